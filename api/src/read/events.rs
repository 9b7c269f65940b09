//! `GET /api/v1/events`.

use axum::Json;
use axum::extract::State;
use stackhouse_query::EventsPage;
use stackhouse_query::endpoints::events::EventsRequest;

use super::call::ReadCall;
use super::params::{EventsParams, FrameParams, ScopeParams, TenantHeader, TraceIdParams};
use crate::error::ApiError;
use crate::route::{Route, documented};
use crate::state::AppState;

pub(super) fn routes() -> Vec<Route> {
    vec![documented!(events)]
}

/// Individual samples in time order, one page at a time.
#[utoipa::path(
    get,
    path = "/api/v1/events",
    tag = "query",
    params(TenantHeader, ScopeParams, TraceIdParams, EventsParams),
    responses(
        (status = 200, description = "One page of events; `next_cursor` is absent on the last page", body = EventsPage),
    )
)]
pub(crate) async fn events(
    State(state): State<AppState>,
    ReadCall { tenant, q }: ReadCall,
) -> Result<Json<EventsPage>, ApiError> {
    let scope = ScopeParams::from_query(&q)?;
    let trace = TraceIdParams::from_query(&q)?;
    let page = EventsParams::from_query(&q)?;
    let request = EventsRequest {
        limit: page.asked_limit()?,
        cursor: page.cursor,
        scope: scope.request(tenant, trace.trace_id, FrameParams::default()),
    };
    Ok(Json(state.engine.read_events(&request).await?))
}
