//! pprof, raw or gzipped, or a multipart `profile` with `previous_profile` (to subtract
//! cumulative values) and `sample_type_config`.

use super::{Body, Params, WireFormat, built};
use crate::convert::Conversion;
use crate::pipeline::IngestError;
use crate::pprof::{PprofOptions, convert};

pub struct Pprof;

impl WireFormat for Pprof {
    fn name(&self) -> &'static str {
        "pprof"
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
