//! Pyroscope's legacy `GET /pyroscope/render` and `/pyroscope/render-diff`, which the
//! Profiles Drilldown app still uses for its JSON export and (older versions) its diff
//! view: a flamebearer, and for `render` the time line of the same selection.

use axum::Json;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};
use stackhouse_ingest::pyroscope as ingest_params;
use stackhouse_query::Aggregation;
use stackhouse_query::pyroscope::{self, Caller, RenderQuery, RenderRequest, Rendered};
use stackhouse_query::render::dot::dot;
use stackhouse_query::render::flamebearer::{flamebearer, flamebearer_diff};
use stackhouse_query::request::parse_time;

use super::call::ReadCall;
use crate::error::ApiError;
use crate::route::Route;
use crate::state::AppState;
use crate::wire::query_string::QueryMap;

pub(super) fn routes() -> Vec<Route> {
    vec![
        Route::new("/pyroscope/render", get(render)),
        Route::new("/pyroscope/render-diff", get(render_diff)),
    ]
}

const NANOS_PER_SECOND: i64 = 1_000_000_000;

/// A graphite-style time: a unix time in s, ms, µs or ns (told apart by magnitude, as for
/// Pyroscope ingest); else `now`, `now-1h`, or RFC 3339.
fn parse_attime(value: &str, now: i64) -> Result<i64, ApiError> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return match ingest_params::parse_time("time", value) {
            Ok(Some(nanos)) => Ok(nanos),
            Ok(None) => Ok(now),
            Err(e) => Err(ApiError::invalid(e)),
        };
    }
    parse_time(value, now).map_err(ApiError::invalid)
}

/// `[from, until)` in ms-or-seconds, `now-1h` to `now` by default.
fn range(q: &QueryMap, from: &str, until: &str, now: i64) -> Result<(i64, i64), ApiError> {
    let end = q.one(until)?.map_or(Ok(now), |v| parse_attime(&v, now))?;
    let start = q
        .one(from)?
        .map_or(Ok(end - 3_600 * NANOS_PER_SECOND), |v| parse_attime(&v, now))?;
    Ok((start, end))
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

/// Pyroscope's legacy API serves sanitized label names only.
fn call(tenant: String) -> Caller {
    Caller {
        tenant,
        utf8_names: false,
    }
}

pub(super) async fn render(
    State(state): State<AppState>,
    ReadCall { tenant, q }: ReadCall,
) -> Result<Response, ApiError> {
    let call = call(tenant);
    let query = q
        .one("query")?
        .ok_or_else(|| ApiError::invalid("query is required: <profile type id>{<matchers>}"))?;
    match q.one("format")?.as_deref() {
        None | Some("json") => {}
        Some("dot") => return render_dot(&state, &call, query, &q).await,
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
    let (start, end) = range(&q, "from", "until", state.engine.now_nanos())?;
    let request = RenderRequest {
        query: RenderQuery { query, start, end },
        max_nodes: max_nodes(&q)?,
        aggregation,
        group_by: q.one("groupBy")?,
    };
    let Rendered {
        flamegraph,
        timeseries,
        timeline_start,
        step,
        group_by,
    } = pyroscope::render(&state.engine, &call, &request).await?;
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
    let groups = match &group_by {
        None => Value::Null,
        Some(key) => Value::Object(
            timeseries
                .series
                .iter()
                .map(|s| {
                    (
                        s.group.get(key.name()).cloned().unwrap_or_default(),
                        timeline(&s.points),
                    )
                })
                .collect(),
        ),
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
async fn render_dot(
    state: &AppState,
    call: &Caller,
    query: String,
    q: &QueryMap,
) -> Result<Response, ApiError> {
    let (start, end) = range(q, "from", "until", state.engine.now_nanos())?;
    let flamegraph = pyroscope::render_graph(&state.engine, call, &RenderQuery { query, start, end }).await?;
    let body = if flamegraph.root.total == 0 && flamegraph.root.children.is_empty() {
        String::new()
    } else {
        dot(&flamegraph, max_nodes(q)?)
    };
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], body).into_response())
}

pub(super) async fn render_diff(
    State(state): State<AppState>,
    ReadCall { tenant, q }: ReadCall,
) -> Result<Json<Value>, ApiError> {
    let call = call(tenant);
    let side = |name: &str| {
        q.one(name)?
            .ok_or_else(|| ApiError::invalid(format!("{name} is required: <profile type id>{{<matchers>}}")))
    };
    let (left, right) = (side("leftQuery")?, side("rightQuery")?);
    let now = state.engine.now_nanos();
    let (left_range, right_range) = (
        range(&q, "leftFrom", "leftUntil", now)?,
        range(&q, "rightFrom", "rightUntil", now)?,
    );
    let (left, right) = (
        RenderQuery {
            query: left,
            start: left_range.0,
            end: left_range.1,
        },
        RenderQuery {
            query: right,
            start: right_range.0,
            end: right_range.1,
        },
    );
    let diff = pyroscope::render_diff(&state.engine, &call, &left, &right, max_nodes(&q)?).await?;
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
}
