//! speedscope's JSON file format.

use super::{Body, Params, WireFormat, built};
use crate::convert::Conversion;
use crate::pipeline::IngestError;
use crate::speedscope::convert;

pub struct Speedscope;

impl WireFormat for Speedscope {
    fn name(&self) -> &'static str {
        "speedscope"
    }

    fn convert(&self, body: &Body, params: &Params) -> Result<Conversion, IngestError> {
        built(|builder| convert(body.main(self.name(), &["profile"])?, &params.source, builder))
    }
}
