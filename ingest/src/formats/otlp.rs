//! OTLP profiles v1development in any layout the sender declared or the wire shows,
//! protobuf (its dictionary decoded flat) or JSON.

use super::{Body, Encoding, Params, WireFormat};
use crate::convert::Conversion;
use crate::otlp::layout::{self, Layout};
use crate::pipeline::IngestError;

pub struct Development(pub Encoding);

pub static PROTOBUF: Development = Development(Encoding::Protobuf);
pub static JSON: Development = Development(Encoding::Json);

impl WireFormat for Development {
    fn name(&self) -> &'static str {
        match self.0 {
            Encoding::Protobuf => "otlp-protobuf",
            Encoding::Json => "otlp-json",
        }
    }

    fn convert(&self, body: &Body, params: &Params) -> Result<Conversion, IngestError> {
        let bytes = body.main(self.name(), &[])?;
        Ok(match self.0 {
            Encoding::Protobuf => {
                let (request, dictionary) = layout::decode_protobuf_flat(bytes, params.layout)?;
                Conversion {
                    request,
                    dictionary: Some(dictionary),
                    ..Conversion::default()
                }
            }
            Encoding::Json => Conversion {
                request: layout::decode_json(bytes, params.layout)?,
                ..Conversion::default()
            },
        })
    }
}

/// The layout a sender declared (`value` of the `OTLP-Profiles-Development-Version` header
/// or metadata, named `what` in errors), if it declared one.
pub fn declared_layout(value: Option<&[u8]>, what: &str) -> Result<Option<Layout>, IngestError> {
    let Some(value) = value else {
        return Ok(None);
    };
    let value =
        std::str::from_utf8(value).map_err(|_| IngestError::invalid(format!("invalid {what}: not ASCII")))?;
    Layout::from_header(value)
        .map(Some)
        .map_err(|e| IngestError::invalid(format!("invalid {what} {value:?}: {e}")))
}
