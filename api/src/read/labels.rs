//! Catalog listings: profile types, label names and values, storage stats; the engine
//! runs them as it runs data queries.

use std::collections::{BTreeMap, BTreeSet};

use axum::Json;
use axum::extract::{Path, State};
use serde::Serialize;
use stackhouse_query::endpoints;
use stackhouse_storage::catalog::{CatalogStats, TableStats};
use stackhouse_storage::model::{ProfileType, Series};
use stackhouse_storage::selector::Selector;
use utoipa::ToSchema;

use super::call::ReadCall;
use super::connect::querier;
use super::params::{RangeParams, TenantHeader};
use crate::error::ApiError;
use crate::route::{Route, documented};
use crate::state::AppState;

pub(super) fn routes() -> Vec<Route> {
    vec![
        documented!(profile_types),
        documented!(label_names),
        documented!(label_values),
        documented!(stats),
        documented!(usage),
        querier!("ProfileTypes", endpoints::profile_types::profile_types),
        querier!("LabelNames", endpoints::labels::label_names),
        querier!("LabelValues", endpoints::labels::label_values),
        querier!("Series", endpoints::series::series),
        querier!("GetProfileStats", endpoints::stats::get_profile_stats),
        querier!("AnalyzeQuery", endpoints::stats::analyze_query),
    ]
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ProfileTypes {
    pub profile_types: Vec<ProfileTypeEntry>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ProfileTypeEntry {
    /// `sample_type:sample_unit:period_type:period_unit`, the `profile_type` parameter.
    pub id: String,
    pub sample_type: String,
    pub sample_unit: String,
    pub period_type: String,
    pub period_unit: String,
    /// The distinct sampling periods (in `period_unit`) of this type's series in the
    /// range, as last sent by each source.
    pub periods: Vec<i64>,
    /// For counted CPU samples (`samples:count:cpu:nanoseconds`): the type Grafana's API
    /// (`/querier.v1.QuerierService/*`, `/pyroscope/render`) serves them as, each sample
    /// worth its series' period in `period_unit`. Here the stored counts are served.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_type: Option<String>,
}

impl ProfileTypeEntry {
    fn new(t: &ProfileType, series: &[Series]) -> Self {
        let periods: BTreeSet<i64> = series
            .iter()
            .filter(|s| &s.profile_type == t)
            .map(|s| s.period)
            .collect();
        ProfileTypeEntry {
            id: t.id(),
            sample_type: t.sample_type.clone(),
            sample_unit: t.sample_unit.clone(),
            period_type: t.period_type.clone(),
            period_unit: t.period_unit.clone(),
            periods: periods.into_iter().collect(),
            time_type: t.in_time().map(|t| t.id()),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct LabelNames {
    /// Sorted resource, scope, profile and sample attribute keys.
    pub names: Vec<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct LabelValues {
    pub name: String,
    /// Sorted.
    pub values: Vec<String>,
}

/// What a tenant has stored.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Stats {
    pub segments: u64,
    pub series: u64,
    /// Per table kind (`samples`, `stacks`, `locations`, …).
    pub tables: BTreeMap<String, TableStatsBody>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct TableStatsBody {
    pub objects: u64,
    pub rows: u64,
    pub bytes: u64,
}

impl From<CatalogStats> for Stats {
    fn from(stats: CatalogStats) -> Self {
        // Destructured without `..`, so a field added to the catalog's stats fails to
        // compile here instead of silently missing from the API and its schema.
        let CatalogStats {
            segments,
            series,
            tables,
        } = stats;
        Stats {
            segments,
            series,
            tables: tables
                .into_iter()
                .map(|(kind, t)| {
                    let TableStats { objects, rows, bytes } = t;
                    (kind, TableStatsBody { objects, rows, bytes })
                })
                .collect(),
        }
    }
}

/// Profile types with samples in the range.
#[utoipa::path(
    get,
    path = "/api/v1/profile-types",
    tag = "catalog",
    params(TenantHeader, RangeParams),
    responses(
        (status = 200, description = "The profile types", body = ProfileTypes),
    )
)]
pub(crate) async fn profile_types(
    State(state): State<AppState>,
    ReadCall { tenant, q }: ReadCall,
) -> Result<Json<ProfileTypes>, ApiError> {
    let request = RangeParams::from_query(&q)?.request(tenant);
    let (types, series) = state.engine.read_profile_types(&request).await?;
    Ok(Json(ProfileTypes {
        profile_types: types.iter().map(|t| ProfileTypeEntry::new(t, &series)).collect(),
    }))
}

/// Label names (series labels and sample attribute keys) with samples in the range.
#[utoipa::path(
    get,
    path = "/api/v1/labels",
    tag = "catalog",
    params(TenantHeader, RangeParams),
    responses(
        (status = 200, description = "The label names", body = LabelNames),
    )
)]
pub(crate) async fn label_names(
    State(state): State<AppState>,
    ReadCall { tenant, q }: ReadCall,
) -> Result<Json<LabelNames>, ApiError> {
    let request = RangeParams::from_query(&q)?.request(tenant);
    let names = state.engine.read_label_names(&request).await?;
    Ok(Json(LabelNames { names }))
}

/// Values of one label with samples in the range.
#[utoipa::path(
    get,
    path = "/api/v1/labels/{name}/values",
    tag = "catalog",
    params(("name" = String, Path, description = "Label name"), TenantHeader, RangeParams),
    responses(
        (status = 200, description = "The label's values", body = LabelValues),
    )
)]
pub(crate) async fn label_values(
    State(state): State<AppState>,
    Path(name): Path<String>,
    ReadCall { tenant, q }: ReadCall,
) -> Result<Json<LabelValues>, ApiError> {
    let request = RangeParams::from_query(&q)?.request(tenant);
    let values = state.engine.read_label_values(&request, &name).await?;
    Ok(Json(LabelValues { name, values }))
}

/// The tenant's segments, series, and per-table objects, rows and bytes.
#[utoipa::path(
    get,
    path = "/api/v1/stats",
    tag = "catalog",
    params(TenantHeader),
    responses(
        (status = 200, description = "Storage totals", body = Stats),
    )
)]
pub(crate) async fn stats(
    State(state): State<AppState>,
    ReadCall { tenant, .. }: ReadCall,
) -> Result<Json<Stats>, ApiError> {
    Ok(Json(Stats::from(state.engine.stats(&tenant).await?)))
}

/// One usage group's stored series, samples and bytes in the range.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct GroupUsageBody {
    pub series: u64,
    pub samples: u64,
    /// Bytes of the segments holding its samples, shared out by samples.
    pub bytes: u64,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Usage {
    /// Per usage group of the tenant (`--usage-groups`), and `other` for the series no
    /// group selects.
    pub groups: BTreeMap<String, GroupUsageBody>,
}

/// What each usage group of the tenant stores in the range, from the catalog: a segment
/// overlapping the range counts whole; its objects' bytes are shared out among its series
/// by samples (symbol tables are not).
#[utoipa::path(
    get,
    path = "/api/v1/usage",
    tag = "catalog",
    params(TenantHeader, RangeParams),
    responses(
        (status = 200, description = "Stored data per usage group", body = Usage),
    )
)]
pub(crate) async fn usage(
    State(state): State<AppState>,
    ReadCall { tenant, q }: ReadCall,
) -> Result<Json<Usage>, ApiError> {
    let groups = state.pipeline.usage_groups(&tenant);
    let selectors: Vec<(String, Selector)> = groups
        .groups()
        .iter()
        .map(|g| (g.name.clone(), g.selector.clone()))
        .collect();
    let request = RangeParams::from_query(&q)?.request(tenant);
    let usage = state.engine.read_usage(&request, &selectors).await?;
    Ok(Json(Usage {
        groups: usage
            .into_iter()
            .map(|(name, g)| {
                let endpoints::usage::GroupUsage {
                    series,
                    samples,
                    bytes,
                } = g;
                (
                    name,
                    GroupUsageBody {
                        series,
                        samples,
                        bytes,
                    },
                )
            })
            .collect(),
    }))
}
