//! JFR recordings, raw or a multipart `jfr` with its `labels`.

use super::detect::Sniff;
use super::{Body, Params, WireFormat, built};
use crate::convert::Conversion;
use crate::jfr::convert;
use crate::pipeline::error::IngestError;

pub struct Jfr;

impl WireFormat for Jfr {
    fn name(&self) -> &'static str {
        "jfr"
    }

    fn ingest_name(&self) -> Option<&'static str> {
        Some("jfr")
    }

    fn file_extensions(&self) -> &'static [&'static str] {
        &["jfr"]
    }

    /// First: a magic number is the surest sign there is.
    fn detect_rank(&self) -> Option<u8> {
        Some(10)
    }

    fn detect(&self, content: &Sniff<'_>) -> bool {
        content.bytes().is_some_and(|data| data.starts_with(b"FLR\0"))
    }

    fn convert(&self, body: &Body, params: &Params) -> Result<Conversion, IngestError> {
        built(|builder| {
            let labels = body.part(&["labels"]).map(|b| &b[..]);
            convert(
                body.main(self.name(), &["jfr"])?,
                labels,
                params.jfr_frame_names,
                &params.source,
                params.limit,
                builder,
            )
        })
    }
}
