//! `GET /api/v1/flamegraph`.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use stackhouse_query::FlamegraphQuery;

use super::params::{
    GroupByParams, QueryMap, ScopeParams, TenantHeader, TraceIdParams, TreeParams, tenant_of,
};
use super::{AppState, FlamegraphBody, flamegraph_response};
use crate::error::ApiError;

/// The call tree of the selected samples, values summed per call path.
#[utoipa::path(
    get,
    path = "/api/v1/flamegraph",
    tag = "query",
    params(TenantHeader, ScopeParams, TraceIdParams, GroupByParams, TreeParams),
    responses(
        (status = 200, description = "The flamegraph in the requested format", content(
            (FlamegraphBody = "application/json"),
            (String = "text/plain"),
            ("application/octet-stream"),
        )),
    )
)]
pub async fn flamegraph(
    State(state): State<AppState>,
    headers: HeaderMap,
    q: QueryMap,
) -> Result<Response, ApiError> {
    let tenant = tenant_of(&headers)?;
    let scope_params = ScopeParams::from_query(&q)?;
    let trace = TraceIdParams::from_query(&q)?;
    let group = GroupByParams::from_query(&q)?;
    let tree = TreeParams::from_query(&q)?;

    let trace_ids = trace.trace_ids()?;
    let group_by = group.group_by()?;
    let max_nodes = tree.max_nodes(&state.engine)?;
    let format = tree.format()?;
    let scope = scope_params.scope(&state, &tenant, trace_ids).await?;
    let query = FlamegraphQuery {
        scope,
        group_by,
        max_nodes,
    };
    flamegraph_response(&state, format, &query).await
}
