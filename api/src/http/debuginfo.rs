//! `/api/v1/debuginfo`: a tenant's debug files (ELF with DWARF or a symbol table), by GNU
//! build id, which name native frames at query time.

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use serde::Serialize;
use stackhouse_query::debuginfo::DebugInfoError;
use stackhouse_storage::catalog;
use utoipa::ToSchema;

use crate::error::ApiError;
use crate::read::params::{TenantHeader, tenant_of};
use crate::route::{Route, documented};
use crate::state::AppState;
use crate::wire::body::{inflate, read_limited};
use crate::wire::query_string::QueryMap;

pub(super) fn routes() -> Vec<Route> {
    vec![documented!(list), documented!(put, get, delete)]
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DebugFiles {
    /// Sorted by build id.
    pub files: Vec<DebugFileEntry>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DebugFileEntry {
    /// GNU build id, lowercase hex.
    pub build_id: String,
    /// The `name` it was uploaded with; may be empty.
    pub file_name: String,
    pub size_bytes: i64,
    /// Milliseconds since the Unix epoch.
    pub uploaded_at_millis: i64,
}

impl From<catalog::DebugFile> for DebugFileEntry {
    fn from(f: catalog::DebugFile) -> Self {
        DebugFileEntry {
            build_id: f.build_id,
            file_name: f.file_name,
            size_bytes: f.size_bytes,
            uploaded_at_millis: f.uploaded_at_millis,
        }
    }
}

impl From<DebugInfoError> for ApiError {
    fn from(e: DebugInfoError) -> Self {
        match e {
            DebugInfoError::InvalidBuildId(_) | DebugInfoError::Invalid(_) => ApiError::invalid(e),
            DebugInfoError::TooLarge { .. } => ApiError::too_large(e),
            DebugInfoError::Catalog(e) => e.into(),
            DebugInfoError::Store(e) if e.is_transient() => ApiError::unavailable(format!("storage: {e}")),
            DebugInfoError::Store(e) => ApiError::internal(format!("storage: {e}")),
        }
    }
}

fn no_debug_file(build_id: &str) -> ApiError {
    ApiError::not_found(format!("no debug file with build id {build_id}"))
}

/// Every debug file of the tenant.
#[utoipa::path(
    get,
    path = "/api/v1/debuginfo",
    tag = "debuginfo",
    params(TenantHeader),
    responses((status = 200, description = "The tenant's debug files", body = DebugFiles))
)]
pub async fn list(State(state): State<AppState>, headers: HeaderMap) -> Result<Json<DebugFiles>, ApiError> {
    let tenant = tenant_of(&headers)?;
    let files = state.engine.debuginfo().list(&tenant).await?;
    Ok(Json(DebugFiles {
        files: files.into_iter().map(DebugFileEntry::from).collect(),
    }))
}

/// The debug file of a build id.
#[utoipa::path(
    get,
    path = "/api/v1/debuginfo/{build_id}",
    tag = "debuginfo",
    params(TenantHeader, ("build_id" = String, Path, description = "GNU build id, hex")),
    responses((status = 200, description = "The debug file's entry", body = DebugFileEntry))
)]
pub async fn get(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(build_id): Path<String>,
) -> Result<Json<DebugFileEntry>, ApiError> {
    let tenant = tenant_of(&headers)?;
    match state.engine.debuginfo().get(&tenant, &build_id).await? {
        Some(file) => Ok(Json(file.into())),
        None => Err(no_debug_file(&build_id)),
    }
}

/// Uploads (or replaces) the debug file of a build id: the body is the ELF file, plain or
/// with `Content-Encoding: gzip`; its GNU build id must be the one in the path.
#[utoipa::path(
    put,
    path = "/api/v1/debuginfo/{build_id}",
    tag = "debuginfo",
    params(
        TenantHeader,
        ("build_id" = String, Path, description = "GNU build id, hex"),
        ("name" = Option<String>, Query, description = "File name shown in listings"),
    ),
    request_body(content = Vec<u8>, content_type = "application/octet-stream"),
    responses(
        (status = 201, description = "Stored", body = DebugFileEntry),
        (status = 400, description = "Not an ELF file, or its build id differs", body = crate::error::ErrorBody),
        (status = 413, description = "Over `--debuginfo-max-file-bytes`", body = crate::error::ErrorBody),
    )
)]
pub async fn put(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(build_id): Path<String>,
    q: QueryMap,
    body: Body,
) -> Result<(StatusCode, Json<DebugFileEntry>), ApiError> {
    let tenant = tenant_of(&headers)?;
    let debuginfo = state.engine.debuginfo();
    let limit = debuginfo.max_file_bytes();
    let raw = read_limited(body, limit).await?;
    let bytes = match inflate(&raw, &headers, None, limit)? {
        std::borrow::Cow::Borrowed(_) => raw,
        std::borrow::Cow::Owned(inflated) => inflated.into(),
    };
    let name = q.one("name")?.unwrap_or_default();
    let file = debuginfo.upload(&tenant, &build_id, &name, bytes).await?;
    tracing::info!(%tenant, build_id = %file.build_id, bytes = file.size_bytes, "debug file stored");
    Ok((StatusCode::CREATED, Json(file.into())))
}

/// Deletes the debug file of a build id.
#[utoipa::path(
    delete,
    path = "/api/v1/debuginfo/{build_id}",
    tag = "debuginfo",
    params(TenantHeader, ("build_id" = String, Path, description = "GNU build id, hex")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "No such debug file", body = crate::error::ErrorBody),
    )
)]
pub async fn delete(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(build_id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let tenant = tenant_of(&headers)?;
    if state.engine.debuginfo().delete(&tenant, &build_id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(no_debug_file(&build_id))
    }
}
