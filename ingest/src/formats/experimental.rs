//! The seed format (OTEP 239, `v1experimental`), converted into the current layout.

use super::{Body, Encoding, Params, WireFormat};
use crate::convert::Conversion;
use crate::otlp::experimental::{from_json, from_protobuf};
use crate::pipeline::error::IngestError;

pub struct Experimental(pub Encoding);

pub static PROTOBUF: Experimental = Experimental(Encoding::Protobuf);
pub static JSON: Experimental = Experimental(Encoding::Json);

impl WireFormat for Experimental {
    fn name(&self) -> &'static str {
        match self.0 {
            Encoding::Protobuf => "otlp-experimental-protobuf",
            Encoding::Json => "otlp-experimental-json",
        }
    }

    fn convert(&self, body: &Body, _params: &Params) -> Result<Conversion, IngestError> {
        let bytes = body.main(self.name(), &[])?;
        Ok(match self.0 {
            Encoding::Protobuf => from_protobuf(bytes)?,
            Encoding::Json => from_json(bytes)?,
        })
    }
}
