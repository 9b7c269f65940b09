//! A diff of two flamegraphs: one tree whose nodes carry the baseline's and the
//! comparison's values, merged by each node's path of names from the root.

use std::collections::BTreeMap;

use serde::Serialize;
use utoipa::ToSchema;

use super::{Flamegraph, Node, OTHER_NAME, ROOT_NAME, TreeNode, truncate_tree};
use crate::types::{ProfileTypeInfo, ScanStats};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct DiffNode {
    pub name: String,
    pub baseline_self: i64,
    pub baseline_total: i64,
    pub comparison_self: i64,
    pub comparison_total: i64,
    /// Sorted by the larger of the two totals, largest first, then by name.
    #[schema(no_recursion)]
    pub children: Vec<DiffNode>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct Diff {
    #[serde(flatten)]
    pub kind: ProfileTypeInfo,
    pub unit: String,
    /// The larger period of the two sides, in `period_unit`.
    pub period: i64,
    pub baseline_total: i64,
    pub comparison_total: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_nodes: Option<usize>,
    pub root: DiffNode,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline_stats: Option<ScanStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comparison_stats: Option<ScanStats>,
}

impl DiffNode {
    /// The larger of the two totals: what ordering and truncation rank a node by, so that
    /// a frame large on either side survives.
    pub fn weight(&self) -> i64 {
        self.baseline_total.max(self.comparison_total)
    }

    /// Nodes in this subtree, this one included.
    pub fn count(&self) -> usize {
        crate::tree::count_nodes(self)
    }

    /// The child with this name, if any.
    pub fn child(&self, name: &str) -> Option<&DiffNode> {
        self.children.iter().find(|c| c.name == name)
    }

    /// Merges the nodes found at one path on each side. A side can hold several nodes of
    /// one name only if its tree was built by hand; they are added up rather than lost.
    fn merge(name: &str, baseline: &[&Node], comparison: &[&Node]) -> DiffNode {
        let mut by_name: BTreeMap<&str, (Vec<&Node>, Vec<&Node>)> = BTreeMap::new();
        for child in baseline.iter().flat_map(|n| &n.children) {
            by_name.entry(&child.name).or_default().0.push(child);
        }
        for child in comparison.iter().flat_map(|n| &n.children) {
            by_name.entry(&child.name).or_default().1.push(child);
        }
        let mut node = DiffNode {
            name: name.to_string(),
            baseline_self: baseline.iter().map(|n| n.self_value).sum(),
            baseline_total: baseline.iter().map(|n| n.total).sum(),
            comparison_self: comparison.iter().map(|n| n.self_value).sum(),
            comparison_total: comparison.iter().map(|n| n.total).sum(),
            children: by_name
                .into_iter()
                .map(|(name, (b, c))| DiffNode::merge(name, &b, &c))
                .collect(),
        };
        node.sort_children();
        node
    }
}

impl TreeNode for DiffNode {
    fn weight(&self) -> i64 {
        DiffNode::weight(self)
    }

    fn children(&self) -> &[DiffNode] {
        &self.children
    }

    fn children_mut(&mut self) -> &mut Vec<DiffNode> {
        &mut self.children
    }

    fn other(folded: &[DiffNode]) -> DiffNode {
        let baseline = folded.iter().map(|n| n.baseline_total).sum();
        let comparison = folded.iter().map(|n| n.comparison_total).sum();
        DiffNode {
            name: OTHER_NAME.to_string(),
            baseline_self: baseline,
            baseline_total: baseline,
            comparison_self: comparison,
            comparison_total: comparison,
            children: Vec::new(),
        }
    }

    fn sort_children(&mut self) {
        self.children
            .sort_by(|a, b| b.weight().cmp(&a.weight()).then_with(|| a.name.cmp(&b.name)));
    }
}

impl Diff {
    /// Merges two untruncated flamegraphs of the same profile type: a node present on one
    /// side only has zeros for the other.
    ///
    /// Nodes are matched by their path of names from the root. Type information and unit
    /// come from the baseline; the caller checks that both sides have the same type.
    pub fn new(baseline: &Flamegraph, comparison: &Flamegraph) -> Diff {
        let root = DiffNode::merge(ROOT_NAME, &[&baseline.root], &[&comparison.root]);
        Diff {
            kind: baseline.kind.clone(),
            unit: baseline.unit.clone(),
            period: baseline.period.max(comparison.period),
            baseline_total: root.baseline_total,
            comparison_total: root.comparison_total,
            max_nodes: None,
            root,
            baseline_stats: baseline.stats.clone(),
            comparison_stats: comparison.stats.clone(),
        }
    }

    /// Keeps at most `max_nodes` nodes (weighing a node by the larger of its two totals),
    /// folding the rest into `other` nodes; both totals stay exact at every level.
    pub fn truncate(&mut self, max_nodes: usize) {
        truncate_tree(&mut self.root, max_nodes);
        self.max_nodes = Some(max_nodes);
    }
}

#[cfg(test)]
mod tests {
    use stackhouse_storage::model::ProfileType;

    use super::*;
    use crate::tree::TreeBuilder;

    fn flamegraph(period: i64, paths: &[(&[&str], i64)]) -> Flamegraph {
        let mut b = TreeBuilder::new();
        for (path, value) in paths {
            b.add_path(path, *value);
        }
        let pt = ProfileType::parse("samples:count:cpu:nanoseconds").unwrap();
        Flamegraph::new(pt, period, b.build())
    }

    fn baseline() -> Flamegraph {
        flamegraph(
            10,
            &[(&["main", "a"], 10), (&["main", "b"], 5), (&["gc"], 2), (&[], 1)],
        )
    }

    fn comparison() -> Flamegraph {
        flamegraph(20, &[(&["main", "a"], 4), (&["main", "c"], 8), (&["idle"], 3)])
    }

    fn values(node: &DiffNode) -> (i64, i64, i64, i64) {
        (
            node.baseline_self,
            node.baseline_total,
            node.comparison_self,
            node.comparison_total,
        )
    }

    /// Both sides add up at every node, and children are in weight order.
    fn assert_consistent(node: &DiffNode) {
        let baseline: i64 = node.children.iter().map(|c| c.baseline_total).sum();
        let comparison: i64 = node.children.iter().map(|c| c.comparison_total).sum();
        assert_eq!(
            node.baseline_total,
            node.baseline_self + baseline,
            "node {}",
            node.name
        );
        assert_eq!(
            node.comparison_total,
            node.comparison_self + comparison,
            "node {}",
            node.name
        );
        for w in node.children.windows(2) {
            assert!(
                (w[0].weight(), &w[1].name) >= (w[1].weight(), &w[0].name),
                "children of {} sorted",
                node.name
            );
        }
        node.children.iter().for_each(assert_consistent);
    }

    fn count_named(node: &DiffNode, name: &str) -> usize {
        usize::from(node.name == name) + node.children.iter().map(|c| count_named(c, name)).sum::<usize>()
    }

    #[test]
    fn merges_by_path_with_zeros_for_the_missing_side() {
        let diff = Diff::new(&baseline(), &comparison());
        assert_eq!((diff.baseline_total, diff.comparison_total), (18, 15));
        assert_eq!((diff.period, diff.max_nodes), (20, None));
        assert_eq!(diff.kind.profile_type, "samples:count:cpu:nanoseconds");
        assert_eq!(diff.unit, "count");
        let root = &diff.root;
        assert_eq!(root.name, ROOT_NAME);
        assert_eq!(values(root), (1, 18, 0, 15));
        let names: Vec<&str> = root.children.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["main", "idle", "gc"]);
        let main = root.child("main").unwrap();
        assert_eq!(values(main), (0, 15, 0, 12));
        let names: Vec<&str> = main.children.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["a", "c", "b"], "ordered by the larger side");
        assert_eq!(values(main.child("a").unwrap()), (10, 10, 4, 4));
        assert_eq!(values(main.child("b").unwrap()), (5, 5, 0, 0));
        assert_eq!(values(main.child("c").unwrap()), (0, 0, 8, 8));
        assert_eq!(values(root.child("gc").unwrap()), (2, 2, 0, 0));
        assert_eq!(values(root.child("idle").unwrap()), (0, 0, 3, 3));
        assert_eq!(root.count(), 7);
        assert_consistent(root);
    }

    #[test]
    fn diff_of_empty_flamegraphs() {
        let empty = Flamegraph::empty(ProfileType::default(), 0);
        let diff = Diff::new(&empty, &comparison());
        assert_eq!((diff.baseline_total, diff.comparison_total), (0, 15));
        assert_eq!(diff.root.child("idle").map(values), Some((0, 0, 3, 3)));
        let diff = Diff::new(&empty, &empty);
        assert_eq!(diff.root.count(), 1);
    }

    #[test]
    fn truncation_folds_both_sides_into_other() {
        let mut diff = Diff::new(&baseline(), &comparison());
        // total, main and a weigh the most (18, 15, 10).
        diff.truncate(3);
        assert_eq!(diff.max_nodes, Some(3));
        assert_consistent(&diff.root);
        assert_eq!(values(&diff.root), (1, 18, 0, 15));
        let main = diff.root.child("main").unwrap();
        assert_eq!(values(main.child("a").unwrap()), (10, 10, 4, 4));
        // b (5, 0) and c (0, 8) fold together.
        assert_eq!(values(main.child(OTHER_NAME).unwrap()), (5, 5, 8, 8));
        // gc (2, 0) and idle (0, 3) fold together.
        assert_eq!(values(diff.root.child(OTHER_NAME).unwrap()), (2, 2, 3, 3));
        assert_eq!(diff.root.count(), 5);
    }

    #[test]
    fn truncation_keeps_totals_exact_at_every_budget() {
        let original = Diff::new(&baseline(), &comparison());
        let count = original.root.count();
        for max_nodes in 1..=count + 1 {
            let mut diff = original.clone();
            diff.truncate(max_nodes);
            assert_consistent(&diff.root);
            assert_eq!(
                values(&diff.root),
                values(&original.root),
                "max_nodes {max_nodes}"
            );
            let others = count_named(&diff.root, OTHER_NAME);
            assert!(diff.root.count() <= max_nodes + others, "max_nodes {max_nodes}");
            if max_nodes >= count {
                assert_eq!(diff.root, original.root);
            }
        }
    }
}
