//! Call trees from `SUM(value) GROUP BY stack` scans: what the flamegraph, top and diff
//! endpoints build on.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use stackhouse_storage::model::{IdMap, ProfileType, SymbolId};
use stackhouse_storage::symbols::SymbolIndex;

use super::QueryEngine;
use super::aggregate::{Dim, Row};
use super::grouping::{group_values, too_many_groups};
use super::plan::Needs;
use super::scope::{GroupKey, Scope, group_name};
use crate::call_paths::{CallPaths, PathNode, PathSums, Through, Within};
use crate::debuginfo::NativeFiles;
use crate::error::QueryError;
use crate::frames::FrameView;
use crate::limits::size;
use crate::stack_filter::StackFilter;
use crate::symbolize::MissingSymbols;
use crate::tree::{DEFAULT_MAX_NODES, Flamegraph, FlamegraphJson, Node, ROOT_NAME};
use crate::types::ScanStats;

impl QueryEngine {
    /// The node budget a tree gets when `asked` (0 asks for the default): every endpoint
    /// that builds a tree checks it here, and a caller may check it before other work.
    pub fn max_nodes(&self, asked: usize) -> Result<usize, QueryError> {
        size(
            "max_nodes",
            "max_nodes",
            asked,
            DEFAULT_MAX_NODES,
            self.limits.max_nodes,
        )
    }

    /// Keeps only the rows whose stacks' call paths `filter` keeps (all of them for an
    /// empty filter).
    pub(crate) async fn retain_stacks(
        &self,
        tenant: &str,
        rows: &mut Vec<Row>,
        filter: &StackFilter,
    ) -> Result<(), QueryError> {
        if filter.is_empty() {
            return Ok(());
        }
        let filter = filter.clone();
        self.retain_resolved(
            tenant,
            &Arc::default(),
            rows,
            move |paths, symbols, native, missing, id| {
                let end = paths.end(symbols, native, missing, id);
                filter.keeps(&paths.frames(end))
            },
        )
        .await
    }

    /// Keeps only the rows whose stacks the scope's frame rules (focus, drop) keep.
    pub(crate) async fn retain_focused(&self, scope: &Scope, rows: &mut Vec<Row>) -> Result<(), QueryError> {
        if !scope.frames.filters_stacks() {
            return Ok(());
        }
        self.retain_resolved(
            &scope.tenant,
            &scope.frames,
            rows,
            |paths, symbols, native, missing, id| paths.keeps(symbols, native, missing, id),
        )
        .await
    }

    /// Keeps only the rows whose stacks `keep` keeps, each stack asked once, in the tenant's
    /// call paths of `view`.
    async fn retain_resolved(
        &self,
        tenant: &str,
        view: &Arc<FrameView>,
        rows: &mut Vec<Row>,
        keep: impl Fn(&mut CallPaths, &SymbolIndex, &NativeFiles, &mut MissingSymbols, SymbolId) -> bool
        + Send
        + 'static,
    ) -> Result<(), QueryError> {
        let stack_ids: HashSet<SymbolId> = rows.iter().map(|r| r.stack_id).collect();
        let symbols = self.symbols.loaded(tenant).await;
        let native = self.debuginfo.files_for(tenant, &symbols).await?;
        let paths = self.call_paths.view(tenant, view);
        let kept: HashSet<SymbolId> = tokio::task::spawn_blocking(move || {
            let mut paths = paths.lock().unwrap_or_else(|e| e.into_inner());
            paths.use_native(&native);
            let mut missing = MissingSymbols::default();
            stack_ids
                .into_iter()
                .filter(|&id| keep(&mut paths, &symbols, &native, &mut missing, id))
                .collect()
        })
        .await
        .map_err(|e| QueryError::Internal(format!("symbolization task failed: {e}")))?;
        rows.retain(|r| kept.contains(&r.stack_id));
        Ok(())
    }

    /// For each of `stack_ids`, which of `names` (at most [`Through::MAX_NAMES`]) its frames
    /// include, a bit per name: a function filter for many rules at once, each stack's path
    /// walked once.
    pub(crate) async fn stacks_through(
        &self,
        tenant: &str,
        stack_ids: Vec<SymbolId>,
        names: &[String],
    ) -> Result<IdMap<u64>, QueryError> {
        let symbols = self.symbols.loaded(tenant).await;
        let native = self.debuginfo.files_for(tenant, &symbols).await?;
        let paths = self.call_paths.tenant(tenant);
        let names = names.to_vec();
        tokio::task::spawn_blocking(move || {
            let mut paths = paths.lock().unwrap_or_else(|e| e.into_inner());
            paths.use_native(&native);
            let mut missing = MissingSymbols::default();
            let ends: Vec<(SymbolId, PathNode)> = stack_ids
                .into_iter()
                .map(|id| (id, paths.end(&symbols, &native, &mut missing, id)))
                .collect();
            // Names are looked up once every stack is resolved, so frames new to the tree
            // are among them.
            let mut through = Through::new(&paths, &names);
            ends.into_iter()
                .map(|(id, end)| (id, through.mask(&paths, end)))
                .collect()
        })
        .await
        .map_err(|e| QueryError::Internal(format!("symbolization task failed: {e}")))
    }

    /// The tree of a scope, grouped under the root by `group_by`, truncated to `max_nodes`
    /// when given. With a `call_site` (root first; ungrouped trees only), only the stacks
    /// that begin with it, as [`crate::StackFilter`] keeps them, and only their nodes are
    /// ever built.
    pub(crate) async fn tree(
        &self,
        scope: &Scope,
        group_by: &[GroupKey],
        max_nodes: Option<usize>,
        call_site: &[String],
    ) -> Result<Flamegraph, QueryError> {
        let (root, built) = self
            .tree_as::<Node>(scope, group_by, max_nodes, call_site)
            .await?;
        Ok(built.flamegraph(root))
    }

    /// [`QueryEngine::tree`] cut to `max_nodes` and written as JSON while it is cut: see
    /// [`FlamegraphJson`].
    pub(crate) async fn tree_json(
        &self,
        scope: &Scope,
        group_by: &[GroupKey],
        max_nodes: usize,
    ) -> Result<FlamegraphJson, QueryError> {
        let (root, built) = self
            .tree_as::<TreeJson>(scope, group_by, Some(max_nodes), &[])
            .await?;
        let mut head = built.flamegraph(Node::leaf(ROOT_NAME, root.total));
        head.max_nodes = Some(max_nodes);
        Ok(FlamegraphJson::new(head, root.json))
    }

    /// The tree of a scope built into `O` (see [`QueryEngine::tree`]), with what the
    /// flamegraph holds besides.
    pub(crate) async fn tree_as<O: TreeOut>(
        &self,
        scope: &Scope,
        group_by: &[GroupKey],
        max_nodes: Option<usize>,
        call_site: &[String],
    ) -> Result<(O, Built), QueryError> {
        debug_assert!(call_site.is_empty() || group_by.is_empty());
        let mut built = Built {
            profile_type: scope.profile_type.clone(),
            period: 0,
            group_by: group_by.iter().map(|k| k.name().to_string()).collect(),
            stats: None,
        };
        let Some(plan) = self
            .plan(scope, Needs::grouped(vec![Dim::Stack], group_by))
            .await?
        else {
            return Ok((O::empty(), built));
        };
        let (rows, stats) = self.aggregate(&plan).await?;
        // Planning read the symbols after listing the segments it scans, so every stack
        // the scan returned has its symbols without asking the catalog again.
        let symbols = self.symbols.loaded(&scope.tenant).await;
        let tenant = scope.tenant.clone();
        let group_by = group_by.to_vec();
        let max_groups = self.limits.max_groups;
        let call_site = call_site.to_vec();
        let native = self.debuginfo.files_for(&scope.tenant, &symbols).await?;
        let paths = self.call_paths.view(&scope.tenant, &scope.frames);
        let root = tokio::task::spawn_blocking(move || {
            let mut paths = paths.lock().unwrap_or_else(|e| e.into_inner());
            paths.use_native(&native);
            let mut missing = MissingSymbols::default();
            // A stack the view's rules leave out ends nowhere.
            let ends: Vec<Option<PathNode>> = rows
                .iter()
                .map(|row| {
                    paths
                        .keeps(&symbols, &native, &mut missing, row.stack_id)
                        .then(|| paths.end(&symbols, &native, &mut missing, row.stack_id))
                })
                .collect();
            let mut within = (!call_site.is_empty()).then(|| Within::new(paths.find(&call_site)));
            let mut sums = PathSums::new(&paths);
            let mut groups: HashMap<String, usize> = HashMap::new();
            for (row, end) in rows.iter().zip(ends) {
                let Some(end) = end else {
                    continue;
                };
                if let Some(within) = &mut within
                    && !within.contains(&paths, end)
                {
                    continue;
                }
                if group_by.is_empty() {
                    sums.add(PathSums::ROOT, end, row.value);
                    continue;
                }
                let name = group_name(&group_by, &group_values(&group_by, row, &plan, &symbols));
                let node = match groups.get(&name) {
                    Some(&node) => node,
                    None => {
                        if groups.len() >= max_groups {
                            return Err(too_many_groups(max_groups));
                        }
                        let node = sums.group(&name);
                        groups.insert(name, node);
                        node
                    }
                };
                sums.add(node, end, row.value);
            }
            if !missing.is_empty() {
                tracing::warn!(%tenant, ?missing, "symbols missing, frames named <unknown>");
            }
            Ok((O::build(sums, max_nodes), plan.period))
        })
        .await
        .map_err(|e| QueryError::Internal(format!("symbolization task failed: {e}")))?;
        let (root, period) = root?;
        built.period = period;
        built.stats = Some(stats);
        Ok((root, built))
    }
}

/// What a tree is built into: [`Node`]s, the JSON they would be written as, or sums
/// without a tree (top functions).
pub(crate) trait TreeOut: Send + 'static {
    /// The tree of `sums`, cut to `max_nodes` when given.
    fn build(sums: PathSums<'_>, max_nodes: Option<usize>) -> Self;
    /// The tree of no samples.
    fn empty() -> Self;
}

impl TreeOut for Node {
    fn build(sums: PathSums<'_>, max_nodes: Option<usize>) -> Self {
        sums.build(max_nodes)
    }

    fn empty() -> Self {
        Node::leaf(ROOT_NAME, 0)
    }
}

/// A tree's JSON and its root's total.
struct TreeJson {
    json: Vec<u8>,
    total: i64,
}

impl TreeOut for TreeJson {
    fn build(sums: PathSums<'_>, max_nodes: Option<usize>) -> Self {
        let mut json = Vec::new();
        let total = sums.write_json(max_nodes, &mut json);
        TreeJson { json, total }
    }

    fn empty() -> Self {
        let root = <Node as TreeOut>::empty();
        TreeJson {
            json: serde_json::to_vec(&root).expect("writing JSON to a Vec cannot fail"),
            total: root.total,
        }
    }
}

/// What a tree's flamegraph holds besides the tree.
pub(crate) struct Built {
    profile_type: ProfileType,
    period: i64,
    group_by: Vec<String>,
    /// What the scan read; none when nothing was scanned.
    stats: Option<ScanStats>,
}

impl Built {
    pub(crate) fn flamegraph(self, root: Node) -> Flamegraph {
        let mut flamegraph = Flamegraph::new(self.profile_type, self.period, root);
        flamegraph.group_by = self.group_by;
        flamegraph.stats = self.stats;
        flamegraph
    }
}
