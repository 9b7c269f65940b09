//! The flamegraph tree: building it from call paths, and truncating it to a node budget
//! without losing value.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use serde::Serialize;
use stackhouse_storage::model::{FastMap, ProfileType};
use utoipa::ToSchema;

use crate::types::{ProfileTypeInfo, ScanStats};

/// Node budget when a query does not ask for one (as Pyroscope's `max_nodes`).
pub const DEFAULT_MAX_NODES: usize = 8192;
/// Name of the synthetic root every call path hangs from.
pub const ROOT_NAME: &str = "total";
/// Name of the node that stands for the siblings truncation folded away.
pub const OTHER_NAME: &str = "other";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct Node {
    pub name: String,
    /// Value of samples whose stack ends exactly here.
    #[serde(rename = "self")]
    pub self_value: i64,
    /// `self_value` plus the totals of all children.
    pub total: i64,
    /// Sorted by total, largest first, then by name.
    #[schema(no_recursion)]
    pub children: Vec<Node>,
}

impl Node {
    pub fn leaf(name: impl Into<String>, value: i64) -> Node {
        Node {
            name: name.into(),
            self_value: value,
            total: value,
            children: Vec::new(),
        }
    }

    /// Nodes in this subtree, this one included.
    pub fn count(&self) -> usize {
        count_nodes(self)
    }

    /// The child with this name, if any.
    pub fn child(&self, name: &str) -> Option<&Node> {
        self.children.iter().find(|c| c.name == name)
    }

    /// Keeps at most `max_nodes` nodes of this subtree; see [`truncate_tree`].
    pub fn truncate(&mut self, max_nodes: usize) {
        truncate_tree(self, max_nodes);
    }
}

impl TreeNode for Node {
    fn weight(&self) -> i64 {
        self.total
    }

    fn children(&self) -> &[Node] {
        &self.children
    }

    fn children_mut(&mut self) -> &mut Vec<Node> {
        &mut self.children
    }

    fn other(folded: &[Node]) -> Node {
        Node::leaf(OTHER_NAME, folded.iter().map(|n| n.total).sum())
    }

    fn sort_children(&mut self) {
        self.children
            .sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.name.cmp(&b.name)));
    }
}

/// A tree [`truncate_tree`] can cut down: the flamegraph and the diff share one algorithm.
pub trait TreeNode: Sized {
    /// What truncation ranks nodes by: larger weights are kept first.
    fn weight(&self) -> i64;
    fn children(&self) -> &[Self];
    fn children_mut(&mut self) -> &mut Vec<Self>;
    /// The leaf that stands for `folded`, siblings truncation dropped: it carries their
    /// summed totals so that its parent's total stays exact.
    fn other(folded: &[Self]) -> Self;
    /// Restores the children's order after an `other` node was added.
    fn sort_children(&mut self);
}

/// Nodes in the subtree of `node`, `node` included.
pub fn count_nodes<T: TreeNode>(node: &T) -> usize {
    1 + node.children().iter().map(count_nodes).sum::<usize>()
}

/// Keeps at most `max_nodes` nodes of the tree under `root`, preferring larger weights, and
/// folds the siblings dropped under each kept node into one [`OTHER_NAME`] child (see
/// [`TreeNode::other`]). Every kept node keeps its exact values; the tree grows by at most
/// one `other` node per kept node. The root is always kept.
pub fn truncate_tree<T: TreeNode>(root: &mut T, max_nodes: usize) {
    let count = count_nodes(root);
    if count <= max_nodes {
        return;
    }
    // Number the nodes in pre-order, then pick the kept set best-first from the root: a
    // node becomes a candidate only once its parent is kept, so the kept set always
    // contains the ancestors of its members, even with negative values.
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
    let mut next = 0;
    prune(root, &keep, &mut next);
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

/// Walks the tree in the same pre-order as [`number_preorder`]; `next` is this node's id.
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

/// A query's result: the call tree plus what a client needs to read its values.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct Flamegraph {
    #[serde(flatten)]
    pub kind: ProfileTypeInfo,
    /// The sample unit of the profile type: what `self` and `total` count.
    pub unit: String,
    /// The largest sampling period of the selected series, in `period_unit`.
    pub period: i64,
    pub total: i64,
    /// The node budget applied by [`Flamegraph::truncate`]; absent before truncation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_nodes: Option<usize>,
    /// The `group_by` keys of the first level under the root, when grouped.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub group_by: Vec<String>,
    pub root: Node,
    /// What the query read; absent for results not built by a scan.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stats: Option<ScanStats>,
}

impl Flamegraph {
    pub fn new(profile_type: ProfileType, period: i64, root: Node) -> Flamegraph {
        Flamegraph {
            unit: profile_type.sample_unit.clone(),
            kind: ProfileTypeInfo::from(&profile_type),
            period,
            total: root.total,
            max_nodes: None,
            group_by: Vec::new(),
            root,
            stats: None,
        }
    }

    pub fn profile_type(&self) -> ProfileType {
        self.kind.to_profile_type()
    }

    /// A flamegraph of nothing: total 0, a root without children.
    pub fn empty(profile_type: ProfileType, period: i64) -> Flamegraph {
        Flamegraph::new(profile_type, period, Node::leaf(ROOT_NAME, 0))
    }

    /// See [`Node::truncate`]; the root total never changes.
    pub fn truncate(&mut self, max_nodes: usize) {
        self.root.truncate(max_nodes);
        self.max_nodes = Some(max_nodes);
    }
}

/// A [`Flamegraph`] whose tree was written as JSON while it was cut, so that answering in
/// JSON makes no [`Node`] and no name per node: [`FlamegraphJson::to_json`] is what
/// `serde_json` writes for the flamegraph.
#[derive(Debug)]
pub struct FlamegraphJson {
    /// Everything but the tree, with a childless root standing in for it.
    head: Flamegraph,
    root: Vec<u8>,
}

impl FlamegraphJson {
    pub(crate) fn new(head: Flamegraph, root: Vec<u8>) -> FlamegraphJson {
        FlamegraphJson { head, root }
    }

    pub fn total(&self) -> i64 {
        self.head.total
    }

    pub fn stats(&self) -> Option<&ScanStats> {
        self.head.stats.as_ref()
    }

    /// The flamegraph's JSON: `serde_json` writes everything but the tree, whose JSON
    /// takes the stand-in root's place, so the fields stay what [`Flamegraph`] declares.
    pub fn to_json(&self) -> Vec<u8> {
        let head = serde_json::to_vec(&self.head).expect("writing JSON to a Vec cannot fail");
        let key = b",\"root\":";
        let mut stand_in = key.to_vec();
        json_value(&self.head.root, &mut stand_in);
        // A quote inside a JSON string is escaped, so `,"root":` is only ever the key.
        let at = head
            .windows(stand_in.len())
            .position(|w| w == stand_in)
            .expect("the root follows other fields");
        let mut out = Vec::with_capacity(head.len() + self.root.len());
        out.extend_from_slice(&head[..at + key.len()]);
        out.extend_from_slice(&self.root);
        out.extend_from_slice(&head[at + stand_in.len()..]);
        out
    }
}

/// Frame names numbered once, so tree nodes hold a `u32` instead of a string.
#[derive(Debug, Default)]
pub(crate) struct Interner {
    names: Vec<String>,
    ids: FastMap<String, u32>,
}

impl Interner {
    pub fn intern(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = u32::try_from(self.names.len()).expect("fewer than 2^32 distinct frame names");
        self.names.push(name.to_string());
        self.ids.insert(name.to_string(), id);
        id
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The number of `name`, if interned.
    pub fn id(&self, name: &str) -> Option<u32> {
        self.ids.get(name).copied()
    }

    pub fn len(&self) -> usize {
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
    pub fn new(base: &'a [String]) -> NameTable<'a> {
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

/// Every node's children in one array, in creation order: node `i`'s are
/// `list[start[i]..start[i + 1]]`.
#[derive(Debug)]
pub(crate) struct Children {
    start: Vec<usize>,
    list: Vec<usize>,
}

impl Children {
    /// From every node's parent, by index; node 0, the root, is its own.
    pub fn of(parents: impl ExactSizeIterator<Item = usize> + Clone) -> Children {
        let n = parents.len();
        let mut start = vec![0usize; n + 1];
        for parent in parents.clone().skip(1) {
            start[parent + 1] += 1;
        }
        for i in 0..n {
            start[i + 1] += start[i];
        }
        let mut fill = start.clone();
        let mut list = vec![0usize; n.saturating_sub(1)];
        for (child, parent) in parents.enumerate().skip(1) {
            list[fill[parent]] = child;
            fill[parent] += 1;
        }
        Children { start, list }
    }

    pub fn get(&self, id: usize) -> &[usize] {
        &self.list[self.start[id]..self.start[id + 1]]
    }

    fn get_mut(&mut self, id: usize) -> &mut [usize] {
        &mut self.list[self.start[id]..self.start[id + 1]]
    }
}

impl PathTree {
    pub const ROOT: usize = 0;

    pub fn new(root_name: u32) -> PathTree {
        PathTree {
            names: vec![root_name],
            self_values: vec![0],
            parents: vec![Self::ROOT],
        }
    }

    /// A new child of `parent` (the caller knows it has none of this name yet).
    pub fn push_child(&mut self, parent: usize, name: u32) -> usize {
        let id = self.names.len();
        self.names.push(name);
        self.self_values.push(0);
        self.parents.push(parent);
        id
    }

    pub fn add_self(&mut self, node: usize, value: i64) {
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
    /// [`truncate_tree`], with the same result, but choosing the kept nodes first so that
    /// only those (and their `other` nodes) are ever materialized: a million-path tree cut
    /// to a few thousand nodes no longer allocates a name and a child list for every path.
    pub fn build_truncated(self, names: NameTable<'_>, max_nodes: usize) -> Node {
        self.cut(names, max_nodes, |cut| cut.into_node())
    }

    /// Hands the tree cut to `max_nodes` (see [`PathTree::build_truncated`]) to `finish`.
    pub fn cut<R>(&self, names: NameTable<'_>, max_nodes: usize, finish: impl FnOnce(Cut<'_>) -> R) -> R {
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
    pub fn build(self, names: NameTable<'_>) -> Node {
        self.build_truncated(names, usize::MAX)
    }
}

/// A tree with totals, as choosing and materializing its kept nodes reads it: a
/// [`PathTree`], or a query's values summed over the cached call paths of
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

const ROOT: usize = PathTree::ROOT;

/// Sibling order in a built tree: larger totals first, then by name.
fn cmp_siblings<T: RankedTree>(tree: &T, a: usize, b: usize) -> std::cmp::Ordering {
    tree.total(b)
        .cmp(&tree.total(a))
        .then_with(|| tree.name(a).cmp(tree.name(b)))
}

/// A node a cut keeps.
#[derive(Clone, Copy, Debug)]
struct Kept {
    id: usize,
    /// How many children it has in the tree: the kept ones fewer than that are folded into
    /// an `other` node.
    children: usize,
    self_value: i64,
}

impl Kept {
    /// `id` and its `children` in the tree, which a selection walks anyway: its self value
    /// is what its total leaves over theirs, so no tree needs to keep self values.
    fn with_children<T: RankedTree>(tree: &T, id: usize, children: &[usize]) -> Kept {
        Kept {
            id,
            children: children.len(),
            self_value: tree.total(id) - children.iter().map(|&c| tree.total(c)).sum::<i64>(),
        }
    }
}

/// `tree` cut to `max_nodes` as [`truncate_tree`] cuts the built tree: only the kept nodes
/// and their `other` nodes are ever laid out.
pub(crate) fn cut<T: RankedTree>(tree: &T, max_nodes: usize) -> Cut<'_> {
    let (kept, parents) = if tree.len() <= max_nodes {
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
    } else if tree.no_negative_values() {
        keep_top(tree, max_nodes.max(1))
    } else {
        with_parents(tree, keep_best_first(tree, max_nodes.max(1)))
    };
    arrange(tree, &kept, &parents)
}

/// `kept` by number, the root first, and where each one's parent is among them.
fn with_parents<T: RankedTree>(tree: &T, mut kept: Vec<Kept>) -> (Vec<Kept>, Vec<usize>) {
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

/// [`truncate_tree`]'s choice when no value is negative, without ordering the whole tree.
/// Then no child outweighs its parent, which also precedes it in pre-order, so the nodes
/// best-first selection keeps are the `k` best by (total, pre-order) of the whole tree:
/// every node above the `k`-th largest total, and those equal to it in pre-order until
/// `k` are kept. Only nodes at or above that total are walked, and only their children
/// are sorted.
/// The kept nodes come in that pre-order, each with where its parent is among them.
fn keep_top<T: RankedTree>(tree: &T, k: usize) -> (Vec<Kept>, Vec<usize>) {
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
        next.sort_by(|&a, &b| cmp_siblings(tree, a, b));
        stack.extend(next.iter().rev().map(|&c| (c, at)));
    }
    (kept, parents)
}

/// The `k`-th largest total of a tree without negative values, and how many totals are
/// larger. A walk from the root that always takes the largest total it can reach meets
/// totals in descending order, as no child outweighs its parent: it visits `k` nodes and
/// their children, however large the tree, and takes a chain of equal totals at once.
/// `k` is at most the tree's length.
fn kth_total<T: RankedTree>(tree: &T, k: usize) -> (i64, usize) {
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

/// [`truncate_tree`]'s best-first choice, in pre-order of the built tree for ties: what
/// negative values need, since a child may then outweigh its parent. Orders every node.
fn keep_best_first<T: RankedTree>(tree: &T, k: usize) -> Vec<Kept> {
    let mut preorder = vec![0usize; tree.bound()];
    let mut stack = vec![ROOT];
    let mut next = 0;
    let mut children = Vec::new();
    while let Some(id) = stack.pop() {
        preorder[id] = next;
        next += 1;
        children.clear();
        tree.children_into(id, &mut children);
        children.sort_by(|&a, &b| cmp_siblings(tree, a, b));
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

/// The tree of the `kept` nodes (the root and the ancestors of each among them), children
/// in `build`'s order, a node's dropped children folded into one `other` leaf as
/// [`truncate_tree`] does. Dropped nodes are never visited: what they fold into is what
/// their parent's total leaves over.
/// `parents` tells where each kept node's parent is in `kept`, which starts with the root.
fn arrange<'t, T: RankedTree>(tree: &'t T, kept: &[Kept], parents: &[usize]) -> Cut<'t> {
    let mut children = Children::of(parents.iter().copied());
    for at in 0..kept.len() {
        let below = children.get_mut(at);
        if below.len() > 1 {
            below.sort_unstable_by(|&a, &b| cmp_siblings(tree, kept[a].id, kept[b].id));
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
/// JSON is written from it directly, without a node or a name allocated per node.
#[derive(Debug)]
pub(crate) struct Cut<'t> {
    nodes: Vec<CutNode<'t>>,
}

#[derive(Clone, Copy, Debug)]
struct CutNode<'t> {
    name: &'t str,
    self_value: i64,
    total: i64,
    /// How many children follow it.
    children: usize,
}

impl Cut<'_> {
    /// The root's total.
    pub fn total(&self) -> i64 {
        self.nodes[0].total
    }

    pub fn into_node(self) -> Node {
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

    /// Appends the tree as JSON, byte for byte what `serde_json` writes for its [`Node`].
    pub fn write_json(&self, out: &mut Vec<u8>) {
        // The keys, punctuation and two numbers take under 80 bytes a node: reserved once,
        // the buffer is not copied while it grows.
        out.reserve(self.nodes.iter().map(|n| n.name.len() + 80).sum());
        // Per open node, the children still to come.
        let mut left: Vec<usize> = Vec::new();
        for n in &self.nodes {
            out.extend_from_slice(b"{\"name\":");
            json_string(n.name, out);
            let mut digits = itoa::Buffer::new();
            out.extend_from_slice(b",\"self\":");
            out.extend_from_slice(digits.format(n.self_value).as_bytes());
            out.extend_from_slice(b",\"total\":");
            out.extend_from_slice(digits.format(n.total).as_bytes());
            out.extend_from_slice(b",\"children\":[");
            if n.children > 0 {
                left.push(n.children);
                continue;
            }
            out.extend_from_slice(b"]}");
            while let Some(l) = left.last_mut() {
                *l -= 1;
                if *l > 0 {
                    out.push(b',');
                    break;
                }
                left.pop();
                out.extend_from_slice(b"]}");
            }
        }
    }
}

/// `s` as a JSON string: copied as it is when nothing in it needs escaping (frame names
/// rarely do), else escaped by `serde_json`.
fn json_string(s: &str, out: &mut Vec<u8>) {
    // A fold without an early exit: the compiler checks many bytes per instruction.
    let plain = s
        .bytes()
        .fold(true, |plain, b| plain & (b >= 0x20) & (b != b'"') & (b != b'\\'));
    if !plain {
        json_value(s, out);
    } else {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    }
}

fn json_value<V: Serialize + ?Sized>(value: &V, out: &mut Vec<u8>) {
    serde_json::to_writer(out, value).expect("writing JSON to a Vec cannot fail");
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

    /// See [`PathTree::build_truncated`].
    pub fn build_truncated(self, max_nodes: usize) -> Node {
        self.tree
            .build_truncated(NameTable::new(self.names.names()), max_nodes)
    }

    /// The tree with totals computed and children sorted.
    pub fn build(self) -> Node {
        self.tree.build(NameTable::new(self.names.names()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every node's total is its self value plus its children's totals.
    fn assert_consistent(node: &Node) {
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

    fn count_named(node: &Node, name: &str) -> usize {
        usize::from(node.name == name) + node.children.iter().map(|c| count_named(c, name)).sum::<usize>()
    }

    fn sample_tree() -> Node {
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

    fn random_builder(seed: u64, paths: usize, lowest: i64) -> TreeBuilder {
        builder_over(&["f0", "f1", "f2", "f3"], 6, 5, seed, paths, lowest)
    }

    /// Paths over names that need escaping in JSON, non-ASCII names, and names sorting
    /// around [`OTHER_NAME`] (one is a frame called that), so that `other` nodes tie with
    /// kept siblings on both sides.
    fn awkward_builder(seed: u64, paths: usize, lowest: i64) -> TreeBuilder {
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

    /// What the JSON writer makes of `b` cut to `max_nodes`.
    fn cut_json(b: &TreeBuilder, max_nodes: usize) -> Vec<u8> {
        b.tree.cut(NameTable::new(b.names.names()), max_nodes, |cut| {
            let mut out = Vec::new();
            cut.write_json(&mut out);
            out
        })
    }

    #[test]
    fn the_json_writer_writes_what_serde_writes() {
        for lowest in [0, -1] {
            for seed in 1..30 {
                for max_nodes in [0, 1, 2, 5, 13, 40, 10_000] {
                    let b = awkward_builder(seed, 200, lowest);
                    let mut node = awkward_builder(seed, 200, lowest).build();
                    truncate_tree(&mut node, max_nodes);
                    let want = serde_json::to_string(&node).unwrap();
                    let got = String::from_utf8(cut_json(&b, max_nodes)).unwrap();
                    assert_eq!(got, want, "seed {seed}, max_nodes {max_nodes}, lowest {lowest}");
                }
            }
        }
        let empty = TreeBuilder::new();
        assert_eq!(
            cut_json(&empty, 10),
            br#"{"name":"total","self":0,"total":0,"children":[]}"#
        );
    }

    #[test]
    fn a_flamegraph_as_json_is_what_serde_writes() {
        let pt = ProfileType::parse("samples:count:cpu:nanoseconds").unwrap();
        let b = awkward_builder(3, 100, 0);
        let cases = [
            (None, vec![], None),
            (
                Some(7),
                vec!["pod".to_string()],
                Some(ScanStats {
                    segments: 2,
                    rows_by_tier: [("raw".to_string(), 5)].into(),
                    answered: Some((1, 2)),
                    ..ScanStats::default()
                }),
            ),
        ];
        for (max_nodes, group_by, stats) in cases {
            let mut fg = Flamegraph::new(pt.clone(), 10, awkward_builder(3, 100, 0).build());
            if let Some(max_nodes) = max_nodes {
                fg.truncate(max_nodes);
            }
            fg.group_by = group_by;
            fg.stats = stats;
            let mut head = fg.clone();
            head.root = Node::leaf(ROOT_NAME, fg.total);
            let json = FlamegraphJson::new(head, cut_json(&b, max_nodes.unwrap_or(usize::MAX)));
            assert_eq!(
                String::from_utf8(json.to_json()).unwrap(),
                serde_json::to_string(&fg).unwrap()
            );
        }
        let empty = Flamegraph::empty(pt, 0);
        let json = FlamegraphJson::new(empty.clone(), cut_json(&TreeBuilder::new(), 1));
        assert_eq!(json.to_json(), serde_json::to_vec(&empty).unwrap());
    }

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

    #[test]
    fn flamegraph_truncation_records_the_budget() {
        let pt = ProfileType::parse("samples:count:cpu:nanoseconds").unwrap();
        let mut fg = Flamegraph::new(pt, 10, sample_tree());
        assert_eq!((fg.unit.as_str(), fg.total, fg.max_nodes), ("count", 102, None));
        fg.truncate(3);
        assert_eq!((fg.total, fg.root.total, fg.max_nodes), (102, 102, Some(3)));
        let empty = Flamegraph::empty(ProfileType::default(), 0);
        assert_eq!((empty.total, empty.root.name.as_str()), (0, ROOT_NAME));
    }
}
