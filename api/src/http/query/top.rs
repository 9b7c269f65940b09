//! `GET /api/v1/top`.

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use stackhouse_query::{Top, TopQuery};

use super::AppState;
use super::params::{QueryMap, ScopeParams, TenantHeader, TopParams, TraceIdParams, tenant_of};
use crate::error::ApiError;

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
pub async fn top(
    State(state): State<AppState>,
    headers: HeaderMap,
    q: QueryMap,
) -> Result<Json<Top>, ApiError> {
    let tenant = tenant_of(&headers)?;
    let scope_params = ScopeParams::from_query(&q)?;
    let trace = TraceIdParams::from_query(&q)?;
    let top = TopParams::from_query(&q)?;

    let trace_ids = trace.trace_ids()?;
    let limit = top.limit()?;
    let scope = scope_params.scope(&state, &tenant, trace_ids).await?;
    Ok(Json(state.engine.top(&TopQuery { scope, limit }).await?))
}
