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

fn error(encoding: Encoding, status: StatusCode, code: tonic::Code, message: String) -> Response {
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
    let headers = request.headers().clone();
    // Read the body before any refusal: answering while the client is still sending resets
    // the connection, and the client would see a broken pipe instead of our message.
    let response_encoding = Encoding::from_headers(&headers).unwrap_or(Encoding::Json);
    let limit = state.max_message_bytes;
    let raw = match read_limited(request.into_body(), limit).await {
        Ok(b) => b,
        Err(ReadError::TooLarge) => {
            let message = format!("request body exceeds the limit of {limit} bytes");
            return error(
                response_encoding,
                StatusCode::PAYLOAD_TOO_LARGE,
                tonic::Code::ResourceExhausted,
                message,
            );
        }
        Err(ReadError::Body(e)) => {
            let message = format!("failed to read request body: {e}");
            return error(
                response_encoding,
                StatusCode::BAD_REQUEST,
                tonic::Code::InvalidArgument,
                message,
            );
        }
    };
    let Some(encoding) = Encoding::from_headers(&headers) else {
        let got = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("none");
        let message = format!("unsupported content type {got:?}: use {PROTOBUF} or {JSON}");
        return error(
            Encoding::Json,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            tonic::Code::InvalidArgument,
            message,
        );
    };
    let tenant = match tenant::parse(headers.get(tenant::HEADER).map(|v| v.as_bytes())) {
        Ok(t) => t,
        Err(m) => return error(encoding, StatusCode::BAD_REQUEST, tonic::Code::InvalidArgument, m),
    };
    let content_encoding = headers
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok());
    let body = match decompress(&raw, content_encoding, limit) {
        Ok(b) => b,
        Err(e @ BodyError::TooLarge { .. }) => {
            return error(
                encoding,
                StatusCode::PAYLOAD_TOO_LARGE,
                tonic::Code::ResourceExhausted,
                e.to_string(),
            );
        }
        Err(e @ BodyError::UnsupportedEncoding(_)) => {
            return error(
                encoding,
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                tonic::Code::InvalidArgument,
                e.to_string(),
            );
        }
        Err(e) => {
            return error(
                encoding,
                StatusCode::BAD_REQUEST,
                tonic::Code::InvalidArgument,
                e.to_string(),
            );
        }
    };
    let decoded = match encoding {
        Encoding::Protobuf => decode_protobuf(&body),
        Encoding::Json => decode_json(&body),
    };
    let request = match decoded {
        Ok(r) => r,
        Err(e) => {
            return error(
                encoding,
                StatusCode::BAD_REQUEST,
                tonic::Code::InvalidArgument,
                e.to_string(),
            );
        }
    };
    match state.exporter.export(tenant, request).await {
        Ok(response) => success(encoding, &response),
        Err(ExportError::InvalidArgument(m)) => {
            error(encoding, StatusCode::BAD_REQUEST, tonic::Code::InvalidArgument, m)
        }
        Err(ExportError::Unavailable(m)) => error(
            encoding,
            StatusCode::SERVICE_UNAVAILABLE,
            tonic::Code::Unavailable,
            m,
        ),
    }
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
