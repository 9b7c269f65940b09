//! What every read of the query API starts from, extracted once before the handler runs:
//! the tenants (`X-Scope-OrgID`, one or several as `a|b`, or the token's) and the query
//! string.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use crate::error::ApiError;
use crate::tenant;
use crate::wire::query_string::QueryMap;

pub(crate) struct ReadCall {
    pub(crate) tenant: String,
    pub(crate) q: QueryMap,
}

impl<S: Send + Sync> FromRequestParts<S> for ReadCall {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(ReadCall {
            tenant: tenant::read_from_headers(&parts.headers)?,
            q: QueryMap::parse(parts.uri.query()),
        })
    }
}
