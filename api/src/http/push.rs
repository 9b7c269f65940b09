//! Connect `POST /push.v1.PusherService/Push`, as the Pyroscope SDKs send it:
//! `application/proto` or `application/json` (protojson, `rawProfile` base64), optionally
//! gzipped. Each series' labels become the resource; each sample's `raw_profile` is pprof.
//!
//! A malformed sample is refused alone: the others are stored, then the answer is a Connect
//! `invalid_argument` error saying how many were stored and naming each refused sample, so
//! that a client neither loses the good profiles nor retries the bad ones forever.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use prost::Message;
use stackhouse_ingest::convert::{Conversion, RequestBuilder};
use stackhouse_ingest::pprof::{self, PprofOptions};
use stackhouse_ingest::pyroscope::source_from_labels;
use stackhouse_proto::pyroscope_push::{PushRequest, PushResponse};

use super::AppState;
use super::body::{content_type_essence, inflate, read_limited};
use crate::error::ApiError;
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
        Err(e) => e.into_connect(),
    }
}

async fn try_push(state: &AppState, codec: Option<Codec>, request: Request) -> Result<(), ApiError> {
    let (parts, body) = request.into_parts();
    let limit = state.max_message_bytes;
    let raw = read_limited(body, limit).await?;
    let Some(codec) = codec else {
        return Err(ApiError::invalid(format!(
            "unsupported content type {:?}: use application/proto or application/json",
            content_type_essence(&parts.headers)
        )));
    };
    let tenant = tenant::from_headers(&parts.headers)?;
    let body = inflate(&raw, &parts.headers, Some("connect-content-encoding"), limit)?;
    let request = decode(&body, codec)?;
    drop(body);
    let raw_total: usize = request.series.iter().map(|s| s.samples.len()).sum();
    let conversion = tokio::task::spawn_blocking(move || convert(&request, limit)).await?;
    let raw_refused = conversion.rejected_profiles;
    let exported = state.exporter.export(tenant, conversion).await?;
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
    Err(ApiError::invalid(format!(
        "{stored}; {}",
        exported.errors.join("; ")
    )))
}

fn decode(body: &[u8], codec: Codec) -> Result<PushRequest, ApiError> {
    match codec {
        Codec::Proto => PushRequest::decode(body)
            .map_err(|e| ApiError::invalid(format!("failed to decode PushRequest: {e}"))),
        Codec::Json => {
            let desc = stackhouse_proto::descriptor_pool()
                .get_message_by_name(PUSH_REQUEST)
                .expect("push.v1 is compiled into the descriptor pool");
            let mut de = serde_json::Deserializer::from_slice(body);
            let options = prost_reflect::DeserializeOptions::new().deny_unknown_fields(false);
            let message = prost_reflect::DynamicMessage::deserialize_with_options(desc, &mut de, &options)
                .and_then(|m| de.end().map(|()| m))
                .map_err(|e| ApiError::invalid(format!("failed to decode PushRequest from JSON: {e}")))?;
            message
                .transcode_to::<PushRequest>()
                .map_err(|e| ApiError::invalid(format!("failed to decode PushRequest from JSON: {e}")))
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
        assert_eq!(err.kind.connect_code(), "invalid_argument");
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
