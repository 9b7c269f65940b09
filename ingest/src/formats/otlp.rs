//! OTLP profiles v1development in any layout the sender declared or the wire shows,
//! protobuf (its dictionary decoded flat) or JSON.

use prost::Message;

use super::detect::Sniff;
use super::{Body, Encoding, Params, WireFormat};
use crate::convert::Conversion;
use crate::otlp::layout::{self, Layout};
use crate::pipeline::error::IngestError;

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

    fn otlp_encoding(&self) -> Option<Encoding> {
        Some(self.0)
    }

    fn file_extensions(&self) -> &'static [&'static str] {
        match self.0 {
            Encoding::Protobuf => &["pb", "proto"],
            Encoding::Json => &["json"],
        }
    }

    /// JSON: before speedscope, as `resourceProfiles` is the surer sign. Protobuf: last, as
    /// most messages with a field 1 pass, a pprof among them.
    fn detect_rank(&self) -> Option<u8> {
        Some(match self.0 {
            Encoding::Json => 20,
            Encoding::Protobuf => 60,
        })
    }

    /// JSON: a `resourceProfiles` key (or its proto name). Protobuf: a message that decodes
    /// with fields 1 and 2 as bytes and has `resource_profiles`.
    fn detect(&self, content: &Sniff<'_>) -> bool {
        match self.0 {
            Encoding::Json => content
                .json_object()
                .is_some_and(|o| o.contains_key("resourceProfiles") || o.contains_key("resource_profiles")),
            Encoding::Protobuf => content
                .bytes()
                .and_then(|data| ShallowRequest::decode(data).ok())
                .is_some_and(|r| !r.resource_profiles.is_empty()),
        }
    }

    fn convert(&self, body: &Body, params: &Params) -> Result<Conversion, IngestError> {
        let bytes = body.main(self.name(), &[])?;
        Ok(match self.0 {
            Encoding::Protobuf => {
                let decoded = layout::decode_protobuf_flat(bytes, params.layout)?;
                Conversion {
                    request: decoded.request,
                    dictionary: Some(decoded.dictionary),
                    rejected_profiles: decoded.rejected.len(),
                    errors: decoded.rejected,
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

/// Top-level view of an OTLP request: both fields as raw bytes, so that any layout's
/// nested messages decode.
#[derive(Clone, PartialEq, prost::Message)]
struct ShallowRequest {
    #[prost(bytes = "vec", repeated, tag = "1")]
    resource_profiles: Vec<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "2")]
    dictionary: Option<Vec<u8>>,
}

/// The layout a sender declared in the `OTLP-Profiles-Development-Version` header or
/// metadata (`values`, every one sent; named `what` in errors), if it declared one. One
/// value only: a repeated header, or values joined by commas, is refused.
pub fn declared_layout<'a>(
    mut values: impl Iterator<Item = &'a [u8]>,
    what: &str,
) -> Result<Option<Layout>, IngestError> {
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(IngestError::invalid(format!(
            "invalid {what}: sent more than once; send one version"
        )));
    }
    let value =
        std::str::from_utf8(value).map_err(|_| IngestError::invalid(format!("invalid {what}: not ASCII")))?;
    Layout::from_header(value)
        .map(Some)
        .map_err(|e| IngestError::invalid(format!("invalid {what} {value:?}: {e}")))
}
