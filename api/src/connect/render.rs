//! Pyroscope's legacy `GET /pyroscope/render` and `/pyroscope/render-diff`, which the
//! Profiles Drilldown app still uses for its JSON export and (older versions) its diff
//! view: a flamebearer, and for `render` the time line of the same selection.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use stackhouse_ingest::pyroscope;
use stackhouse_query::render::dot::dot;
use stackhouse_query::render::flamebearer::{flamebearer, flamebearer_diff};
use stackhouse_query::{Aggregation, DiffQuery, FlamegraphQuery, GroupKey, Scope, TimeseriesQuery};

use super::labels::Names;
use super::{Call, querier};
use crate::error::ApiError;
use crate::http::AppState;
use crate::http::query::params::QueryMap;
use crate::tenant;
use crate::time_param::{now_nanos, parse_time};

const NANOS_PER_SECOND: i64 = 1_000_000_000;
/// Time line points Pyroscope aims for over the range.
const TIMELINE_POINTS: i64 = 1_500;
/// Time line steps, smallest first: the first at least range / [`TIMELINE_POINTS`] is used.
const NICE_STEPS_SECONDS: [i64; 14] = [
    15, 30, 60, 300, 600, 900, 1_800, 3_600, 10_800, 21_600, 43_200, 86_400, 604_800, 2_592_000,
];

/// A graphite-style time: a unix time in s, ms, µs or ns (told apart by magnitude, as for
/// Pyroscope ingest); else `now`, `now-1h`, or RFC 3339.
fn parse_attime(value: &str, now: i64) -> Result<i64, ApiError> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return match pyroscope::parse_time("time", value) {
            Ok(Some(nanos)) => Ok(nanos),
            Ok(None) => Ok(now),
            Err(e) => Err(ApiError::invalid(e)),
        };
    }
    parse_time(value, now).map_err(ApiError::invalid)
}

/// `[from, until)` in ms-or-seconds, `now-1h` to `now` by default.
fn range(q: &QueryMap, from: &str, until: &str) -> Result<(i64, i64), ApiError> {
    let now = now_nanos();
    let end = q.one(until)?.map_or(Ok(now), |v| parse_attime(&v, now))?;
    let start = q
        .one(from)?
        .map_or(Ok(end - 3_600 * NANOS_PER_SECOND), |v| parse_attime(&v, now))?;
    Ok((start, end))
}

/// `<profile type id>{matchers}` → the scope over `[start, end)` (nanoseconds).
async fn query_scope(
    state: &AppState,
    call: &Call,
    query: &str,
    (start, end): (i64, i64),
) -> Result<Scope, ApiError> {
    let (id, selector) = match query.find('{') {
        Some(i) => (query[..i].trim(), &query[i..]),
        None => (query.trim(), "{}"),
    };
    if id.is_empty() {
        return Err(ApiError::invalid(format!(
            "invalid query {query:?}: expected <profile type id>{{<matchers>}}"
        )));
    }
    // The Connect scope takes milliseconds; ranges here may be finer.
    let mut scope = querier::select_scope(
        state,
        call,
        id,
        selector,
        start / querier::NANOS_PER_MILLI,
        (end + querier::NANOS_PER_MILLI - 1) / querier::NANOS_PER_MILLI,
    )
    .await?;
    if scope.segments.is_none() {
        scope.range.start = start;
        scope.range.end = end;
    }
    Ok(scope)
}

fn max_nodes(q: &QueryMap) -> Result<usize, ApiError> {
    let value = match q.one("max-nodes")? {
        Some(v) => Some(v),
        None => q.one("maxNodes")?,
    };
    value.map_or(Ok(0), |v| {
        v.trim().parse().map_err(|_| {
            ApiError::invalid(format!(
                "invalid max-nodes {v:?}: expected a non-negative integer"
            ))
        })
    })
}

fn call(headers: &HeaderMap) -> Result<Call, ApiError> {
    Ok(Call {
        tenant: tenant::from_headers(headers)?,
        utf8_names: false,
    })
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

pub async fn render(
    State(state): State<AppState>,
    headers: HeaderMap,
    q: QueryMap,
) -> Result<Response, ApiError> {
    let call = call(&headers)?;
    let query = q
        .one("query")?
        .ok_or_else(|| ApiError::invalid("query is required: <profile type id>{<matchers>}"))?;
    match q.one("format")?.as_deref() {
        None | Some("json") => {}
        Some("dot") => return render_dot(&state, &call, &query, &q).await,
        Some(other) => {
            return Err(ApiError::invalid(format!(
                "format {other:?} is not served; use json or dot"
            )));
        }
    }
    let aggregation = match q.one("aggregation")?.as_deref() {
        None => Aggregation::Sum,
        Some(a) => Aggregation::parse(a)
            .ok_or_else(|| ApiError::invalid(format!("invalid aggregation {a:?}: use sum or avg")))?,
    };
    let (start, end) = range(&q, "from", "until")?;
    let mut scope = query_scope(&state, &call, &query, (start, end)).await?;
    let step = timeline_step(start, end);
    // The time line starts on a step boundary, as Pyroscope's does.
    let timeline_start = start - start.rem_euclid(step);
    let flamegraph_query = FlamegraphQuery {
        scope: scope.clone(),
        group_by: Vec::new(),
        max_nodes: max_nodes(&q)?,
    };
    if scope.segments.is_none() {
        scope.range.start = timeline_start;
    }
    let group_by: Vec<GroupKey> = match q.one("groupBy")? {
        Some(name) => {
            let names = Names::new(state.engine.label_names(&call.tenant, scope.range).await?);
            vec![GroupKey::Label(names.resolve(&name))]
        }
        None => Vec::new(),
    };
    let timeseries_query = TimeseriesQuery {
        scope,
        step_nanos: step,
        group_by: group_by.clone(),
        aggregation,
    };
    let (flamegraph, timeseries) = futures::try_join!(
        state.engine.flamegraph(&flamegraph_query),
        state.engine.timeseries(&timeseries_query)
    )?;
    let buckets = usize::try_from((end - timeline_start + step - 1) / step).unwrap_or(0);
    let timeline = |points: &[(i64, f64)]| {
        let mut samples = vec![0i64; buckets];
        for &(at, value) in points {
            if let Some(slot) = usize::try_from((at - timeline_start) / step)
                .ok()
                .and_then(|i| samples.get_mut(i))
            {
                *slot += value.round() as i64;
            }
        }
        json!({
            "startTime": timeline_start / NANOS_PER_SECOND,
            "samples": samples,
            "durationDelta": step / NANOS_PER_SECOND,
            "watermarks": null,
        })
    };
    let mut total_points: Vec<(i64, f64)> = Vec::new();
    for series in &timeseries.series {
        total_points.extend(&series.points);
    }
    let groups = if group_by.is_empty() {
        Value::Null
    } else {
        let key = group_by[0].name();
        Value::Object(
            timeseries
                .series
                .iter()
                .map(|s| (s.group.get(key).cloned().unwrap_or_default(), timeline(&s.points)))
                .collect(),
        )
    };
    let mut body = serde_json::to_value(flamebearer(&flamegraph)).expect("a flamebearer serializes");
    body["metadata"]["name"] = json!(flamegraph.kind.sample_type);
    body["timeline"] = timeline(&total_points);
    body["groups"] = groups;
    body["heatmap"] = Value::Null;
    if flamegraph.kind.sample_type == "cpu" {
        // Pyroscope's units for CPU time: ticks are nanoseconds, shown as seconds.
        body["metadata"]["units"] = json!("samples");
    }
    Ok(Json(body).into_response())
}

/// `format=dot`: the selection's call graph as Graphviz text, at most `max-nodes`
/// functions (100 by default); an empty selection is an empty body, as Pyroscope's.
async fn render_dot(state: &AppState, call: &Call, query: &str, q: &QueryMap) -> Result<Response, ApiError> {
    let scope = query_scope(state, call, query, range(q, "from", "until")?).await?;
    let flamegraph = state
        .engine
        .flamegraph(&FlamegraphQuery {
            scope,
            group_by: Vec::new(),
            max_nodes: 0,
        })
        .await?;
    let body = if flamegraph.root.total == 0 && flamegraph.root.children.is_empty() {
        String::new()
    } else {
        dot(&flamegraph, max_nodes(q)?)
    };
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], body).into_response())
}

pub async fn render_diff(
    State(state): State<AppState>,
    headers: HeaderMap,
    q: QueryMap,
) -> Result<Json<Value>, ApiError> {
    let call = call(&headers)?;
    let side = |name: &str| {
        q.one(name)?
            .ok_or_else(|| ApiError::invalid(format!("{name} is required: <profile type id>{{<matchers>}}")))
    };
    let (left, right) = (side("leftQuery")?, side("rightQuery")?);
    let (left_range, right_range) = (
        range(&q, "leftFrom", "leftUntil")?,
        range(&q, "rightFrom", "rightUntil")?,
    );
    let (baseline, comparison) = futures::try_join!(
        query_scope(&state, &call, &left, left_range),
        query_scope(&state, &call, &right, right_range)
    )?;
    let query = DiffQuery {
        baseline,
        comparison,
        max_nodes: max_nodes(&q)?,
        baseline_stacks: Default::default(),
        comparison_stacks: Default::default(),
    };
    let diff = state.engine.diff(&query).await?;
    let mut body = serde_json::to_value(flamebearer_diff(&diff)).expect("a flamebearer serializes");
    body["metadata"]["name"] = json!(diff.kind.sample_type);
    Ok(Json(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graphite_times() {
        let now = 1_700_000_000 * NANOS_PER_SECOND;
        assert_eq!(parse_attime("1700000000", now).unwrap(), now);
        assert_eq!(parse_attime("1700000000000", now).unwrap(), now);
        assert_eq!(parse_attime("1700000000000000", now).unwrap(), now);
        assert_eq!(parse_attime("1700000000000000000", now).unwrap(), now);
        assert_eq!(
            parse_attime("now-1h", now).unwrap(),
            now - 3_600 * NANOS_PER_SECOND
        );
        assert!(parse_attime("yesterday", now).is_err());
    }

    #[test]
    fn timeline_steps_are_nice() {
        let hour = 3_600 * NANOS_PER_SECOND;
        assert_eq!(timeline_step(0, hour), 15 * NANOS_PER_SECOND);
        assert_eq!(timeline_step(0, 24 * hour), 60 * NANOS_PER_SECOND);
        assert_eq!(timeline_step(0, 7 * 24 * hour), 600 * NANOS_PER_SECOND);
    }
}
