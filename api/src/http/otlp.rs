//! OTLP/HTTP: `POST /v1development/profiles` (any layout, see the
//! `OTLP-Profiles-Development-Version` header) and the seed format's
//! `POST /v1experimental/profiles`; protobuf or JSON, optional gzip. The response (and an
//! error's `google.rpc.Status`) uses the request's content type.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use prost::Message;
use stackhouse_ingest::formats::{self, Body, Encoding, Params, WireFormat};
use stackhouse_ingest::otlp::layout;
use stackhouse_ingest::pipeline::{Exported, Payload};
use stackhouse_proto::otlp_collector::ExportProfilesServiceResponse;

use crate::error::ApiError;
use crate::monitoring::{self, Protocol};
use crate::state::AppState;
use crate::tenant;
use crate::wire::body::{content_type_essence, inflate_bytes, read_limited};

const PROTOBUF: &str = "application/x-protobuf";
const JSON: &str = "application/json";

fn encoding_of(headers: &HeaderMap) -> Option<Encoding> {
    match content_type_essence(headers).as_str() {
        PROTOBUF | "application/protobuf" => Some(Encoding::Protobuf),
        JSON => Some(Encoding::Json),
        _ => None,
    }
}

fn content_type(encoding: Encoding) -> &'static str {
    match encoding {
        Encoding::Protobuf => PROTOBUF,
        Encoding::Json => JSON,
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
        [(header::CONTENT_TYPE, content_type(encoding))],
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

    /// The format of the request and what its headers say about it.
    fn format(
        self,
        encoding: Encoding,
        headers: &HeaderMap,
    ) -> Result<(&'static dyn WireFormat, Params), ApiError> {
        let format: &'static dyn WireFormat = match (self, encoding) {
            (Api::Development, Encoding::Protobuf) => &formats::otlp::PROTOBUF,
            (Api::Development, Encoding::Json) => &formats::otlp::JSON,
            (Api::Experimental, Encoding::Protobuf) => &formats::experimental::PROTOBUF,
            (Api::Experimental, Encoding::Json) => &formats::experimental::JSON,
        };
        let params = match self {
            Api::Development => Params {
                layout: declared_layout(headers)?,
                ..Params::default()
            },
            Api::Experimental => Params::default(),
        };
        Ok((format, params))
    }
}

/// The layout named by `OTLP-Profiles-Development-Version`, if the sender set it.
fn declared_layout(headers: &HeaderMap) -> Result<Option<layout::Layout>, ApiError> {
    let values = headers.get_all(layout::HEADER).into_iter().map(|v| v.as_bytes());
    Ok(formats::otlp::declared_layout(
        values,
        "OTLP-Profiles-Development-Version header",
    )?)
}

pub(super) async fn export(State(state): State<AppState>, request: Request) -> Response {
    handle(&state, Api::Development, request).await
}

pub(super) async fn export_experimental(State(state): State<AppState>, request: Request) -> Response {
    handle(&state, Api::Experimental, request).await
}

async fn handle(state: &AppState, api: Api, request: Request) -> Response {
    let encoding = encoding_of(request.headers());
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
    let body = inflate_bytes(&raw, &headers, None, limit)?;
    let (format, params) = api.format(encoding, &headers)?;
    let payload = Payload {
        format,
        body: Body::Raw(body),
        params,
        sent_bytes: raw.len(),
    };
    let exported = state.pipeline.ingest(tenant, payload).await?;
    monitoring::ingest_volume(api.protocol(), raw.len(), &exported);
    Ok(exported)
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
        let mut headers = HeaderMap::new();
        headers.insert(layout::HEADER, "1".parse().unwrap());
        assert!(declared_layout(&headers).is_ok_and(|l| l == Some(layout::Layout::V1_10)));
        headers.append(layout::HEADER, "1".parse().unwrap());
        let Err(refusal) = declared_layout(&headers) else {
            panic!("accepted a repeated header")
        };
        assert_eq!(refusal.status(), StatusCode::BAD_REQUEST);
        assert!(refusal.message.contains("more than once"), "{}", refusal.message);
    }
}
