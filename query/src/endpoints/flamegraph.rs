//! `flamegraph`: the call tree of the selected samples, optionally grouped. The query API
//! reads it as `GET /api/v1/flamegraph` (a trace's too); Pyroscope as
//! `SelectMergeStacktraces` (also as a tree, DOT or pprof) and `SelectMergeSpanProfile`.

use stackhouse_proto::pyroscope_querier::{
    FlameGraph, PprofProfile, ProfileFormat, SelectMergeSpanProfileRequest, SelectMergeSpanProfileResponse,
    SelectMergeStacktracesRequest, SelectMergeStacktracesResponse,
};

use crate::endpoints::export::{PprofQuery, merged_profile};
use crate::engine::QueryEngine;
use crate::engine::scope::{GroupKey, Scope};
use crate::error::QueryError;
use crate::pyroscope::scope::{explicit_max_nodes, max_nodes, merge_scope, stack_filter};
use crate::pyroscope::{Caller, wire_levels};
use crate::render::dot::dot;
use crate::render::flamebearer::levels;
use crate::render::tree_bytes::tree_bytes;
use crate::request::{ScopeRequest, TreeAnswer, TreeOutput};
use crate::stack_filter::StackFilter;
use crate::tree::{Flamegraph, FlamegraphJson};

#[derive(Clone, Debug)]
pub struct FlamegraphQuery {
    pub scope: Scope,
    /// Puts one level of `key=value` nodes under the root.
    pub group_by: Vec<GroupKey>,
    /// Node budget of the tree; 0 means [`crate::DEFAULT_MAX_NODES`].
    pub max_nodes: usize,
}

impl QueryEngine {
    /// The call tree of the selected samples, values summed per call path. Selecting
    /// nothing is not an error: the result has total 0.
    pub async fn flamegraph(&self, q: &FlamegraphQuery) -> Result<Flamegraph, QueryError> {
        self.filtered_flamegraph(q, &StackFilter::default()).await
    }

    /// [`QueryEngine::flamegraph`] as JSON, written while the tree is cut.
    pub async fn flamegraph_json(&self, q: &FlamegraphQuery) -> Result<FlamegraphJson, QueryError> {
        self.bounded("flamegraph", async {
            let max_nodes = self.max_nodes(q.max_nodes)?;
            self.tree_json(&q.scope, &q.group_by, max_nodes).await
        })
        .await
    }

    /// [`QueryEngine::flamegraph`] of only the stacks `stacks` keeps.
    pub async fn filtered_flamegraph(
        &self,
        q: &FlamegraphQuery,
        stacks: &StackFilter,
    ) -> Result<Flamegraph, QueryError> {
        self.bounded("flamegraph", async {
            let max_nodes = self.max_nodes(q.max_nodes)?;
            // An ungrouped tree is cut to its call site while it is built, so a subtree
            // costs what its own stacks cost.
            let call_site: &[String] = if q.group_by.is_empty() {
                &stacks.call_site
            } else {
                &[]
            };
            if stacks.is_empty() || stacks.only_call_site() && !call_site.is_empty() {
                let mut flamegraph = self
                    .tree(&q.scope, &q.group_by, Some(max_nodes), call_site)
                    .await?;
                // Already cut while building: cutting again would fold kept nodes in favour
                // of the `other` nodes the first cut made.
                flamegraph.max_nodes = Some(max_nodes);
                return Ok(flamegraph);
            }
            // Filtering needs every node: truncation would have folded some into `other`.
            let mut flamegraph = self.tree(&q.scope, &q.group_by, None, call_site).await?;
            flamegraph.root = stacks.apply(flamegraph.root);
            flamegraph.total = flamegraph.root.total;
            flamegraph.truncate(max_nodes);
            Ok(flamegraph)
        })
        .await
    }
}

/// A flamegraph read: the scope (a trace's flamegraph is one with its trace id), grouping,
/// the node budget asked for (0: the default).
#[derive(Clone, Debug)]
pub struct FlamegraphRequest {
    pub scope: ScopeRequest,
    pub group_by: Vec<GroupKey>,
    pub max_nodes: usize,
    pub output: TreeOutput,
}

impl QueryEngine {
    /// `GET /api/v1/flamegraph` and `/traces/{id}/flamegraph`.
    pub async fn read_flamegraph(
        &self,
        r: &FlamegraphRequest,
    ) -> Result<TreeAnswer<FlamegraphJson, Flamegraph>, QueryError> {
        self.bounded("flamegraph", async {
            let max_nodes = self.max_nodes(r.max_nodes)?;
            let scope = self.resolve_scope(&r.scope).await?;
            let query = FlamegraphQuery {
                scope,
                group_by: r.group_by.clone(),
                max_nodes,
            };
            Ok(match r.output {
                TreeOutput::Pprof => TreeAnswer::Pprof(self.pprof(&PprofQuery::Scope(query.scope)).await?),
                TreeOutput::Json => TreeAnswer::Json(self.flamegraph_json(&query).await?),
                TreeOutput::Tree => TreeAnswer::Tree(self.flamegraph(&query).await?),
            })
        })
        .await
    }
}

/// Pyroscope's `SelectMergeStacktraces`.
pub async fn select_merge_stacktraces(
    engine: &QueryEngine,
    call: &Caller,
    r: SelectMergeStacktracesRequest,
) -> Result<SelectMergeStacktracesResponse, QueryError> {
    engine
        .bounded("flamegraph", async move {
            let scope = merge_scope(engine, call, (&r).into()).await?;
            match ProfileFormat::try_from(r.format) {
                Ok(ProfileFormat::Pprof) => {
                    let stacks = stack_filter(r.stack_trace_selector.as_ref())?;
                    let profile =
                        merged_profile(engine, scope, &stacks, explicit_max_nodes(engine, r.max_nodes)?)
                            .await?;
                    return Ok(SelectMergeStacktracesResponse {
                        pprof: Some(PprofProfile {
                            profile: Some(profile),
                        }),
                        ..Default::default()
                    });
                }
                Ok(ProfileFormat::Dot) => {
                    // `max_nodes` bounds the functions drawn; the graph is made from the default
                    // call tree, as Pyroscope draws it from a merged profile.
                    let query = FlamegraphQuery {
                        scope,
                        group_by: Vec::new(),
                        max_nodes: 0,
                    };
                    let stacks = stack_filter(r.stack_trace_selector.as_ref())?;
                    let flamegraph = engine.filtered_flamegraph(&query, &stacks).await?;
                    return Ok(SelectMergeStacktracesResponse {
                        dot: dot(&flamegraph, max_nodes(r.max_nodes)?),
                        ..Default::default()
                    });
                }
                // Unknown formats (the Drilldown app's FUNCTIONS and SANDWICH) get the flame graph,
                // which the app falls back to.
                _ => {}
            }
            let query = FlamegraphQuery {
                scope,
                group_by: Vec::new(),
                max_nodes: max_nodes(r.max_nodes)?,
            };
            let stacks = stack_filter(r.stack_trace_selector.as_ref())?;
            let flamegraph = engine.filtered_flamegraph(&query, &stacks).await?;
            if r.format == ProfileFormat::Tree as i32 {
                return Ok(SelectMergeStacktracesResponse {
                    tree: tree_bytes(&flamegraph.root),
                    ..Default::default()
                });
            }
            Ok(SelectMergeStacktracesResponse {
                flamegraph: Some(flame_graph(&flamegraph)),
                ..Default::default()
            })
        })
        .await
}

/// Pyroscope's `SelectMergeSpanProfile`.
pub async fn select_merge_span_profile(
    engine: &QueryEngine,
    call: &Caller,
    r: SelectMergeSpanProfileRequest,
) -> Result<SelectMergeSpanProfileResponse, QueryError> {
    engine
        .bounded("flamegraph", async move {
            let scope = merge_scope(engine, call, (&r).into()).await?;
            let query = FlamegraphQuery {
                scope,
                group_by: Vec::new(),
                max_nodes: max_nodes(r.max_nodes)?,
            };
            let flamegraph = engine.flamegraph(&query).await?;
            Ok(SelectMergeSpanProfileResponse {
                flamegraph: Some(flame_graph(&flamegraph)),
                ..Default::default()
            })
        })
        .await
}

fn flame_graph(flamegraph: &Flamegraph) -> FlameGraph {
    let laid_out = levels(&flamegraph.root);
    FlameGraph {
        names: laid_out.names,
        levels: wire_levels(laid_out.levels),
        total: flamegraph.root.total,
        max_self: laid_out.max_self,
    }
}
