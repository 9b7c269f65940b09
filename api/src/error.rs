//! The error vocabulary of every edge. A request fails in one of a few ways ([`ErrorKind`]);
//! each way has one answer per protocol: an HTTP status, a gRPC code (with RetryInfo when
//! the sender should come back later) and a Connect code. Handlers build an [`ApiError`]
//! and pick the protocol's writer; none of them chooses a status of its own.

use std::time::Duration;

use axum::Json;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use prost::Message;
use serde::Serialize;
use stackhouse_query::QueryError;
use tonic::Code;
use tonic_types::{ErrorDetails, StatusExt};
use utoipa::ToSchema;

use crate::config::limit_flag;

/// How a request failed, independent of the protocol it came in on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The request is malformed; sending it again cannot succeed.
    InvalidArgument,
    /// The body's media type or content encoding is not one we read.
    UnsupportedMediaType,
    /// What the request names (a profile id) is not stored.
    NotFound,
    /// The request is well formed but asks for more than a configured limit allows.
    LimitExceeded,
    /// The request alone is larger than a limit; retrying it cannot succeed.
    TooLarge,
    /// The server is full right now; the same request may succeed after the delay.
    Overloaded(Duration),
    /// Nothing was done; the sender should retry.
    Unavailable,
    Unauthenticated,
    PermissionDenied,
    /// The method or route is not served.
    Unimplemented,
    /// What is asked conflicts with the state of what it names (a deletion request past
    /// its cancel period).
    Conflict,
    /// A change based on a version that is no longer the stored one (a recording rule's
    /// generation): read it again and retry. Connect's `already_exists`, as Pyroscope answers.
    Stale,
    /// The query did not finish within the time its caller allowed (`Connect-Timeout-Ms`).
    DeadlineExceeded,
    /// Our fault; retrying the same request will likely fail again.
    Internal,
}

/// `Retry-After` of an [`ErrorKind::Unavailable`] answer: come back soon.
const UNAVAILABLE_RETRY: Duration = Duration::from_secs(1);

impl ErrorKind {
    /// The HTTP status of the JSON API, OTLP/HTTP and Pyroscope ingest.
    pub fn http_status(self) -> StatusCode {
        match self {
            ErrorKind::InvalidArgument => StatusCode::BAD_REQUEST,
            ErrorKind::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ErrorKind::NotFound => StatusCode::NOT_FOUND,
            ErrorKind::LimitExceeded => StatusCode::UNPROCESSABLE_ENTITY,
            ErrorKind::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            // OTLP/HTTP's throttling answer, which senders retry after `Retry-After`.
            ErrorKind::Overloaded(_) => StatusCode::TOO_MANY_REQUESTS,
            ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            ErrorKind::Unauthenticated => StatusCode::UNAUTHORIZED,
            ErrorKind::PermissionDenied => StatusCode::FORBIDDEN,
            ErrorKind::Unimplemented => StatusCode::NOT_IMPLEMENTED,
            ErrorKind::Conflict | ErrorKind::Stale => StatusCode::CONFLICT,
            ErrorKind::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
            ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The gRPC code (also the `code` of OTLP/HTTP's `google.rpc.Status`). OTLP senders
    /// retry RESOURCE_EXHAUSTED only when it carries RetryInfo, so a request too large for
    /// good shares the code with an overload but not the retry.
    pub fn grpc_code(self) -> Code {
        match self {
            ErrorKind::InvalidArgument | ErrorKind::UnsupportedMediaType | ErrorKind::LimitExceeded => {
                Code::InvalidArgument
            }
            ErrorKind::NotFound => Code::NotFound,
            ErrorKind::TooLarge | ErrorKind::Overloaded(_) => Code::ResourceExhausted,
            ErrorKind::Unavailable => Code::Unavailable,
            ErrorKind::Unauthenticated => Code::Unauthenticated,
            ErrorKind::PermissionDenied => Code::PermissionDenied,
            ErrorKind::Unimplemented => Code::Unimplemented,
            ErrorKind::Conflict => Code::FailedPrecondition,
            ErrorKind::Stale => Code::AlreadyExists,
            ErrorKind::DeadlineExceeded => Code::DeadlineExceeded,
            ErrorKind::Internal => Code::Internal,
        }
    }

    /// The Connect code; Connect fixes the HTTP status of each ([`connect_http_status`]).
    pub fn connect_code(self) -> &'static str {
        match self {
            ErrorKind::InvalidArgument | ErrorKind::UnsupportedMediaType | ErrorKind::LimitExceeded => {
                "invalid_argument"
            }
            ErrorKind::Unimplemented => "unimplemented",
            ErrorKind::Conflict => "failed_precondition",
            ErrorKind::Stale => "already_exists",
            ErrorKind::NotFound => "not_found",
            ErrorKind::TooLarge | ErrorKind::Overloaded(_) => "resource_exhausted",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Unauthenticated => "unauthenticated",
            ErrorKind::PermissionDenied => "permission_denied",
            ErrorKind::DeadlineExceeded => "deadline_exceeded",
            ErrorKind::Internal => "internal",
        }
    }

    /// How long the sender should wait before retrying; `None` when it should not retry.
    pub fn retry_after(self) -> Option<Duration> {
        match self {
            ErrorKind::Overloaded(delay) => Some(delay),
            ErrorKind::Unavailable => Some(UNAVAILABLE_RETRY),
            _ => None,
        }
    }

    /// What the answer means, for the API documentation.
    pub fn description(self) -> &'static str {
        match self {
            ErrorKind::InvalidArgument => {
                "Malformed request: a parameter, the selector or the profile type; the message names it"
            }
            ErrorKind::UnsupportedMediaType => "Unsupported content type or content encoding",
            ErrorKind::NotFound => "Nothing is stored under this id",
            ErrorKind::LimitExceeded => {
                "A query limit was exceeded; the message names the limit and the flag that raises it"
            }
            ErrorKind::TooLarge => "The request is larger than the server accepts",
            ErrorKind::Overloaded(_) => "The server is busy; retry after `Retry-After` seconds",
            ErrorKind::Unavailable => {
                "Temporarily unavailable (query memory budget, storage or catalog); retry after `Retry-After` seconds"
            }
            ErrorKind::Unauthenticated => "Missing or invalid credentials",
            ErrorKind::PermissionDenied => "The credentials do not allow this tenant",
            ErrorKind::Unimplemented => "Not implemented",
            ErrorKind::Conflict => {
                "The request conflicts with the state of what it names; the message says why"
            }
            ErrorKind::Stale => "The change was based on an older version; read it again and retry",
            ErrorKind::DeadlineExceeded => "The query did not finish within the time the client allowed",
            ErrorKind::Internal => "Internal error, including unreadable stored data; the message names it",
        }
    }

    /// Every kind, for tables and tests; the delay of `Overloaded` is a placeholder.
    pub const ALL: [ErrorKind; 14] = [
        ErrorKind::InvalidArgument,
        ErrorKind::UnsupportedMediaType,
        ErrorKind::NotFound,
        ErrorKind::LimitExceeded,
        ErrorKind::TooLarge,
        ErrorKind::Overloaded(UNAVAILABLE_RETRY),
        ErrorKind::Unavailable,
        ErrorKind::Unauthenticated,
        ErrorKind::PermissionDenied,
        ErrorKind::Unimplemented,
        ErrorKind::Conflict,
        ErrorKind::Stale,
        ErrorKind::DeadlineExceeded,
        ErrorKind::Internal,
    ];
}

/// The HTTP status Connect's protocol assigns to a code (connect-go `connectCodeToHTTP`).
pub fn connect_http_status(code: &str) -> StatusCode {
    match code {
        "canceled" => StatusCode::from_u16(499).unwrap_or(StatusCode::BAD_REQUEST),
        "invalid_argument" | "failed_precondition" | "out_of_range" => StatusCode::BAD_REQUEST,
        "deadline_exceeded" => StatusCode::GATEWAY_TIMEOUT,
        "not_found" => StatusCode::NOT_FOUND,
        "already_exists" | "aborted" => StatusCode::CONFLICT,
        "permission_denied" => StatusCode::FORBIDDEN,
        "resource_exhausted" => StatusCode::TOO_MANY_REQUESTS,
        "unimplemented" => StatusCode::NOT_IMPLEMENTED,
        "unavailable" => StatusCode::SERVICE_UNAVAILABLE,
        "unauthenticated" => StatusCode::UNAUTHORIZED,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// `Retry-After` in whole seconds: the delay rounded up, at least 1.
pub fn set_retry_after(headers: &mut HeaderMap, delay: Duration) {
    let seconds = delay.as_secs_f64().ceil().max(1.0) as u64;
    headers.insert(header::RETRY_AFTER, header::HeaderValue::from(seconds));
}

/// The body of every error answer of the JSON API and Pyroscope ingest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct ErrorBody {
    /// What went wrong; for a 422, the name of the limit and the flag that raises it.
    pub error: String,
}

/// A failed request: how it failed and a message naming the problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    pub kind: ErrorKind,
    pub message: String,
}

impl ApiError {
    pub fn new(kind: ErrorKind, message: impl ToString) -> ApiError {
        ApiError {
            kind,
            message: message.to_string(),
        }
    }

    pub fn invalid(message: impl ToString) -> ApiError {
        ApiError::new(ErrorKind::InvalidArgument, message)
    }

    pub fn not_found(message: impl ToString) -> ApiError {
        ApiError::new(ErrorKind::NotFound, message)
    }

    pub fn too_large(message: impl ToString) -> ApiError {
        ApiError::new(ErrorKind::TooLarge, message)
    }

    pub fn unavailable(message: impl ToString) -> ApiError {
        ApiError::new(ErrorKind::Unavailable, message)
    }

    pub fn unsupported_media_type(message: impl ToString) -> ApiError {
        ApiError::new(ErrorKind::UnsupportedMediaType, message)
    }

    pub fn internal(message: impl ToString) -> ApiError {
        ApiError::new(ErrorKind::Internal, message)
    }

    pub fn status(&self) -> StatusCode {
        self.kind.http_status()
    }

    /// Server faults are logged where they are answered, once, whatever the protocol.
    fn log(&self) {
        match self.kind {
            ErrorKind::Internal => tracing::error!(error = %self.message, "request failed"),
            ErrorKind::Unavailable | ErrorKind::Overloaded(_) => {
                tracing::warn!(error = %self.message, "request not served");
            }
            _ => tracing::debug!(error = %self.message, "request refused"),
        }
    }

    /// A response with `status`, `body` and the kind's `Retry-After`.
    fn respond(&self, status: StatusCode, body: impl IntoResponse) -> Response {
        self.log();
        let mut response = (status, body).into_response();
        if let Some(delay) = self.kind.retry_after() {
            set_retry_after(response.headers_mut(), delay);
        }
        response
    }

    /// The gRPC answer; an overload carries `google.rpc.RetryInfo` with its delay.
    pub fn into_grpc(self) -> tonic::Status {
        self.log();
        let code = self.kind.grpc_code();
        match self.kind {
            ErrorKind::Overloaded(delay) => tonic::Status::with_error_details(
                code,
                self.message,
                ErrorDetails::with_retry_info(Some(delay)),
            ),
            _ => tonic::Status::new(code, self.message),
        }
    }

    /// The Connect answer: `{"code", "message"}` with the HTTP status Connect gives the code.
    pub fn into_connect(self) -> Response {
        let code = self.kind.connect_code();
        let body = serde_json::json!({ "code": code, "message": self.message });
        // Connect answers a content type it does not read with a bare 415.
        let status = match self.kind {
            ErrorKind::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            _ => connect_http_status(code),
        };
        self.respond(status, Json(body))
    }

    /// OTLP/HTTP's answer: a `google.rpc.Status`, protobuf or JSON as the request was.
    pub fn into_rpc_status(self, protobuf: bool) -> Response {
        let code = self.kind.grpc_code() as i32;
        let (content_type, body) = if protobuf {
            let status = tonic_types::Status {
                code,
                message: self.message.clone(),
                details: Vec::new(),
            };
            ("application/x-protobuf", status.encode_to_vec())
        } else {
            // `error` beside `message` so that one reader serves every JSON error we send.
            let body = serde_json::json!({ "code": code, "message": self.message, "error": self.message });
            ("application/json", body.to_string().into_bytes())
        };
        self.respond(
            self.kind.http_status(),
            ([(header::CONTENT_TYPE, content_type)], body),
        )
    }
}

impl IntoResponse for ApiError {
    /// The JSON API's answer: `{"error": "…"}`.
    fn into_response(self) -> Response {
        let body = Json(ErrorBody {
            error: self.message.clone(),
        });
        self.respond(self.kind.http_status(), body)
    }
}

impl From<tokio::task::JoinError> for ApiError {
    /// A task that panicked would panic again on the same input: not worth a retry. One
    /// that was cancelled (the server is stopping) is.
    fn from(e: tokio::task::JoinError) -> Self {
        if e.is_cancelled() {
            ApiError::unavailable("the server is shutting down")
        } else {
            ApiError::internal(format!("request task failed: {e}"))
        }
    }
}

impl From<stackhouse_storage::catalog::CatalogError> for ApiError {
    fn from(e: stackhouse_storage::catalog::CatalogError) -> Self {
        let transient = if e.is_transient() { "true" } else { "false" };
        metrics::counter!("stackhouse_catalog_errors_total", "transient" => transient).increment(1);
        let kind = if e.is_transient() {
            ErrorKind::Unavailable
        } else {
            ErrorKind::Internal
        };
        ApiError::new(kind, format!("catalog: {e}"))
    }
}

impl From<stackhouse_storage::writer::WriteError> for ApiError {
    fn from(e: stackhouse_storage::writer::WriteError) -> Self {
        use stackhouse_storage::writer::WriteError;
        let kind = match &e {
            WriteError::Unavailable(_) | WriteError::ShuttingDown => ErrorKind::Unavailable,
            WriteError::Overloaded { retry_after, .. } => ErrorKind::Overloaded(*retry_after),
            WriteError::TooLarge { .. } => ErrorKind::TooLarge,
        };
        ApiError::new(kind, e)
    }
}

impl From<stackhouse_ingest::body::BodyError> for ApiError {
    fn from(e: stackhouse_ingest::body::BodyError) -> Self {
        use stackhouse_ingest::body::BodyError;
        let kind = match &e {
            BodyError::TooLarge { .. } => ErrorKind::TooLarge,
            BodyError::UnsupportedEncoding(_) => ErrorKind::UnsupportedMediaType,
            BodyError::Malformed(_) => ErrorKind::InvalidArgument,
        };
        ApiError::new(kind, e)
    }
}

impl From<stackhouse_ingest::pipeline::IngestError> for ApiError {
    fn from(e: stackhouse_ingest::pipeline::IngestError) -> Self {
        use stackhouse_ingest::pipeline::IngestError;
        match e {
            IngestError::Invalid(message) => ApiError::invalid(message),
            IngestError::TooLarge(message) => ApiError::too_large(message),
            IngestError::Overloaded { retry_after, message } => {
                ApiError::new(ErrorKind::Overloaded(retry_after), message)
            }
            IngestError::Catalog(e) => e.into(),
            IngestError::Write(e) => e.into(),
            IngestError::Task(e) => e.into(),
        }
    }
}

impl From<QueryError> for ApiError {
    fn from(e: QueryError) -> Self {
        match &e {
            QueryError::Catalog(c) => {
                let transient = if c.is_transient() { "true" } else { "false" };
                metrics::counter!("stackhouse_catalog_errors_total", "transient" => transient).increment(1);
            }
            QueryError::Symbols(_) => {
                metrics::counter!("stackhouse_store_errors_total").increment(1);
            }
            _ => {}
        }
        let kind = match &e {
            QueryError::NotFound(_) => ErrorKind::NotFound,
            QueryError::Conflict(_) => ErrorKind::Conflict,
            // Unavailable, not a limit: the budget is shared by every running query, so the
            // same query may fit when the server is less busy (the message still says how
            // to make it smaller).
            QueryError::ResourcesExhausted { .. } => ErrorKind::Unavailable,
            _ if e.is_transient() => ErrorKind::Unavailable,
            _ if e.is_limit() => ErrorKind::LimitExceeded,
            _ if e.is_client_error() => ErrorKind::InvalidArgument,
            _ => ErrorKind::Internal,
        };
        let flag = match &e {
            QueryError::LimitExceeded { limit, .. } => limit_flag(limit),
            QueryError::Timeout(_) => limit_flag("timeout"),
            _ => None,
        };
        let message = match flag {
            Some(flag) => format!("{e}; raise it with {flag}"),
            None => e.to_string(),
        };
        ApiError::new(kind, message)
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
            (e.status(), e.message.as_str()),
            (StatusCode::NOT_FOUND, "profile 00ff not found")
        );

        let e = ApiError::from(QueryError::LimitExceeded {
            limit: "max_points",
            message: "too many points".into(),
        });
        assert_eq!(e.status(), StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(
            e.message,
            "too many points (limit max_points); raise it with --query-max-points"
        );

        // Raw samples a query needs are gone: a 422 saying so, with no flag to raise.
        let gone = "a trace id filter needs raw samples, and raw retention removed them up to 2026-11-19T17:00:00Z; start the range after it";
        let e = ApiError::from(QueryError::RawGone(gone.into()));
        assert_eq!(
            (e.status(), e.message.as_str()),
            (StatusCode::UNPROCESSABLE_ENTITY, gone)
        );

        let e = ApiError::from(QueryError::Timeout(Duration::from_secs(2)));
        assert_eq!(e.status(), StatusCode::UNPROCESSABLE_ENTITY);
        assert!(
            e.message.ends_with("raise it with --query-timeout"),
            "{}",
            e.message
        );

        let e = ApiError::from(QueryError::ResourcesExhausted {
            budget: Some(1 << 20),
            detail: "Failed to allocate additional 1.0 MB".into(),
        });
        assert_eq!(e.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            e.message.starts_with(
                "query exceeded the memory budget of 1048576 bytes; narrow the time range or selector"
            ),
            "{}",
            e.message
        );

        let e = ApiError::from(QueryError::InvalidArgument("bad step".into()));
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
        assert!(e.message.contains("bad step"));

        let e = ApiError::from(QueryError::Internal("boom".into()));
        assert_eq!(e.status(), StatusCode::INTERNAL_SERVER_ERROR);

        let corrupt = stackhouse_storage::catalog::CatalogError::Corrupt("bad row".into());
        assert_eq!(
            ApiError::from(corrupt).status(),
            StatusCode::INTERNAL_SERVER_ERROR
        );
    }

    #[test]
    fn every_kind_agrees_across_protocols() {
        for kind in ErrorKind::ALL {
            let http = kind.http_status();
            let connect = connect_http_status(kind.connect_code());
            // A client that reads only the status must reach the same conclusion about
            // retrying, whichever protocol it spoke.
            assert_eq!(
                kind.retry_after().is_some(),
                matches!(http.as_u16(), 429 | 503),
                "{kind:?}"
            );
            assert_eq!(http.is_server_error(), connect.is_server_error(), "{kind:?}");
            let grpc_retryable =
                matches!(kind.grpc_code(), Code::Unavailable) || matches!(kind, ErrorKind::Overloaded(_));
            assert_eq!(grpc_retryable, kind.retry_after().is_some(), "{kind:?}");
        }
    }

    #[test]
    fn overload_carries_its_delay_everywhere() {
        let e = ApiError::new(ErrorKind::Overloaded(Duration::from_millis(1500)), "budget full");
        let status = e.clone().into_grpc();
        assert_eq!(status.code(), Code::ResourceExhausted);
        assert_eq!(
            status.get_details_retry_info().and_then(|r| r.retry_delay),
            Some(Duration::from_millis(1500))
        );
        for response in [
            e.clone().into_response(),
            e.clone().into_connect(),
            e.into_rpc_status(true),
        ] {
            assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
            assert_eq!(response.headers()[header::RETRY_AFTER], "2");
        }
        let too_large = ApiError::too_large("bigger than the budget").into_grpc();
        assert_eq!(too_large.code(), Code::ResourceExhausted);
        assert!(too_large.get_details_retry_info().is_none());
    }

    #[test]
    fn panicked_tasks_are_internal() {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let join = rt.block_on(async { tokio::spawn(async { panic!("bad input") }).await });
        let e = ApiError::from(join.unwrap_err());
        assert_eq!(e.kind, ErrorKind::Internal);
        assert!(e.message.contains("request task failed"), "{}", e.message);
    }
}
