//! Connect `POST /push.v1.PusherService/Push`, as the Pyroscope SDKs send it:
//! `application/proto` or `application/json` (protojson, `rawProfile` base64), optionally
//! gzipped. Each series' labels become the resource; each sample's `raw_profile` is pprof.
//!
//! A malformed sample is refused alone: the others are stored, then the answer is a Connect
//! `invalid_argument` error saying how many were stored and naming each refused sample, so
//! that a client neither loses the good profiles nor retries the bad ones forever.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use prost::Message;
use stackhouse_ingest::body::BodyError;
use stackhouse_ingest::convert::{Conversion, RequestBuilder};
use stackhouse_ingest::pprof::{self, PprofOptions};
use stackhouse_ingest::pyroscope::source_from_labels;
use stackhouse_proto::pyroscope_push::{PushRequest, PushResponse};

use super::AppState;
use super::body::{ReadError, content_type_essence, inflate, read_limited};
use crate::export::ExportError;
use crate::tenant;

const PUSH_REQUEST: &str = "push.v1.PushRequest";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Codec {
    Proto,
    Json,
}

impl Codec {
    fn from_headers(headers: &HeaderMap) -> Option<Codec> {
        match content_type_essence(headers).as_str() {
            "application/proto" | "application/protobuf" | "application/x-protobuf" => Some(Codec::Proto),
            "application/json" => Some(Codec::Json),
            _ => None,
        }
    }
}

/// A Connect error: `{"code": "...", "message": "..."}` with the code's HTTP status.
#[derive(Debug)]
pub struct ConnectError {
    code: &'static str,
    message: String,
    /// `Retry-After` seconds; an `unavailable` without one says 1.
    retry_after: Option<u64>,
}

impl ConnectError {
    fn new(code: &'static str, message: impl ToString) -> ConnectError {
        ConnectError {
            code,
            message: message.to_string(),
            retry_after: None,
        }
    }

    fn invalid(message: impl ToString) -> ConnectError {
        ConnectError::new("invalid_argument", message)
    }

    /// The HTTP status Connect's protocol assigns to the code.
    fn status(&self) -> StatusCode {
        match self.code {
            "invalid_argument" => StatusCode::BAD_REQUEST,
            "resource_exhausted" => StatusCode::TOO_MANY_REQUESTS,
            "unavailable" => StatusCode::SERVICE_UNAVAILABLE,
            "unimplemented" => StatusCode::NOT_FOUND,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl IntoResponse for ConnectError {
    fn into_response(self) -> Response {
        let status = self.status();
        if status.is_server_error() {
            tracing::warn!(message = %self.message, "push failed");
        } else {
            tracing::debug!(message = %self.message, "push refused");
        }
        let body = serde_json::json!({ "code": self.code, "message": self.message });
        let mut response = (status, axum::Json(body)).into_response();
        let retry_after = self
            .retry_after
            .or((status == StatusCode::SERVICE_UNAVAILABLE).then_some(1));
        if let Some(seconds) = retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from(seconds));
        }
        response
    }
}

pub async fn push(State(state): State<AppState>, request: Request) -> Response {
    let codec = Codec::from_headers(request.headers());
    match try_push(&state, codec, request).await {
        Ok(()) => match codec {
            Some(Codec::Proto) => (
                [(header::CONTENT_TYPE, "application/proto")],
                PushResponse {}.encode_to_vec(),
            )
                .into_response(),
            _ => ([(header::CONTENT_TYPE, "application/json")], "{}").into_response(),
        },
        Err(e) => e.into_response(),
    }
}

async fn try_push(state: &AppState, codec: Option<Codec>, request: Request) -> Result<(), ConnectError> {
    let (parts, body) = request.into_parts();
    let limit = state.max_message_bytes;
    let raw = read_limited(body, limit).await.map_err(|e| match e {
        ReadError::TooLarge => ConnectError::new(
            "resource_exhausted",
            format!("request body exceeds the limit of {limit} bytes"),
        ),
        ReadError::Body(e) => ConnectError::invalid(format!("failed to read request body: {e}")),
    })?;
    let Some(codec) = codec else {
        return Err(ConnectError::invalid(format!(
            "unsupported content type {:?}: use application/proto or application/json",
            content_type_essence(&parts.headers)
        )));
    };
    let tenant = tenant::parse(parts.headers.get(tenant::HEADER).map(|v| v.as_bytes()))
        .map_err(ConnectError::invalid)?;
    let body =
        inflate(&raw, &parts.headers, Some("connect-content-encoding"), limit).map_err(|e| match e {
            BodyError::TooLarge { .. } => ConnectError::new("resource_exhausted", e),
            BodyError::UnsupportedEncoding(_) => ConnectError::new("unimplemented", e),
            BodyError::Malformed(_) => ConnectError::invalid(e),
        })?;
    let request = decode(&body, codec)?;
    drop(body);
    let raw_total: usize = request.series.iter().map(|s| s.samples.len()).sum();
    let conversion = tokio::task::spawn_blocking(move || convert(&request, limit))
        .await
        .map_err(|e| ConnectError::new("internal", format!("conversion task failed: {e}")))?;
    let raw_refused = conversion.rejected_profiles;
    let exported = state
        .exporter
        .export(tenant, conversion)
        .await
        .map_err(|e| match e {
            ExportError::InvalidArgument(m) => ConnectError::invalid(m),
            ExportError::Unavailable(m) => ConnectError::new("unavailable", m),
            // Connect's resource_exhausted is HTTP 429; the delay tells the SDK when.
            ExportError::Overloaded { message, retry_after } => ConnectError {
                retry_after: Some(ExportError::retry_after_secs(retry_after)),
                ..ConnectError::new("resource_exhausted", message)
            },
            // Too large for good: the same answer as an over-limit body, without a delay.
            ExportError::TooLarge(m) => ConnectError::new("resource_exhausted", m),
        })?;
    if exported.rejected_profiles == 0 {
        return Ok(());
    }
    let refused_by_normalization = exported.rejected_profiles - raw_refused;
    let stored = if refused_by_normalization == 0 {
        format!("stored {} of {raw_total} profiles", raw_total - raw_refused)
    } else {
        // A raw pprof becomes one profile per sample type; some of those were refused.
        format!(
            "stored {} of {} converted profiles ({raw_refused} of {raw_total} raw profiles unreadable)",
            exported.stored_profiles,
            exported.stored_profiles + refused_by_normalization,
        )
    };
    Err(ConnectError::invalid(format!(
        "{stored}; {}",
        exported.errors.join("; ")
    )))
}

fn decode(body: &[u8], codec: Codec) -> Result<PushRequest, ConnectError> {
    match codec {
        Codec::Proto => PushRequest::decode(body)
            .map_err(|e| ConnectError::invalid(format!("failed to decode PushRequest: {e}"))),
        Codec::Json => {
            let desc = stackhouse_proto::descriptor_pool()
                .get_message_by_name(PUSH_REQUEST)
                .expect("push.v1 is compiled into the descriptor pool");
            let mut de = serde_json::Deserializer::from_slice(body);
            let options = prost_reflect::DeserializeOptions::new().deny_unknown_fields(false);
            let message = prost_reflect::DynamicMessage::deserialize_with_options(desc, &mut de, &options)
                .and_then(|m| de.end().map(|()| m))
                .map_err(|e| ConnectError::invalid(format!("failed to decode PushRequest from JSON: {e}")))?;
            message
                .transcode_to::<PushRequest>()
                .map_err(|e| ConnectError::invalid(format!("failed to decode PushRequest from JSON: {e}")))
        }
    }
}

/// Every sample converted on its own; a failure refuses that sample only.
fn convert(request: &PushRequest, limit: usize) -> Conversion {
    let mut builder = RequestBuilder::new();
    let mut rejected_profiles = 0;
    let mut errors = Vec::new();
    for (i, series) in request.series.iter().enumerate() {
        let source = source_from_labels(series.labels.iter().map(|l| (l.name.as_str(), l.value.as_str())));
        for (j, sample) in series.samples.iter().enumerate() {
            if let Err(e) = pprof::convert(
                &sample.raw_profile,
                &PprofOptions::default(),
                &source,
                limit,
                &mut builder,
            ) {
                rejected_profiles += 1;
                errors.push(format!("series[{i}].samples[{j}]: {e}"));
            }
        }
    }
    Conversion {
        request: builder.finish(),
        rejected_profiles,
        errors,
    }
}

#[cfg(test)]
mod tests {
    use stackhouse_proto::pyroscope_push::{RawProfileSeries, RawSample};
    use stackhouse_proto::pyroscope_types::LabelPair;

    use super::*;

    fn sample_request() -> PushRequest {
        PushRequest {
            series: vec![RawProfileSeries {
                labels: vec![
                    LabelPair {
                        name: "service_name".into(),
                        value: "py-app".into(),
                    },
                    LabelPair {
                        name: "__name__".into(),
                        value: "process_cpu".into(),
                    },
                ],
                samples: vec![RawSample {
                    raw_profile: vec![0x1f, 0x8b, 0, 0xff],
                    id: "0b1e".into(),
                }],
            }],
        }
    }

    #[test]
    fn connect_json_is_protojson_with_base64_bytes() {
        let json = br#"{"series":[{"labels":[{"name":"service_name","value":"py-app"},
            {"name":"__name__","value":"process_cpu"}],
            "samples":[{"rawProfile":"H4sA/w==","ID":"0b1e"}]}],"futureField":1}"#;
        assert_eq!(decode(json, Codec::Json).unwrap(), sample_request());
        let proto = sample_request().encode_to_vec();
        assert_eq!(decode(&proto, Codec::Proto).unwrap(), sample_request());
        let err = decode(b"{\"series\": 5}", Codec::Json).unwrap_err();
        assert_eq!(err.code, "invalid_argument");
        assert!(err.message.contains("PushRequest"), "{}", err.message);
    }

    #[test]
    fn content_types() {
        let mut h = HeaderMap::new();
        assert_eq!(Codec::from_headers(&h), None);
        h.insert(header::CONTENT_TYPE, "application/proto".parse().unwrap());
        assert_eq!(Codec::from_headers(&h), Some(Codec::Proto));
        h.insert(
            header::CONTENT_TYPE,
            "Application/JSON; charset=utf-8".parse().unwrap(),
        );
        assert_eq!(Codec::from_headers(&h), Some(Codec::Json));
    }

    #[test]
    fn a_bad_sample_is_refused_alone_and_named() {
        let mut request = sample_request();
        request.series[0].samples[0].raw_profile = b"not a profile".to_vec();
        let conversion = convert(&request, 1 << 20);
        assert_eq!(conversion.rejected_profiles, 1);
        assert!(
            conversion.errors[0].starts_with("series[0].samples[0]: "),
            "{:?}",
            conversion.errors
        );
    }
}
