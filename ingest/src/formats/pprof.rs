//! pprof, raw or gzipped, or a multipart `profile` with `previous_profile` (to subtract
//! cumulative values) and `sample_type_config`.

use prost::Message;

use super::detect::Sniff;
use super::{Body, Params, WireFormat, built};
use crate::convert::Conversion;
use crate::pipeline::error::IngestError;
use crate::pprof::{PprofOptions, convert};

pub struct Pprof;

impl WireFormat for Pprof {
    fn name(&self) -> &'static str {
        "pprof"
    }

    fn ingest_name(&self) -> Option<&'static str> {
        Some("pprof")
    }

    fn file_extensions(&self) -> &'static [&'static str] {
        &["pprof", "prof", "pb"]
    }

    /// Before OTLP protobuf, which a pprof also decodes as (its sample types in field 1).
    fn detect_rank(&self) -> Option<u8> {
        Some(50)
    }

    /// A `Profile` with sample types and a string table starting with "".
    fn detect(&self, content: &Sniff<'_>) -> bool {
        content
            .bytes()
            .and_then(|data| ShallowProfile::decode(data).ok())
            .is_some_and(|p| !p.sample_type.is_empty() && p.string_table.first().is_some_and(Vec::is_empty))
    }

    fn convert(&self, body: &Body, params: &Params) -> Result<Conversion, IngestError> {
        built(|builder| {
            let options = PprofOptions {
                previous: body.part(&["previous_profile", "prev_profile"]).map(|b| &b[..]),
                sample_type_config: body.part(&["sample_type_config"]).map(|b| &b[..]),
            };
            convert(
                body.main(self.name(), &["profile"])?,
                &options,
                &params.source,
                params.limit,
                builder,
            )
        })
    }
}

/// A pprof `Profile` with its strings as bytes: a file with invalid UTF-8 is still pprof
/// (the server decides what to do with it).
#[derive(Clone, PartialEq, prost::Message)]
struct ShallowProfile {
    #[prost(message, repeated, tag = "1")]
    sample_type: Vec<stackhouse_proto::pprof::ValueType>,
    #[prost(bytes = "vec", repeated, tag = "6")]
    string_table: Vec<Vec<u8>>,
}
