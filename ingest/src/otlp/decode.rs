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
    /// The request is in another layout than the one declared or detected, or in one that
    /// cannot be told apart from the current layout; the message names the layouts.
    #[error("{0}")]
    Layout(String),
}

pub fn decode_protobuf(bytes: &[u8]) -> Result<ExportProfilesServiceRequest, DecodeError> {
    Ok(ExportProfilesServiceRequest::decode(bytes)?)
}

/// OTLP/JSON: protojson (lowerCamelCase or proto field names, 64-bit integers as strings
/// or numbers) except that trace, span and profile ids are hex, not base64, and unknown
/// fields are ignored so that newer senders keep working.
pub fn decode_json(bytes: &[u8]) -> Result<ExportProfilesServiceRequest, DecodeError> {
    let mut root = parse_json(bytes)?;
    hex_ids_to_base64(&mut root, LINK_TABLES, PROFILES)?;
    decode_json_value(root, REQUEST_MESSAGE)
}

/// Where the v1development request keeps its links and its profiles.
const LINK_TABLES: JsonPath = &[("dictionary", "dictionary"), ("linkTable", "link_table")];
const PROFILES: JsonPath = &[
    ("resourceProfiles", "resource_profiles"),
    ("scopeProfiles", "scope_profiles"),
    ("profiles", "profiles"),
];

/// A path of fields from the JSON root, each under its JSON name and its proto name;
/// arrays on the way are entered element by element.
pub(crate) type JsonPath = &'static [(&'static str, &'static str)];

pub(crate) fn parse_json(bytes: &[u8]) -> Result<Value, DecodeError> {
    serde_json::from_slice(bytes).map_err(DecodeError::Json)
}

/// Maps a JSON tree (ids already rewritten to base64) onto the message `name` of the
/// descriptor pool, then onto its prost type.
pub(crate) fn decode_json_value<M: Message + Default>(root: Value, name: &str) -> Result<M, DecodeError> {
    let desc = stackhouse_proto::descriptor_pool()
        .get_message_by_name(name)
        .expect("the descriptor pool is built from the same protos as the prost types");
    let options = DeserializeOptions::new().deny_unknown_fields(false);
    let message = DynamicMessage::deserialize_with_options(desc, root, &options)
        .map_err(|e| DecodeError::JsonMapping(e.to_string()))?;
    Ok(message.transcode_to::<M>()?)
}

/// Rewrites the hex trace/span ids of every link object at `links` and the hex
/// `profileId` of every object at `profiles` into the base64 that protojson expects for
/// `bytes`. Hex digits are also valid base64 characters, so skipping this would not fail:
/// it would silently decode wrong ids.
pub(crate) fn hex_ids_to_base64(
    root: &mut Value,
    links: JsonPath,
    profiles: JsonPath,
) -> Result<(), DecodeError> {
    visit_objects(root, links, "", &mut |link, at| {
        for (camel, snake) in [("traceId", "trace_id"), ("spanId", "span_id")] {
            for (key, id) in fields_mut(link, camel, snake) {
                hex_to_base64(id, || format!("{at}.{key}"))?;
            }
        }
        Ok(())
    })?;
    visit_objects(root, profiles, "", &mut |profile, at| {
        for (key, id) in fields_mut(profile, "profileId", "profile_id") {
            hex_to_base64(id, || format!("{at}.{key}"))?;
        }
        Ok(())
    })
}

/// What [`visit_objects`] calls with each object and its position.
pub(crate) type ObjectVisitor<'f> = dyn FnMut(&mut Map<String, Value>, &str) -> Result<(), DecodeError> + 'f;

/// Calls `f` with every object found at `path` below `value` and its position (field names
/// as the sender spelled them, array indices in brackets). Anything that is not shaped as
/// expected is skipped: the protojson mapping reports it afterwards.
pub(crate) fn visit_objects(
    value: &mut Value,
    path: JsonPath,
    at: &str,
    f: &mut ObjectVisitor<'_>,
) -> Result<(), DecodeError> {
    match value {
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                visit_objects(item, path, &format!("{at}[{i}]"), f)?;
            }
            Ok(())
        }
        Value::Object(object) => match path.split_first() {
            None => f(object, at),
            Some((&(json_name, proto_name), rest)) => {
                for (key, child) in fields_mut(object, json_name, proto_name) {
                    let at = if at.is_empty() {
                        key.to_string()
                    } else {
                        format!("{at}.{key}")
                    };
                    visit_objects(child, rest, &at, f)?;
                }
                Ok(())
            }
        },
        _ => Ok(()),
    }
}

/// The values of a field under its JSON name and its proto name (either may be present).
pub(crate) fn fields_mut<'m>(
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

fn hex_to_base64(id: &mut Value, path: impl FnOnce() -> String) -> Result<(), DecodeError> {
    // null and non-strings are left for the protojson mapping to accept or reject.
    let Value::String(hex_id) = id else { return Ok(()) };
    let bytes = hex::decode(hex_id.as_str())
        .map_err(|e| DecodeError::JsonMapping(format!("{}: invalid hex id {hex_id:?}: {e}", path())))?;
    *hex_id = base64::engine::general_purpose::STANDARD.encode(bytes);
    Ok(())
}
