//! `GET /api/v1/profiles/{profile_id}`.

use axum::extract::{Path, State};
use axum::response::Response;
use stackhouse_query::endpoints::profile::ProfileRequest;
use stackhouse_query::request::TreeAnswer;

use super::call::ReadCall;
use super::encode::{ProfileBody, json, pprof, rendered};
use super::params::{FrameParams, ProfileTypeParams, TenantHeader, TreeParams};
use crate::error::ApiError;
use crate::route::{Route, documented};
use crate::state::AppState;

pub(super) fn routes() -> Vec<Route> {
    vec![documented!(profile)]
}

/// One stored profile: its metadata and flamegraph (JSON), or the flamegraph alone in the
/// other formats.
#[utoipa::path(
    get,
    path = "/api/v1/profiles/{profile_id}",
    tag = "query",
    params(
        ("profile_id" = String, Path, description = "Profile id, 32 hex characters"),
        TenantHeader, ProfileTypeParams, TreeParams, FrameParams,
    ),
    responses(
        (status = 200, description = "The profile in the requested format", content(
            (ProfileBody = "application/json"),
            (String = "text/plain"),
            ("application/octet-stream"),
        )),
    )
)]
pub(crate) async fn profile(
    State(state): State<AppState>,
    Path(profile_id): Path<String>,
    ReadCall { tenant, q }: ReadCall,
) -> Result<Response, ApiError> {
    let type_params = ProfileTypeParams::from_query(&q)?;
    let tree = TreeParams::from_query(&q)?;
    let frames = FrameParams::from_query(&q)?;
    let format = tree.format()?;
    let request = ProfileRequest {
        tenant,
        profile_id,
        profile_type: type_params.profile_type,
        max_nodes: tree.asked_max_nodes()?,
        output: tree.output()?,
        frames: frames.request(),
    };
    Ok(match state.engine.read_profile(&request).await? {
        TreeAnswer::Pprof(profile) => pprof(&profile),
        TreeAnswer::Json(detail) => json(ProfileBody::Profile(Box::new(detail))),
        TreeAnswer::Tree(flamegraph) => rendered(format, |r| r.flamegraph(&flamegraph))?,
    })
}
