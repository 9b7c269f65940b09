//! Building trees from call paths: [`PathTree`] and the [`TreeBuilder`] over it.

use stackhouse_storage::model::FastMap;

use super::children::Children;
use super::cut::{Cut, cut};
use super::model::{Node, ROOT_NAME};
use super::select::{self, RankedTree};

/// Frame names numbered once, so tree nodes hold a `u32` instead of a string.
#[derive(Debug, Default)]
pub(crate) struct Interner {
    names: Vec<String>,
    ids: FastMap<String, u32>,
}

impl Interner {
    pub(crate) fn intern(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = u32::try_from(self.names.len()).expect("fewer than 2^32 distinct frame names");
        self.names.push(name.to_string());
        self.ids.insert(name.to_string(), id);
        id
    }

    pub(crate) fn names(&self) -> &[String] {
        &self.names
    }

    /// The number of `name`, if interned.
    pub(crate) fn id(&self, name: &str) -> Option<u32> {
        self.ids.get(name).copied()
    }

    pub(crate) fn len(&self) -> usize {
        self.names.len()
    }
}

/// Where the names of a [`PathTree`]'s nodes are looked up: interned names, optionally
/// followed by a query's own (group nodes), numbered after them.
#[derive(Clone, Copy)]
pub(crate) struct NameTable<'a> {
    pub base: &'a [String],
    pub extra: &'a [String],
}

impl<'a> NameTable<'a> {
    pub(crate) fn new(base: &'a [String]) -> NameTable<'a> {
        NameTable { base, extra: &[] }
    }

    fn get(&self, id: u32) -> &'a str {
        let id = id as usize;
        match self.base.get(id) {
            Some(name) => name,
            None => &self.extra[id - self.base.len()],
        }
    }
}

/// A tree of named nodes with self values, addressed by index; a child always has a
/// higher index than its parent. [`TreeBuilder`] and the cached call paths of
/// `crate::call_paths` both fill one and turn it into a [`Node`] tree here.
#[derive(Debug)]
pub(crate) struct PathTree {
    /// Per node, by index: its interned name, self value and parent. Parents rather than
    /// child lists, so that adding a node allocates nothing of its own; the child lists
    /// are laid out once, in [`Children::of`], when the tree is built.
    names: Vec<u32>,
    self_values: Vec<i64>,
    parents: Vec<usize>,
}

impl PathTree {
    pub(crate) const ROOT: usize = select::ROOT;

    pub(crate) fn new(root_name: u32) -> PathTree {
        PathTree {
            names: vec![root_name],
            self_values: vec![0],
            parents: vec![Self::ROOT],
        }
    }

    /// A new child of `parent` (the caller knows it has none of this name yet).
    pub(crate) fn push_child(&mut self, parent: usize, name: u32) -> usize {
        let id = self.names.len();
        self.names.push(name);
        self.self_values.push(0);
        self.parents.push(parent);
        id
    }

    pub(crate) fn add_self(&mut self, node: usize, value: i64) {
        self.self_values[node] += value;
    }

    /// Every node's total: its self value plus its children's totals.
    fn totals(&self) -> Vec<i64> {
        let mut totals = self.self_values.clone();
        // Children have higher indices than their parents: from the top index down, every
        // child's total is final before its parent adds it.
        for id in (1..totals.len()).rev() {
            totals[self.parents[id]] += totals[id];
        }
        totals
    }

    /// The tree, cut to `max_nodes` when given: like [`PathTree::build`] followed by
    /// [`super::truncate_tree`], with the same result, but only the kept nodes (and their
    /// `other` nodes) are ever materialized (see [`cut()`]).
    pub(crate) fn build_truncated(self, names: NameTable<'_>, max_nodes: usize) -> Node {
        self.cut(names, max_nodes, |cut| cut.into_node())
    }

    /// Hands the tree cut to `max_nodes` (see [`PathTree::build_truncated`]) to `finish`.
    pub(crate) fn cut<R>(
        &self,
        names: NameTable<'_>,
        max_nodes: usize,
        finish: impl FnOnce(Cut<'_>) -> R,
    ) -> R {
        let totals = self.totals();
        let children = Children::of(self.parents.iter().copied());
        let ranked = Ranked {
            tree: self,
            children: &children,
            names,
            totals: &totals,
        };
        finish(cut(&ranked, max_nodes))
    }

    /// The tree with totals computed and children sorted.
    pub(crate) fn build(self, names: NameTable<'_>) -> Node {
        self.build_truncated(names, usize::MAX)
    }
}

/// A [`PathTree`] with its totals and child lists.
struct Ranked<'a> {
    tree: &'a PathTree,
    children: &'a Children,
    names: NameTable<'a>,
    totals: &'a [i64],
}

impl RankedTree for Ranked<'_> {
    fn len(&self) -> usize {
        self.totals.len()
    }

    fn bound(&self) -> usize {
        self.totals.len()
    }

    fn total(&self, id: usize) -> i64 {
        self.totals[id]
    }

    fn contains(&self, _: usize) -> bool {
        true
    }

    fn name(&self, id: usize) -> &str {
        self.names.get(self.tree.names[id])
    }

    fn parent(&self, id: usize) -> usize {
        self.tree.parents[id]
    }

    fn children_into(&self, id: usize, out: &mut Vec<usize>) {
        out.extend_from_slice(self.children.get(id));
    }

    fn no_negative_values(&self) -> bool {
        self.tree.self_values.iter().all(|&v| v >= 0)
    }
}

/// Accumulates call paths given as frame names into a tree.
///
/// Frame names are interned and edges live in one map keyed by (parent, name), so adding
/// a node allocates nothing per name. Owned names are made once per node, in
/// [`TreeBuilder::build`].
#[derive(Debug)]
pub struct TreeBuilder {
    tree: PathTree,
    names: Interner,
    edges: FastMap<(usize, u32), usize>,
}

impl Default for TreeBuilder {
    fn default() -> Self {
        TreeBuilder::new()
    }
}

impl TreeBuilder {
    pub const ROOT: usize = PathTree::ROOT;

    pub fn new() -> TreeBuilder {
        let mut names = Interner::default();
        let root = names.intern(ROOT_NAME);
        TreeBuilder {
            tree: PathTree::new(root),
            names,
            edges: FastMap::default(),
        }
    }

    /// The child of `parent` named `name`, created when missing.
    pub fn child(&mut self, parent: usize, name: &str) -> usize {
        let name = self.names.intern(name);
        if let Some(&id) = self.edges.get(&(parent, name)) {
            return id;
        }
        let id = self.tree.push_child(parent, name);
        self.edges.insert((parent, name), id);
        id
    }

    pub fn add_self(&mut self, node: usize, value: i64) {
        self.tree.add_self(node, value);
    }

    /// Adds `value` at the end of a root-first call path.
    pub fn add_path<S: AsRef<str>>(&mut self, frames: &[S], value: i64) {
        let node = frames
            .iter()
            .fold(Self::ROOT, |node, frame| self.child(node, frame.as_ref()));
        self.add_self(node, value);
    }

    /// The tree cut to `max_nodes`: like [`TreeBuilder::build`] followed by
    /// [`super::truncate_tree`], with the same result, but only the kept nodes (and their
    /// `other` nodes) are ever materialized.
    pub fn build_truncated(self, max_nodes: usize) -> Node {
        self.tree
            .build_truncated(NameTable::new(self.names.names()), max_nodes)
    }

    /// Hands the tree cut to `max_nodes` to `finish`: see [`PathTree::cut`].
    #[cfg(test)]
    pub(crate) fn cut<R>(&self, max_nodes: usize, finish: impl FnOnce(Cut<'_>) -> R) -> R {
        self.tree
            .cut(NameTable::new(self.names.names()), max_nodes, finish)
    }

    /// The tree with totals computed and children sorted.
    pub fn build(self) -> Node {
        self.tree.build(NameTable::new(self.names.names()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::testing::{assert_consistent, sample_tree};

    #[test]
    fn builder_merges_paths_and_sums_totals() {
        let root = sample_tree();
        assert_eq!(root.name, ROOT_NAME);
        assert_eq!(root.self_value, 7);
        assert_eq!(root.total, 102);
        assert_eq!(root.count(), 11);
        let main = root.child("main").unwrap();
        assert_eq!(main.total, 91);
        assert_eq!(main.self_value, 0);
        let names: Vec<&str> = main.children.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c", "d"]);
        assert_eq!(main.child("a").unwrap().self_value, 5);
        assert_consistent(&root);
    }

    #[test]
    fn equal_totals_sort_by_name() {
        let mut b = TreeBuilder::new();
        b.add_path(&["z"], 1);
        b.add_path(&["y"], 1);
        b.add_path(&["x"], 2);
        let names: Vec<String> = b.build().children.into_iter().map(|c| c.name).collect();
        assert_eq!(names, ["x", "y", "z"]);
    }
}
