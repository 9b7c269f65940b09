//! Decoding a pprof body into a profile whose references can be resolved with errors that
//! name the broken field.
//!
//! The string table is decoded as bytes and converted lossily: prost's `string` decoding
//! refuses a whole profile for one invalid UTF-8 byte sequence (some runtimes write raw
//! bytes of non-UTF-8 symbol names), while storing it with U+FFFD replacement characters
//! keeps every value and every other frame name intact.

use std::collections::HashMap;

use prost::Message;
use stackhouse_proto::pprof::{Function, Location, Mapping, Sample, ValueType};

use crate::body::{BodyError, decompress};
use crate::convert::ConvertError;

/// `perftools.profiles.Profile` with `string_table` as bytes; the fields we ignore
/// (`drop_frames`, `keep_frames`, `comment`, `default_sample_type`) are skipped.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct RawProfile {
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<Mapping>,
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    #[prost(bytes = "vec", repeated, tag = "6")]
    pub string_table: Vec<Vec<u8>>,
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<ValueType>,
    #[prost(int64, tag = "12")]
    pub period: i64,
}

pub(crate) fn invalid(message: impl std::fmt::Display) -> ConvertError {
    ConvertError::invalid("pprof", message)
}

/// A decoded profile with its strings and id → index maps.
pub(crate) struct Decoded {
    pub profile: RawProfile,
    pub strings: Vec<String>,
    locations: HashMap<u64, usize>,
    functions: HashMap<u64, usize>,
    mappings: HashMap<u64, usize>,
    /// Prefix of every error message: "" for the profile, "previous_profile: " for the
    /// previous one.
    what: &'static str,
}

/// `data` raw or gzipped (by its magic bytes); `what` prefixes error messages.
pub(crate) fn decode(data: &[u8], limit: usize, what: &'static str) -> Result<Decoded, ConvertError> {
    let gzipped = data.starts_with(&[0x1f, 0x8b]);
    let bytes = decompress(data, gzipped.then_some("gzip"), limit).map_err(|e| match e {
        BodyError::TooLarge { limit } => ConvertError::TooLarge {
            format: "pprof",
            limit,
        },
        BodyError::Malformed(m) => invalid(format_args!("{what}{m}")),
        BodyError::UnsupportedEncoding(m) => invalid(format_args!("{what}unsupported encoding {m}")),
    })?;
    if bytes.is_empty() {
        return Err(invalid(format_args!("{what}empty profile")));
    }
    let profile = RawProfile::decode(bytes.as_ref())
        .map_err(|e| invalid(format_args!("{what}not a pprof protobuf: {e}")))?;
    Decoded::new(profile, what)
}

impl Decoded {
    fn new(mut profile: RawProfile, what: &'static str) -> Result<Decoded, ConvertError> {
        let raw = std::mem::take(&mut profile.string_table);
        let strings: Vec<String> = raw
            .into_iter()
            .map(|s| {
                String::from_utf8(s).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
            })
            .collect();
        match strings.first() {
            None => {
                return Err(invalid(format_args!(
                    "{what}string_table is empty (entry 0 must be \"\")"
                )));
            }
            Some(s) if !s.is_empty() => {
                return Err(invalid(format_args!(
                    "{what}string_table[0] must be empty, got {s:?}"
                )));
            }
            Some(_) => {}
        }
        if profile.sample_type.is_empty() {
            return Err(invalid(format_args!("{what}no sample_type")));
        }
        let locations = id_map(profile.location.iter().map(|l| l.id), "location", what)?;
        let functions = id_map(profile.function.iter().map(|f| f.id), "function", what)?;
        let mappings = id_map(profile.mapping.iter().map(|m| m.id), "mapping", what)?;
        Ok(Decoded {
            profile,
            strings,
            locations,
            functions,
            mappings,
            what,
        })
    }

    pub(super) fn err(&self, message: impl std::fmt::Display) -> ConvertError {
        invalid(format_args!("{}{message}", self.what))
    }

    /// `string_table[index]`; `field` names the reference for the error.
    pub(super) fn str(&self, index: i64, field: impl FnOnce() -> String) -> Result<&str, ConvertError> {
        usize::try_from(index)
            .ok()
            .and_then(|i| self.strings.get(i))
            .map(String::as_str)
            .ok_or_else(|| {
                self.err(format_args!(
                    "{} string index {index} out of range (string_table has {} entries)",
                    field(),
                    self.strings.len()
                ))
            })
    }

    /// The index into `location` of a sample's location id.
    pub(super) fn location(&self, sample: usize, id: u64) -> Result<usize, ConvertError> {
        self.locations
            .get(&id)
            .copied()
            .ok_or_else(|| self.err(format_args!("sample {sample}: location id {id} not found")))
    }

    /// The index into `function` of a line's function id; `None` for id 0 (no function).
    pub(super) fn function(&self, location: usize, id: u64) -> Result<Option<usize>, ConvertError> {
        if id == 0 {
            return Ok(None);
        }
        match self.functions.get(&id) {
            Some(&i) => Ok(Some(i)),
            None => Err(self.err(format_args!(
                "location id {}: function id {id} not found",
                self.profile.location[location].id
            ))),
        }
    }

    /// The index into `mapping` of a location's mapping id; `None` for id 0 (no mapping).
    pub(super) fn mapping(&self, location: usize, id: u64) -> Result<Option<usize>, ConvertError> {
        if id == 0 {
            return Ok(None);
        }
        match self.mappings.get(&id) {
            Some(&i) => Ok(Some(i)),
            None => Err(self.err(format_args!(
                "location id {}: mapping id {id} not found",
                self.profile.location[location].id
            ))),
        }
    }

    /// `(type, unit)` of sample type `i`.
    pub(super) fn sample_type(&self, i: usize) -> Result<(&str, &str), ConvertError> {
        let t = self.profile.sample_type[i];
        Ok((
            self.str(t.r#type, || format!("sample_type[{i}].type"))?,
            self.str(t.unit, || format!("sample_type[{i}].unit"))?,
        ))
    }
}

/// pprof ids are not indices: they need not be contiguous or ordered, but must be
/// non-zero and unique. A table whose ids are all absent (0), as the .NET profiler writes
/// them, is positional: references count from 1, like `string_table` indices without the
/// empty entry.
fn id_map(
    ids: impl ExactSizeIterator<Item = u64> + Clone,
    table: &str,
    what: &str,
) -> Result<HashMap<u64, usize>, ConvertError> {
    if ids.clone().all(|id| id == 0) {
        return Ok((0..ids.len()).map(|i| (i as u64 + 1, i)).collect());
    }
    let mut map = HashMap::with_capacity(ids.len());
    for (i, id) in ids.enumerate() {
        if id == 0 {
            return Err(invalid(format_args!(
                "{what}{table}[{i}] has id 0 (ids must be non-zero)"
            )));
        }
        if map.insert(id, i).is_some() {
            return Err(invalid(format_args!(
                "{what}{table}[{i}]: duplicate {table} id {id}"
            )));
        }
    }
    Ok(map)
}
