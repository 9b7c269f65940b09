//! Trees: the flamegraph (optionally grouped), the top table and the diff, all from
//! `SUM(value) GROUP BY stack` scans.

use std::collections::HashMap;

use stackhouse_storage::model::{Series, SymbolId};
use stackhouse_storage::symbols::SymbolIndex;

use super::aggregate::{Dim, Row};
use super::plan::Plan;
use super::{DiffQuery, FlamegraphQuery, QueryEngine, TopQuery};
use crate::diff::Diff;
use crate::error::QueryError;
use crate::limits::exceeded;
use crate::scope::{GroupKey, Scope, group_name};
use crate::symbolize::Symbolizer;
use crate::top::{Top, TopFunction};
use crate::tree::{DEFAULT_MAX_NODES, Flamegraph, Node};

impl QueryEngine {
    pub(crate) async fn run_flamegraph(&self, q: &FlamegraphQuery) -> Result<Flamegraph, QueryError> {
        let max_nodes = self.max_nodes(q.max_nodes)?;
        let mut flamegraph = self.tree(&q.scope, &q.group_by, Some(max_nodes)).await?;
        // Already cut while building; this records the budget on the result.
        flamegraph.truncate(max_nodes);
        Ok(flamegraph)
    }

    pub(crate) async fn run_top(&self, q: &TopQuery) -> Result<Top, QueryError> {
        if q.limit == 0 {
            return Err(QueryError::InvalidArgument("limit must be at least 1".into()));
        }
        let flamegraph = self.tree(&q.scope, &[], None).await?;
        let mut functions = top_functions(&flamegraph.root);
        functions.truncate(q.limit);
        Ok(Top {
            kind: flamegraph.kind,
            unit: flamegraph.unit,
            total: flamegraph.total,
            functions,
            stats: flamegraph.stats,
        })
    }

    pub(crate) async fn run_diff(&self, q: &DiffQuery) -> Result<Diff, QueryError> {
        if q.baseline.profile_type != q.comparison.profile_type {
            return Err(QueryError::InvalidArgument(
                "baseline and comparison must have the same profile type".into(),
            ));
        }
        let max_nodes = self.max_nodes(q.max_nodes)?;
        let (baseline, comparison) = futures::try_join!(
            self.tree(&q.baseline, &[], None),
            self.tree(&q.comparison, &[], None)
        )?;
        let mut diff = Diff::new(&baseline, &comparison);
        diff.baseline_stats = baseline.stats;
        diff.comparison_stats = comparison.stats;
        diff.truncate(max_nodes);
        Ok(diff)
    }

    pub(crate) fn max_nodes(&self, asked: usize) -> Result<usize, QueryError> {
        match asked {
            0 => Ok(DEFAULT_MAX_NODES.min(self.limits.max_nodes)),
            n if n > self.limits.max_nodes => Err(exceeded(
                "max_nodes",
                format!("max_nodes {n} is more than {} allowed", self.limits.max_nodes),
            )),
            n => Ok(n),
        }
    }

    /// The tree of a scope, grouped under the root by `group_by`, truncated to `max_nodes`
    /// when given.
    async fn tree(
        &self,
        scope: &Scope,
        group_by: &[GroupKey],
        max_nodes: Option<usize>,
    ) -> Result<Flamegraph, QueryError> {
        let empty = |period| {
            let mut flamegraph = Flamegraph::empty(scope.profile_type.clone(), period);
            flamegraph.group_by = group_by.iter().map(|k| k.name().to_string()).collect();
            flamegraph
        };
        let Some(plan) = self.plan(scope).await? else {
            return Ok(empty(0));
        };
        let mut dims = vec![Dim::Stack];
        dims.extend(group_dims(group_by));
        let (rows, stats) = self.aggregate(&plan, &dims).await?;
        // Read after the scan: segments committed since planning are loaded now, so every
        // stack the scan returned has its symbols.
        let symbols = self.symbols.read(&scope.tenant).await?;
        let tenant = scope.tenant.clone();
        let group_by = group_by.to_vec();
        let max_groups = self.limits.max_groups;
        let root = tokio::task::spawn_blocking(move || {
            let mut symbolizer = Symbolizer::new(&symbols);
            let mut groups: HashMap<String, usize> = HashMap::new();
            for row in &rows {
                if group_by.is_empty() {
                    symbolizer.add(row.stack_id, row.value);
                    continue;
                }
                let name = group_name(&group_by, &group_values(&group_by, row, &plan, &symbols));
                let node = match groups.get(&name) {
                    Some(&node) => node,
                    None => {
                        if groups.len() >= max_groups {
                            return Err(too_many_groups(max_groups));
                        }
                        let node = symbolizer.group(&name);
                        groups.insert(name, node);
                        node
                    }
                };
                symbolizer.add_under(node, row.stack_id, row.value);
            }
            let (root, missing) = match max_nodes {
                Some(max_nodes) => symbolizer.finish_truncated(max_nodes),
                None => symbolizer.finish(),
            };
            if !missing.is_empty() {
                tracing::warn!(%tenant, ?missing, "symbols missing, frames named <unknown>");
            }
            Ok((root, plan.period))
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

pub(crate) fn too_many_groups(max_groups: usize) -> QueryError {
    exceeded(
        "max_groups",
        format!("group_by yields more than {max_groups} groups; group by fewer or coarser keys"),
    )
}

/// The columns a `group_by` needs next to what the caller groups by.
pub(crate) fn group_dims(group_by: &[GroupKey]) -> Vec<Dim> {
    let mut dims = Vec::new();
    let mut push = |d| {
        if !dims.contains(&d) {
            dims.push(d)
        }
    };
    for key in group_by {
        match key {
            GroupKey::Label(_) => {
                push(Dim::Series);
                push(Dim::AttrSet);
            }
            GroupKey::TraceId => push(Dim::Trace),
            GroupKey::SpanId => push(Dim::Span),
            GroupKey::ProfileId => push(Dim::Profile),
        }
    }
    dims
}

/// The value of each key for one row: the series label when the series carries the key,
/// else the sample attribute, else `""` (the selector's rule).
pub(crate) fn group_values(keys: &[GroupKey], row: &Row, plan: &Plan, symbols: &SymbolIndex) -> Vec<String> {
    keys.iter()
        .map(|key| match key {
            GroupKey::Label(name) => {
                label_value(name, plan.series.get(&row.series_id), row.attr_set_id, symbols)
            }
            GroupKey::TraceId => row.trace_id.map(hex::encode).unwrap_or_default(),
            GroupKey::SpanId => row.span_id.map(hex::encode).unwrap_or_default(),
            GroupKey::ProfileId => row.profile_id.map(hex::encode).unwrap_or_default(),
        })
        .collect()
}

fn label_value(name: &str, series: Option<&Series>, attr_set_id: SymbolId, symbols: &SymbolIndex) -> String {
    if let Some(value) = series.and_then(|s| s.labels.get(name)) {
        return value.clone();
    }
    symbols
        .attr_sets
        .get(&attr_set_id)
        .and_then(|set| set.get(name))
        .unwrap_or_default()
        .to_string()
}

/// Functions of an untruncated tree by self value. A function's total counts each call
/// path once even when the function recurses: only its outermost occurrence adds.
pub(crate) fn top_functions(root: &Node) -> Vec<TopFunction> {
    fn walk<'n>(
        node: &'n Node,
        on_path: &mut HashMap<&'n str, usize>,
        out: &mut HashMap<&'n str, (i64, i64)>,
    ) {
        let entry = out.entry(&node.name).or_default();
        entry.0 += node.self_value;
        let depth = on_path.entry(&node.name).or_default();
        if *depth == 0 {
            entry.1 += node.total;
        }
        *depth += 1;
        for child in &node.children {
            walk(child, on_path, out);
        }
        *on_path.get_mut(node.name.as_str()).expect("pushed above") -= 1;
    }
    let mut out = HashMap::new();
    let mut on_path = HashMap::new();
    for child in &root.children {
        walk(child, &mut on_path, &mut out);
    }
    let mut functions: Vec<TopFunction> = out
        .into_iter()
        .map(|(name, (self_value, total))| TopFunction {
            name: name.to_string(),
            self_value,
            total,
        })
        .collect();
    functions.sort_by(|a, b| {
        (b.self_value, b.total)
            .cmp(&(a.self_value, a.total))
            .then_with(|| a.name.cmp(&b.name))
    });
    functions
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::TreeBuilder;

    #[test]
    fn top_counts_recursion_once_in_total() {
        let mut b = TreeBuilder::new();
        b.add_path(&["main", "f", "f", "g"], 5);
        b.add_path(&["main", "f"], 2);
        b.add_path(&["main", "g"], 3);
        b.add_path(&["main"], 1);
        let top = top_functions(&b.build());
        let get = |name: &str| {
            let f = top.iter().find(|f| f.name == name).unwrap();
            (f.self_value, f.total)
        };
        assert_eq!(get("g"), (8, 8));
        assert_eq!(get("f"), (2, 7));
        assert_eq!(get("main"), (1, 11));
        assert_eq!(top[0].name, "g");
        assert_eq!(top.len(), 3);
    }
}
