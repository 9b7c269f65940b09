//! Trees for tests, and the plain statement of truncation that the cut is checked against.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use stackhouse_storage::model::ProfileType;

use super::{Flamegraph, Node, TreeBuilder, TreeNode, count_nodes};

/// Every node's total is its self value plus its children's totals, children in order.
pub(crate) fn assert_consistent(node: &Node) {
    let children: i64 = node.children.iter().map(|c| c.total).sum();
    assert_eq!(node.total, node.self_value + children, "node {}", node.name);
    for w in node.children.windows(2) {
        assert!(
            (w[0].total, &w[1].name) >= (w[1].total, &w[0].name),
            "children of {} sorted",
            node.name
        );
    }
    node.children.iter().for_each(assert_consistent);
}

pub(crate) fn count_named(node: &Node, name: &str) -> usize {
    usize::from(node.name == name) + node.children.iter().map(|c| count_named(c, name)).sum::<usize>()
}

pub(crate) fn sample_tree() -> Node {
    let mut b = TreeBuilder::new();
    b.add_path(&["main", "a", "a1"], 50);
    b.add_path(&["main", "a", "a2"], 20);
    b.add_path(&["main", "a"], 5);
    b.add_path(&["main", "b", "b1"], 10);
    b.add_path(&["main", "b", "b2"], 3);
    b.add_path(&["main", "c"], 2);
    b.add_path(&["main", "d"], 1);
    b.add_path(&["gc"], 4);
    b.add_path::<&str>(&[], 7);
    b.build()
}

/// A flamegraph of a few paths, one of them ending at the root.
pub(crate) fn small_flamegraph() -> Flamegraph {
    let mut b = TreeBuilder::new();
    b.add_path(&["main", "work", "leaf"], 10);
    b.add_path(&["main", "work"], 3);
    b.add_path(&["main", "idle"], 5);
    b.add_path(&["gc"], 1);
    b.add_path::<&str>(&[], 4);
    let pt = ProfileType::parse("samples:count:cpu:nanoseconds").unwrap();
    Flamegraph::new(pt, 10_000_000, b.build())
}

/// Deterministic pseudo-random paths of 1 to `depth` frames over few `names`, so
/// siblings tie on totals and names recur at many depths; values from `lowest` to
/// `lowest + spread - 1`.
fn builder_over(
    names: &[&str],
    depth: u64,
    spread: u64,
    seed: u64,
    paths: usize,
    lowest: i64,
) -> TreeBuilder {
    let mut x = seed;
    let mut next = move || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        x >> 33
    };
    let mut b = TreeBuilder::new();
    for _ in 0..paths {
        let depth = 1 + (next() % depth) as usize;
        let frames: Vec<&str> = (0..depth)
            .map(|_| names[(next() % names.len() as u64) as usize])
            .collect();
        b.add_path(&frames, lowest + (next() % spread) as i64);
    }
    b
}

pub(crate) fn random_builder(seed: u64, paths: usize, lowest: i64) -> TreeBuilder {
    builder_over(&["f0", "f1", "f2", "f3"], 6, 5, seed, paths, lowest)
}

/// Paths over names that need escaping in JSON, non-ASCII names, and names sorting
/// around [`super::OTHER_NAME`] (one is a frame called that), so that `other` nodes tie
/// with kept siblings on both sides.
pub(crate) fn awkward_builder(seed: u64, paths: usize, lowest: i64) -> TreeBuilder {
    let names = [
        "a\"b",
        "back\\slash",
        "line\nbreak\u{1}",
        "héllo",
        "🦀::crab",
        "other",
        "p",
        "o",
    ];
    builder_over(&names, 5, 3, seed, paths, lowest)
}

/// Truncation as it is specified, done the plain way: number the nodes in pre-order,
/// keep the best by weight from the root, a node becoming a candidate once its parent is
/// kept, ties in pre-order; fold each kept node's dropped children into one `other`.
pub(crate) fn truncate_best_first<T: TreeNode>(root: &mut T, max_nodes: usize) {
    let count = count_nodes(root);
    if count <= max_nodes {
        return;
    }
    let mut weights = Vec::with_capacity(count);
    let mut children = Vec::with_capacity(count);
    number_preorder(root, &mut weights, &mut children);
    let mut keep = vec![false; count];
    let mut candidates = BinaryHeap::from([(weights[0], Reverse(0usize))]);
    for _ in 0..max_nodes.max(1) {
        let Some((_, Reverse(id))) = candidates.pop() else {
            break;
        };
        keep[id] = true;
        candidates.extend(children[id].iter().map(|&c: &usize| (weights[c], Reverse(c))));
    }
    fold(root, &keep, &mut 0);
}

fn number_preorder<T: TreeNode>(node: &T, weights: &mut Vec<i64>, children: &mut Vec<Vec<usize>>) {
    let id = weights.len();
    weights.push(node.weight());
    children.push(Vec::with_capacity(node.children().len()));
    for child in node.children() {
        let child_id = weights.len();
        children[id].push(child_id);
        number_preorder(child, weights, children);
    }
}

fn fold<T: TreeNode>(node: &mut T, keep: &[bool], next: &mut usize) {
    *next += 1;
    let mut folded = Vec::new();
    for mut child in std::mem::take(node.children_mut()) {
        if keep[*next] {
            fold(&mut child, keep, next);
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
