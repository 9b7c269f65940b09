//! Folded stacks (`frame;frame;frame value` per line), Pyroscope's default.

use super::detect::Sniff;
use super::{Body, Params, WireFormat, built};
use crate::convert::Conversion;
use crate::folded::convert;
use crate::pipeline::error::IngestError;

pub struct Folded;

impl WireFormat for Folded {
    fn name(&self) -> &'static str {
        "folded"
    }

    fn ingest_name(&self) -> Option<&'static str> {
        Some("folded")
    }

    fn file_extensions(&self) -> &'static [&'static str] {
        &["folded", "collapsed", "txt"]
    }

    /// Before the protobuf formats: text whose every line ends in a number practically
    /// never is binary protobuf, but it may well decode as one.
    fn detect_rank(&self) -> Option<u8> {
        Some(40)
    }

    /// Every non-empty line is `frames <integer>`, and there is at least one.
    fn detect(&self, content: &Sniff<'_>) -> bool {
        let Some(Ok(text)) = content.bytes().map(std::str::from_utf8) else {
            return false;
        };
        let mut lines = 0;
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let Some((frames, value)) = line.rsplit_once(|c: char| c.is_ascii_whitespace()) else {
                return false;
            };
            if frames.trim().is_empty() || value.parse::<i64>().is_err() {
                return false;
            }
            lines += 1;
        }
        lines > 0
    }

    fn convert(&self, body: &Body, params: &Params) -> Result<Conversion, IngestError> {
        built(|builder| convert(body.main(self.name(), &["profile"])?, &params.source, builder))
    }
}
