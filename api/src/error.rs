//! Errors of the JSON API: a status and `{"error": "…"}`.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use stackhouse_query::QueryError;
use utoipa::ToSchema;

use crate::config::limit_flag;

/// The body of every error answer of the query API.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct ErrorBody {
    /// What went wrong; for a 422, the name of the limit and the flag that raises it.
    pub error: String,
}

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

impl ApiError {
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
        }
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::NOT_FOUND,
            message: message.into(),
        }
    }

    pub fn internal(message: impl std::fmt::Display) -> ApiError {
        tracing::error!(error = %message, "request failed");
        ApiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: message.to_string(),
        }
    }

    /// A request over the limit `limit` (a `QueryLimits` field name), answered like the
    /// engine's own limit errors.
    pub fn limit(limit: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::from(stackhouse_query::limits::exceeded(limit, message))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(ErrorBody { error: self.message })).into_response()
    }
}

impl From<stackhouse_storage::catalog::CatalogError> for ApiError {
    fn from(e: stackhouse_storage::catalog::CatalogError) -> Self {
        ApiError::internal(e)
    }
}

impl From<QueryError> for ApiError {
    fn from(e: QueryError) -> Self {
        match &e {
            QueryError::NotFound(_) => ApiError::not_found(e.to_string()),
            // 503, not 422: the budget is shared by every running query, so the same
            // query may fit when the server is less busy (the message still says how to
            // make it smaller). A 5xx also tells proxies and clients it is a capacity
            // problem of the server, not a malformed request.
            QueryError::ResourcesExhausted { .. } => {
                tracing::warn!(error = %e, "query over the memory budget");
                ApiError {
                    status: StatusCode::SERVICE_UNAVAILABLE,
                    message: e.to_string(),
                }
            }
            _ if e.is_limit() => {
                let flag = match &e {
                    QueryError::LimitExceeded { limit, .. } => limit_flag(limit),
                    QueryError::Timeout(_) => limit_flag("timeout"),
                    _ => None,
                };
                let message = match flag {
                    Some(flag) => format!("{e}; raise it with {flag}"),
                    None => e.to_string(),
                };
                ApiError {
                    status: StatusCode::UNPROCESSABLE_ENTITY,
                    message,
                }
            }
            _ if e.is_client_error() => ApiError::bad_request(e.to_string()),
            _ => ApiError::internal(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn query_errors_map_to_statuses() {
        let e = ApiError::from(QueryError::NotFound("profile 00ff not found".into()));
        assert_eq!(
            (e.status, e.message.as_str()),
            (StatusCode::NOT_FOUND, "profile 00ff not found")
        );

        let e = ApiError::from(stackhouse_query::limits::exceeded(
            "max_points",
            "too many points",
        ));
        assert_eq!(e.status, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(
            e.message,
            "too many points (limit max_points); raise it with --query-max-points"
        );

        let e = ApiError::from(QueryError::Timeout(Duration::from_secs(2)));
        assert_eq!(e.status, StatusCode::UNPROCESSABLE_ENTITY);
        assert!(
            e.message.ends_with("raise it with --query-timeout"),
            "{}",
            e.message
        );

        let e = ApiError::from(QueryError::ResourcesExhausted {
            budget: Some(1 << 20),
            detail: "Failed to allocate additional 1.0 MB".into(),
        });
        assert_eq!(e.status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            e.message.starts_with(
                "query exceeded the memory budget of 1048576 bytes; narrow the time range or selector"
            ),
            "{}",
            e.message
        );

        let e = ApiError::from(QueryError::InvalidArgument("bad step".into()));
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert!(e.message.contains("bad step"));

        let e = ApiError::from(QueryError::Internal("boom".into()));
        assert_eq!(e.status, StatusCode::INTERNAL_SERVER_ERROR);
    }

    #[test]
    fn limit_errors_name_the_flag() {
        let e = ApiError::limit("max_nodes", "max_nodes 100000 is above 65536");
        assert_eq!(e.status, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(
            e.message,
            "max_nodes 100000 is above 65536 (limit max_nodes); raise it with --query-max-nodes"
        );
    }
}
