//! `GET /api/v1/events`.

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use stackhouse_query::{EventsPage, EventsQuery};

use super::AppState;
use super::params::{EventsParams, QueryMap, ScopeParams, TenantHeader, TraceIdParams, tenant_of};
use crate::error::ApiError;

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
pub async fn events(
    State(state): State<AppState>,
    headers: HeaderMap,
    q: QueryMap,
) -> Result<Json<EventsPage>, ApiError> {
    let tenant = tenant_of(&headers)?;
    let scope_params = ScopeParams::from_query(&q)?;
    let trace = TraceIdParams::from_query(&q)?;
    let page = EventsParams::from_query(&q)?;

    let trace_ids = trace.trace_ids()?;
    let limit = page.limit(&state.engine)?;
    let scope = scope_params.scope(&state, &tenant, trace_ids).await?;
    let query = EventsQuery {
        scope,
        limit,
        cursor: page.cursor,
    };
    Ok(Json(state.engine.events(&query).await?))
}
