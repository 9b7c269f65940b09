//! Folded stacks, as Brendan Gregg's `flamegraph.pl` and speedscope read them, and for a
//! diff the two-value lines of `difffolded.pl`.

use crate::tree::{Diff, DiffNode};
use crate::tree::{Flamegraph, Node};

/// `format=folded`.
#[derive(Debug)]
pub(super) struct Folded;

impl super::TreeRenderer for Folded {
    fn name(&self) -> &'static str {
        "folded"
    }

    fn content_type(&self) -> &'static str {
        "text/plain; charset=utf-8"
    }

    fn flamegraph(&self, flamegraph: &Flamegraph) -> Vec<u8> {
        folded(flamegraph).into_bytes()
    }

    fn diff(&self, diff: &Diff) -> Vec<u8> {
        folded_diff(diff).into_bytes()
    }
}

/// Folded stacks: one line `frame1;frame2;...;leaf VALUE` per call path with a non-zero
/// self value, root-first without the synthetic root, lines sorted.
///
/// Samples with an empty stack have no frames to write; they count in the JSON `total`
/// (as the root's `self`) but not here, so the lines may sum to less than the total.
/// Frame names are written as they are: a name containing `;` or a newline cannot be
/// told apart from several frames or lines in this format.
pub fn folded(flamegraph: &Flamegraph) -> String {
    let mut lines = Vec::new();
    let mut path = Vec::new();
    for child in &flamegraph.root.children {
        folded_lines(child, &mut path, &mut lines);
    }
    join_lines(lines)
}

fn folded_lines<'n>(node: &'n Node, path: &mut Vec<&'n str>, lines: &mut Vec<String>) {
    path.push(&node.name);
    if node.self_value != 0 {
        lines.push(format!("{} {}", path.join(";"), node.self_value));
    }
    for child in &node.children {
        folded_lines(child, path, lines);
    }
    path.pop();
}

/// Folded diff: one line `frame1;...;leaf BASELINE COMPARISON` per call path where either
/// side has a non-zero self value, as `difffolded.pl` writes and `flamegraph.pl` reads for
/// a differential flamegraph; lines sorted. The same caveats as [`folded`] apply.
pub fn folded_diff(diff: &Diff) -> String {
    let mut lines = Vec::new();
    let mut path = Vec::new();
    for child in &diff.root.children {
        folded_diff_lines(child, &mut path, &mut lines);
    }
    join_lines(lines)
}

fn folded_diff_lines<'n>(node: &'n DiffNode, path: &mut Vec<&'n str>, lines: &mut Vec<String>) {
    path.push(&node.name);
    if node.baseline_self != 0 || node.comparison_self != 0 {
        lines.push(format!(
            "{} {} {}",
            path.join(";"),
            node.baseline_self,
            node.comparison_self
        ));
    }
    for child in &node.children {
        folded_diff_lines(child, path, lines);
    }
    path.pop();
}

/// Sorts `lines` and writes each followed by a newline.
fn join_lines(mut lines: Vec<String>) -> String {
    lines.sort_unstable();
    let mut out = String::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
    for line in lines {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use stackhouse_storage::model::ProfileType;

    use super::*;
    use crate::tree::TreeBuilder;
    use crate::tree::testing::small_flamegraph;

    #[test]
    fn folded_lists_paths_with_self_value() {
        assert_eq!(
            folded(&small_flamegraph()),
            "gc 1\nmain;idle 5\nmain;work 3\nmain;work;leaf 10\n"
        );
        assert_eq!(folded(&Flamegraph::empty(ProfileType::default(), 0)), "");
    }

    #[test]
    fn folded_diff_lists_paths_with_self_on_either_side() {
        let mut comparison = TreeBuilder::new();
        comparison.add_path(&["main", "work", "leaf"], 7);
        comparison.add_path(&["main", "new"], 2);
        comparison.add_path::<&str>(&[], 9);
        let comparison = Flamegraph::new(small_flamegraph().profile_type(), 10_000_000, comparison.build());
        let diff = Diff::new(&small_flamegraph(), &comparison);
        assert_eq!(
            folded_diff(&diff),
            "gc 1 0\nmain;idle 5 0\nmain;new 0 2\nmain;work 3 0\nmain;work;leaf 10 7\n"
        );
        let empty = Flamegraph::empty(ProfileType::default(), 0);
        assert_eq!(folded_diff(&Diff::new(&empty, &empty)), "");
    }
}
