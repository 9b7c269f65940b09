//! `GET /api/v1/top`.

use axum::Json;
use axum::extract::State;
use stackhouse_query::Top;
use stackhouse_query::endpoints::top::TopRequest;

use super::call::ReadCall;
use super::params::{FrameParams, ScopeParams, TenantHeader, TopParams, TraceIdParams};
use crate::error::ApiError;
use crate::route::{Route, documented};
use crate::state::AppState;

pub(super) fn routes() -> Vec<Route> {
    vec![documented!(top)]
}

/// Functions of the selected samples by self value.
#[utoipa::path(
    get,
    path = "/api/v1/top",
    tag = "query",
    params(TenantHeader, ScopeParams, TraceIdParams, TopParams, FrameParams),
    responses(
        (status = 200, description = "The top table", body = Top),
    )
)]
pub(crate) async fn top(
    State(state): State<AppState>,
    ReadCall { tenant, q }: ReadCall,
) -> Result<Json<Top>, ApiError> {
    let scope = ScopeParams::from_query(&q)?;
    let trace = TraceIdParams::from_query(&q)?;
    let top = TopParams::from_query(&q)?;
    let frames = FrameParams::from_query(&q)?;
    let request = TopRequest {
        limit: top.limit()?,
        scope: scope.request(tenant, trace.trace_id, frames),
    };
    Ok(Json(state.engine.read_top(&request).await?))
}
