//! Cutting a pprof profile down as a flame graph is cut: only the stacks a
//! [`StackFilter`] keeps, and at most `max_nodes` call-tree nodes, a dropped subtree
//! ending in one `other` frame under its kept parent (what `SelectMergeProfile` answers
//! for `stack_trace_selector` and `max_nodes`, as Pyroscope does). Values stay exact: a
//! cut sample keeps its values and its kept frames' locations.

use std::collections::HashMap;

use stackhouse_proto::pprof::{Function, Line, Location, Profile};

use crate::stack_filter::StackFilter;
use crate::tree::{Node, OTHER_NAME, TreeBuilder};

/// Cuts `profile` in place; `max_nodes` 0 keeps every node. The call tree is the one of
/// the first sample type.
pub fn cut(profile: &mut Profile, stacks: &StackFilter, max_nodes: usize) {
    if stacks.is_empty() && max_nodes == 0 {
        return;
    }
    let locations: HashMap<u64, &Location> = profile.location.iter().map(|l| (l.id, l)).collect();
    let functions: HashMap<u64, &Function> = profile.function.iter().map(|f| (f.id, f)).collect();
    let name = |id: u64| -> &str {
        functions
            .get(&id)
            .and_then(|f| profile.string_table.get(usize::try_from(f.name).ok()?))
            .map_or("", String::as_str)
    };
    // Per sample: its frames root first, each with the location it belongs to.
    let frames: Vec<Vec<(&str, u64)>> = profile
        .sample
        .iter()
        .map(|s| {
            let mut frames = Vec::new();
            for &loc in s.location_id.iter().rev() {
                let Some(location) = locations.get(&loc) else {
                    continue;
                };
                // A location's lines are innermost first: the caller comes last.
                for line in location.line.iter().rev() {
                    frames.push((name(line.function_id), loc));
                }
            }
            frames
        })
        .collect();
    let kept: Vec<bool> = frames
        .iter()
        .map(|f| stacks.keeps(&f.iter().map(|(n, _)| *n).collect::<Vec<_>>()))
        .collect();
    let tree = (max_nodes > 0).then(|| {
        let mut b = TreeBuilder::new();
        for ((s, f), keep) in profile.sample.iter().zip(&frames).zip(&kept) {
            if *keep {
                let names: Vec<&str> = f.iter().map(|(n, _)| *n).collect();
                b.add_path(&names, s.value.first().copied().unwrap_or(0));
            }
        }
        b.build_truncated(max_nodes)
    });
    // Each cut sample: its kept locations under one `other` location.
    let mut cut_at: Vec<Option<Vec<u64>>> = vec![None; profile.sample.len()];
    if let Some(tree) = &tree {
        for (i, f) in frames.iter().enumerate() {
            if kept[i] {
                cut_at[i] = kept_locations(tree, f);
            }
        }
    }
    drop(locations);
    drop(functions);
    let other = cut_at.iter().any(Option::is_some).then(|| add_other(profile));
    let samples = std::mem::take(&mut profile.sample);
    profile.sample = samples
        .into_iter()
        .zip(kept)
        .zip(cut_at)
        .filter(|((_, keep), _)| *keep)
        .map(|((mut s, _), cut)| {
            if let (Some(prefix), Some(other)) = (cut, other) {
                s.location_id = std::iter::once(other).chain(prefix.into_iter().rev()).collect();
            }
            s
        })
        .collect();
}

/// `None` when the whole path of `frames` is in the (truncated) tree; otherwise the
/// locations, root first, whose frames all are, before the path leaves the tree.
fn kept_locations(tree: &Node, frames: &[(&str, u64)]) -> Option<Vec<u64>> {
    let mut node = tree;
    let mut whole = Vec::new();
    let mut at = 0;
    while at < frames.len() {
        let loc = frames[at].1;
        let mut inner = node;
        let mut end = at;
        while end < frames.len() && frames[end].1 == loc {
            match inner.child(frames[end].0) {
                Some(c) if c.name != OTHER_NAME || frames[end].0 == OTHER_NAME => inner = c,
                _ => return Some(whole),
            }
            end += 1;
        }
        whole.push(loc);
        node = inner;
        at = end;
    }
    None
}

/// A function and location named `other`; the new location's id.
fn add_other(profile: &mut Profile) -> u64 {
    let name = profile.string_table.len() as i64;
    profile.string_table.push(OTHER_NAME.to_string());
    let function_id = profile.function.iter().map(|f| f.id).max().unwrap_or(0) + 1;
    profile.function.push(Function {
        id: function_id,
        name,
        system_name: name,
        ..Function::default()
    });
    let location_id = profile.location.iter().map(|l| l.id).max().unwrap_or(0) + 1;
    profile.location.push(Location {
        id: location_id,
        line: vec![Line {
            function_id,
            ..Line::default()
        }],
        ..Location::default()
    });
    location_id
}

#[cfg(test)]
mod tests {
    use stackhouse_proto::pprof::Sample;

    use super::*;
    use crate::stack_filter::FrameMatch;

    /// A profile of folded stacks, one location (one line) per frame.
    fn profile(stacks: &[(&str, i64)]) -> Profile {
        let mut p = Profile {
            string_table: vec![String::new()],
            ..Profile::default()
        };
        let mut ids: HashMap<String, u64> = HashMap::new();
        for (stack, value) in stacks {
            let mut location_id = Vec::new();
            for frame in stack.split(';').filter(|f| !f.is_empty()) {
                let next = ids.len() as u64 + 1;
                let id = *ids.entry(frame.to_string()).or_insert_with(|| {
                    p.string_table.push(frame.to_string());
                    let name = p.string_table.len() as i64 - 1;
                    p.function.push(Function {
                        id: next,
                        name,
                        ..Function::default()
                    });
                    p.location.push(Location {
                        id: next,
                        line: vec![Line {
                            function_id: next,
                            ..Line::default()
                        }],
                        ..Location::default()
                    });
                    next
                });
                location_id.insert(0, id);
            }
            p.sample.push(Sample {
                location_id,
                value: vec![*value],
                ..Sample::default()
            });
        }
        p
    }

    /// Folded stacks of a profile, summed.
    fn folded(p: &Profile) -> Vec<(String, i64)> {
        let name = |loc: u64| {
            let l = p.location.iter().find(|l| l.id == loc).unwrap();
            let f = p.function.iter().find(|f| f.id == l.line[0].function_id).unwrap();
            p.string_table[f.name as usize].clone()
        };
        let mut sums: HashMap<String, i64> = HashMap::new();
        for s in &p.sample {
            let stack: Vec<String> = s.location_id.iter().rev().map(|&l| name(l)).collect();
            *sums.entry(stack.join(";")).or_default() += s.value[0];
        }
        let mut out: Vec<_> = sums.into_iter().collect();
        out.sort();
        out
    }

    fn stacks() -> Vec<(&'static str, i64)> {
        vec![
            ("main;work;parse", 10),
            ("main;work;encode", 7),
            ("main;idle", 5),
            ("gc;mark", 4),
            ("main;log;encode", 2),
        ]
    }

    fn expect(list: &[(&str, i64)]) -> Vec<(String, i64)> {
        let mut v: Vec<_> = list.iter().map(|(s, v)| (s.to_string(), *v)).collect();
        v.sort();
        v
    }

    #[test]
    fn a_filter_drops_whole_samples() {
        let mut p = profile(&stacks());
        let filter = StackFilter {
            call_site: vec!["main".into()],
            exclude: FrameMatch::new(vec!["idle".into()], &[], "exclude").unwrap(),
            ..StackFilter::default()
        };
        cut(&mut p, &filter, 0);
        assert_eq!(
            folded(&p),
            expect(&[
                ("main;work;parse", 10),
                ("main;work;encode", 7),
                ("main;log;encode", 2)
            ])
        );
    }

    #[test]
    fn max_nodes_folds_subtrees_into_other_with_exact_values() {
        let mut p = profile(&stacks());
        // Root, main (24), work (17), parse (10): the rest folds into `other` nodes.
        cut(&mut p, &StackFilter::default(), 4);
        let got = folded(&p);
        assert_eq!(got.iter().map(|(_, v)| v).sum::<i64>(), 28);
        assert_eq!(
            got,
            expect(&[
                ("main;work;parse", 10),
                ("main;work;other", 7),
                ("main;other", 7),
                ("other", 4),
            ])
        );
    }
}
