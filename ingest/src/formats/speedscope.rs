//! speedscope's JSON file format.

use super::detect::Sniff;
use super::{Body, Params, WireFormat, built};
use crate::convert::Conversion;
use crate::pipeline::error::IngestError;
use crate::speedscope::convert;

pub struct Speedscope;

impl WireFormat for Speedscope {
    fn name(&self) -> &'static str {
        "speedscope"
    }

    fn ingest_name(&self) -> Option<&'static str> {
        Some("speedscope")
    }

    fn file_extensions(&self) -> &'static [&'static str] {
        &["speedscope", "json"]
    }

    /// After OTLP JSON, whose `resourceProfiles` is the stronger sign.
    fn detect_rank(&self) -> Option<u8> {
        Some(30)
    }

    /// Its `$schema` says so; files written without one still have `shared` and `profiles`.
    fn detect(&self, content: &Sniff<'_>) -> bool {
        let Some(object) = content.json_object() else {
            return false;
        };
        let schema_says = object
            .get("$schema")
            .and_then(|s| s.as_str())
            .is_some_and(|s| s.contains("speedscope"));
        schema_says || (object.contains_key("shared") && object.contains_key("profiles"))
    }

    fn convert(&self, body: &Body, params: &Params) -> Result<Conversion, IngestError> {
        built(|builder| convert(body.main(self.name(), &["profile"])?, &params.source, builder))
    }
}
