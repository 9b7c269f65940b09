//! The query API: profile types, labels, flamegraphs, stats.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use stackhouse_query::engine::FlamegraphQuery;
use stackhouse_query::selector::parse_selector;
use stackhouse_storage::model::{ProfileType, TimeRange};

use super::AppState;
use crate::error::ApiError;
use crate::tenant;
use crate::time_param::{now_nanos, parse_range};

const DEFAULT_MAX_NODES: usize = 8192;

#[derive(Debug, Deserialize)]
pub struct RangeParams {
    from: Option<String>,
    to: Option<String>,
}

impl RangeParams {
    fn range(&self) -> Result<TimeRange, ApiError> {
        parse_range(self.from.as_deref(), self.to.as_deref(), now_nanos()).map_err(ApiError::bad_request)
    }
}

fn tenant_of(headers: &HeaderMap) -> Result<String, ApiError> {
    tenant::parse(headers.get(tenant::HEADER).map(|v| v.as_bytes())).map_err(ApiError::bad_request)
}

fn profile_type_json(t: &ProfileType) -> Value {
    json!({
        "id": t.id(),
        "sample_type": t.sample_type,
        "sample_unit": t.sample_unit,
        "period_type": t.period_type,
        "period_unit": t.period_unit,
    })
}

pub async fn profile_types(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(params): Query<RangeParams>,
) -> Result<Json<Value>, ApiError> {
    let tenant = tenant_of(&headers)?;
    let types = state.catalog.profile_types(&tenant, params.range()?).await?;
    Ok(Json(
        json!({ "profile_types": types.iter().map(profile_type_json).collect::<Vec<_>>() }),
    ))
}

pub async fn label_names(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(params): Query<RangeParams>,
) -> Result<Json<Value>, ApiError> {
    let tenant = tenant_of(&headers)?;
    let names = state.catalog.label_names(&tenant, params.range()?).await?;
    Ok(Json(json!({ "names": names })))
}

pub async fn label_values(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(name): Path<String>,
    Query(params): Query<RangeParams>,
) -> Result<Json<Value>, ApiError> {
    let tenant = tenant_of(&headers)?;
    let values = state
        .catalog
        .label_values(&tenant, &name, params.range()?)
        .await?;
    Ok(Json(json!({ "name": name, "values": values })))
}

#[derive(Debug, Deserialize)]
pub struct FlamegraphParams {
    profile_type: Option<String>,
    selector: Option<String>,
    from: Option<String>,
    to: Option<String>,
    max_nodes: Option<String>,
    format: Option<String>,
}

enum Format {
    Json,
    Folded,
}

pub async fn flamegraph(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(params): Query<FlamegraphParams>,
) -> Result<Response, ApiError> {
    let tenant = tenant_of(&headers)?;
    let range = parse_range(params.from.as_deref(), params.to.as_deref(), now_nanos())
        .map_err(ApiError::bad_request)?;
    let type_id = params
        .profile_type
        .as_deref()
        .ok_or_else(|| ApiError::bad_request("missing parameter profile_type (see /api/v1/profile-types)"))?;
    let profile_type = ProfileType::parse(type_id).ok_or_else(|| {
        ApiError::bad_request(format!(
            "invalid profile_type {type_id:?}: expected sample_type:sample_unit:period_type:period_unit"
        ))
    })?;
    let known = state.catalog.profile_types(&tenant, TimeRange::ALL).await?;
    if !known.contains(&profile_type) {
        let ids: Vec<String> = known.iter().map(ProfileType::id).collect();
        return Err(ApiError::bad_request(format!(
            "unknown profile_type {type_id:?}; stored types: {}",
            if ids.is_empty() {
                "none".to_string()
            } else {
                ids.join(", ")
            }
        )));
    }
    let selector = parse_selector(params.selector.as_deref().unwrap_or(""))
        .map_err(|e| ApiError::bad_request(format!("invalid selector: {e}")))?;
    let max_nodes = match params.max_nodes.as_deref() {
        None => DEFAULT_MAX_NODES,
        Some(v) => v.parse::<usize>().ok().filter(|n| *n >= 1).ok_or_else(|| {
            ApiError::bad_request(format!("invalid max_nodes {v:?}: expected a positive integer"))
        })?,
    };
    let format = match params.format.as_deref().unwrap_or("json") {
        "json" => Format::Json,
        "folded" => Format::Folded,
        other => {
            return Err(ApiError::bad_request(format!(
                "invalid format {other:?}: expected json or folded"
            )));
        }
    };
    let query = FlamegraphQuery {
        tenant,
        profile_type,
        selector,
        range,
        max_nodes,
    };
    let graph = state.engine.flamegraph(&query).await.map_err(query_error)?;
    Ok(match format {
        Format::Json => Json(graph).into_response(),
        Format::Folded => (
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            stackhouse_query::folded(&graph),
        )
            .into_response(),
    })
}

fn query_error(e: stackhouse_query::QueryError) -> ApiError {
    if e.is_client_error() {
        ApiError::bad_request(e.to_string())
    } else {
        ApiError::internal(e)
    }
}

pub async fn stats(State(state): State<AppState>, headers: HeaderMap) -> Result<Json<Value>, ApiError> {
    let tenant = tenant_of(&headers)?;
    let stats = state.catalog.stats(&tenant).await?;
    Ok(Json(serde_json::to_value(stats).map_err(ApiError::internal)?))
}
