//! Connect unary framing: a request body is one bare message, `application/proto` or
//! `application/json` (protojson), maybe gzipped; the answer uses the request's codec.
//!
//! JSON is read as Connect's clients write it and Grafana's apps hand-write it: either
//! field name (`profile_typeID` or `profileTypeID`), 64-bit integers as numbers or
//! strings, enums by name or number; unknown fields and enum names are ignored. It is
//! written as protojson: camelCase names, 64-bit integers as strings, defaults omitted.

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use prost::{Message, Name};
use prost_reflect::{DeserializeOptions, DynamicMessage, MessageDescriptor, SerializeOptions};

use super::body::{accepts_gzip, content_type_essence, gzip, inflate, read_limited};
use crate::error::ApiError;

/// Answers smaller than this are sent as they are: gzip would save less than it costs.
const GZIP_MIN_BYTES: usize = 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    Proto,
    Json,
}

impl Codec {
    pub fn from_headers(headers: &HeaderMap) -> Result<Codec, ApiError> {
        match content_type_essence(headers).as_str() {
            "application/proto" | "application/protobuf" | "application/x-protobuf" => Ok(Codec::Proto),
            "application/json" => Ok(Codec::Json),
            other => Err(ApiError::unsupported_media_type(format!(
                "unsupported content type {other:?}: use application/proto or application/json"
            ))),
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Codec::Proto => "application/proto",
            Codec::Json => "application/json",
        }
    }

    /// One message; an empty body is the empty message in either codec.
    pub fn decode<M: Message + Default + Name>(self, body: &[u8]) -> Result<M, ApiError> {
        let failed = |e: &dyn std::fmt::Display| {
            ApiError::invalid(format!("failed to decode {}: {e}", M::full_name()))
        };
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(M::default());
        }
        match self {
            Codec::Proto => M::decode(body).map_err(|e| failed(&e)),
            Codec::Json => {
                // serde_json skips an unknown field's string without checking its UTF-8,
                // so a body is checked whole: JSON must be UTF-8 everywhere.
                if let Err(e) = std::str::from_utf8(body) {
                    return Err(ApiError::invalid(format!(
                        "failed to decode {}: the JSON body is not valid UTF-8 (at byte {})",
                        M::full_name(),
                        e.valid_up_to()
                    )));
                }
                let mut de = serde_json::Deserializer::from_slice(body);
                let options = DeserializeOptions::new().deny_unknown_fields(false);
                let message = DynamicMessage::deserialize_with_options(descriptor::<M>(), &mut de, &options)
                    .and_then(|m| de.end().map(|()| m))
                    .map_err(|e| failed(&e))?;
                message.transcode_to::<M>().map_err(|e| failed(&e))
            }
        }
    }

    pub fn encode<M: Message + Name>(self, message: &M) -> Vec<u8> {
        match self {
            Codec::Proto => message.encode_to_vec(),
            Codec::Json => {
                let dynamic = DynamicMessage::decode(descriptor::<M>(), message.encode_to_vec().as_slice())
                    .expect("a message re-reads under its own descriptor");
                let mut out = serde_json::Serializer::new(Vec::new());
                dynamic
                    .serialize_with_options(&mut out, &SerializeOptions::new())
                    .expect("protojson of a valid message serializes");
                out.into_inner()
            }
        }
    }
}

fn descriptor<M: Name>() -> MessageDescriptor {
    stackhouse_proto::descriptor_pool()
        .get_message_by_name(&M::full_name())
        .unwrap_or_else(|| panic!("{} is compiled into the descriptor pool", M::full_name()))
}

/// Reads, inflates and decodes a request body of at most `limit` bytes (before and after
/// inflation). The codec comes back too (the answer must use it), and the body's size as
/// sent.
pub async fn read_request<M: Message + Default + Name>(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> Result<(Codec, M, usize), ApiError> {
    let raw = read_limited(body, limit).await?;
    let codec = Codec::from_headers(headers)?;
    let body = inflate(&raw, headers, Some("connect-content-encoding"), limit)?;
    Ok((codec, codec.decode(&body)?, raw.len()))
}

/// A 200 answer in `codec`, gzipped when the client accepts it and it is worth it.
pub fn respond<M: Message + Name>(codec: Codec, request_headers: &HeaderMap, message: &M) -> Response {
    let body = codec.encode(message);
    let content_type = (
        header::CONTENT_TYPE,
        HeaderValue::from_static(codec.content_type()),
    );
    if body.len() >= GZIP_MIN_BYTES && accepts_gzip(request_headers) {
        let encoding = (header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        return ([content_type, encoding], gzip(&body, flate2::Compression::fast())).into_response();
    }
    ([content_type], body).into_response()
}

#[cfg(test)]
mod tests {
    use stackhouse_proto::pyroscope_querier::{SelectMergeStacktracesRequest, SelectSeriesRequest};
    use stackhouse_proto::pyroscope_types::StackTraceSelector;

    use super::*;

    #[test]
    fn json_takes_either_name_numbers_or_strings_and_skips_the_unknown() {
        let body = br#"{"profile_typeID":"process_cpu:cpu:nanoseconds:cpu:nanoseconds",
            "labelSelector":"{service_name=\"a\"}","start":1000,"end":"2000","maxNodes":16384,
            "format":"PROFILE_FORMAT_SANDWICH","sandwichFunction":"main",
            "stackTraceSelector":{"call_site":[{"name":"main"}],"frameFilter":{"excludeFunctionNames":["gc"]}}}"#;
        let r: SelectMergeStacktracesRequest = Codec::Json.decode(body).unwrap();
        assert_eq!(r.profile_type_id, "process_cpu:cpu:nanoseconds:cpu:nanoseconds");
        assert_eq!(r.label_selector, "{service_name=\"a\"}");
        assert_eq!(
            (r.start, r.end, r.max_nodes, r.format),
            (1000, 2000, Some(16384), 0)
        );
        let selector = r.stack_trace_selector.unwrap();
        assert_eq!(selector.call_site[0].name, "main");
        assert_eq!(selector.frame_filter.unwrap().exclude_function_names, ["gc"]);
    }

    #[test]
    fn json_that_is_not_utf8_is_refused_even_in_an_unknown_field() {
        let body = b"{\"start\": 1, \"zz\": \"a\xff\"}";
        let err = Codec::Json.decode::<SelectSeriesRequest>(body).unwrap_err();
        assert_eq!(err.kind, crate::error::ErrorKind::InvalidArgument);
        assert!(
            err.message.contains("not valid UTF-8 (at byte 21)"),
            "{}",
            err.message
        );
    }

    #[test]
    fn proto_skips_unknown_fields_and_presence_is_kept() {
        let mut bytes = SelectSeriesRequest {
            step: 15.0,
            ..Default::default()
        }
        .encode_to_vec();
        // Field 99, varint 1: a field a newer client may send.
        bytes.extend([0x98, 0x06, 0x01]);
        let r: SelectSeriesRequest = Codec::Proto.decode(&bytes).unwrap();
        assert_eq!((r.step, r.limit, r.aggregation), (15.0, None, None));
        let err = Codec::Proto
            .decode::<SelectSeriesRequest>(&[0x0a, 0xff])
            .unwrap_err();
        assert!(
            err.message.contains("querier.v1.SelectSeriesRequest"),
            "{}",
            err.message
        );
    }

    #[test]
    fn json_out_is_protojson() {
        let r = SelectMergeStacktracesRequest {
            profile_type_id: "t".into(),
            max_nodes: Some(5),
            stack_trace_selector: Some(StackTraceSelector::default()),
            ..Default::default()
        };
        let json: serde_json::Value = serde_json::from_slice(&Codec::Json.encode(&r)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"profileTypeID": "t", "maxNodes": "5", "stackTraceSelector": {}})
        );
    }
}
