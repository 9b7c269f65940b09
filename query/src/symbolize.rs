//! Turning stack ids into frame names and call paths.
//!
//! A location gives one frame per `Line`, caller first (the last line is the caller the
//! others were inlined into). A location without lines is named by its mapping's debug
//! file when the query has one ([`NativeFiles`]), else after its mapping and address. Ids
//! missing from the symbol tables never fail a query: they become
//! [`UNKNOWN`] frames, counted and reported in one warning per query.

use stackhouse_storage::model::{IdMap, Location, SymbolId};
use stackhouse_storage::symbols::SymbolIndex;

use crate::debuginfo::NativeFiles;
use crate::frames::Frame;
use crate::frames::demangle::demangle;

/// Name of a frame whose symbols are missing.
pub(crate) const UNKNOWN: &str = "<unknown>";

/// Guards the walk up the stack tree against a corrupt table that loops.
const MAX_STACK_DEPTH: usize = 1 << 16;

/// Ids referenced by samples or stacks but absent from the symbol tables.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct MissingSymbols {
    pub stacks: usize,
    pub locations: usize,
    pub functions: usize,
    pub mappings: usize,
}

impl MissingSymbols {
    pub(crate) fn is_empty(&self) -> bool {
        *self == MissingSymbols::default()
    }
}

/// What is known of the frames of one location, caller first; names that arrive mangled
/// are shown demangled (see [`demangle`]).
pub(crate) fn location_frames(
    index: &SymbolIndex,
    native: &NativeFiles,
    location: &Location,
    missing: &mut MissingSymbols,
) -> Vec<Frame> {
    let frame = |function: String| Frame {
        function,
        binary: mapping_filename(index, location).unwrap_or_default().to_string(),
        address: location.address,
        ..Frame::default()
    };
    if location.lines.is_empty() {
        if let Some(frames) = native.location(index, location) {
            return frames
                .iter()
                .map(|f| Frame {
                    file: f.file.clone(),
                    line: i64::from(f.line),
                    ..frame(f.function.clone())
                })
                .collect();
        }
        return vec![frame(address_name(index, location, missing))];
    }
    location
        .lines
        .iter()
        .rev()
        .map(|line| match index.functions.get(&line.function_id) {
            Some(f) if !f.name.is_empty() || !f.system_name.is_empty() => {
                let sent = if f.name.is_empty() {
                    &f.system_name
                } else {
                    &f.name
                };
                let function = demangle(sent).into_owned();
                // A name sent mangled is the system name when no other was sent.
                let system_name = if f.system_name.is_empty() && function != *sent {
                    sent.clone()
                } else {
                    f.system_name.clone()
                };
                Frame {
                    system_name,
                    file: f.filename.clone(),
                    line: line.line,
                    ..frame(function)
                }
            }
            // A line that names no function is no better than no line at all.
            Some(f) => Frame {
                file: f.filename.clone(),
                line: line.line,
                ..frame(address_name(index, location, missing))
            },
            None => {
                missing.functions += 1;
                frame(UNKNOWN.to_string())
            }
        })
        .collect()
}

/// The file name of a location's mapping, when it has one that is known.
fn mapping_filename<'i>(index: &'i SymbolIndex, location: &Location) -> Option<&'i str> {
    if location.mapping_id.is_zero() {
        return None;
    }
    let mapping = index.mappings.get(&location.mapping_id)?;
    Some(mapping.filename.as_str()).filter(|f| !f.is_empty())
}

/// `<mapping filename>+0x<address>`, or `0x<address>` without a mapping or its filename.
fn address_name(index: &SymbolIndex, location: &Location, missing: &mut MissingSymbols) -> String {
    if !location.mapping_id.is_zero() && !index.mappings.contains_key(&location.mapping_id) {
        missing.mappings += 1;
    }
    match mapping_filename(index, location) {
        Some(filename) => format!("{filename}+0x{:x}", location.address),
        None => format!("0x{:x}", location.address),
    }
}

/// Names the frames of single stacks (the events endpoint), each location once per
/// query. Flamegraphs use the cached trees of `crate::call_paths` instead.
pub(crate) struct Symbolizer<'a> {
    index: &'a SymbolIndex,
    native: &'a NativeFiles,
    frames: IdMap<Vec<String>>,
    missing: MissingSymbols,
}

impl<'a> Symbolizer<'a> {
    pub(crate) fn new(index: &'a SymbolIndex, native: &'a NativeFiles) -> Symbolizer<'a> {
        Symbolizer {
            index,
            native,
            frames: IdMap::default(),
            missing: MissingSymbols::default(),
        }
    }

    /// The frames of a stack, caller first.
    pub(crate) fn frames(&mut self, stack_id: SymbolId) -> Vec<String> {
        let mut frames = Vec::new();
        let (nodes, _) = walk_up(self.index, &mut self.missing, stack_id, |_| None);
        for (_, location) in nodes.into_iter().rev() {
            match location {
                Some(location_id) => frames.extend_from_slice(cached_frames(
                    &mut self.frames,
                    self.index,
                    self.native,
                    &mut self.missing,
                    location_id,
                )),
                None => frames.push(UNKNOWN.to_string()),
            }
        }
        frames
    }

    /// What was missing from the symbol tables so far.
    pub(crate) fn missing(&self) -> MissingSymbols {
        self.missing
    }
}

/// Location ids of a stack, leaf first (pprof's order); `None` stands for a stack node
/// missing from the table, which ends the walk.
pub(crate) fn stack_location_ids(index: &SymbolIndex, stack_id: SymbolId) -> Vec<Option<SymbolId>> {
    let (nodes, _) = walk_up(index, &mut MissingSymbols::default(), stack_id, |_| None);
    nodes.into_iter().map(|(_, location)| location).collect()
}

/// Stack nodes from `stack_id` towards the root, leaf first, each with its location id
/// (`None` for a node missing from the table, which ends the walk as an unknown frame).
/// Stops before the first node `placed` knows and returns what it gave for it.
pub(crate) fn walk_up(
    index: &SymbolIndex,
    missing: &mut MissingSymbols,
    stack_id: SymbolId,
    placed: impl Fn(SymbolId) -> Option<usize>,
) -> (Vec<(SymbolId, Option<SymbolId>)>, Option<usize>) {
    let mut nodes = Vec::new();
    let mut current = stack_id;
    while !current.is_zero() {
        if let Some(end) = placed(current) {
            return (nodes, Some(end));
        }
        if nodes.len() >= MAX_STACK_DEPTH {
            missing.stacks += 1;
            nodes.push((current, None));
            break;
        }
        match index.stacks.get(&current) {
            Some(node) => {
                nodes.push((current, Some(node.location_id)));
                current = node.parent_id;
            }
            None => {
                missing.stacks += 1;
                nodes.push((current, None));
                break;
            }
        }
    }
    (nodes, None)
}

/// Frames of a location, computed once per query: locations recur across many stacks.
fn cached_frames<'c>(
    cache: &'c mut IdMap<Vec<String>>,
    index: &SymbolIndex,
    native: &NativeFiles,
    missing: &mut MissingSymbols,
    location_id: SymbolId,
) -> &'c [String] {
    cache
        .entry(location_id)
        .or_insert_with(|| match index.locations.get(&location_id) {
            Some(location) => location_frames(index, native, location, missing)
                .into_iter()
                .map(|f| f.function)
                .collect(),
            None => {
                missing.locations += 1;
                vec![UNKNOWN.to_string()]
            }
        })
}

#[cfg(test)]
mod tests {
    use stackhouse_storage::model::{Batch, Function, Line, Mapping, StackNode};

    use super::*;

    fn names(frames: Vec<Frame>) -> Vec<String> {
        frames.into_iter().map(|f| f.function).collect()
    }

    fn index_of(batch: &Batch) -> SymbolIndex {
        let mut index = SymbolIndex::default();
        index.extend_from_batch(batch);
        index
    }

    fn function(b: &mut Batch, name: &str) -> Line {
        let function_id = b.add_function(Function {
            name: name.into(),
            ..Default::default()
        });
        Line {
            function_id,
            line: 1,
            column: 0,
        }
    }

    #[test]
    fn inline_lines_put_the_caller_first() {
        let mut b = Batch::new("t");
        let lines = vec![
            function(&mut b, "inlined"),
            function(&mut b, "middle"),
            function(&mut b, "caller"),
        ];
        let loc = Location {
            mapping_id: SymbolId::ZERO,
            address: 0x10,
            lines,
        };
        let index = index_of(&b);
        let mut missing = MissingSymbols::default();
        assert_eq!(
            names(location_frames(
                &index,
                &NativeFiles::default(),
                &loc,
                &mut missing
            )),
            ["caller", "middle", "inlined"]
        );
        assert!(missing.is_empty());
    }

    #[test]
    fn unsymbolized_locations_are_named_by_mapping_and_address() {
        let mut b = Batch::new("t");
        let libc = b.add_mapping(Mapping {
            filename: "/lib/libc.so.6".into(),
            ..Default::default()
        });
        let anonymous = b.add_mapping(Mapping {
            memory_start: 1,
            ..Default::default()
        });
        let index = index_of(&b);
        let mut missing = MissingSymbols::default();
        let mut name = |mapping_id, address| {
            names(location_frames(
                &index,
                &NativeFiles::default(),
                &Location {
                    mapping_id,
                    address,
                    lines: vec![],
                },
                &mut missing,
            ))
        };
        assert_eq!(name(libc, 0xABCDEF), ["/lib/libc.so.6+0xabcdef"]);
        assert_eq!(name(SymbolId::ZERO, 0xFF), ["0xff"]);
        assert_eq!(name(anonymous, 0x1A), ["0x1a"], "a mapping without filename");
        assert_eq!(name(SymbolId([9; 16]), 0x2), ["0x2"], "an unknown mapping");
        assert_eq!(
            missing,
            MissingSymbols {
                mappings: 1,
                ..Default::default()
            }
        );
    }

    #[test]
    fn functions_without_name_fall_back() {
        let mut b = Batch::new("t");
        let system = b.add_function(Function {
            system_name: "_ZN4main".into(),
            ..Default::default()
        });
        let nameless = b.add_function(Function {
            filename: "x.rs".into(),
            ..Default::default()
        });
        let index = index_of(&b);
        let line = |function_id| Line {
            function_id,
            line: 0,
            column: 0,
        };
        let loc = Location {
            mapping_id: SymbolId::ZERO,
            address: 0x5,
            lines: vec![line(system), line(nameless)],
        };
        let mut missing = MissingSymbols::default();
        let frames = location_frames(&index, &NativeFiles::default(), &loc, &mut missing);
        assert_eq!(names(frames.clone()), ["0x5", "_ZN4main"]);
        assert_eq!(frames[0].file, "x.rs");
        assert_eq!(frames[1].system_name, "_ZN4main");
    }

    #[test]
    fn frames_name_a_stack_caller_first() {
        let mut b = Batch::new("t");
        let loc = |b: &mut Batch, name: &str| {
            let line = function(b, name);
            b.add_location(Location {
                mapping_id: SymbolId::ZERO,
                address: 0,
                lines: vec![line],
            })
        };
        let (main, leaf) = (loc(&mut b, "main"), loc(&mut b, "leaf"));
        let stack = b.add_stack(&[leaf, main]);
        let orphan = StackNode {
            parent_id: SymbolId([5; 16]),
            location_id: leaf,
        };
        b.stacks.insert(orphan.id(), orphan);
        let index = index_of(&b);
        let none = NativeFiles::default();
        let mut s = Symbolizer::new(&index, &none);
        assert_eq!(s.frames(stack), ["main", "leaf"]);
        assert_eq!(s.frames(SymbolId::ZERO), Vec::<String>::new());
        assert!(s.missing().is_empty());
        assert_eq!(s.frames(orphan.id()), ["<unknown>", "leaf"]);
        assert_eq!(s.missing().stacks, 1);
    }
}

#[cfg(test)]
mod demangling {
    use stackhouse_storage::model::{Batch, Function, Line, Mapping};

    use super::*;

    #[test]
    fn mangled_names_are_shown_demangled_and_kept_as_system_names() {
        let mut b = Batch::new("t");
        let mapping_id = b.add_mapping(Mapping {
            filename: "/usr/bin/app".into(),
            ..Default::default()
        });
        let sent_as_name = b.add_function(Function {
            name: "_ZN4core3fmt5write17h0123456789abcdefE".into(),
            filename: "fmt/mod.rs".into(),
            ..Default::default()
        });
        let both = b.add_function(Function {
            name: "parse".into(),
            system_name: "_ZN3app5parseEv".into(),
            ..Default::default()
        });
        let mut index = SymbolIndex::default();
        index.extend_from_batch(&b);
        let line = |function_id, line| Line {
            function_id,
            line,
            column: 0,
        };
        let loc = Location {
            mapping_id,
            address: 0x40,
            lines: vec![line(sent_as_name, 7), line(both, 3)],
        };
        let frames = location_frames(
            &index,
            &NativeFiles::default(),
            &loc,
            &mut MissingSymbols::default(),
        );
        assert_eq!(frames[0].function, "parse");
        assert_eq!(frames[0].system_name, "_ZN3app5parseEv");
        assert_eq!(frames[1].function, "core::fmt::write");
        assert_eq!(frames[1].system_name, "_ZN4core3fmt5write17h0123456789abcdefE");
        assert_eq!((frames[1].file.as_str(), frames[1].line), ("fmt/mod.rs", 7));
        assert!(
            frames
                .iter()
                .all(|f| f.binary == "/usr/bin/app" && f.address == 0x40)
        );
    }
}
