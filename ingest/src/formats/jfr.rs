//! JFR recordings, raw or a multipart `jfr` with its `labels`.

use super::{Body, Params, WireFormat, built};
use crate::convert::Conversion;
use crate::jfr::convert;
use crate::pipeline::IngestError;

pub struct Jfr;

impl WireFormat for Jfr {
    fn name(&self) -> &'static str {
        "jfr"
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
