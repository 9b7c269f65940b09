//! `GET /api/v1/timeseries`.

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use stackhouse_query::{Timeseries, TimeseriesQuery};

use super::AppState;
use super::params::{
    QueryMap, ScopeParams, TenantHeader, TimeseriesParams, TraceIdParams, default_step_nanos, tenant_of,
};
use crate::error::ApiError;

/// Values of the selected samples bucketed by `step`, one series per group.
#[utoipa::path(
    get,
    path = "/api/v1/timeseries",
    tag = "query",
    params(TenantHeader, ScopeParams, TraceIdParams, TimeseriesParams),
    responses(
        (status = 200, description = "The series", body = Timeseries),
    )
)]
pub async fn timeseries(
    State(state): State<AppState>,
    headers: HeaderMap,
    q: QueryMap,
) -> Result<(HeaderMap, Json<Timeseries>), ApiError> {
    let tenant = tenant_of(&headers)?;
    let scope_params = ScopeParams::from_query(&q)?;
    let trace = TraceIdParams::from_query(&q)?;
    let series = TimeseriesParams::from_query(&q)?;

    let trace_ids = trace.trace_ids()?;
    let group_by = series.group_by()?;
    let aggregation = series.aggregation()?;
    let step_nanos = series.step_nanos()?;
    let scope = scope_params.scope(&state, &tenant, trace_ids).await?;
    let step_nanos = step_nanos.unwrap_or_else(|| default_step_nanos(scope.range));
    let query = TimeseriesQuery {
        scope,
        step_nanos,
        group_by,
        aggregation,
    };
    let timeseries = state.engine.timeseries(&query).await?;
    Ok((super::scan_headers(timeseries.stats.as_ref()), Json(timeseries)))
}
