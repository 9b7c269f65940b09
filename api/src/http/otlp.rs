//! OTLP/HTTP: `POST /v1development/profiles` (any layout, see the
//! `OTLP-Profiles-Development-Version` header) and the seed format's
//! `POST /v1experimental/profiles`; protobuf or JSON, optional gzip. The response (and an
//! error's `google.rpc.Status`) uses the request's content type.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use prost::Message;
use stackhouse_ingest::body::BodyError;
use stackhouse_ingest::convert::Conversion;
use stackhouse_ingest::otlp::DecodeError;
use stackhouse_ingest::otlp::experimental;
use stackhouse_ingest::otlp::layout::{self, Layout};
use stackhouse_proto::otlp_collector::ExportProfilesServiceResponse;

use super::AppState;
use super::body::{ReadError, inflate, read_limited};
use crate::export::{ExportError, unconverted};
use crate::tenant;

const PROTOBUF: &str = "application/x-protobuf";
const JSON: &str = "application/json";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Protobuf,
    Json,
}

impl Encoding {
    fn from_headers(headers: &HeaderMap) -> Option<Encoding> {
        let value = headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
        let essence = value.split(';').next()?.trim().to_ascii_lowercase();
        match essence.as_str() {
            PROTOBUF | "application/protobuf" => Some(Encoding::Protobuf),
            JSON => Some(Encoding::Json),
            _ => None,
        }
    }

    fn content_type(self) -> &'static str {
        match self {
            Encoding::Protobuf => PROTOBUF,
            Encoding::Json => JSON,
        }
    }
}

/// `google.rpc.Status`, the body OTLP/HTTP specifies for errors.
#[derive(Clone, PartialEq, prost::Message)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
}

/// Why a request is refused: the HTTP status, the gRPC code carried in `google.rpc.Status`,
/// and a message naming the problem.
struct Refusal {
    status: StatusCode,
    code: tonic::Code,
    message: String,
    /// `Retry-After` seconds, for refusals the sender should retry.
    retry_after: Option<u64>,
}

impl Refusal {
    fn invalid(message: impl ToString) -> Refusal {
        Refusal {
            status: StatusCode::BAD_REQUEST,
            code: tonic::Code::InvalidArgument,
            message: message.to_string(),
            retry_after: None,
        }
    }

    fn unsupported(message: impl ToString) -> Refusal {
        Refusal {
            status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
            code: tonic::Code::InvalidArgument,
            message: message.to_string(),
            retry_after: None,
        }
    }

    fn too_large(message: impl ToString) -> Refusal {
        Refusal {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            code: tonic::Code::ResourceExhausted,
            message: message.to_string(),
            retry_after: None,
        }
    }

    fn unavailable(message: impl ToString) -> Refusal {
        Refusal {
            status: StatusCode::SERVICE_UNAVAILABLE,
            code: tonic::Code::Unavailable,
            message: message.to_string(),
            retry_after: Some(1),
        }
    }

    /// OTLP/HTTP's throttling answer: 429 with `Retry-After`, which senders retry after
    /// the delay.
    fn overloaded(message: impl ToString, retry_after: std::time::Duration) -> Refusal {
        Refusal {
            status: StatusCode::TOO_MANY_REQUESTS,
            code: tonic::Code::ResourceExhausted,
            message: message.to_string(),
            retry_after: Some(ExportError::retry_after_secs(retry_after)),
        }
    }

    fn into_response(self, encoding: Encoding) -> Response {
        let Refusal {
            status,
            code,
            message,
            retry_after,
        } = self;
        if status.is_server_error() {
            tracing::warn!(%message, "otlp export failed");
        } else {
            tracing::debug!(%message, "otlp export refused");
        }
        let body = match encoding {
            Encoding::Protobuf => RpcStatus {
                code: code as i32,
                message,
            }
            .encode_to_vec(),
            Encoding::Json => serde_json::to_vec(
                &serde_json::json!({ "code": code as i32, "message": message, "error": message }),
            )
            .expect("json of strings"),
        };
        let mut response = (status, [(header::CONTENT_TYPE, encoding.content_type())], body).into_response();
        if let Some(seconds) = retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from(seconds));
        }
        response
    }
}

fn success(encoding: Encoding, response: &ExportProfilesServiceResponse) -> Response {
    let body = match encoding {
        Encoding::Protobuf => response.encode_to_vec(),
        Encoding::Json => {
            let value = match &response.partial_success {
                Some(p) => serde_json::json!({ "partialSuccess": {
                    "rejectedProfiles": p.rejected_profiles.to_string(),
                    "errorMessage": p.error_message,
                }}),
                None => serde_json::json!({}),
            };
            serde_json::to_vec(&value).expect("json of strings")
        }
    };
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, encoding.content_type())],
        body,
    )
        .into_response()
}

/// Which OTLP profiles API a request came to.
#[derive(Clone, Copy)]
enum Api {
    Development,
    Experimental,
}

impl Api {
    fn decode(self, body: &[u8], encoding: Encoding, headers: &HeaderMap) -> Result<Conversion, Refusal> {
        let decoded: Result<Conversion, DecodeError> = match self {
            Api::Development => {
                let declared = declared_layout(headers)?;
                match encoding {
                    Encoding::Protobuf => layout::decode_protobuf(body, declared),
                    Encoding::Json => layout::decode_json(body, declared),
                }
                .map(unconverted)
            }
            Api::Experimental => match encoding {
                Encoding::Protobuf => experimental::from_protobuf(body),
                Encoding::Json => experimental::from_json(body),
            },
        };
        decoded.map_err(Refusal::invalid)
    }
}

/// The layout named by `OTLP-Profiles-Development-Version`, if the sender set it.
fn declared_layout(headers: &HeaderMap) -> Result<Option<Layout>, Refusal> {
    let Some(value) = headers.get(layout::HEADER) else {
        return Ok(None);
    };
    let name = "OTLP-Profiles-Development-Version";
    let value = value
        .to_str()
        .map_err(|_| Refusal::invalid(format!("invalid {name} header: not ASCII")))?;
    Layout::from_header(value)
        .map(Some)
        .map_err(|e| Refusal::invalid(format!("invalid {name} header {value:?}: {e}")))
}

pub async fn export(State(state): State<AppState>, request: Request) -> Response {
    handle(&state, Api::Development, request).await
}

pub async fn export_experimental(State(state): State<AppState>, request: Request) -> Response {
    handle(&state, Api::Experimental, request).await
}

async fn handle(state: &AppState, api: Api, request: Request) -> Response {
    let encoding = Encoding::from_headers(request.headers());
    // Errors use the request's encoding; JSON when it has none we understand.
    let response_encoding = encoding.unwrap_or(Encoding::Json);
    match try_export(state, api, encoding, request).await {
        Ok(response) => success(response_encoding, &response),
        Err(refusal) => refusal.into_response(response_encoding),
    }
}

async fn try_export(
    state: &AppState,
    api: Api,
    encoding: Option<Encoding>,
    request: Request,
) -> Result<ExportProfilesServiceResponse, Refusal> {
    let (parts, body) = request.into_parts();
    let headers = parts.headers;
    let limit = state.max_message_bytes;
    // Read the body before any refusal: answering while the client is still sending resets
    // the connection, and the client would see a broken pipe instead of our message.
    let raw = read_limited(body, limit).await.map_err(|e| match e {
        ReadError::TooLarge => Refusal::too_large(format!("request body exceeds the limit of {limit} bytes")),
        ReadError::Body(e) => Refusal::invalid(format!("failed to read request body: {e}")),
    })?;
    let Some(encoding) = encoding else {
        let got = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("none");
        return Err(Refusal::unsupported(format!(
            "unsupported content type {got:?}: use {PROTOBUF} or {JSON}"
        )));
    };
    let tenant =
        tenant::parse(headers.get(tenant::HEADER).map(|v| v.as_bytes())).map_err(Refusal::invalid)?;
    let body = inflate(&raw, &headers, None, limit).map_err(|e| match e {
        BodyError::TooLarge { .. } => Refusal::too_large(e),
        BodyError::UnsupportedEncoding(_) => Refusal::unsupported(e),
        BodyError::Malformed(_) => Refusal::invalid(e),
    })?;
    let conversion = api.decode(&body, encoding, &headers)?;
    let exported = state
        .exporter
        .export(tenant, conversion)
        .await
        .map_err(|e| match e {
            ExportError::InvalidArgument(m) => Refusal::invalid(m),
            ExportError::Unavailable(m) => Refusal::unavailable(m),
            ExportError::Overloaded { message, retry_after } => Refusal::overloaded(message, retry_after),
            ExportError::TooLarge(m) => Refusal::too_large(m),
        })?;
    Ok(exported.response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_layout_header_is_named() {
        let mut headers = HeaderMap::new();
        assert!(declared_layout(&headers).is_ok_and(|l| l.is_none()));
        headers.insert(layout::HEADER, "banana".parse().unwrap());
        let Err(refusal) = declared_layout(&headers) else {
            panic!("accepted a bad header")
        };
        assert_eq!(refusal.status, StatusCode::BAD_REQUEST);
        assert!(
            refusal.message.contains("OTLP-Profiles-Development-Version"),
            "{}",
            refusal.message
        );
        assert!(refusal.message.contains("banana"), "{}", refusal.message);
    }
}
