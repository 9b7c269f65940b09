//! Earlier v1development layouts: opentelemetry-proto v1.8 and v1.9 numbered `Sample` and
//! (v1.8) `Profile` fields differently from v1.10, with the same message names, so a
//! request of one layout often decodes as another without any error and with wrong values.
//! A request is decoded in the layout its sender declares (the
//! `OTLP-Profiles-Development-Version` header: `1` is v1.10, see [`Layout::from_header`])
//! or, without one, in the only layout the wire allows; anything else is refused with a
//! message naming the layouts. v1.7 is converted, not renumbered ([`super::v1_7`]), and is
//! told apart first.
//!
//! The fields where the layouts differ (`Packed` = repeated integer: packed
//! length-delimited, or unpacked varints; `Varint` = one varint; `Bytes` = one
//! length-delimited value; `—` = no such field):
//!
//! | message   | field | v1.8                      | v1.9                      | v1.10                   |
//! |-----------|-------|---------------------------|---------------------------|-------------------------|
//! | Sample    | 2     | values, Packed            | values, Packed            | attribute_indices, Packed |
//! | Sample    | 3     | attribute_indices, Packed | attribute_indices, Packed | link_index, Varint      |
//! | Sample    | 4     | link_index, Varint        | link_index, Varint        | values, Packed          |
//! | Profile   | 7     | comment_strindices, Packed| profile_id, Bytes         | profile_id, Bytes       |
//! | Profile   | 8     | profile_id, Bytes         | dropped_attributes_count, Varint | (same as v1.9)   |
//! | Profile   | 9     | dropped_attributes_count, Varint | original_payload_format, Bytes | (same as v1.9) |
//! | Profile   | 10    | original_payload_format, Bytes | original_payload, Bytes | (same as v1.9)      |
//! | Profile   | 11    | original_payload, Bytes   | attribute_indices, Packed | (same as v1.9)          |
//! | Profile   | 12    | attribute_indices, Packed | —                         | —                       |
//! | ValueType | 3     | aggregation_temporality, Varint | —                   | —                       |
//!
//! Everything else (dictionary, stack, timestamps, times, ids of links) is the same.
//!
//! **Hard evidence**: a field with a wire type its layout cannot have (Sample field 3
//! length-delimited is not v1.10; Sample field 4 length-delimited is not v1.8/v1.9;
//! Profile field 8 length-delimited or field 9 varint is v1.8; Profile field 8 varint or
//! field 9 length-delimited is not v1.8). A declared layout the wire contradicts is refused; otherwise the request is
//! decoded in it. Without a declaration, the layouts the wire allows are the candidates.
//!
//! **Soft evidence**, used only to choose among candidates that decode to different
//! requests: real encoders pack repeated integers, write a singular field once and write
//! only fields of their own layout, so a reading that needs unpacked values, a repeated
//! singular field or a field its layout does not have (Profile field 12, ValueType field
//! 3 outside v1.8) is implausible (unless every candidate needs one; unknown fields of a
//! later version stay decodable); and a reading is implausible for a profile when OTLP
//! validation rejects the profile in that reading (an index beyond its dictionary table, a
//! profile id that is not 16 bytes, values and timestamps of different lengths), when it
//! has a sample with neither values nor timestamps, or (v1.8) when its comment indices
//! are not string table indices. Profiles that no reading makes valid are rejected
//! whatever the layout, so they do not vote. One plausible meaning is decoded. Of
//! several different ones, the v1.10 reading is decoded, since a request without the
//! header is version 1, the v1.10 layout (opentelemetry-proto PR 857); several older ones
//! without it, or none, are refused with a message that names the candidates and asks for
//! the header.
//!
//! Samples with only `stack_index` and timestamps, and profiles without fields 7–12, read
//! the same in every layout, so they never cause a refusal. OTLP/JSON names fields, so
//! only v1.8's names differ (`sample`, `line`, `commentStrindices`,
//! `aggregationTemporality`) and no detection is needed.

use std::fmt;

use prost::Message;
use prost::encoding::{WireType, decode_varint, encode_key, encode_varint};
use serde_json::{Map, Value};
use stackhouse_proto::otlp_collector::ExportProfilesServiceRequest;
use stackhouse_proto::otlp_profiles::Profile;

use super::decode::{self, DecodeError, JsonPath};
use super::dictionary::{self, Dictionary};
use super::samples::SampleList;
use super::v1_7;
use super::validate::Validator;
use super::wire::{WireError, fields};

/// The HTTP header (and gRPC metadata key) a sender may use to declare its layout.
pub const HEADER: &str = "otlp-profiles-development-version";

const REQUEST_MESSAGE: &str =
    "opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// Converted, not renumbered ([`super::v1_7`]): never among [`LAYOUTS`].
    V1_7,
    V1_8,
    V1_9,
    V1_10,
}

/// Most recent first: the order candidates are reported and preferred in.
const LAYOUTS: [Layout; 3] = [Layout::V1_10, Layout::V1_9, Layout::V1_8];

impl Layout {
    /// The header's value: `1` (opentelemetry-proto PR 857: a positive base-10 integer
    /// without leading zeros; `1` is the v1.10/v1.11 layout), or, as an extension, the
    /// release a sender was built from: `1.7`, `v1.8`, `1.9.0`, ...; `1.11` reads as `1.10`
    /// (same profiles layout). Nothing else is read as some other version.
    pub fn from_header(value: &str) -> Result<Layout, DecodeError> {
        let v = value.trim();
        let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        let unsupported = |why: &str| {
            DecodeError::Layout(format!(
                "unsupported {HEADER} {value:?}: {why}; supported are 1 (the v1.10 and v1.11 layout) \
                 and the opentelemetry-proto releases 1.7, 1.8, 1.9, 1.10 and 1.11"
            ))
        };
        if numeric(v) {
            return match v {
                "1" => Ok(Layout::V1_10),
                _ if v.starts_with('0') => Err(unsupported("a version has no leading zeros")),
                _ => Err(unsupported("this server reads version 1 only")),
            };
        }
        let dotted = v.strip_prefix(['v', 'V']).unwrap_or(v);
        let mut parts = dotted.split('.');
        let layout = match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some("1"), Some(minor), patch, None) if patch.is_none_or(numeric) => match minor {
                "7" => Some(Layout::V1_7),
                "8" => Some(Layout::V1_8),
                "9" => Some(Layout::V1_9),
                "10" | "11" => Some(Layout::V1_10),
                _ => None,
            },
            _ => None,
        };
        layout.ok_or_else(|| {
            if v.contains(',') {
                unsupported("one version only, not a list")
            } else {
                unsupported("not a version")
            }
        })
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Layout::V1_7 => "v1.7",
            Layout::V1_8 => "v1.8",
            Layout::V1_9 => "v1.9",
            Layout::V1_10 => "v1.10",
        })
    }
}

/// OTLP/protobuf in the declared layout, or without one in the layout the wire shows.
/// Profiles a v1.7 request holds that cannot be converted are left out
/// ([`decode_protobuf_flat`] names them).
pub fn decode_protobuf(
    bytes: &[u8],
    declared: Option<Layout>,
) -> Result<ExportProfilesServiceRequest, DecodeError> {
    decode_in(bytes, declared, false).map(|(request, _, _)| request)
}

/// A request as the receivers decode it.
#[derive(Debug)]
pub struct Decoded {
    /// Without its dictionary, which is in `dictionary`.
    pub request: ExportProfilesServiceRequest,
    pub dictionary: Dictionary,
    /// Profiles of an older layout that could not be converted, each with its position
    /// and why; the rest of the request is decoded.
    pub rejected: Vec<String>,
}

/// [`decode_protobuf`] with the dictionary in flat tables, as the receivers decode. The
/// same bytes are accepted and refused, with the same messages.
pub fn decode_protobuf_flat(bytes: &[u8], declared: Option<Layout>) -> Result<Decoded, DecodeError> {
    let (mut request, flat, rejected) = decode_in(bytes, declared, true)?;
    let dictionary = flat.unwrap_or_else(|| {
        let dictionary = Dictionary::of(&request);
        request.dictionary = None;
        dictionary
    });
    Ok(Decoded {
        request,
        dictionary,
        rejected,
    })
}

/// A request, and its dictionary when it was decoded flat (`flat`, and a v1.10 reading).
type Reading = (ExportProfilesServiceRequest, Option<Dictionary>);

fn decode_in(
    bytes: &[u8],
    declared: Option<Layout>,
    flat: bool,
) -> Result<(ExportProfilesServiceRequest, Option<Dictionary>, Vec<String>), DecodeError> {
    if let Some(converted) = v1_7_reading(bytes, declared)? {
        return Ok((converted.request, None, converted.rejected));
    }
    let (request, dictionary) = decode_later(bytes, declared, flat)?;
    Ok((request, dictionary, Vec::new()))
}

/// The request converted from v1.7 when it declares v1.7 or, declaring nothing, its wire
/// shows v1.7; `None` when it is to be read in a later layout.
fn v1_7_reading(bytes: &[u8], declared: Option<Layout>) -> Result<Option<v1_7::Converted>, DecodeError> {
    let evidence = match v1_7::evidence(bytes) {
        Ok(evidence) => evidence,
        // Malformed: the decoder of the declared or a later layout describes it.
        Err(_) if declared == Some(Layout::V1_7) => return v1_7::convert(bytes).map(Some),
        Err(_) => return Ok(None),
    };
    match (declared, evidence) {
        (Some(Layout::V1_7), Some(e)) if !e.v1_7 => Err(DecodeError::Layout(format!(
            "request declares opentelemetry-proto v1.7 profiles layout but {}",
            e.why
        ))),
        (Some(Layout::V1_7), _) => v1_7::convert(bytes).map(Some),
        (Some(layout), Some(e)) if e.v1_7 => Err(DecodeError::Layout(format!(
            "request declares opentelemetry-proto {layout} profiles layout but {}, which only v1.7 has",
            e.why
        ))),
        (None, Some(e)) if e.v1_7 => v1_7::convert(bytes).map(Some),
        _ => Ok(None),
    }
}

fn decode_later(bytes: &[u8], declared: Option<Layout>, flat: bool) -> Result<Reading, DecodeError> {
    let scan = match scan(bytes) {
        Ok(scan) => scan,
        // Let prost describe what is wrong with the bytes.
        Err(e) => {
            ExportProfilesServiceRequest::decode(bytes)?;
            return Err(DecodeError::Layout(format!("malformed request: {e}")));
        }
    };
    if let Some(layout) = declared {
        if let Some(reason) = scan.contradiction(layout) {
            return Err(DecodeError::Layout(format!(
                "request declares opentelemetry-proto {layout} profiles layout but {reason}"
            )));
        }
        let (request, dictionary) = decode_reading(bytes, layout, flat)?;
        // Wire types cannot tell a later sender declaring v1.8 (v1.9's profile_id and
        // attribute_indices read as v1.8's comments and original_payload); the values can.
        for (j, (at, profile)) in flat_profiles(&request).into_iter().enumerate() {
            if let Err(reason) =
                v1_8_fields(layout, profile, scan.comment_max.get(j).copied().flatten(), &scan)
            {
                return Err(DecodeError::Layout(format!(
                    "request declares opentelemetry-proto {layout} profiles layout but {at}: {reason}, \
                     which suggests a later layout"
                )));
            }
        }
        return Ok((request, dictionary));
    }
    let candidates: Vec<Layout> = LAYOUTS
        .into_iter()
        .filter(|&l| scan.contradicting(l).is_none())
        .collect();
    match candidates.as_slice() {
        [] => Err(DecodeError::Layout(format!(
            "request matches no opentelemetry-proto profiles layout: {}",
            LAYOUTS
                .iter()
                .map(|&l| format!("not {l}, since {}", scan.contradiction(l).unwrap_or_default()))
                .collect::<Vec<_>>()
                .join("; ")
        ))),
        &[layout] => decode_reading(bytes, layout, flat),
        _ => {
            // Real encoders write canonically: when only one candidate reads the wire that
            // way, `choose` keeps that reading whatever the others decode to, so they need
            // not be decoded.
            let mut canonical = candidates.iter().filter(|&&l| scan.noncanonical(l).is_none());
            if let (Some(&layout), None) = (canonical.next(), canonical.next())
                && let Ok(reading) = decode_reading(bytes, layout, flat)
            {
                return Ok(reading);
            }
            choose(bytes, &scan, &candidates).map(|request| (request, None))
        }
    }
}

/// OTLP/JSON; v1.8's field names (`sample`, `line`) are read as the current ones and its
/// fields the current layout lacks are dropped. JSON names every field, so the layouts
/// cannot be confused and `declared` needs no check, except that v1.7 is not read from JSON.
pub fn decode_json(
    bytes: &[u8],
    declared: Option<Layout>,
) -> Result<ExportProfilesServiceRequest, DecodeError> {
    if declared == Some(Layout::V1_7) {
        return Err(DecodeError::Layout(
            "the opentelemetry-proto v1.7 profiles layout is read from OTLP/protobuf only".to_string(),
        ));
    }
    const PROFILES: JsonPath = &[
        ("resourceProfiles", "resource_profiles"),
        ("scopeProfiles", "scope_profiles"),
        ("profiles", "profiles"),
    ];
    const LOCATIONS: JsonPath = &[("dictionary", "dictionary"), ("locationTable", "location_table")];
    const LINKS: JsonPath = &[("dictionary", "dictionary"), ("linkTable", "link_table")];
    let mut root = decode::parse_json(bytes)?;
    decode::visit_objects(&mut root, PROFILES, "", &mut |profile, at| {
        rename(profile, at, "sample", "samples")?;
        profile.remove("commentStrindices");
        profile.remove("comment_strindices");
        for key in ["sampleType", "sample_type", "periodType", "period_type"] {
            if let Some(value_type) = profile.get_mut(key).and_then(Value::as_object_mut) {
                value_type.remove("aggregationTemporality");
                value_type.remove("aggregation_temporality");
            }
        }
        Ok(())
    })?;
    decode::visit_objects(&mut root, LOCATIONS, "", &mut |location, at| {
        rename(location, at, "line", "lines")
    })?;
    decode::hex_ids_to_base64(&mut root, LINKS, PROFILES)?;
    decode::decode_json_value(root, REQUEST_MESSAGE)
}

/// Moves v1.8's `old` field to its v1.9+ name; a body with both is contradictory.
fn rename(
    object: &mut Map<String, Value>,
    at: &str,
    old: &str,
    new: &'static str,
) -> Result<(), DecodeError> {
    let Some(value) = object.remove(old) else {
        return Ok(());
    };
    if object.contains_key(new) {
        return Err(DecodeError::Layout(format!(
            "{at} has both {old:?} (opentelemetry-proto v1.8) and {new:?} (v1.9 and later)"
        )));
    }
    object.insert(new.to_string(), value);
    Ok(())
}

/// [`decode_as`], with the dictionary flat when `flat` and the flat decoder reads the wire.
fn decode_reading(bytes: &[u8], layout: Layout, flat: bool) -> Result<Reading, DecodeError> {
    if flat
        && layout == Layout::V1_10
        && let Some((request, dictionary)) = dictionary::decode_request(bytes)
    {
        return Ok((request, Some(dictionary)));
    }
    decode_as(bytes, layout).map(|request| (request, None))
}

fn decode_as(bytes: &[u8], layout: Layout) -> Result<ExportProfilesServiceRequest, DecodeError> {
    if layout == Layout::V1_10 {
        return Ok(ExportProfilesServiceRequest::decode(bytes)?);
    }
    let mut out = Vec::with_capacity(bytes.len());
    rewrite(bytes, Node::Request, layout, &mut out)
        .map_err(|e| DecodeError::Layout(format!("malformed request: {e}")))?;
    Ok(ExportProfilesServiceRequest::decode(out.as_slice())?)
}

/// Several layouts fit the wire: decode each and keep the one plausible meaning.
fn choose(
    bytes: &[u8],
    scan: &Scan<'_>,
    candidates: &[Layout],
) -> Result<ExportProfilesServiceRequest, DecodeError> {
    let mut readings = Vec::new();
    let mut first_error = None;
    for &layout in candidates {
        match decode_as(bytes, layout) {
            Ok(request) => readings.push((layout, request)),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match readings.len() {
        0 => return Err(first_error.expect("at least one candidate was tried")),
        1 => return Ok(readings.pop().expect("one reading").1),
        _ => {}
    }
    if readings.iter().all(|(_, r)| *r == readings[0].1) {
        return Ok(readings.swap_remove(0).1);
    }
    let mut rejected: Vec<String> = Vec::new();
    if readings.iter().any(|(l, _)| scan.noncanonical(*l).is_none()) {
        readings.retain(|(l, _)| match scan.noncanonical(*l) {
            Some(reason) => {
                rejected.push(format!("as {l}, {reason}"));
                false
            }
            None => true,
        });
    }
    // verdicts[k][j]: whether profile j (in request order) is plausible in reading k.
    let verdicts: Vec<Vec<Result<(), String>>> = readings
        .iter()
        .map(|(layout, request)| plausibility(*layout, request, scan))
        .collect();
    let profiles = verdicts.first().map_or(0, Vec::len);
    let voting: Vec<usize> = (0..profiles)
        .filter(|&j| verdicts.iter().any(|v| v[j].is_ok()))
        .collect();
    let mut plausible = Vec::new();
    for ((layout, request), verdict) in readings.into_iter().zip(&verdicts) {
        match voting.iter().find_map(|&j| verdict[j].as_ref().err()) {
            Some(reason) => rejected.push(format!("as {layout}, {reason}")),
            None => plausible.push((layout, request)),
        }
    }
    let names =
        |ls: &mut dyn Iterator<Item = Layout>| ls.map(|l| l.to_string()).collect::<Vec<_>>().join(", ");
    let ask = format!("set the {HEADER} header to the opentelemetry-proto version of the sender");
    let Some((_, first)) = plausible.first() else {
        return Err(DecodeError::Layout(format!(
            "cannot tell the profiles layout of the request ({} fit the wire) and no reading is valid: {}; {ask}",
            names(&mut candidates.iter().copied()),
            rejected.join("; ")
        )));
    };
    let first_profiles = flat_profiles(first);
    let differs = plausible[1..].iter().find_map(|(layout, request)| {
        let other = flat_profiles(request);
        voting
            .iter()
            .find(|&&j| first_profiles[j].1 != other[j].1)
            .map(|&j| (*layout, first_profiles[j].0.clone()))
    });
    if let Some((other, at)) = differs {
        // A request without the header is version 1, the v1.10 layout (opentelemetry-proto
        // PR 857): older senders are read without it only where the wire leaves no doubt.
        if plausible[0].0 == Layout::V1_10 {
            return Ok(plausible.swap_remove(0).1);
        }
        return Err(DecodeError::Layout(format!(
            "ambiguous profiles layout: the request reads validly as opentelemetry-proto {} and {other} \
             with different values (first at {at}); {ask}",
            plausible[0].0
        )));
    }
    Ok(plausible.swap_remove(0).1)
}

/// Every profile with its position, in request order.
fn flat_profiles(request: &ExportProfilesServiceRequest) -> Vec<(String, &Profile)> {
    let mut out = Vec::new();
    for (r, rp) in request.resource_profiles.iter().enumerate() {
        for (s, sp) in rp.scope_profiles.iter().enumerate() {
            for (p, profile) in sp.profiles.iter().enumerate() {
                out.push((
                    format!("resource_profiles[{r}].scope_profiles[{s}].profiles[{p}]"),
                    profile,
                ));
            }
        }
    }
    out
}

/// Per profile of one reading: why it is implausible, if it is.
fn plausibility(
    layout: Layout,
    request: &ExportProfilesServiceRequest,
    scan: &Scan<'_>,
) -> Vec<Result<(), String>> {
    let dict = Dictionary::of(request);
    let mut validator = Validator::new(&dict);
    let mut out = Vec::new();
    for (r, rp) in request.resource_profiles.iter().enumerate() {
        let resource = rp.resource.as_ref().map_or(&[][..], |r| &r.attributes);
        for (s, sp) in rp.scope_profiles.iter().enumerate() {
            for (p, profile) in sp.profiles.iter().enumerate() {
                let comment_max = scan.comment_max.get(out.len()).copied().flatten();
                let verdict = validator
                    .check_profile(
                        resource,
                        sp.scope.as_ref(),
                        profile,
                        SampleList::Decoded(&profile.samples),
                    )
                    .map_err(|e| e.to_string())
                    .and_then(|()| {
                        match profile
                            .samples
                            .iter()
                            .position(|s| s.values.is_empty() && s.timestamps_unix_nano.is_empty())
                        {
                            Some(n) => Err(format!("sample {n} has neither values nor timestamps")),
                            None => Ok(()),
                        }
                    })
                    .and_then(|()| v1_8_fields(layout, profile, comment_max, scan))
                    .map_err(|e| format!("resource_profiles[{r}].scope_profiles[{s}].profiles[{p}]: {e}"));
                out.push(verdict);
            }
        }
    }
    out
}

/// Fields only v1.8 has, read as v1.8: comments must be string indices, and an original
/// payload comes with its format.
fn v1_8_fields(
    layout: Layout,
    profile: &Profile,
    comment_max: Option<u64>,
    scan: &Scan<'_>,
) -> Result<(), String> {
    if layout != Layout::V1_8 {
        return Ok(());
    }
    match comment_max {
        Some(u64::MAX) => return Err("comment_strindices does not parse as string indices".to_string()),
        Some(max) if max >= scan.strings() => {
            return Err(format!(
                "comment_strindices has index {max}, beyond the {} entries of string_table",
                scan.strings()
            ));
        }
        _ => {}
    }
    if !profile.original_payload.is_empty() && profile.original_payload_format.is_empty() {
        return Err("original_payload is set without original_payload_format".to_string());
    }
    Ok(())
}

// ---- the wire ---------------------------------------------------------------------------

/// The messages on the path from the request to the fields that differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Node {
    Request,
    ResourceProfiles,
    ScopeProfiles,
    Profile,
    Sample,
    ValueType,
    /// Copied as is.
    Other,
}

impl Node {
    fn child(self, field: u32) -> Node {
        match (self, field) {
            (Node::Request, 1) => Node::ResourceProfiles,
            (Node::ResourceProfiles, 2) => Node::ScopeProfiles,
            (Node::ScopeProfiles, 2) => Node::Profile,
            (Node::Profile, 2) => Node::Sample,
            (Node::Profile, 1 | 5) => Node::ValueType,
            _ => Node::Other,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Packed,
    Varint,
    Bytes,
    Absent,
}

/// How `layout` types `field` of `node`, for the fields where the layouts differ.
fn kind(layout: Layout, node: Node, field: u32) -> Option<(Kind, &'static str)> {
    use Kind::*;
    let old = layout != Layout::V1_10;
    let v1_8 = layout == Layout::V1_8;
    Some(match (node, field) {
        (Node::Sample, 2) if old => (Packed, "values"),
        (Node::Sample, 3) if old => (Packed, "attribute_indices"),
        (Node::Sample, 4) if old => (Varint, "link_index"),
        (Node::Sample, 2) => (Packed, "attribute_indices"),
        (Node::Sample, 3) => (Varint, "link_index"),
        (Node::Sample, 4) => (Packed, "values"),
        (Node::Profile, 7) if v1_8 => (Packed, "comment_strindices"),
        (Node::Profile, 8) if v1_8 => (Bytes, "profile_id"),
        (Node::Profile, 9) if v1_8 => (Varint, "dropped_attributes_count"),
        (Node::Profile, 10) if v1_8 => (Bytes, "original_payload_format"),
        (Node::Profile, 11) if v1_8 => (Bytes, "original_payload"),
        (Node::Profile, 12) if v1_8 => (Packed, "attribute_indices"),
        (Node::Profile, 7) => (Bytes, "profile_id"),
        (Node::Profile, 8) => (Varint, "dropped_attributes_count"),
        (Node::Profile, 9) => (Bytes, "original_payload_format"),
        (Node::Profile, 10) => (Bytes, "original_payload"),
        (Node::Profile, 11) => (Packed, "attribute_indices"),
        (Node::Profile, 12) => (Absent, ""),
        (Node::ValueType, 3) if v1_8 => (Varint, "aggregation_temporality"),
        (Node::ValueType, 3) => (Absent, ""),
        _ => return None,
    })
}

/// A field a layout does not have is legal (an unknown field, e.g. from a later version)
/// but never canonical: it only tells layouts apart softly.
fn legal(kind: Kind, wire: WireType) -> bool {
    match kind {
        Kind::Packed => matches!(wire, WireType::LengthDelimited | WireType::Varint),
        Kind::Varint => wire == WireType::Varint,
        Kind::Bytes => wire == WireType::LengthDelimited,
        Kind::Absent => true,
    }
}

fn canonical(kind: Kind, wire: WireType, repeated: bool) -> bool {
    match kind {
        Kind::Packed => wire == WireType::LengthDelimited && !repeated,
        Kind::Varint | Kind::Bytes => !repeated,
        Kind::Absent => false,
    }
}

fn wire_name(wire: WireType) -> &'static str {
    match wire {
        WireType::Varint => "a varint",
        WireType::SixtyFourBit => "64-bit",
        WireType::LengthDelimited => "length-delimited",
        WireType::StartGroup | WireType::EndGroup => "a group",
        WireType::ThirtyTwoBit => "32-bit",
    }
}

/// Where a field was seen, for messages.
#[derive(Clone, Debug)]
struct Pos {
    resource: usize,
    scope: usize,
    profile: usize,
    inner: Inner,
}

#[derive(Clone, Debug)]
enum Inner {
    None,
    Sample(usize),
    ValueType(u32),
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "resource_profiles[{}].scope_profiles[{}].profiles[{}]",
            self.resource, self.scope, self.profile
        )?;
        match self.inner {
            Inner::None => Ok(()),
            Inner::Sample(n) => write!(f, ".samples[{n}]"),
            Inner::ValueType(1) => f.write_str(".sample_type"),
            Inner::ValueType(_) => f.write_str(".period_type"),
        }
    }
}

/// A field where the layouts differ, as seen on the wire (first occurrence of each
/// combination is enough to decide).
#[derive(Clone, Debug)]
struct Seen {
    node: Node,
    field: u32,
    wire: WireType,
    /// Written more than once in one message.
    repeated: bool,
    at: Pos,
}

#[derive(Default)]
struct Scan<'a> {
    /// The request's bytes.
    request: &'a [u8],
    seen: Vec<Seen>,
    /// Entries of the dictionary's string_table, counted when a v1.8 reading first asks.
    strings: std::cell::OnceCell<u64>,
    /// Per profile in request order: the largest v1.8 comment index if field 7 were
    /// comments (`u64::MAX` when it does not parse as int32 indices).
    comment_max: Vec<Option<u64>>,
    /// [`count_fields`]'s buffer.
    counts: Vec<(u32, WireType, usize)>,
}

impl Scan<'_> {
    /// Entries of the request dictionary's string_table. Counted only for a v1.8 reading
    /// (its comments index the table): walking a dictionary of thousands of entries for
    /// every request was a tenth of the ingest's CPU with the rest of the scan.
    fn strings(&self) -> u64 {
        *self.strings.get_or_init(|| {
            let dictionaries = fields(self.request)
                .map_while(Result::ok)
                .filter(|f| (f.number, f.wire) == (2, WireType::LengthDelimited));
            let entries = dictionaries.flat_map(|d| fields(d.payload).map_while(Result::ok));
            entries.filter(|f| f.number == 5).count() as u64
        })
    }

    /// Notes the fields of one `node` message found at `at`.
    fn note(&mut self, node: Node, body: &[u8], at: &Pos) -> Result<(), WireError> {
        let mut counts = std::mem::take(&mut self.counts);
        let counted = count_fields(node, body, &mut counts);
        if counted.is_ok() {
            self.note_counts(node, &counts, at);
        }
        self.counts = counts;
        counted
    }

    fn note_counts(&mut self, node: Node, counts: &[(u32, WireType, usize)], at: &Pos) {
        for &(field, wire, count) in counts {
            let repeated = count > 1;
            let known = self
                .seen
                .iter_mut()
                .find(|s| s.node == node && s.field == field && s.wire == wire);
            match known {
                Some(s) if repeated && !s.repeated => {
                    s.repeated = true;
                    s.at = at.clone();
                }
                Some(_) => {}
                None => self.seen.push(Seen {
                    node,
                    field,
                    wire,
                    repeated,
                    at: at.clone(),
                }),
            }
        }
    }

    /// The first field the wire cannot have in `layout`; [`Self::contradiction`] says why.
    fn contradicting(&self, layout: Layout) -> Option<&Seen> {
        self.seen
            .iter()
            .find(|s| kind(layout, s.node, s.field).is_some_and(|(k, _)| !legal(k, s.wire)))
    }

    /// Why the wire cannot be in `layout`, if it cannot.
    fn contradiction(&self, layout: Layout) -> Option<String> {
        let s = self.contradicting(layout)?;
        let allowed: Vec<String> = LAYOUTS
            .iter()
            .rev()
            .filter_map(|&l| {
                let (k, name) = kind(l, s.node, s.field)?;
                legal(k, s.wire).then(|| format!("{l} ({name})"))
            })
            .collect();
        let allowed = match allowed.as_slice() {
            [] => "which no supported layout allows".to_string(),
            [one] => format!("which only {one} allows"),
            many => format!("which only {} allow", many.join(" and ")),
        };
        Some(format!(
            "{} field {} is {}, {allowed}",
            s.at,
            s.field,
            wire_name(s.wire)
        ))
    }

    /// A legal but unusual encoding that reading the wire in `layout` would need.
    fn noncanonical(&self, layout: Layout) -> Option<String> {
        self.seen.iter().find_map(|s| {
            let (k, name) = kind(layout, s.node, s.field)?;
            if canonical(k, s.wire, s.repeated) || !legal(k, s.wire) {
                return None;
            }
            Some(match k {
                Kind::Absent => format!("{} has field {}, which {layout} does not have", s.at, s.field),
                Kind::Packed if s.wire == WireType::Varint => {
                    format!("{} field {} would be {name} unpacked", s.at, s.field)
                }
                _ => format!(
                    "{} field {} would be {name} written more than once",
                    s.at, s.field
                ),
            })
        })
    }
}

/// Counts into `counts`, per (field, wire type), the fields of `body` that `node` has in
/// [`kind`]; `counts` is the caller's buffer, reused for every message of a request.
fn count_fields(node: Node, body: &[u8], counts: &mut Vec<(u32, WireType, usize)>) -> Result<(), WireError> {
    counts.clear();
    for f in fields(body) {
        let f = f?;
        if kind(Layout::V1_10, node, f.number).is_none() {
            continue;
        }
        match counts.iter_mut().find(|(n, w, _)| *n == f.number && *w == f.wire) {
            Some(c) => c.2 += 1,
            None => counts.push((f.number, f.wire, 1)),
        }
    }
    Ok(())
}

fn scan(bytes: &[u8]) -> Result<Scan<'_>, WireError> {
    let mut scan = Scan {
        request: bytes,
        ..Scan::default()
    };
    let mut at = Pos {
        resource: 0,
        scope: 0,
        profile: 0,
        inner: Inner::None,
    };
    for f in fields(bytes) {
        let f = f?;
        if (f.number, f.wire) != (1, WireType::LengthDelimited) {
            continue;
        }
        at.scope = 0;
        for f in fields(f.payload) {
            let f = f?;
            if (f.number, f.wire) == (2, WireType::LengthDelimited) {
                at.profile = 0;
                for f in fields(f.payload) {
                    let f = f?;
                    if (f.number, f.wire) == (2, WireType::LengthDelimited) {
                        scan_profile(&mut scan, f.payload, &at)?;
                        at.profile += 1;
                    }
                }
                at.scope += 1;
            }
        }
        at.resource += 1;
    }
    Ok(scan)
}

fn scan_profile(scan: &mut Scan<'_>, body: &[u8], at: &Pos) -> Result<(), WireError> {
    let mut sample = 0;
    let mut comment_max: Option<u64> = None;
    for f in fields(body) {
        let f = f?;
        match (f.number, f.wire) {
            (2, WireType::LengthDelimited) => {
                let at = Pos {
                    inner: Inner::Sample(sample),
                    ..at.clone()
                };
                scan.note(Node::Sample, f.payload, &at)?;
                sample += 1;
            }
            (1 | 5, WireType::LengthDelimited) => {
                let at = Pos {
                    inner: Inner::ValueType(f.number),
                    ..at.clone()
                };
                scan.note(Node::ValueType, f.payload, &at)?;
            }
            (7, WireType::LengthDelimited) => {
                // In v1.10 this field is `profile_id`: arbitrary bytes that need not read as
                // varints. A bad varint marks the reading invalid and ends the scan, since
                // the decoder does not advance past it.
                let mut packed = f.payload;
                let max = comment_max.get_or_insert(0);
                while !packed.is_empty() {
                    match decode_varint(&mut packed) {
                        Ok(v) if v <= i32::MAX as u64 => *max = (*max).max(v),
                        Ok(_) => *max = u64::MAX,
                        Err(_) => {
                            *max = u64::MAX;
                            break;
                        }
                    }
                }
            }
            (7, WireType::Varint) => {
                let index = decode_varint(&mut &f.value[..])?;
                let index = if index <= i32::MAX as u64 { index } else { u64::MAX };
                let max = comment_max.get_or_insert(0);
                *max = (*max).max(index);
            }
            _ => {}
        }
    }
    scan.note(Node::Profile, body, at)?;
    scan.comment_max.push(comment_max);
    Ok(())
}

/// Copies a message in `layout` into the v1.10 layout, renumbering the fields that moved
/// and dropping those v1.10 does not have (comments, aggregation temporality).
fn rewrite(body: &[u8], node: Node, layout: Layout, out: &mut Vec<u8>) -> Result<(), WireError> {
    for f in fields(body) {
        let f = f?;
        let Some(number) = renumber(layout, node, f.number) else {
            continue;
        };
        let child = node.child(f.number);
        if child != Node::Other && f.wire == WireType::LengthDelimited {
            let mut inner = Vec::with_capacity(f.payload.len());
            rewrite(f.payload, child, layout, &mut inner)?;
            encode_key(number, WireType::LengthDelimited, out);
            encode_varint(inner.len() as u64, out);
            out.extend_from_slice(&inner);
        } else {
            encode_key(number, f.wire, out);
            out.extend_from_slice(f.value);
        }
    }
    Ok(())
}

/// The v1.10 number of `field`, or `None` to drop it.
fn renumber(layout: Layout, node: Node, field: u32) -> Option<u32> {
    match (layout, node, field) {
        (Layout::V1_10, _, f) => Some(f),
        (_, Node::Sample, 2) => Some(4),
        (_, Node::Sample, 3) => Some(2),
        (_, Node::Sample, 4) => Some(3),
        (Layout::V1_8, Node::Profile, 7) => None,
        (Layout::V1_8, Node::Profile, f @ 8..=12) => Some(f - 1),
        (Layout::V1_8, Node::ValueType, 3) => None,
        (_, _, f) => Some(f),
    }
}
