//! Built trees (a flamegraph's [`super::Node`]s, a diff's nodes) cut to a node budget in
//! place, keeping the nodes [`select::select`] chooses, as a tree cut while it is laid out
//! ([`super::cut()`]) keeps them.

use std::cmp::Ordering;

use super::children::Children;
use super::model::{Node, TreeNode, count_nodes};
use super::select::{self, ROOT, Ranking};

impl Node {
    /// Keeps at most `max_nodes` nodes of this subtree; see [`truncate_tree`].
    pub fn truncate(&mut self, max_nodes: usize) {
        truncate_tree(self, max_nodes);
    }
}

/// Keeps at most `max_nodes` nodes of the tree under `root`, preferring larger weights,
/// and folds the siblings dropped under each kept node into one [`super::OTHER_NAME`]
/// child (see [`TreeNode::other`]), placed by [`TreeNode::sort_children`]. The kept nodes
/// are those a tree cut while it is laid out keeps (`select::select`). Every kept node
/// keeps its exact values; the tree grows by at most one `other` node per kept node. The
/// root is always kept.
pub fn truncate_tree<T: TreeNode>(root: &mut T, max_nodes: usize) {
    let tree = Numbered::of(root);
    if tree.weights.len() <= max_nodes {
        return;
    }
    let (kept, _) = select::select(&tree, max_nodes);
    let mut keep = vec![false; tree.weights.len()];
    for k in kept {
        keep[k.id] = true;
    }
    prune(root, &keep, &mut 0);
}

/// A built tree's weights, its nodes numbered in pre-order.
struct Numbered {
    weights: Vec<i64>,
    parents: Vec<usize>,
    children: Children,
}

impl Numbered {
    fn of<T: TreeNode>(root: &T) -> Numbered {
        let mut weights = Vec::new();
        let mut parents = Vec::new();
        // Each node with its parent's number; iterative, since call paths may be deep.
        let mut pending = vec![(root, ROOT)];
        while let Some((node, parent)) = pending.pop() {
            let id = weights.len();
            weights.push(node.weight());
            parents.push(parent);
            pending.extend(node.children().iter().rev().map(|c| (c, id)));
        }
        let children = Children::of(parents.iter().copied());
        Numbered {
            weights,
            parents,
            children,
        }
    }
}

impl Ranking for Numbered {
    fn len(&self) -> usize {
        self.weights.len()
    }

    fn bound(&self) -> usize {
        self.weights.len()
    }

    fn total(&self, id: usize) -> i64 {
        self.weights[id]
    }

    fn contains(&self, _: usize) -> bool {
        true
    }

    fn parent(&self, id: usize) -> usize {
        self.parents[id]
    }

    fn children_into(&self, id: usize, out: &mut Vec<usize>) {
        out.extend_from_slice(self.children.get(id));
    }

    fn monotone(&self) -> bool {
        (1..self.weights.len()).all(|id| self.weights[id] <= self.weights[self.parents[id]])
    }

    fn chain(&self, id: usize) -> (usize, usize) {
        (id, 1)
    }

    /// The tree's own order, which a built tree keeps sorted (see [`TreeNode`]): numbers
    /// follow it, and no names are needed to break ties.
    fn cmp_siblings(&self, a: usize, b: usize) -> Ordering {
        a.cmp(&b)
    }
}

/// Walks the tree in the pre-order [`Numbered::of`] numbers it in; `next` is this node's
/// number.
fn prune<T: TreeNode>(node: &mut T, keep: &[bool], next: &mut usize) {
    *next += 1;
    let mut folded = Vec::new();
    for mut child in std::mem::take(node.children_mut()) {
        if keep[*next] {
            prune(&mut child, keep, next);
            node.children_mut().push(child);
        } else {
            *next += count_nodes(&child);
            folded.push(child);
        }
    }
    if !folded.is_empty() {
        node.children_mut().push(T::other(&folded));
        node.sort_children();
    }
}

#[cfg(test)]
mod tests {
    use stackhouse_storage::model::ProfileType;

    use super::*;
    use crate::tree::Diff;
    use crate::tree::testing::{
        assert_consistent, awkward_builder, count_named, random_builder, sample_tree, truncate_best_first,
    };
    use crate::tree::{Flamegraph, Node, OTHER_NAME};

    #[test]
    fn truncation_keeps_totals_exact() {
        let original = sample_tree();
        for max_nodes in 1..=original.count() + 1 {
            let mut root = original.clone();
            root.truncate(max_nodes);
            assert_consistent(&root);
            assert_eq!(root.total, original.total, "max_nodes {max_nodes}");
            let others = count_named(&root, OTHER_NAME);
            assert!(root.count() <= max_nodes.max(1) + others, "max_nodes {max_nodes}");
            if max_nodes >= original.count() {
                assert_eq!(root, original);
            }
        }
    }

    #[test]
    fn truncation_keeps_the_largest_nodes() {
        let mut root = sample_tree();
        // total, main, a, a1, a2 are the five largest.
        root.truncate(5);
        let main = root.child("main").unwrap();
        assert_eq!(main.total, 91);
        let a = main.child("a").unwrap();
        assert_eq!((a.total, a.self_value), (75, 5));
        assert!(a.child("a1").is_some() && a.child("a2").is_some());
        assert!(a.child(OTHER_NAME).is_none(), "nothing of a was dropped");
        // b (13), c (2), d (1) fold into one other of 16 under main.
        let other = main.child(OTHER_NAME).unwrap();
        assert_eq!((other.self_value, other.total, other.children.len()), (16, 16, 0));
        // gc folds into the root's other.
        assert_eq!(root.child(OTHER_NAME).unwrap().total, 4);
        assert_eq!(root.self_value, 7);
        assert_eq!(root.count(), 7);
    }

    #[test]
    fn truncation_to_one_node_folds_everything_into_other() {
        let mut root = sample_tree();
        root.truncate(1);
        assert_eq!(root.children, vec![Node::leaf(OTHER_NAME, 95)]);
        assert_eq!(root.total, 102);
    }

    /// Built trees, flamegraphs and diffs, with ties, `other` frames and negative values,
    /// against truncation done the plain way.
    #[test]
    fn built_trees_keep_what_best_first_keeps() {
        let pt = ProfileType::parse("samples:count:cpu:nanoseconds").unwrap();
        let flamegraph = |b: crate::tree::TreeBuilder| Flamegraph::new(pt.clone(), 1, b.build());
        for builder in [random_builder, awkward_builder] {
            for (low_a, low_b) in [(0, 0), (-1, 0), (-2, -1), (0, -2)] {
                for seed in 1..30 {
                    let a = builder(seed, 200, low_a).build();
                    let diff = Diff::new(
                        &flamegraph(builder(seed, 200, low_a)),
                        &flamegraph(builder(seed + 100, 150, low_b)),
                    );
                    for max_nodes in [0, 1, 2, 3, 7, 20, 60, 150, 10_000] {
                        let (mut got, mut want) = (a.clone(), a.clone());
                        truncate_tree(&mut got, max_nodes);
                        truncate_best_first(&mut want, max_nodes);
                        assert_eq!(got, want, "seed {seed}, max_nodes {max_nodes}, lowest {low_a}");
                        let (mut got, mut want) = (diff.root.clone(), diff.root.clone());
                        truncate_tree(&mut got, max_nodes);
                        truncate_best_first(&mut want, max_nodes);
                        assert_eq!(
                            got, want,
                            "diff: seed {seed}, max_nodes {max_nodes}, lowest {low_a} {low_b}"
                        );
                    }
                }
            }
        }
    }
}
