//! OTLP/HTTP: `POST /v1development/profiles`, protobuf or JSON, optional gzip. The response
//! (and an error's `google.rpc.Status`) uses the request's content type.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use prost::Message;
use stackhouse_ingest::body::{BodyError, decompress};
use stackhouse_ingest::otlp::decode::{decode_json, decode_protobuf};
use stackhouse_proto::otlp_collector::ExportProfilesServiceResponse;

use super::AppState;
use crate::export::ExportError;
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
}

impl Refusal {
    fn invalid(message: impl ToString) -> Refusal {
        Refusal {
            status: StatusCode::BAD_REQUEST,
            code: tonic::Code::InvalidArgument,
            message: message.to_string(),
        }
    }

    fn unsupported(message: impl ToString) -> Refusal {
        Refusal {
            status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
            code: tonic::Code::InvalidArgument,
            message: message.to_string(),
        }
    }

    fn too_large(message: impl ToString) -> Refusal {
        Refusal {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            code: tonic::Code::ResourceExhausted,
            message: message.to_string(),
        }
    }

    fn unavailable(message: impl ToString) -> Refusal {
        Refusal {
            status: StatusCode::SERVICE_UNAVAILABLE,
            code: tonic::Code::Unavailable,
            message: message.to_string(),
        }
    }

    fn into_response(self, encoding: Encoding) -> Response {
        let Refusal {
            status,
            code,
            message,
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
        if status == StatusCode::SERVICE_UNAVAILABLE {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
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

pub async fn export(State(state): State<AppState>, request: Request) -> Response {
    let encoding = Encoding::from_headers(request.headers());
    // Errors use the request's encoding; JSON when it has none we understand.
    let response_encoding = encoding.unwrap_or(Encoding::Json);
    match try_export(&state, encoding, request).await {
        Ok(response) => success(response_encoding, &response),
        Err(refusal) => refusal.into_response(response_encoding),
    }
}

async fn try_export(
    state: &AppState,
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
    let content_encoding = headers
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok());
    let body = decompress(&raw, content_encoding, limit).map_err(|e| match e {
        BodyError::TooLarge { .. } => Refusal::too_large(e),
        BodyError::UnsupportedEncoding(_) => Refusal::unsupported(e),
        BodyError::Malformed(_) => Refusal::invalid(e),
    })?;
    let request = match encoding {
        Encoding::Protobuf => decode_protobuf(&body),
        Encoding::Json => decode_json(&body),
    }
    .map_err(Refusal::invalid)?;
    state.exporter.export(tenant, request).await.map_err(|e| match e {
        ExportError::InvalidArgument(m) => Refusal::invalid(m),
        ExportError::Unavailable(m) => Refusal::unavailable(m),
    })
}

enum ReadError {
    TooLarge,
    Body(axum::Error),
}

/// Reads at most `limit` bytes. Past the limit the rest is read and dropped (up to a bound)
/// before answering 413: a server that answers while the client is still sending resets the
/// connection, and the client sees a broken pipe instead of the error.
async fn read_limited(body: axum::body::Body, limit: usize) -> Result<bytes::Bytes, ReadError> {
    use http_body_util::BodyExt;
    let drain_bound = limit.saturating_mul(4).max(16 << 20);
    let mut body = body;
    let mut buf = bytes::BytesMut::new();
    let mut seen = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(ReadError::Body)?;
        let Ok(data) = frame.into_data() else { continue };
        seen = seen.saturating_add(data.len());
        if seen > drain_bound {
            break;
        }
        if seen <= limit {
            buf.extend_from_slice(&data);
        }
    }
    if seen > limit {
        Err(ReadError::TooLarge)
    } else {
        Ok(buf.freeze())
    }
}
