//! Folded stacks (`frame;frame;frame value` per line), Pyroscope's default.

use super::{Body, Params, WireFormat, built};
use crate::convert::Conversion;
use crate::folded::convert;
use crate::pipeline::IngestError;

pub struct Folded;

impl WireFormat for Folded {
    fn name(&self) -> &'static str {
        "folded"
    }

    fn convert(&self, body: &Body, params: &Params) -> Result<Conversion, IngestError> {
        built(|builder| convert(body.main(self.name(), &["profile"])?, &params.source, builder))
    }
}
