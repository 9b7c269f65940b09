//! One profile encoded in the opentelemetry-proto v1.8, v1.9 and v1.10 layouts: each
//! decodes to the same request, with and without the layout header, or is refused with a
//! message naming the layouts. The old layouts are written here with their own prost
//! structs, transcribed from the v1.8.0 and v1.9.0 protos, not with the decoder's code.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

mod common;

use common::{CAPTURE_JSON, CAPTURE_PB};
use prost::Message;
use stackhouse_ingest::otlp::layout::{self, Layout};
use stackhouse_ingest::otlp::{DecodeError, decode_json, decode_protobuf};
use stackhouse_proto::otlp_collector::ExportProfilesServiceRequest;
use stackhouse_proto::otlp_common::{AnyValue, InstrumentationScope, KeyValue, any_value::Value};
use stackhouse_proto::otlp_profiles as v10;
use stackhouse_proto::otlp_resource::Resource;

/// opentelemetry-proto v1.9.0 (`Sample` differs from v1.10) and v1.8.0 (`Profile` and
/// `ValueType` differ too).
mod old {
    use stackhouse_proto::otlp_common::InstrumentationScope;
    use stackhouse_proto::otlp_profiles::ProfilesDictionary;
    use stackhouse_proto::otlp_resource::Resource;

    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Request<P: prost::Message + Default + Clone + PartialEq + std::fmt::Debug> {
        #[prost(message, repeated, tag = "1")]
        pub resource_profiles: Vec<ResourceProfiles<P>>,
        #[prost(message, optional, tag = "2")]
        pub dictionary: Option<ProfilesDictionary>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct ResourceProfiles<P: prost::Message + Default + Clone + PartialEq + std::fmt::Debug> {
        #[prost(message, optional, tag = "1")]
        pub resource: Option<Resource>,
        #[prost(message, repeated, tag = "2")]
        pub scope_profiles: Vec<ScopeProfiles<P>>,
        #[prost(string, tag = "3")]
        pub schema_url: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct ScopeProfiles<P: prost::Message + Default + Clone + PartialEq + std::fmt::Debug> {
        #[prost(message, optional, tag = "1")]
        pub scope: Option<InstrumentationScope>,
        #[prost(message, repeated, tag = "2")]
        pub profiles: Vec<P>,
        #[prost(string, tag = "3")]
        pub schema_url: String,
    }

    /// v1.8 and v1.9.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Sample {
        #[prost(int32, tag = "1")]
        pub stack_index: i32,
        #[prost(int64, repeated, tag = "2")]
        pub values: Vec<i64>,
        #[prost(int32, repeated, tag = "3")]
        pub attribute_indices: Vec<i32>,
        #[prost(int32, tag = "4")]
        pub link_index: i32,
        #[prost(fixed64, repeated, tag = "5")]
        pub timestamps_unix_nano: Vec<u64>,
    }

    #[derive(Clone, Copy, PartialEq, prost::Message)]
    pub(crate) struct ValueType9 {
        #[prost(int32, tag = "1")]
        pub type_strindex: i32,
        #[prost(int32, tag = "2")]
        pub unit_strindex: i32,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Profile9 {
        #[prost(message, optional, tag = "1")]
        pub sample_type: Option<ValueType9>,
        #[prost(message, repeated, tag = "2")]
        pub samples: Vec<Sample>,
        #[prost(fixed64, tag = "3")]
        pub time_unix_nano: u64,
        #[prost(uint64, tag = "4")]
        pub duration_nano: u64,
        #[prost(message, optional, tag = "5")]
        pub period_type: Option<ValueType9>,
        #[prost(int64, tag = "6")]
        pub period: i64,
        #[prost(bytes = "vec", tag = "7")]
        pub profile_id: Vec<u8>,
        #[prost(uint32, tag = "8")]
        pub dropped_attributes_count: u32,
        #[prost(string, tag = "9")]
        pub original_payload_format: String,
        #[prost(bytes = "vec", tag = "10")]
        pub original_payload: Vec<u8>,
        #[prost(int32, repeated, tag = "11")]
        pub attribute_indices: Vec<i32>,
    }

    #[derive(Clone, Copy, PartialEq, prost::Message)]
    pub(crate) struct ValueType8 {
        #[prost(int32, tag = "1")]
        pub type_strindex: i32,
        #[prost(int32, tag = "2")]
        pub unit_strindex: i32,
        #[prost(int32, tag = "3")]
        pub aggregation_temporality: i32,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Profile8 {
        #[prost(message, optional, tag = "1")]
        pub sample_type: Option<ValueType8>,
        #[prost(message, repeated, tag = "2")]
        pub sample: Vec<Sample>,
        #[prost(fixed64, tag = "3")]
        pub time_unix_nano: u64,
        #[prost(uint64, tag = "4")]
        pub duration_nano: u64,
        #[prost(message, optional, tag = "5")]
        pub period_type: Option<ValueType8>,
        #[prost(int64, tag = "6")]
        pub period: i64,
        #[prost(int32, repeated, tag = "7")]
        pub comment_strindices: Vec<i32>,
        #[prost(bytes = "vec", tag = "8")]
        pub profile_id: Vec<u8>,
        #[prost(uint32, tag = "9")]
        pub dropped_attributes_count: u32,
        #[prost(string, tag = "10")]
        pub original_payload_format: String,
        #[prost(bytes = "vec", tag = "11")]
        pub original_payload: Vec<u8>,
        #[prost(int32, repeated, tag = "12")]
        pub attribute_indices: Vec<i32>,
    }
}

const PROFILE_ID: [u8; 16] = [7; 16];
const T0: u64 = 1_700_000_000_000_000_000;

/// The same observations in every layout, written out per sample:
/// (stack, attributes, link, values, timestamps).
type SampleSpec = (i32, &'static [i32], i32, &'static [i64], &'static [u64]);
const SAMPLES: [SampleSpec; 4] = [
    (1, &[1], 1, &[100], &[T0 + 1]),
    (2, &[], 0, &[200], &[]),
    (1, &[1, 2], 0, &[5, 6], &[T0 + 2, T0 + 3]),
    (2, &[2], 1, &[], &[T0 + 4]),
];

fn dictionary() -> v10::ProfilesDictionary {
    let strings = [
        "",
        "cpu",
        "nanoseconds",
        "region",
        "us",
        "thread",
        "main",
        "f",
        "g",
        "a comment",
    ];
    let attr = |key, value: &str| v10::KeyValueAndUnit {
        key_strindex: key,
        value: Some(AnyValue {
            value: Some(Value::StringValue(value.into())),
        }),
        unit_strindex: 0,
    };
    let location = |function| v10::Location {
        lines: vec![v10::Line {
            function_index: function,
            line: 0,
            column: 0,
        }],
        ..Default::default()
    };
    v10::ProfilesDictionary {
        string_table: strings.map(String::from).to_vec(),
        attribute_table: vec![Default::default(), attr(3, "us"), attr(5, "main")],
        link_table: vec![
            Default::default(),
            v10::Link {
                trace_id: vec![1; 16],
                span_id: vec![2; 8],
            },
        ],
        function_table: vec![
            Default::default(),
            v10::Function {
                name_strindex: 7,
                ..Default::default()
            },
            v10::Function {
                name_strindex: 8,
                ..Default::default()
            },
        ],
        location_table: vec![Default::default(), location(1), location(2)],
        stack_table: vec![
            Default::default(),
            v10::Stack {
                location_indices: vec![1],
            },
            v10::Stack {
                location_indices: vec![2, 1],
            },
        ],
        mapping_table: vec![Default::default()],
    }
}

fn resource() -> Option<Resource> {
    Some(Resource {
        attributes: vec![KeyValue {
            key: "service.name".into(),
            value: Some(AnyValue {
                value: Some(Value::StringValue("checkout".into())),
            }),
            ..Default::default()
        }],
        ..Default::default()
    })
}

fn scope() -> Option<InstrumentationScope> {
    Some(InstrumentationScope {
        name: "profiler".into(),
        ..Default::default()
    })
}

fn v10_request(samples: &[SampleSpec]) -> ExportProfilesServiceRequest {
    let vt = |t, u| v10::ValueType {
        type_strindex: t,
        unit_strindex: u,
    };
    let profile = v10::Profile {
        sample_type: Some(vt(1, 2)),
        samples: samples
            .iter()
            .map(|&(stack, attrs, link, values, ts)| v10::Sample {
                stack_index: stack,
                attribute_indices: attrs.to_vec(),
                link_index: link,
                values: values.to_vec(),
                timestamps_unix_nano: ts.to_vec(),
            })
            .collect(),
        time_unix_nano: T0,
        duration_nano: 10_000_000_000,
        period_type: Some(vt(1, 2)),
        period: 10_000_000,
        profile_id: PROFILE_ID.to_vec(),
        dropped_attributes_count: 3,
        original_payload_format: "pprof".into(),
        original_payload: b"original".to_vec(),
        attribute_indices: vec![2],
    };
    ExportProfilesServiceRequest {
        resource_profiles: vec![v10::ResourceProfiles {
            resource: resource(),
            scope_profiles: vec![v10::ScopeProfiles {
                scope: scope(),
                profiles: vec![profile],
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
        dictionary: Some(dictionary()),
    }
}

fn old_samples(samples: &[SampleSpec]) -> Vec<old::Sample> {
    samples
        .iter()
        .map(|&(stack, attrs, link, values, ts)| old::Sample {
            stack_index: stack,
            values: values.to_vec(),
            attribute_indices: attrs.to_vec(),
            link_index: link,
            timestamps_unix_nano: ts.to_vec(),
        })
        .collect()
}

fn wrap<P: prost::Message + Default + Clone + PartialEq + std::fmt::Debug>(profile: P) -> Vec<u8> {
    old::Request {
        resource_profiles: vec![old::ResourceProfiles {
            resource: resource(),
            scope_profiles: vec![old::ScopeProfiles {
                scope: scope(),
                profiles: vec![profile],
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
        dictionary: Some(dictionary()),
    }
    .encode_to_vec()
}

fn v1_9(samples: &[SampleSpec]) -> Vec<u8> {
    let vt = |t, u| old::ValueType9 {
        type_strindex: t,
        unit_strindex: u,
    };
    wrap(old::Profile9 {
        sample_type: Some(vt(1, 2)),
        samples: old_samples(samples),
        time_unix_nano: T0,
        duration_nano: 10_000_000_000,
        period_type: Some(vt(1, 2)),
        period: 10_000_000,
        profile_id: PROFILE_ID.to_vec(),
        dropped_attributes_count: 3,
        original_payload_format: "pprof".into(),
        original_payload: b"original".to_vec(),
        attribute_indices: vec![2],
    })
}

fn v1_8(samples: &[SampleSpec]) -> Vec<u8> {
    v1_8_commented(samples, vec![9])
}

fn v1_8_commented(samples: &[SampleSpec], comment_strindices: Vec<i32>) -> Vec<u8> {
    let vt = |t, u| old::ValueType8 {
        type_strindex: t,
        unit_strindex: u,
        aggregation_temporality: 1,
    };
    wrap(old::Profile8 {
        sample_type: Some(vt(1, 2)),
        sample: old_samples(samples),
        time_unix_nano: T0,
        duration_nano: 10_000_000_000,
        period_type: Some(vt(1, 2)),
        period: 10_000_000,
        comment_strindices,
        profile_id: PROFILE_ID.to_vec(),
        dropped_attributes_count: 3,
        original_payload_format: "pprof".into(),
        original_payload: b"original".to_vec(),
        attribute_indices: vec![2],
    })
}

fn layout_error(result: Result<ExportProfilesServiceRequest, DecodeError>) -> String {
    match result {
        Err(DecodeError::Layout(message)) => message,
        other => panic!("expected a layout refusal, got {other:?}"),
    }
}

#[test]
fn the_same_profile_in_every_layout_decodes_the_same() {
    let expected = v10_request(&SAMPLES);
    let encodings = [
        (Layout::V1_10, expected.encode_to_vec()),
        (Layout::V1_9, v1_9(&SAMPLES)),
        (Layout::V1_8, v1_8(&SAMPLES)),
    ];
    for (layout, bytes) in &encodings {
        assert_eq!(
            layout::decode_protobuf(bytes, Some(*layout)).unwrap(),
            expected,
            "{layout} declared"
        );
        assert_eq!(
            layout::decode_protobuf(bytes, None).unwrap(),
            expected,
            "{layout} detected"
        );
    }
    // What reading the old layouts as v1.10 would store: the reason for all of this.
    for (layout, bytes) in &encodings[1..] {
        assert_ne!(
            decode_protobuf(bytes).ok().as_ref(),
            Some(&expected),
            "{layout} read as v1.10"
        );
    }
}

/// A v1.10 `profile_id` is field 7, which the old layouts read as packed varints; ids whose
/// bytes are not valid varints (a last byte with its high bit set) once made detection
/// loop forever. Each is decoded on a thread with a deadline so a loop fails the test.
#[test]
fn profile_ids_that_are_not_varints_are_detected_as_v1_10() {
    for id in [
        [0xff_u8; 16],
        [0x80; 16],
        [
            0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0xb6,
        ],
    ] {
        let mut expected = v10_request(&SAMPLES);
        expected.resource_profiles[0].scope_profiles[0].profiles[0].profile_id = id.to_vec();
        let bytes = expected.encode_to_vec();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(layout::decode_protobuf(&bytes, None));
        });
        let decoded = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("layout detection did not finish for profile id {id:02x?}"));
        assert_eq!(decoded.unwrap(), expected, "profile id {id:02x?}");
    }
}

/// v1.8's comments index the request's string table, which the scan counts only when a
/// v1.8 reading asks: the last entry is a comment, one past it is refused.
#[test]
fn v1_8_comments_must_index_the_string_table() {
    let strings = dictionary().string_table.len() as i32;
    layout::decode_protobuf(&v1_8_commented(&SAMPLES, vec![strings - 1]), Some(Layout::V1_8))
        .expect("the last string is a comment");
    let message = layout_error(layout::decode_protobuf(
        &v1_8_commented(&SAMPLES, vec![1, strings]),
        Some(Layout::V1_8),
    ));
    assert!(
        message.contains(&format!(
            "comment_strindices has index {strings}, beyond the {strings} entries of string_table"
        )),
        "{message}"
    );
}

#[test]
fn a_declared_layout_the_wire_contradicts_is_refused() {
    let v10_bytes = v10_request(&SAMPLES).encode_to_vec();
    let cases = [
        (
            Layout::V1_9,
            v10_bytes.clone(),
            "v1.9",
            "only v1.10 (values) allows",
        ),
        (
            Layout::V1_8,
            v10_bytes,
            "v1.8",
            "field 4 is length-delimited, which only v1.10 (values) allows",
        ),
        (
            Layout::V1_10,
            v1_9(&SAMPLES),
            "v1.10",
            "field 3 is length-delimited, which only v1.8 (attribute_indices) and v1.9 (attribute_indices) allow",
        ),
        (Layout::V1_9, v1_8(&SAMPLES), "v1.9", "v1.8"),
        (
            Layout::V1_8,
            v1_9(&SAMPLES),
            "v1.8",
            "v1.9 (dropped_attributes_count)",
        ),
    ];
    for (declared, bytes, name, evidence) in cases {
        let message = layout_error(layout::decode_protobuf(&bytes, Some(declared)));
        let prefix =
            format!("request declares opentelemetry-proto {name} profiles layout but resource_profiles[0]");
        assert!(message.starts_with(&prefix), "{message}");
        assert!(message.contains(evidence), "{evidence:?} in {message}");
    }
    let message = layout_error(layout::decode_protobuf(
        &v10_request(&SAMPLES).encode_to_vec(),
        Some(Layout::V1_9),
    ));
    assert_eq!(
        message,
        "request declares opentelemetry-proto v1.9 profiles layout but \
         resource_profiles[0].scope_profiles[0].profiles[0].samples[0] field 4 is length-delimited, \
         which only v1.10 (values) allows"
    );
}

/// Samples that carry only values (the common shape without attributes or a link) read in
/// v1.10 as attribute indices with neither values nor timestamps: only the old reading is
/// plausible. v1.8 and v1.9 differ only in Profile fields 7–12, absent here.
#[test]
fn values_only_samples_are_read_in_the_old_layout() {
    const VALUES_ONLY: [SampleSpec; 2] = [(1, &[], 0, &[100], &[]), (2, &[], 0, &[200, 300], &[])];
    let mut expected = v10_request(&VALUES_ONLY);
    let bare = |p: &mut v10::Profile| {
        p.profile_id.clear();
        p.dropped_attributes_count = 0;
        p.original_payload_format.clear();
        p.original_payload.clear();
        p.attribute_indices.clear();
    };
    bare(&mut expected.resource_profiles[0].scope_profiles[0].profiles[0]);
    let old = old::Request {
        resource_profiles: vec![old::ResourceProfiles {
            resource: resource(),
            scope_profiles: vec![old::ScopeProfiles {
                scope: scope(),
                profiles: vec![old::Profile9 {
                    sample_type: Some(old::ValueType9 {
                        type_strindex: 1,
                        unit_strindex: 2,
                    }),
                    samples: old_samples(&VALUES_ONLY),
                    time_unix_nano: T0,
                    duration_nano: 10_000_000_000,
                    period_type: Some(old::ValueType9 {
                        type_strindex: 1,
                        unit_strindex: 2,
                    }),
                    period: 10_000_000,
                    ..Default::default()
                }],
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
        dictionary: Some(dictionary()),
    }
    .encode_to_vec();
    assert_eq!(layout::decode_protobuf(&old, None).unwrap(), expected);
}

/// A v1.9 sample with values and as many timestamps, but no attributes or link, and a v1.10
/// sample with attributes and timestamps but no values have the same wire shape. When the
/// dictionary makes both readings valid, a request without the header is read as v1.10
/// (an absent header means version 1, the v1.10 layout); the v1.9 sender must declare its
/// layout, and one that only v1.9 reads validly is read as v1.9. Two older readings are
/// still refused without the header.
#[test]
fn ambiguous_samples_are_v1_10_without_the_header() {
    const OLD: [SampleSpec; 1] = [(1, &[], 0, &[2], &[T0 + 1])];
    const NEW: [SampleSpec; 1] = [(1, &[2], 0, &[], &[T0 + 1])];
    let old_bytes = v1_9(&OLD);
    let new_bytes = v10_request(&NEW).encode_to_vec();
    assert_eq!(old_bytes, new_bytes, "the two requests share one wire form");
    assert_eq!(
        layout::decode_protobuf(&new_bytes, None).unwrap(),
        v10_request(&NEW)
    );
    assert_eq!(
        layout::decode_protobuf(&old_bytes, Some(Layout::V1_9)).unwrap(),
        v10_request(&OLD)
    );
    assert_eq!(
        layout::decode_protobuf(&new_bytes, Some(Layout::V1_10)).unwrap(),
        v10_request(&NEW)
    );
    // Value 7 is no attribute index (the table has 3 entries): only the old reading is valid.
    const OLD_BIG: [SampleSpec; 1] = [(1, &[], 0, &[7], &[T0 + 1])];
    assert_eq!(
        layout::decode_protobuf(&v1_9(&OLD_BIG), None).unwrap(),
        v10_request(&OLD_BIG)
    );
}

/// Samples with only a stack and timestamps mean the same in every layout.
#[test]
fn layout_free_samples_decode_without_a_header() {
    const EVENTS: [SampleSpec; 2] = [(1, &[], 0, &[], &[T0 + 1, T0 + 2]), (2, &[], 0, &[], &[T0 + 3])];
    let expected = v10_request(&EVENTS);
    assert_eq!(layout::decode_protobuf(&v1_9(&EVENTS), None).unwrap(), expected);
    assert_eq!(
        layout::decode_protobuf(&expected.encode_to_vec(), None).unwrap(),
        expected
    );
}

#[test]
fn the_real_capture_is_v1_10() {
    let bytes = std::fs::read(CAPTURE_PB).unwrap();
    let plain = decode_protobuf(&bytes).unwrap();
    assert_eq!(layout::decode_protobuf(&bytes, None).unwrap(), plain);
    assert_eq!(
        layout::decode_protobuf(&bytes, Some(Layout::V1_10)).unwrap(),
        plain
    );
    let json = std::fs::read(CAPTURE_JSON).unwrap();
    assert_eq!(
        layout::decode_json(&json, None).unwrap(),
        decode_json(&json).unwrap()
    );
    assert_eq!(layout::decode_json(&json, None).unwrap(), plain);
}

#[test]
fn v1_8_json_names() {
    let v10_json = r#"{"resourceProfiles": [{"scopeProfiles": [{"profiles": [{
        "sampleType": {"typeStrindex": 1, "unitStrindex": 2},
        "samples": [{"stackIndex": 1, "values": [5]}],
        "profileId": "07070707070707070707070707070707"}]}]}],
      "dictionary": {"stringTable": ["", "cpu", "ns", "f"], "functionTable": [{}, {"nameStrindex": 3}],
        "locationTable": [{}, {"lines": [{"functionIndex": 1}]}], "stackTable": [{}, {"locationIndices": [1]}]}}"#;
    let v18_json = v10_json
        .replace(r#""samples""#, r#""sample""#)
        .replace(r#""lines""#, r#""line""#)
        .replace(
            r#""unitStrindex": 2}"#,
            r#""unitStrindex": 2, "aggregationTemporality": "AGGREGATION_TEMPORALITY_DELTA"}, "commentStrindices": [3]"#,
        );
    let expected = decode_json(v10_json.as_bytes()).unwrap();
    assert_eq!(
        expected.resource_profiles[0].scope_profiles[0].profiles[0].samples[0].values,
        [5]
    );
    assert_eq!(layout::decode_json(v18_json.as_bytes(), None).unwrap(), expected);
    assert_eq!(
        layout::decode_json(v18_json.as_bytes(), Some(Layout::V1_8)).unwrap(),
        expected
    );
    assert_eq!(layout::decode_json(v10_json.as_bytes(), None).unwrap(), expected);
    let both = v10_json.replace(r#""samples": ["#, r#""sample": [], "samples": ["#);
    let message = layout_error(layout::decode_json(both.as_bytes(), None));
    assert!(
        message.contains("resourceProfiles[0].scopeProfiles[0].profiles[0] has both \"sample\""),
        "{message}"
    );
}

#[test]
fn header_values() {
    for (value, layout) in [
        ("1", Layout::V1_10),
        (" 1 ", Layout::V1_10),
        ("1.7", Layout::V1_7),
        ("v1.7.0", Layout::V1_7),
        ("1.8", Layout::V1_8),
        ("v1.8.0", Layout::V1_8),
        ("1.9.2", Layout::V1_9),
        (" 1.10 ", Layout::V1_10),
        ("1.11.0", Layout::V1_10),
        ("V1.10", Layout::V1_10),
    ] {
        assert_eq!(Layout::from_header(value).unwrap(), layout, "{value}");
    }
    for (value, why) in [
        ("2", "reads version 1 only"),
        ("10", "reads version 1 only"),
        ("01", "no leading zeros"),
        ("+1", "not a version"),
        ("-1", "not a version"),
        ("1,1", "not a list"),
        ("1, 2", "not a list"),
        ("x", "not a version"),
        ("1.6", "not a version"),
        ("2.0", "not a version"),
        ("", "not a version"),
        ("1.8.x", "not a version"),
        ("1.10.0.1", "not a version"),
        ("latest", "not a version"),
    ] {
        let err = Layout::from_header(value).unwrap_err().to_string();
        assert!(
            err.contains(&format!("{value:?}"))
                && err.contains(why)
                && err.contains("supported are 1 (the v1.10 and v1.11 layout)"),
            "{value:?}: {err}"
        );
    }
}

/// Truncated and flipped bytes of every layout never panic, and whatever decodes without
/// a header is what some layout reads.
#[test]
fn mangled_bytes_never_panic() {
    for bytes in [
        v1_8(&SAMPLES),
        v1_9(&SAMPLES),
        v10_request(&SAMPLES).encode_to_vec(),
    ] {
        for cut in 0..bytes.len() {
            let _ = layout::decode_protobuf(&bytes[..cut], None);
        }
        for i in 0..bytes.len() {
            let mut mangled = bytes.clone();
            mangled[i] ^= 0x08;
            let _ = layout::decode_protobuf(&mangled, None);
            let _ = layout::decode_protobuf(&mangled, Some(Layout::V1_8));
        }
    }
}
