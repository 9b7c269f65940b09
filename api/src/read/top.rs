//! `GET /api/v1/top`.

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::{MethodRouter, get};
use stackhouse_query::Top;
use stackhouse_query::request::TopRequest;

use super::params::{ScopeParams, TenantHeader, TopParams, TraceIdParams, tenant_of};
use crate::error::ApiError;
use crate::state::AppState;
use crate::wire::query_string::QueryMap;

pub(super) fn routes() -> Vec<(&'static str, MethodRouter<AppState>)> {
    vec![("/api/v1/top", get(top))]
}

/// Functions of the selected samples by self value.
#[utoipa::path(
    get,
    path = "/api/v1/top",
    tag = "query",
    params(TenantHeader, ScopeParams, TraceIdParams, TopParams),
    responses(
        (status = 200, description = "The top table", body = Top),
    )
)]
pub(crate) async fn top(
    State(state): State<AppState>,
    headers: HeaderMap,
    q: QueryMap,
) -> Result<Json<Top>, ApiError> {
    let tenant = tenant_of(&headers)?;
    let scope = ScopeParams::from_query(&q)?;
    let trace = TraceIdParams::from_query(&q)?;
    let top = TopParams::from_query(&q)?;
    let request = TopRequest {
        limit: top.limit()?,
        scope: scope.request(tenant, trace.trace_id),
    };
    Ok(Json(state.engine.read_top(&request).await?))
}
