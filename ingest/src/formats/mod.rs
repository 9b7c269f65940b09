//! Every wire format a receiver accepts, one file each: a [`WireFormat`] turns a request
//! body (and what the transport says about it, [`Params`]) into a [`Conversion`], the OTLP
//! request the rest of the pipeline reads. The format also says everything else that is
//! particular to it: its `format=` value on Pyroscope's `/ingest`, how a file of it is
//! recognized on import ([`detect`]), where import sends it and its file extensions. So
//! adding a format is a file here and a line in [`ALL`], nothing else.
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
use crate::pipeline::error::IngestError;
use detect::Sniff;

/// One wire format: how its requests become OTLP, and what the transports and the import
/// command need to know about it. Only `name` and `convert` are required: a format a
/// receiver picks by itself (Push, the OTLP endpoints) has nothing else to say.
pub trait WireFormat: Send + Sync + 'static {
    /// How errors, logs and [`by_name`] name it.
    fn name(&self) -> &'static str;

    /// Its `format=` value on Pyroscope's `/ingest`; `None`: not sent there.
    fn ingest_name(&self) -> Option<&'static str> {
        None
    }

    /// Its encoding when it is the current OTLP request (what `/v1development/profiles`
    /// takes): `stackhouse import` sends such a file there, not to `/ingest`.
    fn otlp_encoding(&self) -> Option<Encoding> {
        None
    }

    /// Where [`detect::detect`] asks this format, lowest first, if files of it can be
    /// recognized from their content; unique among the formats. A check may count on every
    /// lower rank having said no, so a loose check (any protobuf that decodes) ranks after
    /// the strict ones it would otherwise shadow. Today's ranks are tens, leaving room to
    /// slot a format in between without renumbering.
    fn detect_rank(&self) -> Option<u8> {
        None
    }

    /// Whether a file's content is in this format; asked only when
    /// [`detect_rank`](Self::detect_rank) is set.
    fn detect(&self, _content: &Sniff<'_>) -> bool {
        false
    }

    /// The extensions its files carry (`cpu.pb.gz`), which `stackhouse import` strips to
    /// name the service after the file.
    fn file_extensions(&self) -> &'static [&'static str] {
        &[]
    }

    /// The whole request, converted; profiles refused alone are counted in the result.
    fn convert(&self, body: &Body, params: &Params) -> Result<Conversion, IngestError>;
}

/// Formats are told apart by name, which is all a log or a test needs to see.
impl std::fmt::Debug for dyn WireFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Every format, each once; [`by_name`] and [`of_ingest`] look them up. The order is the one
/// `/ingest`'s messages list the `format=` values in (after the default), so it is part of
/// those messages; detection has its own order ([`WireFormat::detect_rank`]).
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

/// The format whose [`WireFormat::ingest_name`] is `value`.
pub fn of_ingest(value: &str) -> Option<&'static dyn WireFormat> {
    ALL.iter().copied().find(|f| f.ingest_name() == Some(value))
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
    use crate::pyroscope::parse_format;

    #[test]
    fn names_are_unique() {
        for (i, f) in ALL.iter().enumerate() {
            assert!(
                ALL[..i].iter().all(|g| g.name() != f.name()),
                "{} twice",
                f.name()
            );
        }
    }

    /// What makes a line in ALL enough: everything that picks a format by a value or by
    /// content finds every registered format that says it can be picked that way.
    #[test]
    fn registration_alone_makes_a_format_reachable() {
        let same = |a: &dyn WireFormat, b: &dyn WireFormat| a.name() == b.name();
        let mut ingest_names = Vec::new();
        let mut ranks = Vec::new();
        for &f in &ALL {
            assert!(same(by_name(f.name()).unwrap(), f), "{f:?}");
            if let Some(value) = f.ingest_name() {
                assert!(same(parse_format(value).unwrap(), f), "{f:?}");
                assert!(!ingest_names.contains(&value), "format={value} twice");
                ingest_names.push(value);
            }
            if let Some(rank) = f.detect_rank() {
                assert!(!ranks.contains(&rank), "detect rank {rank} twice");
                ranks.push(rank);
                assert!(
                    f.ingest_name().is_some() || f.otlp_encoding().is_some(),
                    "{f:?} is detected but import has nowhere to send it"
                );
            }
        }
    }
}
