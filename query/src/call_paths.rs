//! Call paths kept between queries: a per-tenant tree of frame names that every resolved
//! stack id points into, so that a flamegraph adds values to nodes it already knows
//! instead of walking the stack table and naming frames again.
//!
//! Stack, location and function ids are content hashes: what a stack id resolves to never
//! changes, so a resolved path stays right for as long as it is cached. Only resolutions
//! that found every symbol are kept: a stack with missing symbols is resolved again by the
//! next query (its symbols may have been committed meanwhile) and warned about again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use stackhouse_storage::model::{FastMap, IdMap, SymbolId};
use stackhouse_storage::symbols::SymbolIndex;

use crate::debuginfo::NativeFiles;
use crate::frames::{Frame, FrameView};
use crate::render::json::write_cut;
use crate::symbolize::{MissingSymbols, UNKNOWN, location_frames, walk_up};
use crate::tree::{Children, Cut, Interner, NameTable, Node, PathTree, ROOT_NAME, RankedTree, cut};

/// Node of the cached tree; [`CallPaths::ROOT`] is the synthetic root.
pub(crate) type PathNode = u32;

/// The frame tree of one tenant's resolved stacks.
#[derive(Debug)]
pub(crate) struct CallPaths {
    names: Interner,
    /// Per node: its parent (the root is its own) and its name.
    parents: Vec<PathNode>,
    node_names: Vec<u32>,
    /// Laid out when a dense sum first needs it after the tree grew or a query asked for a
    /// stack ending inside a chain.
    layout: OnceLock<Layout>,
    edges: FastMap<(PathNode, u32), PathNode>,
    /// Stack id a query asked for → the node its path ends at. Kept apart from `ends`,
    /// which also holds every stack node on the way up and so is many times larger: a
    /// query looks up each of its stacks here, in a map small enough to stay in cache.
    asked: IdMap<PathNode>,
    /// Stack node → the node its path ends at, for every resolved node.
    ends: IdMap<PathNode>,
    /// Location → its frames, caller first.
    locations: IdMap<Box<[u32]>>,
    /// [`NativeFiles::fingerprint`] of the debug files native frames were named with.
    native: u64,
    /// How frames are named and which are kept: one tree per view.
    view: Arc<FrameView>,
    /// With stack rules: per location, the marks of its frames ([`FrameView::marks`])…
    location_marks: IdMap<u64>,
    /// …and per stack node, the marks of every frame from it to the root.
    stack_marks: IdMap<u64>,
}

impl Default for CallPaths {
    fn default() -> Self {
        CallPaths::new(Arc::default())
    }
}

impl CallPaths {
    pub(crate) fn new(view: Arc<FrameView>) -> CallPaths {
        let mut names = Interner::default();
        let root = names.intern(ROOT_NAME);
        CallPaths {
            names,
            parents: vec![Self::ROOT],
            node_names: vec![root],
            layout: OnceLock::new(),
            edges: FastMap::default(),
            asked: IdMap::default(),
            ends: IdMap::default(),
            locations: IdMap::default(),
            native: 0,
            view,
            location_marks: IdMap::default(),
            stack_marks: IdMap::default(),
        }
    }

    pub(crate) const ROOT: PathNode = 0;

    /// Entries held: what the cache's size limit counts.
    pub(crate) fn entries(&self) -> usize {
        self.parents.len()
            + self.asked.len()
            + self.ends.len()
            + self.locations.len()
            + self.location_marks.len()
            + self.stack_marks.len()
    }

    /// A tree like this one (same view and debug files) with nothing resolved.
    fn emptied(&self) -> CallPaths {
        CallPaths {
            native: self.native,
            ..CallPaths::new(self.view.clone())
        }
    }

    /// Starts afresh when the names were resolved with other debug files than `native` (a
    /// file was uploaded or deleted since): call before resolving a query's stacks.
    pub(crate) fn use_native(&mut self, native: &NativeFiles) {
        if self.native != native.fingerprint() {
            *self = CallPaths {
                native: native.fingerprint(),
                ..CallPaths::new(self.view.clone())
            };
        }
    }

    /// The node where the call path of `stack_id` ends (the root for ZERO), resolving and
    /// caching it when new. Ids missing from `index` count in `missing` and become
    /// [`UNKNOWN`] frames, as in [`crate::symbolize`].
    pub(crate) fn end(
        &mut self,
        index: &SymbolIndex,
        native: &NativeFiles,
        missing: &mut MissingSymbols,
        stack_id: SymbolId,
    ) -> PathNode {
        if stack_id.is_zero() {
            return Self::ROOT;
        }
        if let Some(&end) = self.asked.get(&stack_id) {
            return end;
        }
        if let Some(&end) = self.ends.get(&stack_id) {
            self.ask(stack_id, end);
            return end;
        }
        let ends = &self.ends;
        let (pending, placed) = walk_up(index, missing, stack_id, |node| {
            ends.get(&node).map(|&end| end as usize)
        });
        // Root-first from the first cached ancestor. A missing symbol makes this node and
        // every node below it provisional: their ends are not cached.
        let mut end = placed.map_or(Self::ROOT, |p| p as PathNode);
        let mut complete = true;
        let collapses = self.view.aggregate_by.collapses();
        for (stack_node, location_id) in pending.into_iter().rev() {
            match location_id {
                Some(location_id) => {
                    let frames = self.location(index, native, missing, location_id, &mut complete);
                    for &frame in &frames {
                        if collapses && end != Self::ROOT && self.node_names[end as usize] == frame {
                            continue;
                        }
                        end = self.child(end, frame);
                    }
                }
                None => {
                    complete = false;
                    let unknown = self.names.intern(UNKNOWN);
                    end = self.child(end, unknown);
                }
            }
            if complete {
                self.ends.insert(stack_node, end);
            }
        }
        if complete {
            self.ask(stack_id, end);
        }
        end
    }

    fn ask(&mut self, stack_id: SymbolId, end: PathNode) {
        self.asked.insert(stack_id, end);
        if self.layout.get().is_some_and(|layout| !layout.ends_chain(end)) {
            self.layout.take();
        }
    }

    fn layout(&self) -> &Layout {
        self.layout.get_or_init(|| Layout::of(self))
    }

    /// The interned frames of a location as the view names them, caller first, hidden
    /// ones left out; cached when nothing was missing, and otherwise clears `complete`.
    fn location(
        &mut self,
        index: &SymbolIndex,
        native: &NativeFiles,
        missing: &mut MissingSymbols,
        location_id: SymbolId,
        complete: &mut bool,
    ) -> Box<[u32]> {
        let (view, names) = (&self.view, &mut self.names);
        per_location(
            &mut self.locations,
            index,
            native,
            missing,
            location_id,
            complete,
            |frames| {
                let named: Vec<String> = match frames {
                    Some(frames) => frames.iter().filter_map(|frame| view.name(frame)).collect(),
                    None => vec![UNKNOWN.to_string()],
                };
                named.iter().map(|n| names.intern(n)).collect()
            },
        )
    }

    /// Whether the view's stack rules (focus, drop) keep `stack_id`. Marks are cached per
    /// stack node, so stacks sharing a prefix share its walk; a stack with missing
    /// symbols is marked by the frames that are known, and not cached.
    pub(crate) fn keeps(
        &mut self,
        index: &SymbolIndex,
        native: &NativeFiles,
        missing: &mut MissingSymbols,
        stack_id: SymbolId,
    ) -> bool {
        if !self.view.filters_stacks() {
            return true;
        }
        let marks = &self.stack_marks;
        let (pending, placed) = walk_up(index, missing, stack_id, |node| {
            marks.get(&node).map(|&m| m as usize)
        });
        let mut mask = placed.map_or(0, |m| m as u64);
        let mut complete = true;
        for (stack_node, location_id) in pending.into_iter().rev() {
            match location_id {
                Some(location_id) => {
                    mask |= self.location_marks(index, native, missing, location_id, &mut complete);
                }
                None => complete = false,
            }
            if complete {
                self.stack_marks.insert(stack_node, mask);
            }
        }
        self.view.keeps(mask)
    }

    fn location_marks(
        &mut self,
        index: &SymbolIndex,
        native: &NativeFiles,
        missing: &mut MissingSymbols,
        location_id: SymbolId,
        complete: &mut bool,
    ) -> u64 {
        let view = &self.view;
        per_location(
            &mut self.location_marks,
            index,
            native,
            missing,
            location_id,
            complete,
            |frames| {
                frames.map_or(0, |frames| {
                    frames.iter().fold(0, |marks, frame| marks | view.marks(frame))
                })
            },
        )
    }

    /// The frame names of the path ending at `end`, root first (the synthetic root left
    /// out).
    pub(crate) fn frames(&self, mut end: PathNode) -> Vec<&str> {
        let mut frames = Vec::new();
        while end != Self::ROOT {
            frames.push(self.names.names()[self.node_names[end as usize] as usize].as_str());
            end = self.parents[end as usize];
        }
        frames.reverse();
        frames
    }

    /// The node at the end of a root-first path of frame names, if a resolved stack
    /// passes through it.
    pub(crate) fn find(&self, frames: &[String]) -> Option<PathNode> {
        frames.iter().try_fold(Self::ROOT, |node, frame| {
            let name = self.names.id(frame)?;
            self.edges.get(&(node, name)).copied()
        })
    }

    fn child(&mut self, parent: PathNode, name: u32) -> PathNode {
        if let Some(&node) = self.edges.get(&(parent, name)) {
            return node;
        }
        let node = PathNode::try_from(self.parents.len()).expect("fewer than 2^32 call path nodes");
        self.parents.push(parent);
        self.node_names.push(name);
        self.layout.take();
        self.edges.insert((parent, name), node);
        node
    }
}

/// What `make` makes of a location's frames (`None`: the location is missing from the
/// index), cached per location when nothing was missing; otherwise `complete` is cleared,
/// so the symbols are looked up again once they may have been committed.
fn per_location<T: Clone>(
    cache: &mut IdMap<T>,
    index: &SymbolIndex,
    native: &NativeFiles,
    missing: &mut MissingSymbols,
    location_id: SymbolId,
    complete: &mut bool,
    make: impl FnOnce(Option<&[Frame]>) -> T,
) -> T {
    if let Some(value) = cache.get(&location_id) {
        return value.clone();
    }
    let before = *missing;
    let value = match index.locations.get(&location_id) {
        Some(location) => make(Some(&location_frames(index, native, location, missing))),
        None => {
            missing.locations += 1;
            make(None)
        }
    };
    if *missing == before {
        cache.insert(location_id, value.clone());
    } else {
        *complete = false;
    }
    value
}

/// The cached tree read as chains. A node ends a chain unless it has exactly one child and
/// no asked stack ends at it; a chain is the nodes from a child of a chain's end down to
/// the next end. Every node of a chain has the same total in any sum whose values land on
/// chain ends only, so a dense sum adds up chains (a few per stack) instead of nodes (tens
/// per stack), and a cut takes a chain at once.
///
/// Nodes are laid out in pre-order of the tree, numbered by their place in it (their
/// position): the root is 0 and every subtree, a chain included, is one run of positions.
/// Node numbers follow the order in which queries resolved stacks, which scatters a node's
/// children and a chain's nodes over the whole cache; a cut's walk down from the root
/// missed the cache at nearly every node it took.
#[derive(Debug)]
struct Layout {
    /// Per node, its position.
    position: Vec<u32>,
    /// Per position: its parent's position (the root is its own) and its node's name.
    parents_at: Vec<u32>,
    names_at: Vec<u32>,
    /// Every position's children, in one array: read far faster than per-node links.
    children: Children,
    /// Per position, its chain; chains are numbered in the order of their first positions,
    /// so a chain's parent chain has a lower number. The root is chain 0, alone.
    chain_of: Vec<u32>,
    /// Per chain: its first and last position, its length, and the chain its first
    /// position's parent ends.
    firsts: Vec<u32>,
    lasts: Vec<u32>,
    lens: Vec<u32>,
    parents: Vec<u32>,
}

impl Layout {
    fn of(paths: &CallPaths) -> Layout {
        let nodes = paths.parents.len();
        let (position, parents_at, names_at) = {
            let children = Children::of(paths.parents.iter().map(|&p| p as usize));
            // Every node hangs from the root: `CallPaths::child` is the only way one is made.
            let mut order = Vec::with_capacity(nodes);
            let mut todo = vec![CallPaths::ROOT as usize];
            while let Some(node) = todo.pop() {
                order.push(node);
                todo.extend(children.get(node).iter().rev());
            }
            let mut position = vec![0u32; nodes];
            for (at, &node) in order.iter().enumerate() {
                position[node] = u32::try_from(at).expect("fewer than 2^32 call path nodes");
            }
            let parents_at: Vec<u32> = order
                .iter()
                .map(|&node| position[paths.parents[node] as usize])
                .collect();
            let names_at = order.iter().map(|&node| paths.node_names[node]).collect();
            (position, parents_at, names_at)
        };
        let children = Children::of(parents_at.iter().map(|&p| p as usize));
        let mut asked = vec![false; nodes];
        asked[CallPaths::ROOT as usize] = true;
        for &end in paths.asked.values() {
            asked[position[end as usize] as usize] = true;
        }
        let ends_chain = |node: usize| asked[node] || children.get(node).len() != 1;
        let mut chain_of = vec![0u32; nodes];
        let (mut firsts, mut lasts, mut lens, mut parents) = (vec![0u32], vec![0u32], vec![1u32], vec![0u32]);
        for (node, &parent) in parents_at.iter().enumerate().skip(1) {
            let parent = parent as usize;
            let chain = if ends_chain(parent) {
                firsts.push(node as u32);
                lasts.push(node as u32);
                lens.push(0);
                parents.push(chain_of[parent]);
                u32::try_from(firsts.len() - 1).expect("fewer than 2^32 chains")
            } else {
                chain_of[parent]
            };
            chain_of[node] = chain;
            lens[chain as usize] += 1;
            if ends_chain(node) {
                lasts[chain as usize] = node as u32;
            }
        }
        Layout {
            position,
            parents_at,
            names_at,
            children,
            chain_of,
            firsts,
            lasts,
            lens,
            parents,
        }
    }

    fn ends_chain(&self, node: PathNode) -> bool {
        let at = self.position[node as usize];
        self.lasts[self.chain_of[at as usize] as usize] == at
    }
}

/// A query whose ungrouped values end at more than one in this many of the cached nodes is
/// summed densely over the whole cached tree (see [`PathSums::dense`]). Summing
/// densely costs a few nanoseconds per cached node; walking costs a hash map insert per
/// node of each new path, and a stack has tens of nodes of its own.
const DENSE_FRACTION: usize = 256;

/// One frame name's sums: see [`PathSums::name_sums`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NameSum<'p> {
    pub name: &'p str,
    pub self_value: i64,
    pub total: i64,
}

/// One query's values on a [`CallPaths`] tree, optionally under group nodes: what the query
/// costs follows the nodes its stacks pass through, however large the cached tree is.
pub(crate) struct PathSums<'p> {
    paths: &'p CallPaths,
    tree: PathTree,
    group_names: Vec<String>,
    /// Values added under the root, kept until the tree is built: see [`PathSums::dense`].
    at_root: Vec<(PathNode, i64)>,
    /// (group's output node, cached node) → output node.
    placed: FastMap<(usize, PathNode), usize>,
    /// Reused by every `add`: the nodes of a path not placed yet.
    pending: Vec<PathNode>,
}

impl<'p> PathSums<'p> {
    /// The output root; what ungrouped values hang from.
    pub(crate) const ROOT: usize = PathTree::ROOT;

    pub(crate) fn new(paths: &'p CallPaths) -> PathSums<'p> {
        PathSums {
            paths,
            tree: PathTree::new(paths.node_names[CallPaths::ROOT as usize]),
            group_names: Vec::new(),
            at_root: Vec::new(),
            placed: FastMap::default(),
            pending: Vec::new(),
        }
    }

    /// A new node named `name` under the root, to add values under.
    pub(crate) fn group(&mut self, name: &str) -> usize {
        let id = u32::try_from(self.paths.names.len() + self.group_names.len())
            .expect("fewer than 2^32 distinct frame names");
        self.group_names.push(name.to_string());
        self.tree.push_child(Self::ROOT, id)
    }

    /// Adds `value` at the path ending at `end`, under `group` (a [`PathSums::group`] or
    /// [`PathSums::ROOT`]).
    pub(crate) fn add(&mut self, group: usize, end: PathNode, value: i64) {
        if group == Self::ROOT {
            self.at_root.push((end, value));
            return;
        }
        let node = self.output_node(group, end);
        self.tree.add_self(node, value);
    }

    fn output_node(&mut self, group: usize, end: PathNode) -> usize {
        // Walk up to the first node already placed under this group, then place the rest
        // root-first, so children keep higher indices than their parents.
        self.pending.clear();
        let mut node = end;
        let mut out = group;
        while node != CallPaths::ROOT {
            if let Some(&placed) = self.placed.get(&(group, node)) {
                out = placed;
                break;
            }
            self.pending.push(node);
            node = self.paths.parents[node as usize];
        }
        for &node in self.pending.iter().rev() {
            out = self.tree.push_child(out, self.paths.node_names[node as usize]);
            self.placed.insert((group, node), out);
        }
        out
    }

    /// Per frame name on the paths of the values added under the root: the value of the
    /// paths that end in it (self) and of the paths through it, each path counted once
    /// however often the name recurs on it (total); and the value of every path. Walks
    /// each distinct path up once, by name numbers: top functions need no tree and no
    /// name per node. Names on no path are left out; ungrouped sums only.
    pub(crate) fn name_sums(mut self) -> (Vec<NameSum<'p>>, i64) {
        debug_assert!(self.group_names.is_empty(), "name sums of grouped values");
        let mut ends = std::mem::take(&mut self.at_root);
        ends.sort_unstable_by_key(|&(end, _)| end);
        ends.dedup_by(|next, kept| {
            let same = next.0 == kept.0;
            if same {
                kept.1 += next.1;
            }
            same
        });
        let paths = self.paths;
        let names = paths.names.names();
        // Per name: (self, total), and the last path that added to its total.
        let mut sums = vec![(0i64, 0i64); names.len()];
        let mut last_path = vec![usize::MAX; names.len()];
        let mut all = 0;
        for (path, &(end, value)) in ends.iter().enumerate() {
            all += value;
            if end != CallPaths::ROOT {
                sums[paths.node_names[end as usize] as usize].0 += value;
            }
            let mut node = end;
            while node != CallPaths::ROOT {
                let name = paths.node_names[node as usize] as usize;
                if last_path[name] != path {
                    last_path[name] = path;
                    sums[name].1 += value;
                }
                node = paths.parents[node as usize];
            }
        }
        let out = last_path
            .iter()
            .zip(sums)
            .zip(names)
            .filter(|((last, _), _)| **last != usize::MAX)
            .map(|((_, (self_value, total)), name)| NameSum {
                name,
                self_value,
                total,
            })
            .collect();
        (out, all)
    }

    /// Whether the values under the root reach a good part of the cached tree (a
    /// flamegraph of everything): they are then summed in arrays over the whole cached
    /// tree, in one pass and with memory read in order, and no hashing. A small query (one
    /// trace) walks its own paths instead, so that it does not pay for the size of the cache.
    fn dense(&self) -> bool {
        self.at_root.len().saturating_mul(DENSE_FRACTION) >= self.paths.parents.len()
    }

    pub(crate) fn build(self, max_nodes: Option<usize>) -> Node {
        self.cut(max_nodes, |cut| cut.into_node())
    }

    /// Appends the tree as JSON, as `serde_json` writes its [`Node`], and returns its
    /// total: see [`write_cut`].
    pub(crate) fn write_json(self, max_nodes: Option<usize>, out: &mut Vec<u8>) -> i64 {
        self.cut(max_nodes, |cut| {
            write_cut(&cut, out);
            cut.total()
        })
    }

    /// Hands the tree, cut to `max_nodes` when given, to `finish`.
    fn cut<R>(mut self, max_nodes: Option<usize>, finish: impl FnOnce(Cut<'_>) -> R) -> R {
        let max_nodes = max_nodes.unwrap_or(usize::MAX);
        if self.group_names.is_empty()
            && self.dense()
            && let Some(dense) = DenseSums::new(self.paths, self.paths.layout(), &self.at_root)
        {
            return finish(cut(&dense, max_nodes));
        }
        for (end, value) in std::mem::take(&mut self.at_root) {
            let node = self.output_node(Self::ROOT, end);
            self.tree.add_self(node, value);
        }
        let names = NameTable {
            base: self.paths.names.names(),
            extra: &self.group_names,
        };
        self.tree.cut(names, max_nodes, finish)
    }
}

/// Ungrouped values summed over the whole cached tree: the nodes of the query's tree are
/// the cached nodes its paths reach, numbered by their positions in the [`Layout`]. Only
/// totals are kept, per chain of the layout: a node's self value is what its total leaves
/// over its children's (see `tree::cut`).
struct DenseSums<'p> {
    paths: &'p CallPaths,
    layout: &'p Layout,
    totals: Vec<i64>,
    reached: Vec<bool>,
    len: usize,
    no_negative_values: bool,
}

impl<'p> DenseSums<'p> {
    /// `None` when a value ends inside a chain: its path had symbols missing, so it was not
    /// asked, and chains do not sum it.
    fn new(paths: &'p CallPaths, layout: &'p Layout, values: &[(PathNode, i64)]) -> Option<DenseSums<'p>> {
        let chains = layout.firsts.len();
        let mut totals = vec![0i64; chains];
        let mut reached = vec![false; chains];
        reached[0] = true;
        let mut no_negative_values = true;
        for &(end, value) in values {
            // The position and chain are looked up once, for the check and the sum.
            let at = layout.position[end as usize];
            let chain = layout.chain_of[at as usize] as usize;
            if layout.lasts[chain] != at {
                return None;
            }
            totals[chain] += value;
            reached[chain] = true;
            no_negative_values &= value >= 0;
        }
        // A chain is numbered after its parent: from the top number down, a chain's total is
        // final before its parent adds it. Without a branch: a chain not reached adds 0 and
        // reaches nothing, and most chains of a dense sum are reached anyway.
        let mut len = 1;
        for chain in (1..chains).rev() {
            let parent = layout.parents[chain] as usize;
            totals[parent] += totals[chain];
            reached[parent] |= reached[chain];
            len += usize::from(reached[chain]) * layout.lens[chain] as usize;
        }
        Some(DenseSums {
            paths,
            layout,
            totals,
            reached,
            len,
            no_negative_values,
        })
    }
}

impl RankedTree for DenseSums<'_> {
    fn len(&self) -> usize {
        self.len
    }

    fn bound(&self) -> usize {
        self.layout.chain_of.len()
    }

    fn total(&self, id: usize) -> i64 {
        self.totals[self.layout.chain_of[id] as usize]
    }

    fn contains(&self, id: usize) -> bool {
        self.reached[self.layout.chain_of[id] as usize]
    }

    fn name(&self, id: usize) -> &str {
        &self.paths.names.names()[self.layout.names_at[id] as usize]
    }

    fn parent(&self, id: usize) -> usize {
        self.layout.parents_at[id] as usize
    }

    fn children_into(&self, id: usize, out: &mut Vec<usize>) {
        out.extend(self.layout.children.get(id).iter().filter(|&&c| self.contains(c)));
    }

    fn no_negative_values(&self) -> bool {
        self.no_negative_values
    }

    fn chain(&self, id: usize) -> (usize, usize) {
        let chain = self.layout.chain_of[id] as usize;
        if self.layout.firsts[chain] as usize == id {
            (
                self.layout.lasts[chain] as usize,
                self.layout.lens[chain] as usize,
            )
        } else {
            (id, 1)
        }
    }
}

/// Which call paths pass through one node, a call site (Grafana's progressive loading
/// asks for one subtree at a time). Each node is walked once per query.
pub(crate) struct Within {
    site: Option<PathNode>,
    known: FastMap<PathNode, bool>,
    /// Reused by every `contains`: the nodes walked before the answer was known.
    walked: Vec<PathNode>,
}

impl Within {
    /// Paths through `site`; `None` (a call site no stored stack has) lets none through.
    pub(crate) fn new(site: Option<PathNode>) -> Within {
        Within {
            site,
            known: FastMap::default(),
            walked: Vec::new(),
        }
    }

    pub(crate) fn contains(&mut self, paths: &CallPaths, end: PathNode) -> bool {
        let Some(site) = self.site else {
            return false;
        };
        self.walked.clear();
        let mut node = end;
        let answer = loop {
            if node == site {
                break true;
            }
            if let Some(&known) = self.known.get(&node) {
                break known;
            }
            if node == CallPaths::ROOT {
                break false;
            }
            self.walked.push(node);
            node = paths.parents[node as usize];
        };
        for &node in &self.walked {
            self.known.insert(node, answer);
        }
        answer
    }
}

/// Which of up to [`Through::MAX_NAMES`] frame names each call path passes through, as a
/// bit per name; each node is walked once per query, paths sharing a prefix sharing its
/// walk.
pub(crate) struct Through {
    /// The names' ids in the tree (`None`: no resolved frame has the name yet).
    names: Vec<Option<u32>>,
    /// Per node: the bits of the names on the path from the root to it, and [`KNOWN`] once
    /// they are. Nodes are dense indices, so a vector beats a map by far here.
    known: Vec<u64>,
    walked: Vec<PathNode>,
}

/// The bit of [`Through::known`] that says an entry is filled.
const KNOWN: u64 = 1 << 63;

impl Through {
    /// Names one walk tells apart.
    pub(crate) const MAX_NAMES: usize = 63;

    pub(crate) fn new(paths: &CallPaths, names: &[String]) -> Through {
        debug_assert!(names.len() <= Self::MAX_NAMES);
        Through {
            names: names.iter().map(|n| paths.names.id(n)).collect(),
            known: vec![0; paths.parents.len()],
            walked: Vec::new(),
        }
    }

    pub(crate) fn mask(&mut self, paths: &CallPaths, end: PathNode) -> u64 {
        self.walked.clear();
        let mut node = end;
        let mut mask = loop {
            if node == CallPaths::ROOT {
                break 0;
            }
            let known = self.known[node as usize];
            if known & KNOWN != 0 {
                break known & !KNOWN;
            }
            self.walked.push(node);
            node = paths.parents[node as usize];
        };
        for &node in self.walked.iter().rev() {
            let name = paths.node_names[node as usize];
            for (bit, id) in self.names.iter().enumerate() {
                if *id == Some(name) {
                    mask |= 1 << bit;
                }
            }
            self.known[node as usize] = mask | KNOWN;
        }
        mask
    }
}

/// Per-tenant [`CallPaths`], one per frame view, each dropped and started afresh once it
/// holds more than `max_entries`, which bounds the memory a tenant with ever-new stacks
/// can take. A tenant keeps at most [`CallPathCache::MAX_VIEWS`] views besides the default
/// one: a view a reader tried once does not stay.
pub(crate) struct CallPathCache {
    max_entries: usize,
    tenants: Mutex<HashMap<String, TenantPaths>>,
}

#[derive(Default)]
struct TenantPaths {
    default: Arc<Mutex<CallPaths>>,
    /// Other views by key, the most recently used last.
    views: Vec<(String, Arc<Mutex<CallPaths>>)>,
}

impl CallPathCache {
    pub(crate) const MAX_VIEWS: usize = 8;

    pub(crate) fn new(max_entries: usize) -> CallPathCache {
        CallPathCache {
            max_entries,
            tenants: Mutex::default(),
        }
    }

    /// The tenant's paths in the default view: see [`CallPathCache::view`].
    pub(crate) fn tenant(&self, tenant: &str) -> Arc<Mutex<CallPaths>> {
        self.view(tenant, &Arc::default())
    }

    /// The tenant's paths in `view`, emptied first when over the limit. Queries of one
    /// tenant and view take turns on it while they resolve and sum.
    pub(crate) fn view(&self, tenant: &str, view: &Arc<FrameView>) -> Arc<Mutex<CallPaths>> {
        let entry = {
            let mut tenants = self.tenants.lock().unwrap_or_else(|e| e.into_inner());
            let paths = tenants.entry(tenant.to_string()).or_default();
            if view.key().is_empty() {
                paths.default.clone()
            } else {
                let entry = match paths.views.iter().position(|(key, _)| key == view.key()) {
                    Some(i) => paths.views.remove(i).1,
                    None => Arc::new(Mutex::new(CallPaths::new(view.clone()))),
                };
                paths.views.push((view.key().to_string(), entry.clone()));
                if paths.views.len() > Self::MAX_VIEWS {
                    paths.views.remove(0);
                }
                entry
            }
        };
        {
            let mut paths = entry.lock().unwrap_or_else(|e| e.into_inner());
            if paths.entries() > self.max_entries {
                *paths = paths.emptied();
            }
        }
        entry
    }
}

#[cfg(test)]
mod tests {
    use stackhouse_storage::model::{Batch, Function, Line, Location, StackNode};

    use super::*;

    fn index_of(batch: &Batch) -> SymbolIndex {
        let mut index = SymbolIndex::default();
        index.extend_from_batch(batch);
        index
    }

    fn function(b: &mut Batch, name: &str) -> Line {
        let function_id = b.add_function(Function {
            name: name.into(),
            ..Default::default()
        });
        Line {
            function_id,
            line: 1,
            column: 0,
        }
    }

    fn location(b: &mut Batch, lines: Vec<Line>) -> SymbolId {
        b.add_location(Location {
            mapping_id: SymbolId::ZERO,
            address: 0,
            lines,
        })
    }

    /// One location of one line per name.
    fn locations_named(b: &mut Batch, names: impl Iterator<Item = String>) -> Vec<SymbolId> {
        names
            .map(|name| {
                let line = function(b, &name);
                location(b, vec![line])
            })
            .collect()
    }

    /// Paths with non-zero self value, root-first, as `a;b;c`.
    fn paths(node: &Node, prefix: &str, out: &mut Vec<(String, i64)>) {
        for c in &node.children {
            let path = if prefix.is_empty() {
                c.name.clone()
            } else {
                format!("{prefix};{}", c.name)
            };
            if c.self_value != 0 {
                out.push((path.clone(), c.self_value));
            }
            paths(c, &path, out);
        }
    }

    fn all_paths(node: &Node) -> Vec<(String, i64)> {
        let mut out = Vec::new();
        paths(node, "", &mut out);
        out.sort();
        out
    }

    /// The ungrouped tree of `(stack, value)` pairs over `paths`.
    fn tree_of(
        paths: &mut CallPaths,
        index: &SymbolIndex,
        rows: &[(SymbolId, i64)],
    ) -> (Node, MissingSymbols) {
        cut_tree_of(paths, index, rows, None)
    }

    /// [`tree_of`] cut to `max_nodes` while it is built.
    fn cut_tree_of(
        paths: &mut CallPaths,
        index: &SymbolIndex,
        rows: &[(SymbolId, i64)],
        max_nodes: Option<usize>,
    ) -> (Node, MissingSymbols) {
        let (sums, missing) = sums_of(paths, index, rows);
        (sums.build(max_nodes), missing)
    }

    /// The ungrouped sums of `(stack, value)` pairs over `paths`.
    fn sums_of<'p>(
        paths: &'p mut CallPaths,
        index: &SymbolIndex,
        rows: &[(SymbolId, i64)],
    ) -> (PathSums<'p>, MissingSymbols) {
        let mut missing = MissingSymbols::default();
        let ends: Vec<PathNode> = rows
            .iter()
            .map(|(s, _)| paths.end(index, &NativeFiles::default(), &mut missing, *s))
            .collect();
        let mut sums = PathSums::new(paths);
        for (end, (_, value)) in ends.into_iter().zip(rows) {
            sums.add(PathSums::ROOT, end, *value);
        }
        (sums, missing)
    }

    /// The name sums of `(path, value)` pairs (root first) counted from the paths
    /// themselves: self at the leaf, total once per path per distinct name.
    fn expected_name_sums(rows: &[(Vec<String>, i64)]) -> Vec<(String, i64, i64)> {
        let mut sums: std::collections::BTreeMap<String, (i64, i64)> = Default::default();
        for (path, value) in rows {
            if let Some(leaf) = path.last() {
                sums.entry(leaf.clone()).or_default().0 += value;
            }
            let distinct: std::collections::BTreeSet<&String> = path.iter().collect();
            for name in distinct {
                sums.entry(name.clone()).or_default().1 += value;
            }
        }
        sums.into_iter().map(|(n, (s, t))| (n, s, t)).collect()
    }

    fn name_sums_of(
        paths: &mut CallPaths,
        index: &SymbolIndex,
        rows: &[(SymbolId, i64)],
    ) -> (Vec<(String, i64, i64)>, i64) {
        let (sums, _) = sums_of(paths, index, rows);
        let (names, total) = sums.name_sums();
        let mut out: Vec<_> = names
            .into_iter()
            .map(|n| (n.name.to_string(), n.self_value, n.total))
            .collect();
        out.sort();
        (out, total)
    }

    #[test]
    fn name_sums_count_each_path_once_per_name() {
        let mut b = Batch::new("t");
        let names = ["main", "f", "g", "h", "loop"];
        let locations = locations_named(&mut b, names.iter().map(|n| n.to_string()));
        // 500 stacks 1-12 frames deep over 5 names, so that most recurse; some repeat.
        let mut rows = Vec::new();
        let mut by_path = Vec::new();
        let mut x = 7u64;
        for n in 0..500usize {
            let depth = 1 + n % 12;
            let frames: Vec<usize> = (0..depth)
                .map(|_| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (x >> 33) as usize % names.len()
                })
                .collect();
            // Leaf first, as samples reference them.
            let leaf_first: Vec<SymbolId> = frames.iter().rev().map(|&f| locations[f]).collect();
            let stack = b.add_stack(&leaf_first);
            let value = (n % 17) as i64 + 1;
            rows.push((stack, value));
            by_path.push((
                frames.iter().map(|&f| names[f].to_string()).collect::<Vec<_>>(),
                value,
            ));
        }
        rows.push((SymbolId::ZERO, 4));
        by_path.push((Vec::new(), 4));
        let index = index_of(&b);
        let mut cache = CallPaths::default();
        let (sums, total) = name_sums_of(&mut cache, &index, &rows);
        assert_eq!(total, by_path.iter().map(|(_, v)| v).sum::<i64>());
        assert_eq!(sums, expected_name_sums(&by_path));
        // Over a warm cache holding more paths than the query's, only its own count.
        let (few, total) = name_sums_of(&mut cache, &index, &rows[..3]);
        assert_eq!(total, by_path[..3].iter().map(|(_, v)| v).sum::<i64>());
        assert_eq!(few, expected_name_sums(&by_path[..3]));
    }

    #[test]
    fn stacks_become_root_first_paths() {
        let mut b = Batch::new("t");
        let (main, work, leaf) = (
            function(&mut b, "main"),
            function(&mut b, "work"),
            function(&mut b, "leaf"),
        );
        let (main, work, leaf) = (
            location(&mut b, vec![main]),
            location(&mut b, vec![work]),
            location(&mut b, vec![leaf]),
        );
        let inlined = {
            let lines = vec![function(&mut b, "inner"), function(&mut b, "outer")];
            location(&mut b, lines)
        };
        // Leaf-first, as samples reference them.
        let s1 = b.add_stack(&[leaf, work, main]);
        let s2 = b.add_stack(&[work, main]);
        let s3 = b.add_stack(&[inlined, main]);
        let index = index_of(&b);
        let mut cache = CallPaths::default();
        let rows = [(s1, 10), (s2, 3), (s1, 1), (s3, 4), (SymbolId::ZERO, 2)];
        let (root, missing) = tree_of(&mut cache, &index, &rows);
        assert!(missing.is_empty());
        assert_eq!(root.total, 20);
        assert_eq!(root.self_value, 2, "the empty stack counts at the root");
        let expected = [
            ("main;outer;inner".to_string(), 4),
            ("main;work".to_string(), 3),
            ("main;work;leaf".to_string(), 11),
        ];
        assert_eq!(all_paths(&root), expected);

        // A second query over the warm cache: same tree, nothing new resolved, and only the
        // nodes this query's stacks pass through appear in it.
        let entries = cache.entries();
        let (again, _) = tree_of(&mut cache, &index, &rows);
        assert_eq!(again, root);
        assert_eq!(cache.entries(), entries);
        let (one, _) = tree_of(&mut cache, &index, &[(s2, 5)]);
        assert_eq!(all_paths(&one), [("main;work".to_string(), 5)]);
        assert_eq!(one.count(), 3);
    }

    /// A query over most of the cached tree sums densely, one over a few of its stacks
    /// walks its own paths: both give the tree of exactly the query's stacks.
    #[test]
    fn large_and_small_queries_give_the_tree_of_their_own_stacks() {
        let mut b = Batch::new("t");
        let locations = locations_named(&mut b, (0..12).map(|i| format!("f{i}")));
        // 1000 stacks 2-9 frames deep over 12 functions, each with its own value.
        let mut rows = Vec::new();
        let mut row_paths = Vec::new();
        for n in 0..1000usize {
            let mut x = n as u64 + 1;
            let frames: Vec<usize> = (0..2 + n % 8)
                .map(|_| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (x >> 33) as usize % 12
                })
                .collect();
            let leaf_first: Vec<SymbolId> = frames.iter().rev().map(|&f| locations[f]).collect();
            rows.push((b.add_stack(&leaf_first), 1 + (n % 9) as i64));
            row_paths.push(
                frames
                    .iter()
                    .map(|f| format!("f{f}"))
                    .collect::<Vec<_>>()
                    .join(";"),
            );
        }
        let expected = |picked: &[usize]| {
            let mut sums = std::collections::BTreeMap::new();
            for &i in picked {
                *sums.entry(row_paths[i].clone()).or_insert(0) += rows[i].1;
            }
            sums.into_iter().collect::<Vec<(String, i64)>>()
        };
        let index = index_of(&b);
        let mut cache = CallPaths::default();

        let (all, _) = tree_of(&mut cache, &index, &rows);
        assert!(
            rows.len() * DENSE_FRACTION >= cache.parents.len(),
            "summed densely"
        );
        assert_eq!(all_paths(&all), expected(&(0..rows.len()).collect::<Vec<_>>()));
        assert_eq!(all.total, rows.iter().map(|r| r.1).sum::<i64>());

        // Cut while built, densely: the same as the whole tree cut afterwards, with values
        // that tie (1-9) and, in the second round, negative ones.
        for negate_every in [usize::MAX, 7] {
            let signed: Vec<(SymbolId, i64)> = rows
                .iter()
                .enumerate()
                .map(|(i, &(s, v))| (s, if i % negate_every == 6 { -v } else { v }))
                .collect();
            let (whole, _) = tree_of(&mut cache, &index, &signed);
            for max_nodes in [1, 2, 9, 60, 400, 100_000] {
                let mut expected = whole.clone();
                expected.truncate(max_nodes);
                let (cut, _) = cut_tree_of(&mut cache, &index, &signed, Some(max_nodes));
                assert_eq!(
                    cut, expected,
                    "max_nodes {max_nodes}, negative every {negate_every}"
                );
                let mut sums = PathSums::new(&cache);
                for &(stack, value) in &signed {
                    let end = cache.ends[&stack];
                    sums.add(PathSums::ROOT, end, value);
                }
                let mut json = Vec::new();
                assert_eq!(sums.write_json(Some(max_nodes), &mut json), expected.total);
                assert_eq!(
                    json,
                    serde_json::to_vec(&expected).unwrap(),
                    "the JSON of max_nodes {max_nodes}"
                );
            }
        }

        let picked = [3, 150, 3];
        assert!(
            cache.parents.len() > 3 * DENSE_FRACTION,
            "the cache outgrows a small query"
        );
        let few: Vec<(SymbolId, i64)> = picked.iter().map(|&i| rows[i]).collect();
        let (small, _) = tree_of(&mut cache, &index, &few);
        assert!(few.len() * DENSE_FRACTION < cache.parents.len(), "walked");
        assert_eq!(all_paths(&small), expected(&picked));
        assert_eq!(small.total, 2 * rows[3].1 + rows[150].1);
    }

    /// Long single-child chains, stacks that end inside another's chain (asked in a later
    /// query, and a provisional one with a symbol missing): dense sums by chain give the
    /// tree of exactly the query's stacks, whole and cut.
    #[test]
    fn chains_sum_as_their_nodes_would() {
        let mut b = Batch::new("t");
        let locations = locations_named(&mut b, (0..40).map(|i| format!("f{i:02}")));
        let path = |frames: &[usize]| {
            frames
                .iter()
                .map(|f| format!("f{f:02}"))
                .collect::<Vec<_>>()
                .join(";")
        };
        let stack = |b: &mut Batch, frames: &[usize]| {
            let leaf_first: Vec<SymbolId> = frames.iter().rev().map(|&f| locations[f]).collect();
            b.add_stack(&leaf_first)
        };
        let deep: Vec<usize> = (0..30).collect();
        let fork: Vec<usize> = (0..20).chain(30..35).collect();
        let inside: Vec<usize> = (0..10).collect();
        let other: Vec<usize> = (35..40).collect();
        let (s_deep, s_fork, s_inside, s_other) = (
            stack(&mut b, &deep),
            stack(&mut b, &fork),
            stack(&mut b, &inside),
            stack(&mut b, &other),
        );
        // Provisional paths: a parent missing from the table makes `<unknown>` their root,
        // and the shorter one ends inside the longer one's chain.
        let lost = StackNode {
            parent_id: SymbolId([5; 16]),
            location_id: locations[0],
        };
        let below = StackNode {
            parent_id: lost.id(),
            location_id: locations[1],
        };
        let lowest = StackNode {
            parent_id: below.id(),
            location_id: locations[2],
        };
        for node in [lost, below, lowest] {
            b.stacks.insert(node.id(), node);
        }
        let index = index_of(&b);
        let mut cache = CallPaths::default();

        let first = [(s_deep, 5), (s_fork, 3), (s_other, 1), (s_deep, 2)];
        let mut expected = vec![(path(&fork), 3), (path(&deep), 7), (path(&other), 1)];
        expected.sort();
        let (tree, _) = tree_of(&mut cache, &index, &first);
        assert_eq!(all_paths(&tree), expected);
        assert_eq!(tree.total, 11);
        let layout = cache.layout.get().expect("summed densely");
        assert_eq!(
            layout.firsts.len(),
            5,
            "the root, the shared 20 frames, the two forks and the other stack"
        );
        assert_eq!(
            layout.lens.iter().map(|&l| l as usize).sum::<usize>(),
            cache.parents.len()
        );
        for max_nodes in [1, 2, 3, 10, 20, 21, 22, 30, 45, 100] {
            let mut expected = tree.clone();
            expected.truncate(max_nodes);
            let (cut, _) = cut_tree_of(&mut cache, &index, &first, Some(max_nodes));
            assert_eq!(cut, expected, "max_nodes {max_nodes}");
        }

        // A stack ending inside a chain lays the chains out again.
        let second = [(s_deep, 5), (s_inside, 4), (s_fork, 3)];
        let (tree, _) = tree_of(&mut cache, &index, &second);
        let mut expected = vec![(path(&deep), 5), (path(&inside), 4), (path(&fork), 3)];
        expected.sort();
        assert_eq!(all_paths(&tree), expected);
        assert_eq!(tree.child("f00").map(|n| n.total), Some(12));
        assert_eq!(cache.layout.get().map(|l| l.firsts.len()), Some(6));
        for max_nodes in [5, 9, 10, 11, 12, 25] {
            let mut expected = tree.clone();
            expected.truncate(max_nodes);
            let (cut, _) = cut_tree_of(&mut cache, &index, &second, Some(max_nodes));
            assert_eq!(cut, expected, "max_nodes {max_nodes}");
        }

        // A provisional path ending inside a chain is summed by walking.
        let third = [(lowest.id(), 1), (below.id(), 2), (s_other, 4)];
        let (tree, missing) = tree_of(&mut cache, &index, &third);
        assert!(!missing.is_empty());
        let mut expected = vec![
            ("<unknown>;f00;f01".to_string(), 2),
            ("<unknown>;f00;f01;f02".to_string(), 1),
            (path(&other), 4),
        ];
        expected.sort();
        assert_eq!(all_paths(&tree), expected);
        assert_eq!(tree.total, 7);
    }

    #[test]
    fn groups_hang_separate_paths_under_the_root() {
        let mut b = Batch::new("t");
        let (main, work) = (function(&mut b, "main"), function(&mut b, "work"));
        let (main, work) = (location(&mut b, vec![main]), location(&mut b, vec![work]));
        let s = b.add_stack(&[work, main]);
        let index = index_of(&b);
        let mut cache = CallPaths::default();
        let mut missing = MissingSymbols::default();
        let end = cache.end(&index, &NativeFiles::default(), &mut missing, s);
        let grouped = || {
            let mut sums = PathSums::new(&cache);
            let (a, main_group) = (sums.group("pod=a"), sums.group("main"));
            sums.add(a, end, 2);
            sums.add(main_group, end, 3);
            sums.add(a, CallPaths::ROOT, 1);
            sums
        };
        let mut json = Vec::new();
        assert_eq!(grouped().write_json(None, &mut json), 6);
        let root = grouped().build(None);
        assert_eq!(
            json,
            serde_json::to_vec(&root).unwrap(),
            "the JSON of the grouped tree"
        );
        assert_eq!(
            all_paths(&root),
            [
                ("main;main;work".to_string(), 3),
                ("pod=a".to_string(), 1),
                ("pod=a;main;work".to_string(), 2),
            ]
        );
        assert_eq!(root.total, 6);
    }

    #[test]
    fn missing_symbols_become_unknown_frames_and_are_not_cached() {
        let mut b = Batch::new("t");
        let known = {
            let line = function(&mut b, "known");
            location(&mut b, vec![line])
        };
        let lost_location = SymbolId([7; 16]);
        let with_lost_location = b.add_stack(&[lost_location, known]);
        let lost_function = location(
            &mut b,
            vec![Line {
                function_id: SymbolId([8; 16]),
                line: 0,
                column: 0,
            }],
        );
        let with_lost_function = b.add_stack(&[lost_function]);
        // A stack whose root node is missing from the table.
        let orphan = StackNode {
            parent_id: SymbolId([5; 16]),
            location_id: known,
        };
        b.stacks.insert(orphan.id(), orphan);
        let index = index_of(&b);
        let rows = [
            (with_lost_location, 1),
            (with_lost_function, 2),
            (orphan.id(), 3),
            (SymbolId([6; 16]), 4),
        ];
        let mut cache = CallPaths::default();
        let (root, missing) = tree_of(&mut cache, &index, &rows);
        assert_eq!(root.total, 10);
        let expected = [
            ("<unknown>".to_string(), 6),
            ("<unknown>;known".to_string(), 3),
            ("known;<unknown>".to_string(), 1),
        ];
        assert_eq!(all_paths(&root), expected);
        let expected_missing = MissingSymbols {
            stacks: 2,
            locations: 1,
            functions: 1,
            mappings: 0,
        };
        assert_eq!(missing, expected_missing);
        // Resolved again, and reported again, by the next query.
        let (again, missing) = tree_of(&mut cache, &index, &rows);
        assert_eq!(all_paths(&again), expected);
        assert_eq!(missing, expected_missing);

        // Once the lost location is stored, the same stack gets its real name.
        let mut later = Batch::new("t");
        let found = {
            let line = function(&mut later, "found");
            later.add_location(Location {
                mapping_id: SymbolId::ZERO,
                address: 0,
                lines: vec![line],
            })
        };
        let mut index = index;
        index.extend_from_batch(&later);
        let mut renamed = index.clone();
        renamed
            .locations
            .insert(lost_location, index.locations[&found].clone());
        let (fixed, _) = tree_of(&mut cache, &renamed, &[(with_lost_location, 1)]);
        assert_eq!(all_paths(&fixed), [("known;found".to_string(), 1)]);
    }

    #[test]
    fn a_call_site_keeps_the_paths_through_it() {
        let mut b = Batch::new("t");
        let names = ["main", "work", "leaf", "idle"].map(|n| {
            let line = function(&mut b, n);
            location(&mut b, vec![line])
        });
        let [main, work, leaf, idle] = names;
        let stacks = [
            b.add_stack(&[leaf, work, main]),
            b.add_stack(&[work, main]),
            b.add_stack(&[idle, main]),
            b.add_stack(&[main]),
            b.add_stack(&[work]),
        ];
        let index = index_of(&b);
        let mut paths = CallPaths::default();
        let mut missing = MissingSymbols::default();
        let ends: Vec<PathNode> = stacks
            .iter()
            .map(|s| paths.end(&index, &NativeFiles::default(), &mut missing, *s))
            .collect();
        let site = |frames: &[&str]| paths.find(&frames.iter().map(|f| f.to_string()).collect::<Vec<_>>());
        assert_eq!(site(&[]), Some(CallPaths::ROOT));
        assert_eq!(site(&["work", "leaf"]), None, "no stack has it");
        assert_eq!(site(&["nothing"]), None);
        let mut within = Within::new(site(&["main", "work"]));
        let passed: Vec<bool> = ends.iter().map(|e| within.contains(&paths, *e)).collect();
        assert_eq!(passed, [true, true, false, false, false]);
        // Asked again, the answers come from what the first walk learned.
        let again: Vec<bool> = ends.iter().map(|e| within.contains(&paths, *e)).collect();
        assert_eq!(again, passed);
        assert!(!Within::new(None).contains(&paths, ends[0]));
    }

    #[test]
    fn the_cache_starts_afresh_over_its_limit() {
        let mut b = Batch::new("t");
        let f = function(&mut b, "f");
        let loc = location(&mut b, vec![f]);
        let s = b.add_stack(&[loc]);
        let index = index_of(&b);
        let cache = CallPathCache::new(3);
        let entry = cache.tenant("t");
        entry
            .lock()
            .unwrap()
            .end(&index, &NativeFiles::default(), &mut MissingSymbols::default(), s);
        assert!(entry.lock().unwrap().entries() > 3);
        assert_eq!(
            cache.tenant("t").lock().unwrap().entries(),
            1,
            "only the root left"
        );
        assert_eq!(cache.tenant("other").lock().unwrap().entries(), 1);
    }

    fn hiding(name: &str) -> Arc<FrameView> {
        let request = crate::frames::FrameRequest {
            hide: vec![name.to_string()],
            ..Default::default()
        };
        Arc::new(request.resolve().unwrap())
    }

    #[test]
    fn views_have_trees_of_their_own_and_the_least_used_leaves() {
        let cache = CallPathCache::new(1000);
        let default = cache.tenant("t");
        let a = cache.view("t", &hiding("a"));
        assert!(
            Arc::ptr_eq(&a, &cache.view("t", &hiding("a"))),
            "the same rules, the same tree"
        );
        assert!(!Arc::ptr_eq(&a, &default));
        for i in 0..CallPathCache::MAX_VIEWS {
            cache.view("t", &hiding(&format!("x{i}")));
        }
        assert!(
            !Arc::ptr_eq(&a, &cache.view("t", &hiding("a"))),
            "the least used view left"
        );
        assert!(
            Arc::ptr_eq(&default, &cache.tenant("t")),
            "the default view stays"
        );
    }

    #[test]
    fn hidden_frames_join_their_parent_and_coarse_names_merge() {
        let mut b = Batch::new("t");
        let (main, tokio, work) = (
            function(&mut b, "main"),
            function(&mut b, "tokio::poll"),
            function(&mut b, "work"),
        );
        let locs = [main, tokio, work].map(|f| location(&mut b, vec![f]));
        let s = b.add_stack(&[locs[2], locs[1], locs[0]]);
        let index = index_of(&b);
        let none = NativeFiles::default();
        let mut hidden = CallPaths::new(hiding("tokio::.*"));
        let end = hidden.end(&index, &none, &mut MissingSymbols::default(), s);
        assert_eq!(hidden.frames(end), ["main", "work"]);
        // Every frame has the same (unknown) binary: one node.
        let request = crate::frames::FrameRequest {
            aggregate_by: Some("binary".into()),
            ..Default::default()
        };
        let mut binary = CallPaths::new(Arc::new(request.resolve().unwrap()));
        let end = binary.end(&index, &none, &mut MissingSymbols::default(), s);
        assert_eq!(binary.frames(end), [UNKNOWN]);
    }
}
