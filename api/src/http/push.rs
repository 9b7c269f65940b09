//! Connect `POST /push.v1.PusherService/Push`, as the Pyroscope SDKs send it:
//! `application/proto` or `application/json` (protojson, `rawProfile` base64), optionally
//! gzipped. Each series' labels become the resource; each sample's `raw_profile` is pprof.
//!
//! A malformed sample is refused alone: the others are stored, then the answer is a Connect
//! `invalid_argument` error saying how many were stored and naming each refused sample, so
//! that a client neither loses the good profiles nor retries the bad ones forever.

use axum::extract::{Request, State};
use axum::response::Response;
use stackhouse_ingest::formats::{self, Body, Params};
use stackhouse_ingest::pipeline::{Exported, Payload};
use stackhouse_proto::pyroscope_push::{PushRequest, PushResponse};

use crate::error::ApiError;
use crate::monitoring::{self, Protocol};
use crate::state::AppState;
use crate::tenant;
use crate::wire::connect::{read_request, respond};

pub(super) async fn push(State(state): State<AppState>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let outcome = async {
        let (codec, request, bytes) =
            read_request::<PushRequest>(&parts.headers, body, state.max_message_bytes).await?;
        let tenant = tenant::from_headers(&parts.headers)?;
        let stored = store(&state, tenant, request, bytes).await;
        let done = Exported::default();
        monitoring::ingest_request(Protocol::PyroscopePush, stored.as_ref().map(|()| &done));
        stored?;
        Ok::<_, ApiError>(respond(codec, &parts.headers, &PushResponse {}))
    };
    outcome.await.unwrap_or_else(ApiError::into_connect)
}

/// Stores the request; a partly refused one is an error naming what was refused.
async fn store(state: &AppState, tenant: String, request: PushRequest, bytes: usize) -> Result<(), ApiError> {
    let raw_total: usize = request.series.iter().map(|s| s.samples.len()).sum();
    let payload = Payload {
        format: &formats::push::Push,
        body: Body::Push(request),
        params: Params {
            limit: state.max_message_bytes,
            ..Params::default()
        },
        sent_bytes: bytes,
    };
    let exported = state.pipeline.ingest(tenant, payload).await?;
    monitoring::ingest_volume(Protocol::PyroscopePush, bytes, &exported);
    if exported.rejected_profiles == 0 {
        return Ok(());
    }
    let raw_refused = exported.conversion_rejected;
    let refused_by_normalization = exported.rejected_profiles - raw_refused;
    let stored = if refused_by_normalization == 0 {
        format!("stored {} of {raw_total} profiles", raw_total - raw_refused)
    } else {
        // A raw pprof becomes one profile per sample type; some of those were refused.
        format!(
            "stored {} of {} converted profiles ({raw_refused} of {raw_total} raw profiles unreadable)",
            exported.stored_profiles,
            exported.stored_profiles + exported.repeated_profiles + refused_by_normalization,
        )
    };
    Err(ApiError::invalid(format!(
        "{stored}; {}",
        exported.errors.join("; ")
    )))
}

#[cfg(test)]
mod tests {
    use stackhouse_proto::pyroscope_push::{RawProfileSeries, RawSample};
    use stackhouse_proto::pyroscope_types::LabelPair;

    use super::*;
    use crate::wire::connect::Codec;

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
        assert_eq!(Codec::Json.decode::<PushRequest>(json).unwrap(), sample_request());
        let proto = prost::Message::encode_to_vec(&sample_request());
        assert_eq!(
            Codec::Proto.decode::<PushRequest>(&proto).unwrap(),
            sample_request()
        );
        let err = Codec::Json.decode::<PushRequest>(b"{\"series\": 5}").unwrap_err();
        assert_eq!(err.kind.connect_code(), "invalid_argument");
        assert!(err.message.contains("PushRequest"), "{}", err.message);
    }
}
