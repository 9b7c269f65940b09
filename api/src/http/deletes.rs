//! `/api/v1/admin/deletes`: a tenant's deletion requests, for admin tokens only. A request
//! is in the catalog before it is answered, and from then on no read returns what it
//! matches; it can be cancelled during `--deletion-cancel-period`.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use stackhouse_query::endpoints::deletes::DeleteAsked;
use stackhouse_storage::catalog::DeleteRequest;
use utoipa::ToSchema;

use crate::auth::Admin;
use crate::error::{ApiError, ErrorKind};
use crate::read::params::{TenantHeader, tenant_of};
use crate::route::{Route, documented};
use crate::state::AppState;
use crate::wire::body::read_limited;

/// A deletion request's body is a selector and two times.
const MAX_BODY_BYTES: usize = 64 << 10;

pub(super) fn routes() -> Vec<Route> {
    vec![documented!(list, create), documented!(get, cancel)]
}

/// What to delete.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteBody {
    /// Series selector on series labels, e.g. `{service.name="checkout"}`; `{}` is every series.
    pub selector: String,
    /// Start (inclusive): unix nanoseconds, RFC 3339, `now` or `now-<duration>`.
    pub from: String,
    /// End (exclusive), in the same forms.
    pub to: String,
}

/// One deletion request.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeleteEntry {
    pub id: String,
    pub selector: String,
    /// The deleted range, `[from, to)`, unix nanoseconds.
    pub from_nanos: i64,
    pub to_nanos: i64,
    /// Milliseconds since the Unix epoch.
    pub created_at_millis: i64,
    /// Until when it can be cancelled (milliseconds since the Unix epoch).
    pub cancel_until_millis: i64,
    /// `pending` (hidden, cancellable), `purging`, `purged` or `cancelled`.
    pub state: String,
    /// Series the selector matched in the range when it was made.
    pub matched_series: i64,
    /// Their samples in the range, estimated from the catalog (exact where a segment's
    /// samples of a series lie wholly inside the range).
    pub matched_samples: i64,
}

impl From<DeleteRequest> for DeleteEntry {
    fn from(r: DeleteRequest) -> Self {
        DeleteEntry {
            id: r.id,
            selector: r.selector,
            from_nanos: r.from_nanos,
            to_nanos: r.to_nanos,
            created_at_millis: r.created_at_millis,
            cancel_until_millis: r.cancel_until_millis,
            state: r.state.as_str().to_string(),
            matched_series: r.matched_series,
            matched_samples: r.matched_samples,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DeleteList {
    /// Oldest first, cancelled ones included.
    pub requests: Vec<DeleteEntry>,
}

/// The tenant of an admin request about `what`; a token without the admin role is refused.
pub(super) fn admin_tenant(
    headers: &HeaderMap,
    admin: Option<Extension<Admin>>,
    what: &str,
) -> Result<String, ApiError> {
    let tenant = tenant_of(headers)?;
    match admin {
        Some(Extension(Admin(true))) => Ok(tenant),
        _ => Err(ApiError::new(
            ErrorKind::PermissionDenied,
            format!(
                "{what} need an admin token of tenant {tenant:?} (stackhouse tenant token create --admin)"
            ),
        )),
    }
}

const REQUESTS: &str = "deletion requests";

/// The tenant's deletion requests.
#[utoipa::path(
    get,
    path = "/api/v1/admin/deletes",
    tag = "admin",
    params(TenantHeader),
    responses((status = 200, description = "The tenant's deletion requests", body = DeleteList))
)]
pub async fn list(
    State(state): State<AppState>,
    headers: HeaderMap,
    admin: Option<Extension<Admin>>,
) -> Result<Json<DeleteList>, ApiError> {
    let tenant = admin_tenant(&headers, admin, REQUESTS)?;
    let requests = state.engine.delete_requests(&tenant).await?;
    Ok(Json(DeleteList {
        requests: requests.into_iter().map(DeleteEntry::from).collect(),
    }))
}

/// One deletion request of the tenant.
#[utoipa::path(
    get,
    path = "/api/v1/admin/deletes/{id}",
    tag = "admin",
    params(TenantHeader, ("id" = String, Path, description = "The request's id")),
    responses((status = 200, description = "The request", body = DeleteEntry))
)]
pub async fn get(
    State(state): State<AppState>,
    headers: HeaderMap,
    admin: Option<Extension<Admin>>,
    Path(id): Path<String>,
) -> Result<Json<DeleteEntry>, ApiError> {
    let tenant = admin_tenant(&headers, admin, REQUESTS)?;
    Ok(Json(state.engine.delete_request(&tenant, &id).await?.into()))
}

/// Deletes what a selector matches in a range: hidden from every read once answered,
/// purged from storage after the cancel period.
#[utoipa::path(
    post,
    path = "/api/v1/admin/deletes",
    tag = "admin",
    params(TenantHeader),
    request_body(content = DeleteBody, content_type = "application/json"),
    responses(
        (status = 201, description = "Committed: reads no longer return what it matches", body = DeleteEntry),
        (status = 400, description = "Bad selector or times", body = crate::error::ErrorBody),
        (status = 403, description = "Not an admin token", body = crate::error::ErrorBody),
    )
)]
pub async fn create(
    State(state): State<AppState>,
    headers: HeaderMap,
    admin: Option<Extension<Admin>>,
    body: Body,
) -> Result<(StatusCode, Json<DeleteEntry>), ApiError> {
    let tenant = admin_tenant(&headers, admin, REQUESTS)?;
    let bytes = read_limited(body, MAX_BODY_BYTES).await?;
    let body: DeleteBody = serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::invalid(format!(
            "a deletion request is JSON {{\"selector\": …, \"from\": …, \"to\": …}}: {e}"
        ))
    })?;
    let asked = DeleteAsked {
        tenant: tenant.clone(),
        selector: body.selector,
        from: body.from,
        to: body.to,
    };
    let request = state.engine.request_delete(&asked).await?;
    tracing::info!(%tenant, id = %request.id, selector = %request.selector, "deletion requested");
    Ok((StatusCode::CREATED, Json(request.into())))
}

/// Cancels a deletion request within its cancel period: reads return what it hid again.
#[utoipa::path(
    delete,
    path = "/api/v1/admin/deletes/{id}",
    tag = "admin",
    params(TenantHeader, ("id" = String, Path, description = "The request's id")),
    responses(
        (status = 200, description = "Cancelled (or cancelled before)", body = DeleteEntry),
        (status = 403, description = "Not an admin token", body = crate::error::ErrorBody),
        (status = 404, description = "No such request", body = crate::error::ErrorBody),
        (status = 409, description = "Past its cancel period, or its purge has begun", body = crate::error::ErrorBody),
    )
)]
pub async fn cancel(
    State(state): State<AppState>,
    headers: HeaderMap,
    admin: Option<Extension<Admin>>,
    Path(id): Path<String>,
) -> Result<Json<DeleteEntry>, ApiError> {
    let tenant = admin_tenant(&headers, admin, REQUESTS)?;
    let request = state.engine.cancel_delete(&tenant, &id).await?;
    tracing::info!(%tenant, %id, "deletion cancelled");
    Ok(Json(request.into()))
}
