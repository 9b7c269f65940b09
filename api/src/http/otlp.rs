//! OTLP/HTTP: `POST /v1development/profiles` (any layout, see the
//! `OTLP-Profiles-Development-Version` header) and the seed format's
//! `POST /v1experimental/profiles`; protobuf or JSON, optional gzip. The response (and an
//! error's `google.rpc.Status`) uses the request's content type.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use prost::Message;
use stackhouse_ingest::convert::Conversion;
use stackhouse_ingest::otlp::DecodeError;
use stackhouse_ingest::otlp::experimental;
use stackhouse_ingest::otlp::layout;
use stackhouse_proto::otlp_collector::ExportProfilesServiceResponse;

use super::AppState;
use super::body::{content_type_essence, inflate, read_limited};
use crate::error::ApiError;
use crate::export::{Exported, unconverted, unconverted_flat};
use crate::monitoring::{self, Protocol};
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
        match content_type_essence(headers).as_str() {
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
    fn protocol(self) -> Protocol {
        match self {
            Api::Development => Protocol::OtlpHttp,
            Api::Experimental => Protocol::OtlpExperimentalHttp,
        }
    }

    fn decode(self, body: &[u8], encoding: Encoding, headers: &HeaderMap) -> Result<Conversion, ApiError> {
        let decoded: Result<Conversion, DecodeError> = match self {
            Api::Development => {
                let declared = declared_layout(headers)?;
                match encoding {
                    Encoding::Protobuf => layout::decode_protobuf_flat(body, declared).map(unconverted_flat),
                    Encoding::Json => layout::decode_json(body, declared).map(unconverted),
                }
            }
            Api::Experimental => match encoding {
                Encoding::Protobuf => experimental::from_protobuf(body),
                Encoding::Json => experimental::from_json(body),
            },
        };
        decoded.map_err(ApiError::invalid)
    }
}

/// The layout named by `OTLP-Profiles-Development-Version`, if the sender set it.
fn declared_layout(headers: &HeaderMap) -> Result<Option<layout::Layout>, ApiError> {
    let value = headers.get(layout::HEADER).map(|v| v.as_bytes());
    crate::export::declared_layout(value, "OTLP-Profiles-Development-Version header")
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
    let result = try_export(state, api, encoding, request).await;
    monitoring::ingest_request(api.protocol(), result.as_ref());
    match result {
        Ok(exported) => success(response_encoding, &exported.response()),
        Err(e) => e.into_rpc_status(response_encoding == Encoding::Protobuf),
    }
}

async fn try_export(
    state: &AppState,
    api: Api,
    encoding: Option<Encoding>,
    request: Request,
) -> Result<Exported, ApiError> {
    let (parts, body) = request.into_parts();
    let headers = parts.headers;
    let limit = state.max_message_bytes;
    // Read the body before any refusal: answering while the client is still sending resets
    // the connection, and the client would see a broken pipe instead of our message.
    let raw = read_limited(body, limit).await?;
    let Some(encoding) = encoding else {
        let got = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("none");
        return Err(ApiError::unsupported_media_type(format!(
            "unsupported content type {got:?}: use {PROTOBUF} or {JSON}"
        )));
    };
    let tenant = tenant::from_headers(&headers)?;
    let body = inflate(&raw, &headers, None, limit)?;
    let conversion = api.decode(&body, encoding, &headers)?;
    state
        .exporter
        .export(tenant, conversion, api.protocol(), raw.len())
        .await
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
        assert_eq!(refusal.status(), StatusCode::BAD_REQUEST);
        assert!(
            refusal.message.contains("OTLP-Profiles-Development-Version"),
            "{}",
            refusal.message
        );
        assert!(refusal.message.contains("banana"), "{}", refusal.message);
    }
}
