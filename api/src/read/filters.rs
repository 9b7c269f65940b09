//! `GET /api/v1/filter-presets`: the named sets of frame rules a read's `preset=` takes.

use axum::Json;
use serde::Serialize;
use stackhouse_query::frames::presets::{Preset, presets};
use utoipa::ToSchema;

use super::call::ReadCall;
use super::params::TenantHeader;
use crate::error::ApiError;
use crate::route::{Route, documented};

pub(super) fn routes() -> Vec<Route> {
    vec![documented!(filter_presets)]
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct FilterPresets {
    pub presets: Vec<Preset>,
}

/// The filter presets, each with its rules.
#[utoipa::path(
    get,
    path = "/api/v1/filter-presets",
    tag = "query",
    params(TenantHeader),
    responses(
        (status = 200, description = "The presets", body = FilterPresets),
    )
)]
pub(crate) async fn filter_presets(_: ReadCall) -> Result<Json<FilterPresets>, ApiError> {
    Ok(Json(FilterPresets { presets: presets() }))
}
