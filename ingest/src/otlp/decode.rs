//! OTLP profiles wire decoding: protobuf with prost, OTLP/JSON through prost-reflect's
//! protojson mapping plus the OTLP deviations from it (hex ids).

use base64::Engine as _;
use prost::Message;
use prost_reflect::{DeserializeOptions, DynamicMessage};
use serde_json::{Map, Value};
use stackhouse_proto::otlp_collector::ExportProfilesServiceRequest;

const REQUEST_MESSAGE: &str =
    "opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest";

#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("failed to decode ExportProfilesServiceRequest: {0}")]
    Protobuf(#[from] prost::DecodeError),
    /// Syntax errors carry serde_json's "at line L column C".
    #[error("invalid JSON: {0}")]
    Json(#[source] serde_json::Error),
    #[error("failed to decode ExportProfilesServiceRequest from JSON: {0}")]
    JsonMapping(String),
}

pub fn decode_protobuf(bytes: &[u8]) -> Result<ExportProfilesServiceRequest, DecodeError> {
    Ok(ExportProfilesServiceRequest::decode(bytes)?)
}

/// OTLP/JSON: protojson (lowerCamelCase or proto field names, 64-bit integers as strings
/// or numbers) except that trace, span and profile ids are hex, not base64, and unknown
/// fields are ignored so that newer senders keep working.
pub fn decode_json(bytes: &[u8]) -> Result<ExportProfilesServiceRequest, DecodeError> {
    let mut root: Value = serde_json::from_slice(bytes).map_err(DecodeError::Json)?;
    hex_ids_to_base64(&mut root)?;
    let desc = stackhouse_proto::descriptor_pool()
        .get_message_by_name(REQUEST_MESSAGE)
        .expect("the descriptor pool is built from the same protos as the request type");
    let options = DeserializeOptions::new().deny_unknown_fields(false);
    let message = DynamicMessage::deserialize_with_options(desc, root, &options)
        .map_err(|e| DecodeError::JsonMapping(e.to_string()))?;
    Ok(message.transcode_to::<ExportProfilesServiceRequest>()?)
}

/// Rewrites the hex id fields in place into the base64 that protojson expects for `bytes`.
/// Hex digits are also valid base64 characters, so skipping this would not fail: it would
/// silently decode wrong ids.
fn hex_ids_to_base64(root: &mut Value) -> Result<(), DecodeError> {
    let Some(root) = root.as_object_mut() else {
        return Ok(()); // not an object: let the protojson mapping report it
    };
    for (dict_key, dict) in fields_mut(root, "dictionary", "dictionary") {
        let Some(dict) = dict.as_object_mut() else {
            continue;
        };
        for (table_key, links) in fields_mut(dict, "linkTable", "link_table") {
            for (i, link) in array_items(links) {
                let Some(link) = link.as_object_mut() else {
                    continue;
                };
                for (camel, snake) in [("traceId", "trace_id"), ("spanId", "span_id")] {
                    for (key, id) in fields_mut(link, camel, snake) {
                        hex_to_base64(id, || format!("{dict_key}.{table_key}[{i}].{key}"))?;
                    }
                }
            }
        }
    }
    for (rp_key, rps) in fields_mut(root, "resourceProfiles", "resource_profiles") {
        for (r, rp) in array_items(rps) {
            let Some(rp) = rp.as_object_mut() else { continue };
            for (sp_key, sps) in fields_mut(rp, "scopeProfiles", "scope_profiles") {
                for (s, sp) in array_items(sps) {
                    let Some(sp) = sp.as_object_mut() else { continue };
                    for (_, profiles) in fields_mut(sp, "profiles", "profiles") {
                        for (p, profile) in array_items(profiles) {
                            let Some(profile) = profile.as_object_mut() else {
                                continue;
                            };
                            for (key, id) in fields_mut(profile, "profileId", "profile_id") {
                                hex_to_base64(id, || {
                                    format!("{rp_key}[{r}].{sp_key}[{s}].profiles[{p}].{key}")
                                })?;
                            }
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// The values of a field under its JSON name and its proto name (either may be present).
fn fields_mut<'m>(
    object: &'m mut Map<String, Value>,
    json_name: &'static str,
    proto_name: &'static str,
) -> impl Iterator<Item = (&'static str, &'m mut Value)> {
    object.iter_mut().filter_map(move |(k, v)| {
        if k == json_name {
            Some((json_name, v))
        } else if k == proto_name {
            Some((proto_name, v))
        } else {
            None
        }
    })
}

fn array_items(value: &mut Value) -> impl Iterator<Item = (usize, &mut Value)> {
    value.as_array_mut().into_iter().flatten().enumerate()
}

fn hex_to_base64(id: &mut Value, path: impl FnOnce() -> String) -> Result<(), DecodeError> {
    // null and non-strings are left for the protojson mapping to accept or reject.
    let Value::String(hex_id) = id else { return Ok(()) };
    let bytes = hex::decode(hex_id.as_str())
        .map_err(|e| DecodeError::JsonMapping(format!("{}: invalid hex id {hex_id:?}: {e}", path())))?;
    *hex_id = base64::engine::general_purpose::STANDARD.encode(bytes);
    Ok(())
}
