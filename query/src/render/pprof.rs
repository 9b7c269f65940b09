//! pprof export: a `perftools.profiles.Profile`, and its gzipped encoding that `go tool
//! pprof` and other pprof readers open. Queries answer the profile; the edge that sends
//! it as a file encodes and gzips it once ([`gzip`]).
//!
//! Functions, mappings and locations are written as stored, so a reader sees the same
//! frames as our JSON (see [`crate::symbolize`]): one frame per line, the last line of a
//! location being the caller, as in pprof. Two naming details are settled here, where
//! pprof has no equivalent: a function without a name gets the name our JSON shows for
//! that frame, and symbols missing from the tables become [`UNKNOWN`] functions.

use std::collections::HashMap;
use std::io::Write;

use flate2::Compression;
use flate2::write::GzEncoder;
use prost::Message;
use stackhouse_proto::pprof;
use stackhouse_storage::model::{IdMap, Location, SymbolId};
use stackhouse_storage::symbols::SymbolIndex;

use crate::debuginfo::NativeFiles;
use crate::frames::{Frame, FrameView, Granularity};
use crate::native::NativeFrame;
use crate::symbolize::{MissingSymbols, UNKNOWN, location_frames, stack_location_ids};

/// One pprof sample: a stack (leaf node of the stack tree), one value per sample type, and
/// string labels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PprofSample {
    pub stack_id: SymbolId,
    pub values: Vec<i64>,
    pub labels: Vec<(String, String)>,
}

/// What to export.
pub struct PprofInput<'a> {
    /// `(type, unit)` per value of each sample.
    pub sample_types: Vec<(String, String)>,
    /// `(type, unit)` of the period.
    pub period_type: (String, String),
    pub period: i64,
    pub time_nanos: i64,
    pub duration_nanos: i64,
    pub samples: Vec<PprofSample>,
    /// Resolves stacks, locations, functions and mappings.
    pub symbols: &'a SymbolIndex,
    /// Debug files that name native frames, with their source files and lines.
    pub native: &'a NativeFiles,
    /// Names functions by its granularity and leaves its hidden frames out; the stack
    /// rules (focus, drop) are the caller's, who picks the samples.
    pub view: &'a FrameView,
}

/// The profile encoded and gzipped, as a `.pb.gz` file holds it.
pub fn gzip(profile: &pprof::Profile) -> Vec<u8> {
    let encoded = profile.encode_to_vec();
    let mut gz = GzEncoder::new(Vec::with_capacity(encoded.len() / 4), Compression::default());
    gz.write_all(&encoded)
        .and_then(|()| gz.finish())
        .expect("gzip into memory cannot fail")
}

/// The profile of the samples.
pub fn build(input: &PprofInput<'_>) -> pprof::Profile {
    let mut b = Builder::new(input.symbols, input.native, input.view);
    let sample_type = input
        .sample_types
        .iter()
        .map(|(t, unit)| b.value_type(t, unit))
        .collect();
    let period_type = Some(b.value_type(&input.period_type.0, &input.period_type.1));
    let sample = input
        .samples
        .iter()
        .map(|s| pprof::Sample {
            location_id: b.stack(s.stack_id).to_vec(),
            value: s.values.clone(),
            label: s
                .labels
                .iter()
                .map(|(key, value)| pprof::Label {
                    key: b.string(key),
                    str: b.string(value),
                    ..Default::default()
                })
                .collect(),
        })
        .collect();
    pprof::Profile {
        sample_type,
        sample,
        mapping: b.mappings,
        location: b.locations,
        function: b.functions,
        string_table: b.strings,
        time_nanos: input.time_nanos,
        duration_nanos: input.duration_nanos,
        period_type,
        period: input.period,
        ..Default::default()
    }
}

/// What [`Builder::location`] answers for a location whose frames are all hidden: pprof
/// ids start at 1.
const HIDDEN: u64 = 0;

/// A pprof Function's identity: name, system name, filename, start line.
type FunctionKey = (String, String, String, i64);

/// The profile's tables, filled as samples reference symbols. pprof ids are 1-based
/// positions in these tables; 0 means none.
struct Builder<'a> {
    index: &'a SymbolIndex,
    native: &'a NativeFiles,
    view: &'a FrameView,
    strings: Vec<String>,
    string_ids: HashMap<String, i64>,
    functions: Vec<pprof::Function>,
    function_ids: HashMap<FunctionKey, u64>,
    mappings: Vec<pprof::Mapping>,
    mapping_ids: IdMap<u64>,
    locations: Vec<pprof::Location>,
    location_ids: IdMap<u64>,
    /// The location that stands for a missing location or stack node.
    unknown_location: Option<u64>,
    /// Stack id → its location ids, leaf first: many samples share a stack.
    stacks: IdMap<Vec<u64>>,
}

impl<'a> Builder<'a> {
    fn new(index: &'a SymbolIndex, native: &'a NativeFiles, view: &'a FrameView) -> Builder<'a> {
        Builder {
            index,
            native,
            view,
            strings: vec![String::new()],
            string_ids: HashMap::from([(String::new(), 0)]),
            functions: Vec::new(),
            function_ids: HashMap::new(),
            mappings: Vec::new(),
            mapping_ids: IdMap::default(),
            locations: Vec::new(),
            location_ids: IdMap::default(),
            unknown_location: None,
            stacks: IdMap::default(),
        }
    }

    fn string(&mut self, s: &str) -> i64 {
        if let Some(&id) = self.string_ids.get(s) {
            return id;
        }
        let id = self.strings.len() as i64;
        self.strings.push(s.to_string());
        self.string_ids.insert(s.to_string(), id);
        id
    }

    fn value_type(&mut self, r#type: &str, unit: &str) -> pprof::ValueType {
        pprof::ValueType {
            r#type: self.string(r#type),
            unit: self.string(unit),
        }
    }

    /// Location ids of a stack, leaf first. A stack node missing from the index ends the
    /// stack with an unknown root frame, as in the flamegraph.
    fn stack(&mut self, stack_id: SymbolId) -> &[u64] {
        if !self.stacks.contains_key(&stack_id) {
            let ids = stack_location_ids(self.index, stack_id)
                .into_iter()
                .map(|location| match location {
                    Some(location_id) => self.location(location_id),
                    None => self.unknown_location(),
                })
                .filter(|&id| id != HIDDEN)
                .collect();
            self.stacks.insert(stack_id, ids);
        }
        &self.stacks[&stack_id]
    }

    /// The pprof location of a stored one, [`HIDDEN`] when the view hides all its frames.
    fn location(&mut self, location_id: SymbolId) -> u64 {
        if let Some(&id) = self.location_ids.get(&location_id) {
            return id;
        }
        let index = self.index;
        let id = match index.locations.get(&location_id) {
            Some(location) => self.add_location(location),
            None => self.unknown_location(),
        };
        self.location_ids.insert(location_id, id);
        id
    }

    fn add_location(&mut self, location: &Location) -> u64 {
        let mapping_id = self.mapping(location.mapping_id);
        if let Some(frames) = self.native.location(self.index, location) {
            return self.add_native_location(mapping_id, location, &frames);
        }
        if mapping_id != 0 && !location.lines.is_empty() {
            self.mappings[mapping_id as usize - 1].has_functions = true;
        }
        // The names our JSON gives each line (caller first), so that a function without a
        // name reads the same in both.
        let mut frames = location_frames(
            self.index,
            &NativeFiles::default(),
            location,
            &mut MissingSymbols::default(),
        );
        frames.reverse();
        if location.lines.is_empty() {
            // An address alone: hidden as its frame is, and named by the view when it names
            // frames by other than their function, so that readers see the same names.
            let Some(name) = frames.first().and_then(|frame| self.view.name(frame)) else {
                return HIDDEN;
            };
            let line = if self.view.aggregate_by == Granularity::Function {
                Vec::new()
            } else {
                vec![pprof::Line {
                    function_id: self.function((name, String::new(), String::new(), 0)),
                    ..Default::default()
                }]
            };
            return self.push_location(pprof::Location {
                mapping_id,
                address: location.address,
                line,
                ..Default::default()
            });
        }
        let line: Vec<pprof::Line> = location
            .lines
            .iter()
            .zip(frames)
            .filter_map(|(line, frame)| {
                let name = self.view.name(&frame)?;
                let key = match self.index.functions.get(&line.function_id) {
                    Some(f) => (name, frame.system_name, f.filename.clone(), f.start_line),
                    None => (name, String::new(), String::new(), 0),
                };
                Some(pprof::Line {
                    function_id: self.function(key),
                    line: line.line,
                    column: line.column,
                })
            })
            .collect();
        if line.is_empty() {
            return HIDDEN;
        }
        self.push_location(pprof::Location {
            mapping_id,
            address: location.address,
            line,
            ..Default::default()
        })
    }

    /// A location named by a debug file: one line per frame, innermost first as pprof
    /// orders them, with the source file and line DWARF gave.
    fn add_native_location(&mut self, mapping_id: u64, location: &Location, frames: &[NativeFrame]) -> u64 {
        if mapping_id != 0 {
            let mapping = &mut self.mappings[mapping_id as usize - 1];
            mapping.has_functions = true;
            mapping.has_filenames |= frames.iter().any(|f| !f.file.is_empty());
            mapping.has_line_numbers |= frames.iter().any(|f| f.line != 0);
            mapping.has_inline_frames |= frames.len() > 1;
        }
        let binary = self
            .index
            .mappings
            .get(&location.mapping_id)
            .map(|m| m.filename.clone())
            .unwrap_or_default();
        let line: Vec<pprof::Line> = frames
            .iter()
            .rev()
            .filter_map(|f| {
                let name = self.view.name(&Frame {
                    function: f.function.clone(),
                    file: f.file.clone(),
                    line: i64::from(f.line),
                    binary: binary.clone(),
                    address: location.address,
                    ..Frame::default()
                })?;
                Some(pprof::Line {
                    function_id: self.function((name, String::new(), f.file.clone(), 0)),
                    line: i64::from(f.line),
                    column: 0,
                })
            })
            .collect();
        if line.is_empty() {
            return HIDDEN;
        }
        self.push_location(pprof::Location {
            mapping_id,
            address: location.address,
            line,
            ..Default::default()
        })
    }

    fn unknown_location(&mut self) -> u64 {
        if let Some(id) = self.unknown_location {
            return id;
        }
        let function_id = self.function((UNKNOWN.to_string(), String::new(), String::new(), 0));
        let id = self.push_location(pprof::Location {
            line: vec![pprof::Line {
                function_id,
                ..Default::default()
            }],
            ..Default::default()
        });
        self.unknown_location = Some(id);
        id
    }

    fn push_location(&mut self, mut location: pprof::Location) -> u64 {
        location.id = self.locations.len() as u64 + 1;
        let id = location.id;
        self.locations.push(location);
        id
    }

    fn function(&mut self, key: FunctionKey) -> u64 {
        if let Some(&id) = self.function_ids.get(&key) {
            return id;
        }
        let id = self.functions.len() as u64 + 1;
        let (name, system_name, filename, start_line) = &key;
        let function = pprof::Function {
            id,
            name: self.string(name),
            system_name: self.string(system_name),
            filename: self.string(filename),
            start_line: *start_line,
        };
        self.functions.push(function);
        self.function_ids.insert(key, id);
        id
    }

    /// The pprof mapping of a stored one; 0 for none or one missing from the index.
    fn mapping(&mut self, mapping_id: SymbolId) -> u64 {
        if mapping_id.is_zero() {
            return 0;
        }
        if let Some(&id) = self.mapping_ids.get(&mapping_id) {
            return id;
        }
        let id = match self.index.mappings.get(&mapping_id) {
            Some(m) => {
                let id = self.mappings.len() as u64 + 1;
                let mapping = pprof::Mapping {
                    id,
                    memory_start: m.memory_start,
                    memory_limit: m.memory_limit,
                    file_offset: m.file_offset,
                    filename: self.string(&m.filename),
                    build_id: self.string(&m.build_id),
                    ..Default::default()
                };
                self.mappings.push(mapping);
                id
            }
            None => 0,
        };
        self.mapping_ids.insert(mapping_id, id);
        id
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::io::Read;

    use flate2::read::GzDecoder;
    use stackhouse_storage::model::{Batch, Function, Line, Mapping, StackNode};

    use super::*;

    fn index_of(batch: &Batch) -> SymbolIndex {
        let mut index = SymbolIndex::default();
        index.extend_from_batch(batch);
        index
    }

    fn decode(bytes: &[u8]) -> pprof::Profile {
        let mut raw = Vec::new();
        GzDecoder::new(bytes).read_to_end(&mut raw).expect("gzip");
        pprof::Profile::decode(raw.as_slice()).expect("a pprof profile")
    }

    /// Frame names of a decoded sample, caller first, named the way our JSON names them:
    /// one per line (the last line is the caller), or mapping filename + address.
    fn frames(p: &pprof::Profile, sample: &pprof::Sample) -> Vec<String> {
        let s = |i: i64| p.string_table[usize::try_from(i).unwrap()].clone();
        let mut out = Vec::new();
        for id in sample.location_id.iter().rev() {
            let loc = p
                .location
                .iter()
                .find(|l| l.id == *id)
                .expect("location id exists");
            if loc.line.is_empty() {
                let mapping = p.mapping.iter().find(|m| m.id == loc.mapping_id);
                match mapping.map(|m| s(m.filename)).filter(|f| !f.is_empty()) {
                    Some(file) => out.push(format!("{file}+0x{:x}", loc.address)),
                    None => out.push(format!("0x{:x}", loc.address)),
                }
            }
            for line in loc.line.iter().rev() {
                let f = p
                    .function
                    .iter()
                    .find(|f| f.id == line.function_id)
                    .expect("function id exists");
                out.push(s(f.name));
            }
        }
        out
    }

    /// Values per folded stack, per sample type.
    fn folded(p: &pprof::Profile) -> BTreeMap<String, Vec<i64>> {
        let mut out: BTreeMap<String, Vec<i64>> = BTreeMap::new();
        for sample in &p.sample {
            let sums = out
                .entry(frames(p, sample).join(";"))
                .or_insert_with(|| vec![0; sample.value.len()]);
            for (sum, v) in sums.iter_mut().zip(&sample.value) {
                *sum += v;
            }
        }
        out
    }

    struct Fixture {
        index: SymbolIndex,
        native: NativeFiles,
        samples: Vec<PprofSample>,
    }

    fn fixture() -> Fixture {
        let mut b = Batch::new("t");
        let function = |b: &mut Batch, name: &str, line: i64| Line {
            function_id: b.add_function(Function {
                name: name.into(),
                system_name: format!("_Z{name}"),
                filename: format!("{name}.rs"),
                start_line: 1,
            }),
            line,
            column: 0,
        };
        let libc = b.add_mapping(Mapping {
            memory_start: 0x1000,
            memory_limit: 0x9000,
            file_offset: 0x200,
            filename: "/lib/libc.so.6".into(),
            build_id: "abc123".into(),
        });
        let loc = |b: &mut Batch, mapping_id, address, lines| {
            b.add_location(Location {
                mapping_id,
                address,
                lines,
            })
        };
        let main_line = function(&mut b, "main", 3);
        let main = loc(&mut b, SymbolId::ZERO, 0x10, vec![main_line]);
        let work_line = function(&mut b, "work", 7);
        let work = loc(&mut b, SymbolId::ZERO, 0x20, vec![work_line]);
        let leaf_line = function(&mut b, "leaf", 9);
        let leaf = loc(&mut b, SymbolId::ZERO, 0x30, vec![leaf_line]);
        // Inlined: `inner` was inlined into `outer`, the caller, which is the last line.
        let inlined_lines = vec![function(&mut b, "inner", 1), function(&mut b, "outer", 2)];
        let inlined = loc(&mut b, SymbolId::ZERO, 0x40, inlined_lines);
        let unsymbolized = loc(&mut b, libc, 0xabc, vec![]);
        let nameless_function = b.add_function(Function {
            filename: "x.c".into(),
            ..Default::default()
        });
        let nameless = loc(
            &mut b,
            libc,
            0x50,
            vec![Line {
                function_id: nameless_function,
                line: 4,
                column: 0,
            }],
        );
        let lost_function = loc(
            &mut b,
            SymbolId::ZERO,
            0x60,
            vec![Line {
                function_id: SymbolId([8; 16]),
                line: 0,
                column: 0,
            }],
        );
        let lost_location = SymbolId([7; 16]);
        let deep = b.add_stack(&[leaf, work, main]);
        let with_inline = b.add_stack(&[inlined, main]);
        let with_unsymbolized = b.add_stack(&[unsymbolized, main]);
        let with_nameless = b.add_stack(&[nameless, main]);
        let with_lost_location = b.add_stack(&[lost_location, main]);
        let with_lost_function = b.add_stack(&[lost_function]);
        let orphan = StackNode {
            parent_id: SymbolId([5; 16]),
            location_id: work,
        };
        b.stacks.insert(orphan.id(), orphan);
        let sample = |stack_id, value: i64, labels: &[(&str, &str)]| PprofSample {
            stack_id,
            values: vec![value, 10 * value],
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        let samples = vec![
            sample(deep, 10, &[("service.name", "api"), ("thread.name", "worker-1")]),
            sample(deep, 1, &[("service.name", "api"), ("thread.name", "worker-2")]),
            sample(with_inline, 4, &[]),
            sample(with_unsymbolized, 3, &[]),
            sample(with_nameless, 5, &[]),
            sample(with_lost_location, 6, &[]),
            sample(with_lost_function, 8, &[]),
            sample(orphan.id(), 9, &[]),
            sample(SymbolId([6; 16]), 2, &[]),
            sample(SymbolId::ZERO, 7, &[]),
        ];
        Fixture {
            index: index_of(&b),
            native: NativeFiles::default(),
            samples,
        }
    }

    fn input(f: &Fixture) -> PprofInput<'_> {
        PprofInput {
            sample_types: vec![
                ("baseline".into(), "count".into()),
                ("comparison".into(), "count".into()),
            ],
            period_type: ("cpu".into(), "nanoseconds".into()),
            period: 10_000_000,
            time_nanos: 1_700_000_000_000_000_000,
            duration_nanos: 60_000_000_000,
            samples: f.samples.clone(),
            symbols: &f.index,
            native: &f.native,
            view: &crate::frames::DEFAULT_VIEW,
        }
    }

    #[test]
    fn stacks_read_back_as_written() {
        let f = fixture();
        let p = decode(&gzip(&build(&input(&f))));
        let got = folded(&p);
        let want: BTreeMap<String, Vec<i64>> = [
            ("main;work;leaf", 11),
            ("main;outer;inner", 4),
            ("main;/lib/libc.so.6+0xabc", 3),
            // The nameless function is named as our JSON names the frame.
            ("main;/lib/libc.so.6+0x50", 5),
            ("main;<unknown>", 6),
            ("<unknown>", 8 + 2),
            ("<unknown>;work", 9),
            ("", 7),
        ]
        .into_iter()
        .map(|(path, v)| (path.to_string(), vec![v, 10 * v]))
        .collect();
        assert_eq!(got, want);
        assert_eq!(p.sample.len(), f.samples.len());
    }

    #[test]
    fn tables_follow_the_pprof_conventions() {
        let f = fixture();
        let p = decode(&gzip(&build(&input(&f))));
        let s = |i: i64| p.string_table[usize::try_from(i).unwrap()].as_str();
        assert_eq!(p.string_table[0], "");
        let types: Vec<(&str, &str)> = p.sample_type.iter().map(|t| (s(t.r#type), s(t.unit))).collect();
        assert_eq!(types, [("baseline", "count"), ("comparison", "count")]);
        let period_type = p.period_type.unwrap();
        assert_eq!(
            (s(period_type.r#type), s(period_type.unit)),
            ("cpu", "nanoseconds")
        );
        assert_eq!(p.period, 10_000_000);
        assert_eq!(p.time_nanos, 1_700_000_000_000_000_000);
        assert_eq!(p.duration_nanos, 60_000_000_000);
        // Ids are unique and non-zero; strings and functions are not repeated.
        for ids in [
            p.location.iter().map(|l| l.id).collect::<Vec<_>>(),
            p.function.iter().map(|f| f.id).collect(),
            p.mapping.iter().map(|m| m.id).collect(),
        ] {
            let mut unique = ids.clone();
            unique.sort();
            unique.dedup();
            assert_eq!(unique.len(), ids.len());
            assert!(!ids.contains(&0));
        }
        let mut strings = p.string_table.clone();
        strings.sort();
        strings.dedup();
        assert_eq!(strings.len(), p.string_table.len());
        let mut functions: Vec<_> = p
            .function
            .iter()
            .map(|f| (f.name, f.system_name, f.filename, f.start_line))
            .collect();
        functions.sort();
        functions.dedup();
        assert_eq!(functions.len(), p.function.len());
        let main = p.function.iter().find(|f| s(f.name) == "main").unwrap();
        assert_eq!(
            (s(main.system_name), s(main.filename), main.start_line),
            ("_Zmain", "main.rs", 1)
        );
        // The one mapping, as stored.
        assert_eq!(p.mapping.len(), 1);
        let m = &p.mapping[0];
        assert_eq!(
            (
                m.memory_start,
                m.memory_limit,
                m.file_offset,
                s(m.filename),
                s(m.build_id)
            ),
            (0x1000, 0x9000, 0x200, "/lib/libc.so.6", "abc123")
        );
        // Line numbers, addresses and the inline order survive.
        let outer = p.function.iter().find(|f| s(f.name) == "outer").unwrap().id;
        let inlined = p.location.iter().find(|l| l.address == 0x40).unwrap();
        let lines: Vec<(u64, i64)> = inlined.line.iter().map(|l| (l.function_id, l.line)).collect();
        assert_eq!(lines[1], (outer, 2));
        let unsymbolized = p.location.iter().find(|l| l.address == 0xabc).unwrap();
        assert_eq!((unsymbolized.mapping_id, unsymbolized.line.len()), (m.id, 0));
        // Labels as strings.
        let labels: Vec<(&str, &str)> = p.sample[0].label.iter().map(|l| (s(l.key), s(l.str))).collect();
        assert_eq!(labels, [("service.name", "api"), ("thread.name", "worker-1")]);
        assert!(p.sample[2].label.is_empty());
    }

    #[test]
    fn empty_input_is_a_valid_profile() {
        let index = SymbolIndex::default();
        let native = NativeFiles::default();
        let p = decode(&gzip(&build(&PprofInput {
            sample_types: vec![("samples".into(), "count".into())],
            period_type: ("cpu".into(), "nanoseconds".into()),
            period: 0,
            time_nanos: 0,
            duration_nanos: 0,
            samples: vec![],
            symbols: &index,
            native: &native,
            view: &crate::frames::DEFAULT_VIEW,
        })));
        assert!(p.sample.is_empty() && p.location.is_empty() && p.function.is_empty());
        assert_eq!(p.string_table[0], "");
        assert_eq!(p.sample_type.len(), 1);
    }
}
