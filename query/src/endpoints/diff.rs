//! Diff of two flamegraphs: one tree whose nodes carry the baseline's and the comparison's
//! values. The query API reads it as `GET /api/v1/diff` (also as pprof); Pyroscope as
//! `Diff`.

use std::sync::Arc;

use stackhouse_proto::pyroscope_querier::{self, DiffResponse, FlameGraphDiff};

use crate::endpoints::export::PprofQuery;
use crate::engine::QueryEngine;
use crate::engine::scope::Scope;
use crate::error::QueryError;
use crate::frames::FrameRequest;
use crate::pyroscope::scope::{max_nodes, merge_scope, stack_filter};
use crate::pyroscope::{Caller, wire_levels};
use crate::render::flamebearer::diff_levels;
use crate::request::{RangeRequest, TreeAnswer, TreeOutput, selector};
use crate::stack_filter::StackFilter;
use crate::tree::{Diff, Node, ROOT_NAME};

#[derive(Clone, Debug)]
pub struct DiffQuery {
    pub baseline: Scope,
    pub comparison: Scope,
    /// Node budget; 0 means [`crate::DEFAULT_MAX_NODES`].
    pub max_nodes: usize,
    /// The stacks each side keeps; empty keeps all.
    pub baseline_stacks: StackFilter,
    pub comparison_stacks: StackFilter,
}

impl DiffQuery {
    /// Both sides with every stack.
    pub fn new(baseline: Scope, comparison: Scope, max_nodes: usize) -> DiffQuery {
        DiffQuery {
            baseline,
            comparison,
            max_nodes,
            baseline_stacks: StackFilter::default(),
            comparison_stacks: StackFilter::default(),
        }
    }
}

impl QueryEngine {
    /// One tree carrying both sides' values.
    pub async fn diff(&self, q: &DiffQuery) -> Result<Diff, QueryError> {
        self.bounded("diff", async {
            if q.baseline.profile_type != q.comparison.profile_type {
                return Err(QueryError::InvalidArgument(
                    "baseline and comparison must have the same profile type".into(),
                ));
            }
            let max_nodes = self.max_nodes(q.max_nodes)?;
            let (mut baseline, mut comparison) = futures::try_join!(
                self.tree(&q.baseline, &[], None, &[]),
                self.tree(&q.comparison, &[], None, &[])
            )?;
            for (side, stacks) in [
                (&mut baseline, &q.baseline_stacks),
                (&mut comparison, &q.comparison_stacks),
            ] {
                if !stacks.is_empty() {
                    side.root = stacks.apply(std::mem::replace(&mut side.root, Node::leaf(ROOT_NAME, 0)));
                    side.total = side.root.total;
                }
            }
            let mut diff = Diff::new(&baseline, &comparison);
            diff.baseline_stats = baseline.stats;
            diff.comparison_stats = comparison.stats;
            diff.truncate(max_nodes);
            Ok(diff)
        })
        .await
    }
}

/// Two selections of one profile type compared.
#[derive(Clone, Debug)]
pub struct DiffRequest {
    pub tenant: String,
    pub profile_type: Option<String>,
    pub baseline: SideRequest,
    pub comparison: SideRequest,
    pub max_nodes: usize,
    pub output: TreeOutput,
    /// Frame rules and granularity, the same for both sides.
    pub frames: FrameRequest,
}

/// One side of a diff.
#[derive(Clone, Debug, Default)]
pub struct SideRequest {
    pub selector: Option<String>,
    pub range: RangeRequest,
}

impl QueryEngine {
    /// `GET /api/v1/diff`.
    pub async fn read_diff(&self, r: &DiffRequest) -> Result<TreeAnswer<Diff, Diff>, QueryError> {
        self.bounded("diff", async {
            let max_nodes = self.max_nodes(r.max_nodes)?;
            let (baseline, comparison) = self.diff_scopes(r).await?;
            if r.output == TreeOutput::Pprof {
                let query = PprofQuery::Diff { baseline, comparison };
                return Ok(TreeAnswer::Pprof(self.pprof(&query).await?));
            }
            let diff = self
                .diff(&DiffQuery::new(baseline, comparison, max_nodes))
                .await?;
            Ok(match r.output {
                TreeOutput::Json => TreeAnswer::Json(diff),
                _ => TreeAnswer::Tree(diff),
            })
        })
        .await
    }

    /// `(baseline, comparison)`.
    async fn diff_scopes(&self, r: &DiffRequest) -> Result<(Scope, Scope), QueryError> {
        let side_range = |side: &str, range: &RangeRequest| {
            self.resolve_range(range).map_err(|e| match e {
                QueryError::BadRequest(message) => QueryError::BadRequest(format!("{side}: {message}")),
                e => e,
            })
        };
        let baseline_range = side_range("baseline", &r.baseline.range)?;
        let comparison_range = side_range("comparison", &r.comparison.range)?;
        let baseline_selector = selector("baseline_selector", r.baseline.selector.as_deref())?;
        let comparison_selector = selector("comparison_selector", r.comparison.selector.as_deref())?;
        let frames = Arc::new(r.frames.resolve()?);
        let profile_type = self
            .known_profile_type(&r.tenant, r.profile_type.as_deref())
            .await?;
        let baseline = Scope {
            selector: baseline_selector,
            frames: frames.clone(),
            ..Scope::new(&r.tenant, profile_type.clone(), baseline_range)
        };
        let comparison = Scope {
            selector: comparison_selector,
            frames,
            ..Scope::new(&r.tenant, profile_type, comparison_range)
        };
        Ok((baseline, comparison))
    }
}

/// Pyroscope's `Diff`.
pub async fn diff(
    engine: &QueryEngine,
    call: &Caller,
    r: pyroscope_querier::DiffRequest,
) -> Result<DiffResponse, QueryError> {
    engine
        .bounded("diff", async move {
            let (Some(left), Some(right)) = (&r.left, &r.right) else {
                return Err(QueryError::bad_request("diff needs both left and right"));
            };
            let (baseline, comparison) = futures::try_join!(
                merge_scope(engine, call, left.into()),
                merge_scope(engine, call, right.into())
            )?;
            let query = DiffQuery {
                baseline,
                comparison,
                max_nodes: max_nodes(left.max_nodes)?.max(max_nodes(right.max_nodes)?),
                baseline_stacks: stack_filter(left.stack_trace_selector.as_ref())?,
                comparison_stacks: stack_filter(right.stack_trace_selector.as_ref())?,
            };
            let diff = engine.diff(&query).await?;
            let laid_out = diff_levels(&diff.root);
            Ok(DiffResponse {
                flamegraph: Some(FlameGraphDiff {
                    names: laid_out.names,
                    levels: wire_levels(laid_out.levels),
                    total: diff.baseline_total + diff.comparison_total,
                    max_self: laid_out.max_self,
                    left_ticks: diff.baseline_total,
                    right_ticks: diff.comparison_total,
                }),
            })
        })
        .await
}
