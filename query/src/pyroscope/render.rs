//! What Pyroscope's legacy `GET /pyroscope/render` and `/pyroscope/render-diff` run: a
//! `<profile type id>{matchers}` query over a range, as one engine request each.

use super::Caller;
use super::NANOS_PER_MILLI;
use super::names::Names;
use super::scope::select_scope;
use crate::endpoints::diff::DiffQuery;
use crate::endpoints::flamegraph::FlamegraphQuery;
use crate::endpoints::timeseries::{Aggregation, Timeseries, TimeseriesQuery};
use crate::engine::QueryEngine;
use crate::engine::scope::{GroupKey, Scope};
use crate::error::QueryError;
use crate::tree::Diff;
use crate::tree::Flamegraph;

const NANOS_PER_SECOND: i64 = 1_000_000_000;
/// Time line points Pyroscope aims for over the range.
const TIMELINE_POINTS: i64 = 1_500;
/// Time line steps, smallest first: the first at least range / [`TIMELINE_POINTS`] is used.
const NICE_STEPS_SECONDS: [i64; 14] = [
    15, 30, 60, 300, 600, 900, 1_800, 3_600, 10_800, 21_600, 43_200, 86_400, 604_800, 2_592_000,
];

/// One `<profile type id>{matchers}` over `[start, end)` (nanoseconds).
#[derive(Clone, Debug)]
pub struct RenderQuery {
    pub query: String,
    pub start: i64,
    pub end: i64,
}

/// `render`: the flamegraph and the time line of one query.
#[derive(Clone, Debug)]
pub struct RenderRequest {
    pub query: RenderQuery,
    /// 0: the default node budget.
    pub max_nodes: usize,
    pub aggregation: Aggregation,
    /// One label name as the client spells it; a time line per value.
    pub group_by: Option<String>,
}

/// What `render` answers: the flamegraph and the time line, whose buckets start at
/// `timeline_start` and are `step` wide.
#[derive(Debug)]
pub struct Rendered {
    pub flamegraph: Flamegraph,
    pub timeseries: Timeseries,
    pub timeline_start: i64,
    pub step: i64,
    /// The grouping key, our name for the client's.
    pub group_by: Option<GroupKey>,
}

/// `<profile type id>{matchers}` → the scope over `[start, end)` (nanoseconds).
async fn query_scope(engine: &QueryEngine, call: &Caller, q: &RenderQuery) -> Result<Scope, QueryError> {
    let query = &q.query;
    let (id, selector) = match query.find('{') {
        Some(i) => (query[..i].trim(), &query[i..]),
        None => (query.trim(), "{}"),
    };
    if id.is_empty() {
        return Err(QueryError::bad_request(format!(
            "invalid query {query:?}: expected <profile type id>{{<matchers>}}"
        )));
    }
    // The Connect scope takes milliseconds; ranges here may be finer.
    let mut scope = select_scope(
        engine,
        call,
        id,
        selector,
        q.start / NANOS_PER_MILLI,
        (q.end + NANOS_PER_MILLI - 1) / NANOS_PER_MILLI,
    )
    .await?;
    if scope.segments.is_none() {
        scope.range.start = q.start;
        scope.range.end = q.end;
    }
    Ok(scope)
}

/// The smallest nice step giving at most [`TIMELINE_POINTS`] points, at least 15 s.
fn timeline_step(start: i64, end: i64) -> i64 {
    let wanted = (end - start) / TIMELINE_POINTS;
    let seconds = NICE_STEPS_SECONDS
        .iter()
        .copied()
        .find(|s| s * NANOS_PER_SECOND >= wanted)
        .unwrap_or((wanted + NANOS_PER_SECOND - 1) / NANOS_PER_SECOND);
    seconds * NANOS_PER_SECOND
}

/// `render` with `format=json`.
pub async fn render(engine: &QueryEngine, call: &Caller, r: &RenderRequest) -> Result<Rendered, QueryError> {
    engine
        .bounded("flamegraph", async {
            let (start, end) = (r.query.start, r.query.end);
            let mut scope = query_scope(engine, call, &r.query).await?;
            let step = timeline_step(start, end);
            // The time line starts on a step boundary, as Pyroscope's does.
            let timeline_start = start - start.rem_euclid(step);
            let flamegraph_query = FlamegraphQuery {
                scope: scope.clone(),
                group_by: Vec::new(),
                max_nodes: r.max_nodes,
            };
            if scope.segments.is_none() {
                scope.range.start = timeline_start;
            }
            let group_by = match &r.group_by {
                Some(name) => {
                    let names = Names::new(engine.label_names(&call.tenant, scope.range).await?);
                    Some(GroupKey::Label(names.resolve(name)))
                }
                None => None,
            };
            let timeseries_query = TimeseriesQuery {
                scope,
                step_nanos: step,
                group_by: group_by.iter().cloned().collect(),
                aggregation: r.aggregation,
            };
            let (flamegraph, timeseries) = futures::try_join!(
                engine.flamegraph(&flamegraph_query),
                engine.timeseries(&timeseries_query)
            )?;
            Ok(Rendered {
                flamegraph,
                timeseries,
                timeline_start,
                step,
                group_by,
            })
        })
        .await
}

/// `render` with `format=dot`: the untruncated flamegraph the call graph is drawn from.
pub async fn render_graph(
    engine: &QueryEngine,
    call: &Caller,
    q: &RenderQuery,
) -> Result<Flamegraph, QueryError> {
    engine
        .bounded("flamegraph", async {
            let scope = query_scope(engine, call, q).await?;
            engine
                .flamegraph(&FlamegraphQuery {
                    scope,
                    group_by: Vec::new(),
                    max_nodes: 0,
                })
                .await
        })
        .await
}

/// `render-diff`.
pub async fn render_diff(
    engine: &QueryEngine,
    call: &Caller,
    left: &RenderQuery,
    right: &RenderQuery,
    max_nodes: usize,
) -> Result<Diff, QueryError> {
    engine
        .bounded("diff", async {
            let (baseline, comparison) =
                futures::try_join!(query_scope(engine, call, left), query_scope(engine, call, right))?;
            engine
                .diff(&DiffQuery::new(baseline, comparison, max_nodes))
                .await
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeline_steps_are_nice() {
        let hour = 3_600 * NANOS_PER_SECOND;
        assert_eq!(timeline_step(0, hour), 15 * NANOS_PER_SECOND);
        assert_eq!(timeline_step(0, 24 * hour), 60 * NANOS_PER_SECOND);
        assert_eq!(timeline_step(0, 7 * 24 * hour), 600 * NANOS_PER_SECOND);
    }
}
