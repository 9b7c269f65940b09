//! `GET /api/v1/timeseries`.

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use stackhouse_query::Timeseries;
use stackhouse_query::endpoints;
use stackhouse_query::endpoints::timeseries::TimeseriesRequest;

use super::call::ReadCall;
use super::connect::querier;
use super::encode::scan_headers;
use super::params::{FrameParams, ScopeParams, TenantHeader, TimeseriesParams, TraceIdParams};
use crate::error::ApiError;
use crate::route::{Route, documented};
use crate::state::AppState;

pub(super) fn routes() -> Vec<Route> {
    vec![
        documented!(timeseries),
        querier!("SelectSeries", endpoints::timeseries::select_series),
        querier!("SelectHeatmap", endpoints::heatmap::select_heatmap),
    ]
}

/// Values of the selected samples bucketed by `step`, one series per group.
#[utoipa::path(
    get,
    path = "/api/v1/timeseries",
    tag = "query",
    params(TenantHeader, ScopeParams, TraceIdParams, TimeseriesParams, FrameParams),
    responses(
        (status = 200, description = "The series", body = Timeseries),
    )
)]
pub(crate) async fn timeseries(
    State(state): State<AppState>,
    ReadCall { tenant, q }: ReadCall,
) -> Result<(HeaderMap, Json<Timeseries>), ApiError> {
    let scope = ScopeParams::from_query(&q)?;
    let trace = TraceIdParams::from_query(&q)?;
    let series = TimeseriesParams::from_query(&q)?;
    let frames = FrameParams::from_query(&q)?;
    let request = TimeseriesRequest {
        group_by: series.group_by()?,
        aggregation: series.aggregation()?,
        step_nanos: series.step_nanos()?,
        scope: scope.request(tenant, trace.trace_id, frames),
    };
    let timeseries = state.engine.read_timeseries(&request).await?;
    Ok((scan_headers(timeseries.stats.as_ref()), Json(timeseries)))
}
