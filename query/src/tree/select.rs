//! Which nodes a tree cut to a node budget keeps: the one truncation algorithm, for trees
//! laid out as they are cut ([`super::cut()`]) and for built trees cut in place
//! ([`super::truncate_tree`]).

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

/// The root's number in every tree a cut reads.
pub(super) const ROOT: usize = 0;

/// A tree with totals, as choosing and materializing its kept nodes reads it: a
/// [`super::PathTree`], or a query's values summed over the cached call paths of
/// `crate::call_paths`. Node 0 is the root; a child is numbered higher than its parent.
pub(crate) trait RankedTree {
    /// Nodes in the tree.
    fn len(&self) -> usize;
    /// Every node is numbered below this.
    fn bound(&self) -> usize;
    /// The total of node `id`; what it is for numbers of nodes not in the tree is left open.
    fn total(&self, id: usize) -> i64;
    /// Whether number `id` is a node of the tree.
    fn contains(&self, id: usize) -> bool;
    fn name(&self, id: usize) -> &str;
    fn parent(&self, id: usize) -> usize;
    /// Appends the children of `id` to `out`, in no particular order.
    fn children_into(&self, id: usize, out: &mut Vec<usize>);
    /// Whether no node's self value is negative.
    fn no_negative_values(&self) -> bool;
    /// The last node of the chain that starts at `id` and goes down through only children
    /// of the same total, and how many nodes it has (`id` included): a selection by total
    /// takes a whole chain at once. One node is always a right answer.
    fn chain(&self, id: usize) -> (usize, usize) {
        (id, 1)
    }
}

/// What choosing the kept nodes reads of a tree: a [`RankedTree`], or a built tree
/// numbered in pre-order (`super::truncate`), which has no names to break ties by but
/// whose siblings are in order already.
pub(super) trait Ranking {
    fn len(&self) -> usize;
    fn bound(&self) -> usize;
    /// What the choice ranks by: a node's total, or for a diff the larger of its two.
    fn total(&self, id: usize) -> i64;
    fn contains(&self, id: usize) -> bool;
    fn parent(&self, id: usize) -> usize;
    fn children_into(&self, id: usize, out: &mut Vec<usize>);
    /// Whether no child outweighs its parent, which lets [`keep_top`] choose by threshold.
    fn monotone(&self) -> bool;
    fn chain(&self, id: usize) -> (usize, usize);
    /// Sibling order in the built tree: larger totals first, then by name.
    fn cmp_siblings(&self, a: usize, b: usize) -> Ordering;
}

impl<T: RankedTree> Ranking for T {
    fn len(&self) -> usize {
        RankedTree::len(self)
    }

    fn bound(&self) -> usize {
        RankedTree::bound(self)
    }

    fn total(&self, id: usize) -> i64 {
        RankedTree::total(self, id)
    }

    fn contains(&self, id: usize) -> bool {
        RankedTree::contains(self, id)
    }

    fn parent(&self, id: usize) -> usize {
        RankedTree::parent(self, id)
    }

    fn children_into(&self, id: usize, out: &mut Vec<usize>) {
        RankedTree::children_into(self, id, out);
    }

    /// Without negative self values a total is at least each of its children's.
    fn monotone(&self) -> bool {
        self.no_negative_values()
    }

    fn chain(&self, id: usize) -> (usize, usize) {
        RankedTree::chain(self, id)
    }

    fn cmp_siblings(&self, a: usize, b: usize) -> Ordering {
        RankedTree::total(self, b)
            .cmp(&RankedTree::total(self, a))
            .then_with(|| self.name(a).cmp(self.name(b)))
    }
}

/// A node a cut keeps.
#[derive(Clone, Copy, Debug)]
pub(super) struct Kept {
    pub id: usize,
    /// How many children it has in the tree: the kept ones fewer than that are folded into
    /// an `other` node.
    pub children: usize,
    pub self_value: i64,
}

impl Kept {
    /// `id` and its `children` in the tree, which a selection walks anyway: its self value
    /// is what its total leaves over theirs, so no tree needs to keep self values.
    fn with_children<T: Ranking>(tree: &T, id: usize, children: &[usize]) -> Kept {
        Kept {
            id,
            children: children.len(),
            self_value: tree.total(id) - children.iter().map(|&c| tree.total(c)).sum::<i64>(),
        }
    }
}

/// The nodes of `tree` a cut to `max_nodes` keeps, with where each one's parent is among
/// them (the root first, its own parent).
///
/// The choice is best-first from the root: a node becomes a candidate only once its parent
/// is kept, so the kept set always holds the ancestors of its members, even with negative
/// values; larger totals are kept first, ties in pre-order of the built tree. The root is
/// always kept. What the kept nodes' dropped children fold into is the layout's business.
pub(super) fn select<T: Ranking>(tree: &T, max_nodes: usize) -> (Vec<Kept>, Vec<usize>) {
    if tree.len() <= max_nodes {
        let mut children = Vec::new();
        let kept = (0..tree.bound())
            .filter(|&id| tree.contains(id))
            .map(|id| {
                children.clear();
                tree.children_into(id, &mut children);
                Kept::with_children(tree, id, &children)
            })
            .collect();
        with_parents(tree, kept)
    } else if tree.monotone() {
        keep_top(tree, max_nodes.max(1))
    } else {
        with_parents(tree, keep_best_first(tree, max_nodes.max(1)))
    }
}

/// `kept` by number, the root first, and where each one's parent is among them.
fn with_parents<T: Ranking>(tree: &T, mut kept: Vec<Kept>) -> (Vec<Kept>, Vec<usize>) {
    kept.sort_unstable_by_key(|k| k.id);
    let parents = kept
        .iter()
        .map(|k| {
            if k.id == ROOT {
                return 0;
            }
            kept.binary_search_by_key(&tree.parent(k.id), |k| k.id)
                .expect("the parent of a kept node is kept")
        })
        .collect();
    (kept, parents)
}

/// The best-first choice when no child outweighs its parent, without ordering the whole
/// tree. Then a parent, which also precedes its children in pre-order, always ranks above
/// them, so the nodes best-first keeps are the `k` best by (total, pre-order) of the whole
/// tree: every node above the `k`-th largest total, and those equal to it in pre-order
/// until `k` are kept. Only nodes at or above that total are walked, and only their
/// children are sorted.
/// The kept nodes come in that pre-order, each with where its parent is among them.
fn keep_top<T: Ranking>(tree: &T, k: usize) -> (Vec<Kept>, Vec<usize>) {
    let (threshold, above) = kth_total(tree, k);
    let mut ties = k - above;
    let mut kept = Vec::with_capacity(k);
    let mut parents = Vec::with_capacity(k);
    // Nodes to visit, with where their parent is in `kept`.
    let mut stack = vec![(ROOT, 0)];
    let mut next = Vec::new();
    while let Some((id, parent)) = stack.pop() {
        if tree.total(id) == threshold {
            if ties == 0 {
                continue;
            }
            ties -= 1;
        }
        next.clear();
        tree.children_into(id, &mut next);
        let at = kept.len();
        kept.push(Kept::with_children(tree, id, &next));
        parents.push(parent);
        next.retain(|&c| tree.total(c) >= threshold);
        next.sort_by(|&a, &b| tree.cmp_siblings(a, b));
        stack.extend(next.iter().rev().map(|&c| (c, at)));
    }
    (kept, parents)
}

/// The `k`-th largest total of a tree where no child outweighs its parent, and how many
/// totals are larger. A walk from the root that always takes the largest total it can
/// reach meets totals in descending order: it visits `k` nodes and their children, however
/// large the tree, and takes a chain of equal totals at once. `k` is at most the tree's
/// length.
fn kth_total<T: Ranking>(tree: &T, k: usize) -> (i64, usize) {
    let mut candidates = BinaryHeap::from([(tree.total(ROOT), ROOT)]);
    let (mut threshold, mut taken, mut above) = (tree.total(ROOT), 0, 0);
    let mut children = Vec::new();
    while taken < k {
        let Some((total, id)) = candidates.pop() else {
            break;
        };
        if total < threshold {
            (threshold, above) = (total, taken);
        }
        let (last, len) = tree.chain(id);
        taken += len;
        children.clear();
        tree.children_into(last, &mut children);
        candidates.extend(children.iter().map(|&c| (tree.total(c), c)));
    }
    (threshold, above)
}

/// The best-first choice itself, ties in pre-order of the built tree: what a child that
/// outweighs its parent (a negative value) needs. Orders every node.
fn keep_best_first<T: Ranking>(tree: &T, k: usize) -> Vec<Kept> {
    let mut preorder = vec![0usize; tree.bound()];
    let mut stack = vec![ROOT];
    let mut next = 0;
    let mut children = Vec::new();
    while let Some(id) = stack.pop() {
        preorder[id] = next;
        next += 1;
        children.clear();
        tree.children_into(id, &mut children);
        children.sort_by(|&a, &b| tree.cmp_siblings(a, b));
        stack.extend(children.iter().rev());
    }
    let mut kept = Vec::with_capacity(k);
    let mut candidates = BinaryHeap::from([(tree.total(ROOT), Reverse(0usize), ROOT)]);
    for _ in 0..k {
        let Some((_, _, id)) = candidates.pop() else {
            break;
        };
        children.clear();
        tree.children_into(id, &mut children);
        kept.push(Kept::with_children(tree, id, &children));
        candidates.extend(children.iter().map(|&c| (tree.total(c), Reverse(preorder[c]), c)));
    }
    kept
}
