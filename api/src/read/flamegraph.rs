//! Flamegraphs: `GET /api/v1/flamegraph` and `/api/v1/traces/{trace_id}/flamegraph`, and
//! Connect's `SelectMergeStacktraces`, `SelectMergeSpanProfile` and `SelectMergeProfile`.

use axum::extract::{Path, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use stackhouse_query::endpoints;
use stackhouse_query::endpoints::flamegraph::FlamegraphRequest;
use stackhouse_query::request::TreeAnswer;

use super::call::ReadCall;
use super::connect::querier;
use super::encode::{FlamegraphBody, JSON_CONTENT_TYPE, pprof, rendered, scan_headers};
use super::params::{FrameParams, GroupByParams, ScopeParams, TenantHeader, TraceIdParams, TreeParams};
use crate::error::ApiError;
use crate::route::{Route, documented};
use crate::state::AppState;
use crate::wire::query_string::QueryMap;

pub(super) fn routes() -> Vec<Route> {
    vec![
        documented!(flamegraph),
        documented!(trace_flamegraph),
        querier!(
            "SelectMergeStacktraces",
            endpoints::flamegraph::select_merge_stacktraces
        ),
        querier!(
            "SelectMergeSpanProfile",
            endpoints::flamegraph::select_merge_span_profile
        ),
        querier!("SelectMergeProfile", endpoints::export::select_merge_profile),
    ]
}

/// The call tree of the selected samples, values summed per call path.
#[utoipa::path(
    get,
    path = "/api/v1/flamegraph",
    tag = "query",
    params(TenantHeader, ScopeParams, TraceIdParams, GroupByParams, TreeParams, FrameParams),
    responses(
        (status = 200, description = "The flamegraph in the requested format", content(
            (FlamegraphBody = "application/json"),
            (String = "text/plain"),
            ("application/octet-stream"),
        )),
    )
)]
pub(crate) async fn flamegraph(
    State(state): State<AppState>,
    ReadCall { tenant, q }: ReadCall,
) -> Result<Response, ApiError> {
    let trace_ids = TraceIdParams::from_query(&q)?.trace_id;
    flamegraph_response(&state, tenant, &q, trace_ids).await
}

#[utoipa::path(
    get,
    path = "/api/v1/traces/{trace_id}/flamegraph",
    tag = "query",
    params(
        ("trace_id" = String, Path, description = "Trace id, 32 hex characters"),
        TenantHeader, ScopeParams, GroupByParams, TreeParams, FrameParams,
    ),
    responses(
        (status = 200, description = "The trace's flamegraph in the requested format", content(
            (FlamegraphBody = "application/json"),
            (String = "text/plain"),
            ("application/octet-stream"),
        )),
    )
)]
pub(crate) async fn trace_flamegraph(
    State(state): State<AppState>,
    Path(trace_id): Path<String>,
    ReadCall { tenant, q }: ReadCall,
) -> Result<Response, ApiError> {
    flamegraph_response(&state, tenant, &q, vec![trace_id]).await
}

/// A flamegraph read of these trace ids (hex) answered in any format; pprof exports the
/// samples untruncated.
async fn flamegraph_response(
    state: &AppState,
    tenant: String,
    q: &QueryMap,
    trace_ids: Vec<String>,
) -> Result<Response, ApiError> {
    let scope = ScopeParams::from_query(q)?;
    let group = GroupByParams::from_query(q)?;
    let tree = TreeParams::from_query(q)?;
    let frames = FrameParams::from_query(q)?;
    let format = tree.format()?;
    let request = FlamegraphRequest {
        group_by: group.group_by()?,
        max_nodes: tree.asked_max_nodes()?,
        output: tree.output()?,
        scope: scope.request(tenant, trace_ids, frames),
    };
    Ok(match state.engine.read_flamegraph(&request).await? {
        TreeAnswer::Pprof(profile) => pprof(&profile),
        // Written while the tree is cut: the same bytes as serializing the flamegraph.
        TreeAnswer::Json(flamegraph) => {
            let headers = scan_headers(flamegraph.stats());
            let body = (
                [(header::CONTENT_TYPE, HeaderValue::from_static(JSON_CONTENT_TYPE))],
                flamegraph.to_json(),
            );
            (headers, body).into_response()
        }
        TreeAnswer::Tree(flamegraph) => {
            let headers = scan_headers(flamegraph.stats.as_ref());
            (headers, rendered(format, |r| r.flamegraph(&flamegraph))?).into_response()
        }
    })
}
