//! `GET /api/v1/profiles/{profile_id}`.

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use stackhouse_query::render::flamebearer::flamebearer;
use stackhouse_query::{FlamegraphQuery, PprofQuery, ProfileDetail};

use super::params::{Format, ProfileTypeParams, QueryMap, TenantHeader, TreeParams, hex_id, tenant_of};
use super::{AppState, ProfileBody, folded, json, pprof};
use crate::error::ApiError;

/// One stored profile: its metadata and flamegraph (JSON), or the flamegraph alone in the
/// other formats.
#[utoipa::path(
    get,
    path = "/api/v1/profiles/{profile_id}",
    tag = "query",
    params(
        ("profile_id" = String, Path, description = "Profile id, 32 hex characters"),
        TenantHeader, ProfileTypeParams, TreeParams,
    ),
    responses(
        (status = 200, description = "The profile in the requested format", content(
            (ProfileBody = "application/json"),
            (String = "text/plain"),
            ("application/octet-stream"),
        )),
    )
)]
pub async fn profile(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(profile_id): Path<String>,
    q: QueryMap,
) -> Result<Response, ApiError> {
    let tenant = tenant_of(&headers)?;
    let type_params = ProfileTypeParams::from_query(&q)?;
    let tree = TreeParams::from_query(&q)?;

    let profile_id = hex_id::<16>("profile_id", &profile_id)?;
    let profile_type = type_params.profile_type()?;
    let max_nodes = tree.max_nodes(&state.engine)?;
    let format = tree.format()?;
    let (meta, scope) = state
        .engine
        .find_profile(&tenant, profile_id, profile_type.as_ref())
        .await?;
    let engine = &state.engine;
    let graph = |scope| async move {
        let query = FlamegraphQuery {
            scope,
            group_by: Vec::new(),
            max_nodes,
        };
        engine.flamegraph(&query).await
    };
    Ok(match format {
        Format::Pprof => return pprof(&state, &PprofQuery::Scope(scope)).await,
        Format::Json => json(ProfileBody::Profile(Box::new(ProfileDetail {
            meta,
            flamegraph: graph(scope).await?,
        }))),
        Format::Folded => folded(stackhouse_query::folded(&graph(scope).await?)),
        Format::Flamebearer => json(ProfileBody::Flamebearer(flamebearer(&graph(scope).await?))),
    })
}
