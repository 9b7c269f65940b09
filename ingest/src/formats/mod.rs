//! Every wire format a receiver accepts, one file each: a [`WireFormat`] turns a request
//! body (and what the transport says about it, [`Params`]) into a [`Conversion`], the OTLP
//! request the rest of the pipeline reads. Adding a format is adding a file here and
//! registering it in [`ALL`].
//!
//! The decoders themselves live in their own modules ([`crate::otlp`], [`crate::pprof`],
//! [`crate::jfr`], ...); these are the adapters that pick their inputs out of the body.

pub mod detect;
pub mod experimental;
pub mod folded;
pub mod jfr;
pub mod otlp;
pub mod pprof;
pub mod push;
pub mod speedscope;

use bytes::Bytes;
use stackhouse_proto::pyroscope_push::PushRequest;

use crate::convert::{Conversion, ConvertError, Converted, RequestBuilder, Source};
use crate::otlp::layout::Layout;
use crate::pipeline::IngestError;
use crate::pyroscope::Format;

/// One wire format: how its requests become OTLP.
pub trait WireFormat: Send + Sync + 'static {
    /// How `format=`, detection and messages name it.
    fn name(&self) -> &'static str;

    /// The whole request, converted; profiles refused alone are counted in the result.
    fn convert(&self, body: &Body, params: &Params) -> Result<Conversion, IngestError>;
}

/// Every format, each once; [`by_name`] looks them up.
pub static ALL: [&dyn WireFormat; 9] = [
    &otlp::PROTOBUF,
    &otlp::JSON,
    &experimental::PROTOBUF,
    &experimental::JSON,
    &pprof::Pprof,
    &jfr::Jfr,
    &speedscope::Speedscope,
    &folded::Folded,
    &push::Push,
];

pub fn by_name(name: &str) -> Option<&'static dyn WireFormat> {
    ALL.iter().copied().find(|f| f.name() == name)
}

/// The format of a Pyroscope `/ingest` request's `format=`.
pub fn of_ingest(format: Format) -> &'static dyn WireFormat {
    by_name(format.name()).expect("every /ingest format is registered")
}

/// How an OTLP request is encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    Protobuf,
    Json,
}

/// A request body with the transport's encoding undone.
#[derive(Debug)]
pub enum Body {
    /// One payload.
    Raw(Bytes),
    /// The named parts of a multipart/form-data upload, in order.
    Parts(Vec<(String, Bytes)>),
    /// A Pyroscope Push request, decoded by its Connect codec.
    Push(PushRequest),
}

impl Body {
    /// The first part named one of `names`.
    pub fn part(&self, names: &[&str]) -> Option<&Bytes> {
        let Body::Parts(parts) = self else {
            return None;
        };
        parts
            .iter()
            .find(|(n, _)| names.contains(&n.as_str()))
            .map(|(_, data)| data)
    }

    /// The raw payload, or the multipart part that carries the profile (`names[0]` or an
    /// alias); `format` names the format in the error.
    pub fn main(&self, format: &'static str, names: &[&str]) -> Result<&[u8], ConvertError> {
        let wanted = names.first().copied().unwrap_or_default();
        match self {
            Body::Raw(raw) => Ok(&raw[..]),
            Body::Parts(parts) => self.part(names).map(|b| &b[..]).ok_or_else(|| {
                let sent: Vec<&str> = parts.iter().map(|(n, _)| n.as_str()).collect();
                ConvertError::invalid(
                    format,
                    format!("multipart upload has no {wanted:?} part (parts: {sent:?})"),
                )
            }),
            Body::Push(_) => Err(ConvertError::invalid(
                format,
                format!("a push request has no {wanted:?} part"),
            )),
        }
    }
}

/// What the transport says about a request beyond its body.
#[derive(Clone, Debug, Default)]
pub struct Params {
    /// The Pyroscope query or labels: service, tags, times, units.
    pub source: Source,
    /// The OTLP layout the sender declared, if it did.
    pub layout: Option<Layout>,
    /// Largest content a converter inflates to (a gzipped pprof, JFR).
    pub limit: usize,
    /// How JFR frames are named (a server setting the pipeline fills in).
    pub jfr_frame_names: crate::jfr::FrameNames,
}

/// A conversion through [`RequestBuilder`]: `convert` adds the profiles.
fn built(
    convert: impl FnOnce(&mut RequestBuilder) -> Result<Converted, ConvertError>,
) -> Result<Conversion, IngestError> {
    let mut builder = RequestBuilder::new();
    let converted = convert(&mut builder)?;
    Ok(Conversion {
        request: builder.finish(),
        converted,
        ..Conversion::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_every_ingest_format_is_registered() {
        for (i, f) in ALL.iter().enumerate() {
            assert!(
                ALL[..i].iter().all(|g| g.name() != f.name()),
                "{} twice",
                f.name()
            );
        }
        for format in [Format::Folded, Format::Pprof, Format::Jfr, Format::Speedscope] {
            assert_eq!(of_ingest(format).name(), format.name());
        }
        use detect::Detected;
        for detected in [
            Detected::OtlpProtobuf,
            Detected::OtlpJson,
            Detected::Pprof,
            Detected::Jfr,
            Detected::Speedscope,
            Detected::Folded,
        ] {
            assert_eq!(detected.wire_format().name(), detected.name());
        }
    }
}
