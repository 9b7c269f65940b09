//! `/api/v1/admin/tenants/{tenant}`: what a tenant holds, and its deletion, for an admin token
//! of that tenant. The tenant is named twice, in the path and as the request's tenant (the
//! token's, or `X-Scope-OrgID` with auth off), so no typo deletes another one.

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::{Extension, Json};
use serde::Serialize;
use stackhouse_storage::catalog::TableStats;
use utoipa::ToSchema;

use super::deletes::admin_tenant;
use crate::auth::Admin;
use crate::error::{ApiError, ErrorKind};
use crate::read::params::TenantHeader;
use crate::route::{Route, documented};
use crate::state::AppState;
use crate::tenant;

pub(super) fn routes() -> Vec<Route> {
    vec![documented!(show, delete)]
}

/// What a tenant holds.
#[derive(Debug, Serialize, ToSchema)]
pub struct TenantSummary {
    pub tenant: String,
    pub segments: u64,
    pub series: u64,
    /// Per table kind (`samples`, `rollup_1m`, `stacks`, ...): objects, rows, bytes.
    #[schema(value_type = Object)]
    pub tables: std::collections::BTreeMap<String, TableStats>,
    /// Access tokens, revoked ones included.
    pub tokens: u64,
    pub debug_files: u64,
}

/// What deleting a tenant did.
#[derive(Debug, Serialize, ToSchema)]
pub struct TenantDeletion {
    pub tenant: String,
    /// Catalog rows forgotten: segments, series, profiles, labels, symbols, settings,
    /// tokens, debug files, deletion requests.
    pub catalog_rows: u64,
    /// Objects queued for deletion.
    pub objects: u64,
    /// When they go (milliseconds since the Unix epoch): after `--deletion-grace`, so
    /// queries that listed them finish.
    pub objects_deleted_after_millis: i64,
}

/// The tenant of the path, which must be the request's own.
fn named_tenant(headers: &HeaderMap, admin: Option<Extension<Admin>>, id: &str) -> Result<String, ApiError> {
    let named = tenant::parse(Some(id.as_bytes())).map_err(ApiError::invalid)?;
    let caller = admin_tenant(headers, admin, "a tenant's summary and deletion")?;
    if caller != named {
        return Err(ApiError::new(
            ErrorKind::PermissionDenied,
            format!(
                "a request of tenant {caller:?} cannot administer tenant {named:?}: use an admin \
                 token of {named:?} (with auth off, send X-Scope-OrgID: {named})"
            ),
        ));
    }
    Ok(named)
}

/// What a tenant holds in the catalog.
#[utoipa::path(
    get,
    path = "/api/v1/admin/tenants/{tenant}",
    tag = "admin",
    params(TenantHeader, ("tenant" = String, Path, description = "The tenant")),
    responses((status = 200, description = "What the tenant holds", body = TenantSummary))
)]
pub async fn show(
    State(state): State<AppState>,
    headers: HeaderMap,
    admin: Option<Extension<Admin>>,
    Path(id): Path<String>,
) -> Result<Json<TenantSummary>, ApiError> {
    let tenant = named_tenant(&headers, admin, &id)?;
    let (stats, tokens, debug_files) = futures::try_join!(
        state.catalog.stats(&tenant),
        state.catalog.tokens(Some(&tenant)),
        state.catalog.debug_files(&tenant),
    )?;
    Ok(Json(TenantSummary {
        tenant,
        segments: stats.segments,
        series: stats.series,
        tables: stats.tables,
        tokens: tokens.len() as u64,
        debug_files: debug_files.len() as u64,
    }))
}

/// Deletes a tenant: every catalog row at once (its data, series, profiles, tokens,
/// settings, debug files and deletion requests), every object after `--deletion-grace`.
/// Other tenants are untouched.
#[utoipa::path(
    delete,
    path = "/api/v1/admin/tenants/{tenant}",
    tag = "admin",
    params(TenantHeader, ("tenant" = String, Path, description = "The tenant")),
    responses(
        (status = 200, description = "Deleted from the catalog; objects go after the grace", body = TenantDeletion),
        (status = 400, description = "Not a tenant name", body = crate::error::ErrorBody),
        (status = 403, description = "Not an admin token of this tenant", body = crate::error::ErrorBody),
    )
)]
pub async fn delete(
    State(state): State<AppState>,
    headers: HeaderMap,
    admin: Option<Extension<Admin>>,
    Path(id): Path<String>,
) -> Result<Json<TenantDeletion>, ApiError> {
    let tenant = named_tenant(&headers, admin, &id)?;
    let grace = i64::try_from(state.deletion_grace.as_nanos()).unwrap_or(i64::MAX);
    let after = state.clock.now_nanos().saturating_add(grace);
    let deleted = state.catalog.delete_tenant(&tenant, after).await?;
    tracing::info!(%tenant, rows = deleted.rows, objects = deleted.objects, "tenant deleted");
    Ok(Json(TenantDeletion {
        tenant,
        catalog_rows: deleted.rows,
        objects: deleted.objects,
        objects_deleted_after_millis: after.div_euclid(1_000_000),
    }))
}
