//! Call trees from `SUM(value) GROUP BY stack` scans: what the flamegraph, top and diff
//! endpoints build on.

use std::collections::{HashMap, HashSet};

use stackhouse_storage::model::SymbolId;

use super::QueryEngine;
use super::aggregate::{Dim, Row};
use super::grouping::{group_values, too_many_groups};
use super::plan::Needs;
use super::scope::{GroupKey, Scope, group_name};
use crate::call_paths::{PathNode, PathSums, Within};
use crate::error::QueryError;
use crate::limits::size;
use crate::stack_filter::StackFilter;
use crate::symbolize::MissingSymbols;
use crate::tree::{DEFAULT_MAX_NODES, Flamegraph};

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
        let stack_ids: HashSet<SymbolId> = rows.iter().map(|r| r.stack_id).collect();
        let symbols = self.symbols.loaded(tenant).await;
        let native = self.debuginfo.files_for(tenant, &symbols).await?;
        let paths = self.call_paths.tenant(tenant);
        let filter = filter.clone();
        let kept: HashSet<SymbolId> = tokio::task::spawn_blocking(move || {
            let mut paths = paths.lock().unwrap_or_else(|e| e.into_inner());
            paths.use_native(&native);
            let mut missing = MissingSymbols::default();
            stack_ids
                .into_iter()
                .filter(|&id| {
                    let end = paths.end(&symbols, &native, &mut missing, id);
                    filter.keeps(&paths.frames(end))
                })
                .collect()
        })
        .await
        .map_err(|e| QueryError::Internal(format!("symbolization task failed: {e}")))?;
        rows.retain(|r| kept.contains(&r.stack_id));
        Ok(())
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
        debug_assert!(call_site.is_empty() || group_by.is_empty());
        let empty = |period| {
            let mut flamegraph = Flamegraph::empty(scope.profile_type.clone(), period);
            flamegraph.group_by = group_by.iter().map(|k| k.name().to_string()).collect();
            flamegraph
        };
        let Some(plan) = self
            .plan(scope, Needs::grouped(vec![Dim::Stack], group_by))
            .await?
        else {
            return Ok(empty(0));
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
        let paths = self.call_paths.tenant(&scope.tenant);
        let root = tokio::task::spawn_blocking(move || {
            let mut paths = paths.lock().unwrap_or_else(|e| e.into_inner());
            paths.use_native(&native);
            let mut missing = MissingSymbols::default();
            let ends: Vec<PathNode> = rows
                .iter()
                .map(|row| paths.end(&symbols, &native, &mut missing, row.stack_id))
                .collect();
            let mut within = (!call_site.is_empty()).then(|| Within::new(paths.find(&call_site)));
            let mut sums = PathSums::new(&paths);
            let mut groups: HashMap<String, usize> = HashMap::new();
            for (row, end) in rows.iter().zip(ends) {
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
            Ok((sums.build(max_nodes), plan.period))
        })
        .await
        .map_err(|e| QueryError::Internal(format!("symbolization task failed: {e}")))?;
        let (root, period) = root?;
        let mut flamegraph = Flamegraph::new(scope.profile_type.clone(), period, root);
        flamegraph.group_by = empty(0).group_by;
        flamegraph.stats = Some(stats);
        Ok(flamegraph)
    }
}
