//! `GET /api/v1/traces/{trace_id}/flamegraph`.

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use stackhouse_query::FlamegraphQuery;

use super::params::{GroupByParams, QueryMap, ScopeParams, TenantHeader, TreeParams, hex_id, tenant_of};
use super::{AppState, FlamegraphBody, flamegraph_response};
use crate::error::ApiError;

/// The flamegraph of the samples linked to one trace; `group_by=span_id` splits it by span.
#[utoipa::path(
    get,
    path = "/api/v1/traces/{trace_id}/flamegraph",
    tag = "query",
    params(
        ("trace_id" = String, Path, description = "Trace id, 32 hex characters"),
        TenantHeader, ScopeParams, GroupByParams, TreeParams,
    ),
    responses(
        (status = 200, description = "The trace's flamegraph in the requested format", content(
            (FlamegraphBody = "application/json"),
            (String = "text/plain"),
            ("application/octet-stream"),
        )),
    )
)]
pub async fn trace_flamegraph(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(trace_id): Path<String>,
    q: QueryMap,
) -> Result<Response, ApiError> {
    let tenant = tenant_of(&headers)?;
    let scope_params = ScopeParams::from_query(&q)?;
    let group = GroupByParams::from_query(&q)?;
    let tree = TreeParams::from_query(&q)?;

    let trace_id = hex_id::<16>("trace_id", &trace_id)?;
    let group_by = group.group_by()?;
    let max_nodes = tree.max_nodes(&state.engine)?;
    let format = tree.format()?;
    let scope = scope_params.scope(&state, &tenant, vec![trace_id]).await?;
    let query = FlamegraphQuery {
        scope,
        group_by,
        max_nodes,
    };
    flamegraph_response(&state, format, &query).await
}
