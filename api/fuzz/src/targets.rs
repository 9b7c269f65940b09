//! One function per decoder. Each panics only on a bug: a decoder that panics, or output
//! that breaks an invariant checked here.

use stackhouse_ingest::body::{BodyError, decompress};
use stackhouse_ingest::convert::{ConvertError, Converted, RequestBuilder, Source};
use stackhouse_ingest::jfr::FrameNames;
use stackhouse_ingest::otlp::layout::{self, Layout};
use stackhouse_ingest::otlp::{self, experimental};
use stackhouse_ingest::speedscope as speedscope_format;
use stackhouse_ingest::{folded as folded_format, jfr as jfr_format, pprof as pprof_format};
use stackhouse_proto::otlp_collector::ExportProfilesServiceRequest;
use stackhouse_query::{parse_promql_selector, parse_selector};

/// The decoders' size limit in the targets: larger inputs only test the limit.
pub const LIMIT: usize = 1 << 20;

/// A fuzz target: bytes in, a panic on a bug.
pub type Target = fn(&[u8]);

/// Every target by name, as `cargo fuzz` and the regression folders name them.
pub const ALL: [(&str, Target); 10] = [
    ("otlp_protobuf", otlp_protobuf),
    ("otlp_json", otlp_json),
    ("otlp_experimental", otlp_experimental),
    ("pprof", pprof),
    ("jfr", jfr),
    ("speedscope", speedscope),
    ("folded", folded),
    ("body", body),
    ("selector", selector),
    ("http_api", crate::http_api::request),
];

const DECLARED: [Option<Layout>; 5] = [
    None,
    Some(Layout::V1_7),
    Some(Layout::V1_8),
    Some(Layout::V1_9),
    Some(Layout::V1_10),
];

/// OTLP protobuf as sent: layout detection, then each declared layout, then normalization;
/// the receivers' flat dictionary and sample decode must accept and read exactly what prost
/// does.
pub fn otlp_protobuf(data: &[u8]) {
    for declared in DECLARED {
        let decoded = layout::decode_protobuf(data, declared);
        let flat = layout::decode_protobuf_flat(data, declared);
        match (&decoded, &flat) {
            (
                Ok(request),
                Ok(layout::Decoded {
                    request: profiles,
                    dictionary,
                    ..
                }),
            ) => {
                let flat = match dictionary.samples() {
                    Some(samples) => samples.restore(&profiles.resource_profiles),
                    None => profiles.resource_profiles.clone(),
                };
                assert_eq!(flat, request.resource_profiles);
                assert_eq!(
                    dictionary.to_proto(),
                    request.dictionary.clone().unwrap_or_default()
                );
            }
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
            _ => panic!("prost and the flat decoder disagree: {decoded:?} vs {flat:?}"),
        }
        if let Ok(request) = decoded {
            normalize(&request);
        }
    }
}

/// OTLP/JSON as sent, the same way.
pub fn otlp_json(data: &[u8]) {
    for declared in DECLARED {
        if let Ok(request) = layout::decode_json(data, declared) {
            normalize(&request);
        }
    }
}

/// OTLP v1experimental, protobuf and JSON, converted and normalized.
pub fn otlp_experimental(data: &[u8]) {
    for conversion in [experimental::from_protobuf(data), experimental::from_json(data)]
        .into_iter()
        .flatten()
    {
        normalize(&conversion.request);
    }
}

/// pprof (plain or gzipped) alone, and split at the first 0xff byte into the previous
/// profile of a delta and the current one.
pub fn pprof(data: &[u8]) {
    let options = pprof_format::PprofOptions::default();
    convert(|source, builder| pprof_format::convert(data, &options, source, LIMIT, builder));
    if let Some(split) = data.iter().position(|&b| b == 0xff) {
        let options = pprof_format::PprofOptions {
            previous: Some(&data[..split]),
            ..options
        };
        let current = &data[split + 1..];
        convert(|source, builder| pprof_format::convert(current, &options, source, LIMIT, builder));
    }
}

/// JFR recordings (plain or gzipped) alone, and with a length-prefixed Pyroscope
/// `LabelsSnapshot` taken off the front, as a multipart upload sends it.
pub fn jfr(data: &[u8]) {
    convert(|source, builder| jfr_format::convert(data, None, FrameNames::Pyroscope, source, LIMIT, builder));
    if let [a, b, rest @ ..] = data {
        let n = usize::from(u16::from_le_bytes([*a, *b])).min(rest.len());
        let (labels, recording) = rest.split_at(n);
        convert(|source, builder| {
            jfr_format::convert(recording, Some(labels), FrameNames::Jdk, source, LIMIT, builder)
        });
    }
}

pub fn speedscope(data: &[u8]) {
    convert(|source, builder| speedscope_format::convert(data, source, builder));
}

pub fn folded(data: &[u8]) {
    convert(|source, builder| folded_format::convert(data, source, builder));
}

/// Request bodies as they arrive: gzip inflation under a limit (bombs, truncated and
/// concatenated members) and unknown encodings.
pub fn body(data: &[u8]) {
    const BODY_LIMIT: usize = 64 << 10;
    for encoding in [None, Some("gzip"), Some(" x-gzip "), Some("br")] {
        match decompress(data, encoding, BODY_LIMIT) {
            Ok(body) => assert!(body.len() <= BODY_LIMIT, "inflated past the limit"),
            Err(BodyError::TooLarge { limit }) => assert_eq!(limit, BODY_LIMIT),
            Err(_) => {}
        }
    }
}

/// Label selectors, with and without PromQL's metric name. An accepted selector prints as
/// one that parses back to itself: the API echoes selectors and the web UI edits them.
pub fn selector(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for parse in [parse_selector, parse_promql_selector] {
        if let Ok(selector) = parse(text) {
            let printed = selector.to_string();
            match parse_selector(&printed) {
                Ok(again) => assert_eq!(again, selector, "{text:?} printed as {printed:?}"),
                Err(e) => panic!("{text:?} printed as {printed:?}, which does not parse: {e}"),
            }
            for m in &selector.matchers {
                m.matches(Some(text));
                m.matches(None);
            }
        }
    }
}

/// Normalization reads what decoders only carry along: every index and string.
fn normalize(request: &ExportProfilesServiceRequest) {
    if let Ok(normalized) = otlp::normalize("fuzz", request, 1_700_000_000_000_000_000) {
        let sent: usize = request
            .resource_profiles
            .iter()
            .flat_map(|r| &r.scope_profiles)
            .map(|s| s.profiles.len())
            .sum();
        assert_eq!(
            normalized.accepted_profiles + normalized.rejected_profiles,
            sent,
            "every profile is either accepted or rejected"
        );
    }
}

/// Runs one converter, then normalizes what it built.
fn convert(run: impl FnOnce(&Source, &mut RequestBuilder) -> Result<Converted, ConvertError>) {
    let mut builder = RequestBuilder::new();
    let source = Source {
        resource: vec![("service.name".into(), "fuzz".into())],
        ..Source::default()
    };
    if run(&source, &mut builder).is_ok() {
        normalize(&builder.finish());
    }
}
