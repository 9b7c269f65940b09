//! A tree cut to a node budget while it is laid out: only the kept nodes (chosen by
//! [`super::select`]) and their `other` nodes are ever materialized, so a million-path
//! tree cut to a few thousand nodes does not allocate a name and a child list per path.

use super::children::Children;
use super::model::{Node, OTHER_NAME};
use super::select::{self, Kept, RankedTree};

/// `tree` cut to `max_nodes` as [`super::truncate_tree`] cuts the built tree.
pub(crate) fn cut<T: RankedTree>(tree: &T, max_nodes: usize) -> Cut<'_> {
    let (kept, parents) = select::select(tree, max_nodes);
    arrange(tree, &kept, &parents)
}

/// The tree of the `kept` nodes (the root and the ancestors of each among them), children
/// in `build`'s order, a node's dropped children folded into one `other` leaf as
/// [`super::truncate_tree`] does. Dropped nodes are never visited: what they fold into is
/// what their parent's total leaves over.
/// `parents` tells where each kept node's parent is in `kept`, which starts with the root.
fn arrange<'t, T: RankedTree>(tree: &'t T, kept: &[Kept], parents: &[usize]) -> Cut<'t> {
    let mut children = Children::of(parents.iter().copied());
    for at in 0..kept.len() {
        let below = children.get_mut(at);
        if below.len() > 1 {
            below.sort_unstable_by(|&a, &b| select::Ranking::cmp_siblings(tree, kept[a].id, kept[b].id));
        }
    }

    /// What is written next: a kept node (by index in `kept`), or an `other` node.
    enum Next {
        Kept(usize),
        Other(i64),
    }
    let mut nodes = Vec::with_capacity(kept.len() + kept.len() / 2);
    let mut pending = vec![Next::Kept(0)];
    while let Some(next) = pending.pop() {
        let at = match next {
            Next::Kept(at) => at,
            Next::Other(folded) => {
                nodes.push(CutNode {
                    name: OTHER_NAME,
                    self_value: folded,
                    total: folded,
                    children: 0,
                });
                continue;
            }
        };
        let Kept {
            id,
            children: in_tree,
            self_value,
        } = kept[at];
        let total = tree.total(id);
        let below = children.get(at);
        let folded = (below.len() < in_tree)
            .then(|| total - self_value - below.iter().map(|&c| tree.total(kept[c].id)).sum::<i64>());
        nodes.push(CutNode {
            name: tree.name(id),
            self_value,
            total,
            children: below.len() + usize::from(folded.is_some()),
        });
        // `other` sorts among the kept children as `Node::sort_children` puts it, after
        // those it ties with: it is added last and that sort is stable.
        let other_at = folded.map(|folded| {
            below.partition_point(|&c| {
                let t = tree.total(kept[c].id);
                t > folded || t == folded && tree.name(kept[c].id) <= OTHER_NAME
            })
        });
        // Last child first: `pending` pops them in order.
        for i in (0..=below.len()).rev() {
            if let Some(folded) = folded
                && other_at == Some(i)
            {
                pending.push(Next::Other(folded));
            }
            if i > 0 {
                pending.push(Next::Kept(below[i - 1]));
            }
        }
    }
    Cut { nodes }
}

/// A tree cut to a node budget, flat: its nodes in pre-order, each followed by its
/// children's subtrees, children as [`Node`] orders them. [`Node`]s are made from it, and
/// renderers write it directly (`crate::render::json`), without a node or a name
/// allocated per node.
#[derive(Debug)]
pub(crate) struct Cut<'t> {
    nodes: Vec<CutNode<'t>>,
}

/// A node of a [`Cut`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct CutNode<'t> {
    pub name: &'t str,
    pub self_value: i64,
    pub total: i64,
    /// How many children follow it.
    pub children: usize,
}

impl<'t> Cut<'t> {
    /// The root's total.
    pub(crate) fn total(&self) -> i64 {
        self.nodes[0].total
    }

    /// The nodes in pre-order, the root first.
    pub(crate) fn nodes(&self) -> &[CutNode<'t>] {
        &self.nodes
    }

    pub(crate) fn into_node(self) -> Node {
        // Nodes whose children are still to come, with how many are; iterative, since
        // call paths may be deep.
        let mut open: Vec<(Node, usize)> = Vec::new();
        for n in &self.nodes {
            let mut done = Node {
                name: n.name.to_string(),
                self_value: n.self_value,
                total: n.total,
                children: Vec::with_capacity(n.children),
            };
            if n.children > 0 {
                open.push((done, n.children));
                continue;
            }
            loop {
                let Some((parent, left)) = open.last_mut() else {
                    return done;
                };
                parent.children.push(done);
                *left -= 1;
                if *left > 0 {
                    break;
                }
                done = open.pop().expect("just looked at").0;
            }
        }
        unreachable!("a cut's last node closes its root")
    }
}

#[cfg(test)]
mod tests {
    use crate::tree::testing::{awkward_builder, random_builder, truncate_best_first};
    use crate::tree::truncate_tree;

    /// Both ways of choosing the kept nodes: by threshold when no value is negative, and
    /// best-first when some are.
    #[test]
    fn truncating_while_building_equals_building_then_truncating() {
        for builder in [random_builder, awkward_builder] {
            for lowest in [0, -2] {
                for seed in 1..40 {
                    for max_nodes in [0, 1, 2, 3, 7, 20, 60, 150, 10_000] {
                        let mut expected = builder(seed, 300, lowest).build();
                        truncate_tree(&mut expected, max_nodes);
                        let got = builder(seed, 300, lowest).build_truncated(max_nodes);
                        assert_eq!(
                            got, expected,
                            "seed {seed}, max_nodes {max_nodes}, lowest {lowest}"
                        );
                    }
                }
            }
        }
    }

    /// The cut against truncation done the plain way, which `truncate_tree` no longer is.
    #[test]
    fn a_cut_keeps_what_best_first_keeps() {
        for builder in [random_builder, awkward_builder] {
            for lowest in [0, -1, -2] {
                for seed in 1..40 {
                    for max_nodes in [0, 1, 2, 3, 7, 20, 60, 150, 10_000] {
                        let mut expected = builder(seed, 300, lowest).build();
                        truncate_best_first(&mut expected, max_nodes);
                        let got = builder(seed, 300, lowest).build_truncated(max_nodes);
                        assert_eq!(
                            got, expected,
                            "seed {seed}, max_nodes {max_nodes}, lowest {lowest}"
                        );
                    }
                }
            }
        }
    }
}
