//! The OTEP 239 example and malformed containers. Expected stacks, values and links are
//! written from the OTEP's folded text, never from the converter's output.

use base64::Engine as _;
use prost::Message;
use stackhouse_proto::otlp_collector::ExportProfilesServiceRequest;
use stackhouse_proto::otlp_common::{AnyValue, KeyValue, any_value::Value};
use stackhouse_proto::otlp_experimental::{
    Function, Label, Line, Link, Location, Profile, ProfileContainer, ResourceProfiles, Sample,
    ScopeProfiles, ValueType,
};
use stackhouse_proto::otlp_experimental_collector::ExportProfilesServiceRequest as ExperimentalRequest;

use super::{from_json, from_protobuf};
use crate::convert::Conversion;
use crate::otlp::normalize;

const TRACE: [u8; 16] = [1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4];
const SPAN: [u8; 8] = [0x99; 8];
const PROFILE_ID: [u8; 16] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16];

fn kv(key: &str, value: Value) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(value) }),
        ..Default::default()
    }
}

/// The OTEP's "Simple Example", field for field as its YAML shows it, with the samples'
/// attributes pointing at the attribute_table entries the folded text names.
fn otep_profile() -> Profile {
    Profile {
        sample_type: vec![ValueType {
            r#type: 4,
            unit: 5,
            aggregation_temporality: 1,
        }],
        attribute_table: vec![
            kv("trace_id", Value::BytesValue(TRACE.to_vec())),
            kv("span_id", Value::BytesValue(SPAN.to_vec())),
            kv("region", Value::StringValue("us".into())),
        ],
        function: (1..=3)
            .map(|name| Function {
                name,
                ..Default::default()
            })
            .collect(),
        location: (0..3)
            .map(|f| Location {
                line: vec![Line {
                    function_index: f,
                    ..Default::default()
                }],
                ..Default::default()
            })
            .collect(),
        location_indices: vec![0, 1, 2],
        sample: vec![
            Sample {
                locations_start_index: 0,
                locations_length: 3,
                timestamps_unix_nano: vec![1_687_841_528_000_000],
                value: vec![100],
                attributes: vec![0, 1, 2],
                ..Default::default()
            },
            Sample {
                locations_start_index: 0,
                locations_length: 2,
                value: vec![200],
                attributes: vec![2],
                ..Default::default()
            },
        ],
        string_table: ["", "foo", "bar", "baz", "cpu", "samples"]
            .map(String::from)
            .to_vec(),
        ..Default::default()
    }
}

fn container(profile: Profile) -> ProfileContainer {
    ProfileContainer {
        profile_id: PROFILE_ID.to_vec(),
        start_time_unix_nano: 1_687_841_520_000_000,
        end_time_unix_nano: 1_687_841_530_000_000,
        profile: Some(profile),
        ..Default::default()
    }
}

fn request(containers: Vec<ProfileContainer>) -> ExperimentalRequest {
    ExperimentalRequest {
        resource_profiles: vec![ResourceProfiles {
            resource: Some(stackhouse_proto::otlp_resource::Resource {
                attributes: vec![kv("service.name", Value::StringValue("otep".into()))],
                ..Default::default()
            }),
            scope_profiles: vec![ScopeProfiles {
                profiles: containers,
                ..Default::default()
            }],
            schema_url: "todo".into(),
        }],
    }
}

/// One converted sample, read back through the v1.10 dictionary.
#[derive(Debug, PartialEq)]
struct Seen {
    type_id: String,
    /// Root first, `;`-separated.
    path: String,
    values: Vec<i64>,
    timestamps: Vec<u64>,
    attributes: Vec<(String, String)>,
    link: Option<(Vec<u8>, Vec<u8>)>,
}

fn seen(request: &ExportProfilesServiceRequest) -> Vec<Seen> {
    let dict = request.dictionary.as_ref().unwrap();
    let s = |i: i32| dict.string_table[i as usize].clone();
    let mut out = Vec::new();
    for p in request
        .resource_profiles
        .iter()
        .flat_map(|r| &r.scope_profiles)
        .flat_map(|s| &s.profiles)
    {
        let t = p.sample_type.unwrap();
        for sample in &p.samples {
            let stack = &dict.stack_table[sample.stack_index as usize].location_indices;
            let mut frames: Vec<String> = stack
                .iter()
                .map(|&l| {
                    let lines = &dict.location_table[l as usize].lines;
                    s(dict.function_table[lines[0].function_index as usize].name_strindex)
                })
                .collect();
            frames.reverse();
            let attributes = sample
                .attribute_indices
                .iter()
                .map(|&a| {
                    let a = &dict.attribute_table[a as usize];
                    let value = match a.value.as_ref().and_then(|v| v.value.as_ref()) {
                        Some(Value::StringValue(v)) => v.clone(),
                        Some(Value::IntValue(v)) => v.to_string(),
                        Some(Value::BoolValue(v)) => v.to_string(),
                        other => format!("{other:?}"),
                    };
                    (s(a.key_strindex), value)
                })
                .collect();
            let link = (sample.link_index != 0).then(|| {
                let l = &dict.link_table[sample.link_index as usize];
                (l.trace_id.clone(), l.span_id.clone())
            });
            out.push(Seen {
                type_id: format!("{}:{}", s(t.type_strindex), s(t.unit_strindex)),
                path: frames.join(";"),
                values: sample.values.clone(),
                timestamps: sample.timestamps_unix_nano.clone(),
                attributes,
                link,
            });
        }
    }
    out
}

/// The OTEP's folded text: `foo;bar;baz 100 region=us,trace_id=…,span_id=… 1687841528000000`
/// and `foo;bar 200 region=us`.
fn otep_expected() -> Vec<Seen> {
    let region = vec![("region".to_string(), "us".to_string())];
    vec![
        Seen {
            type_id: "cpu:samples".into(),
            path: "foo;bar;baz".into(),
            values: vec![100],
            timestamps: vec![1_687_841_528_000_000],
            attributes: region.clone(),
            link: Some((TRACE.to_vec(), SPAN.to_vec())),
        },
        Seen {
            type_id: "cpu:samples".into(),
            path: "foo;bar".into(),
            values: vec![200],
            timestamps: vec![],
            attributes: region,
            link: None,
        },
    ]
}

/// Converted without refusals, and accepted whole by the OTLP validation.
fn accepted(conversion: &Conversion) -> &ExportProfilesServiceRequest {
    assert_eq!(conversion.rejected_profiles, 0, "{:?}", conversion.errors);
    let normalized = normalize("t", &conversion.request, 1).unwrap();
    assert_eq!(normalized.rejected_profiles, 0, "{:?}", normalized.errors);
    &conversion.request
}

#[test]
fn otep_example_converts() {
    let bytes = request(vec![container(otep_profile())]).encode_to_vec();
    let conversion = from_protobuf(&bytes).unwrap();
    let request = accepted(&conversion);
    assert_eq!(seen(request), otep_expected());
    let profile = &request.resource_profiles[0].scope_profiles[0].profiles[0];
    assert_eq!(profile.profile_id, PROFILE_ID);
    assert_eq!(profile.time_unix_nano, 1_687_841_520_000_000);
    assert_eq!(profile.duration_nano, 10_000_000);
    let resource = request.resource_profiles[0].resource.as_ref().unwrap();
    assert_eq!(
        resource.attributes,
        [kv("service.name", Value::StringValue("otep".into()))]
    );
    assert_eq!(request.resource_profiles[0].schema_url, "todo");
}

fn otep_json(trace: &str, span: &str) -> String {
    format!(
        r#"{{"resourceProfiles": [{{
  "resource": {{"attributes": [{{"key": "service.name", "value": {{"stringValue": "otep"}}}}]}},
  "schemaUrl": "todo",
  "scopeProfiles": [{{"profiles": [{{
    "profileId": "0102030405060708090a0b0c0d0e0f10",
    "startTimeUnixNano": "1687841520000000",
    "endTimeUnixNano": 1687841530000000,
    "profile": {{
      "sampleType": [{{"type": 4, "unit": "5", "aggregationTemporality": "AGGREGATION_TEMPORALITY_DELTA"}}],
      "attributeTable": [
        {{"key": "trace_id", "value": {trace}}},
        {{"key": "span_id", "value": {span}}},
        {{"key": "region", "value": {{"stringValue": "us"}}}}
      ],
      "function": [{{"name": 1}}, {{"name": 2}}, {{"name": 3}}],
      "location": [{{"line": [{{"functionIndex": 0}}]}}, {{"line": [{{"functionIndex": 1}}]}}, {{"line": [{{"functionIndex": 2}}]}}],
      "locationIndices": [0, 1, 2],
      "sample": [
        {{"locationsStartIndex": 0, "locationsLength": 3, "timestamps": ["1687841528000000"], "value": [100], "attributes": [0, 1, 2]}},
        {{"locations_start_index": 0, "locations_length": 2, "value": ["200"], "attributes": [2]}}
      ],
      "stringTable": ["", "foo", "bar", "baz", "cpu", "samples"]
    }}
  }}]}}]
}}]}}"#
    )
}

#[test]
fn otep_example_as_json() {
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let bytes_json = otep_json(
        &format!(r#"{{"bytesValue": "{}"}}"#, b64(&TRACE)),
        &format!(r#"{{"bytesValue": "{}"}}"#, b64(&SPAN)),
    );
    let from_bytes = from_json(bytes_json.as_bytes()).unwrap();
    assert_eq!(seen(accepted(&from_bytes)), otep_expected());
    let proto = from_protobuf(&request(vec![container(otep_profile())]).encode_to_vec()).unwrap();
    assert_eq!(from_bytes.request, proto.request);
    // The OTEP writes the ids as 0x-prefixed hex; as string attributes they are read so.
    let hex_json = otep_json(
        r#"{"stringValue": "0x01020304010203040102030401020304"}"#,
        r#"{"stringValue": "9999999999999999"}"#,
    );
    assert_eq!(
        seen(accepted(&from_json(hex_json.as_bytes()).unwrap())),
        otep_expected()
    );
}

#[test]
fn json_timestamps_under_both_names_are_refused() {
    let json = otep_json(
        r#"{"stringValue": "01020304010203040102030401020304"}"#,
        r#"{"stringValue": "9999999999999999"}"#,
    )
    .replace(
        r#""timestamps": ["1687841528000000"]"#,
        r#""timestamps": [1], "timestampsUnixNano": [1]"#,
    );
    let err = from_json(json.as_bytes()).unwrap_err().to_string();
    assert!(err.contains("both timestamps and timestampsUnixNano"), "{err}");
}

#[test]
fn deprecated_location_index_and_labels() {
    let mut profile = otep_profile();
    profile
        .string_table
        .extend(["region", "us", "thread", "bytes"].map(String::from));
    // Leaf first, as the field's comment says: baz, bar, foo is foo;bar;baz.
    profile.sample[0] = Sample {
        location_index: vec![2, 1, 0],
        value: vec![100],
        label: vec![
            Label {
                key: 6,
                str: 7,
                ..Default::default()
            },
            Label {
                key: 8,
                num: 42,
                num_unit: 9,
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    profile.sample.truncate(1);
    let conversion = from_protobuf(&request(vec![container(profile)]).encode_to_vec()).unwrap();
    let seen = seen(accepted(&conversion));
    assert_eq!(seen[0].path, "foo;bar;baz");
    assert_eq!(
        seen[0].attributes,
        [
            ("region".to_string(), "us".to_string()),
            ("thread".to_string(), "42".to_string())
        ]
    );
    let dict = conversion.request.dictionary.as_ref().unwrap();
    let thread = &dict.attribute_table[conversion.request.resource_profiles[0].scope_profiles[0].profiles[0]
        .samples[0]
        .attribute_indices[1] as usize];
    assert_eq!(dict.string_table[thread.unit_strindex as usize], "bytes");
}

#[test]
fn link_table_and_several_sample_types() {
    let mut profile = otep_profile();
    profile.string_table.extend(["alloc", "bytes"].map(String::from));
    profile.sample_type.push(ValueType {
        r#type: 6,
        unit: 7,
        ..Default::default()
    });
    profile.link_table = vec![Link {
        trace_id: TRACE.to_vec(),
        span_id: SPAN.to_vec(),
    }];
    profile
        .attribute_table
        .push(kv("sampled", Value::BoolValue(true)));
    profile.sample = vec![Sample {
        locations_start_index: 0,
        locations_length: 3,
        value: vec![100, 4096],
        attributes: vec![3],
        link: 0,
        ..Default::default()
    }];
    let conversion = from_protobuf(&request(vec![container(profile)]).encode_to_vec()).unwrap();
    let seen = seen(accepted(&conversion));
    let attributes = vec![("sampled".to_string(), "true".to_string())];
    let link = Some((TRACE.to_vec(), SPAN.to_vec()));
    assert_eq!(seen.len(), 2, "one profile per sample type");
    for (s, (type_id, value)) in seen.iter().zip([("cpu:samples", 100), ("alloc:bytes", 4096)]) {
        assert_eq!(
            (s.type_id.as_str(), s.path.as_str(), &s.values[..]),
            (type_id, "foo;bar;baz", &[value][..])
        );
        assert_eq!((&s.attributes, &s.link), (&attributes, &link));
    }
}

#[test]
fn slices_of_location_itself_when_location_indices_is_empty() {
    let mut profile = otep_profile();
    profile.location_indices.clear();
    let conversion = from_protobuf(&request(vec![container(profile)]).encode_to_vec()).unwrap();
    assert_eq!(seen(accepted(&conversion)), otep_expected());
}

#[test]
fn timestamps_only_samples_count_one_each() {
    let mut profile = otep_profile();
    profile.sample[0].value.clear();
    profile.sample[0].timestamps_unix_nano = vec![1_687_841_521_000_000, 1_687_841_522_000_000];
    let conversion = from_protobuf(&request(vec![container(profile)]).encode_to_vec()).unwrap();
    let seen = seen(accepted(&conversion));
    assert_eq!(seen[0].values, Vec::<i64>::new());
    assert_eq!(seen[0].timestamps, [1_687_841_521_000_000, 1_687_841_522_000_000]);
}

#[test]
fn time_falls_back_to_the_pprof_fields() {
    let mut profile = otep_profile();
    profile.time_nanos = 1_700_000_000_000_000_000;
    profile.duration_nanos = 5_000_000_000;
    let mut c = container(profile);
    c.start_time_unix_nano = 0;
    c.end_time_unix_nano = 0;
    let conversion = from_protobuf(&request(vec![c]).encode_to_vec()).unwrap();
    let p = &accepted(&conversion).resource_profiles[0].scope_profiles[0].profiles[0];
    assert_eq!(
        (p.time_unix_nano, p.duration_nano),
        (1_700_000_000_000_000_000, 5_000_000_000)
    );
}

/// Each broken container is refused alone, named by its position, with the problem.
#[test]
fn malformed_containers_are_refused_alone() {
    type Breakage = (&'static str, fn(&mut ProfileContainer));
    let cases: Vec<Breakage> = vec![
        ("profile is missing", |c| c.profile = None),
        (
            "locations_start_index 1 + locations_length 3 is beyond profile.location_indices (3 entries)",
            |c| c.profile.as_mut().unwrap().sample[0].locations_start_index = 1,
        ),
        (
            "profile.location_indices[2] 7 out of range (profile.location has 3 entries)",
            |c| c.profile.as_mut().unwrap().location_indices[2] = 7,
        ),
        ("profile.location_indices[0] -1 out of range", |c| {
            c.profile.as_mut().unwrap().location_indices[0] = -1;
        }),
        (
            "location_index[0] 3 out of range (profile.location has 3 entries)",
            |c| {
                let s = &mut c.profile.as_mut().unwrap().sample[0];
                s.locations_length = 0;
                s.location_index = vec![3];
            },
        ),
        (
            "profile.sample[1]: attributes[0] 9 out of range (profile.attribute_table has 3 entries)",
            |c| c.profile.as_mut().unwrap().sample[1].attributes = vec![9],
        ),
        ("link 1 out of range (profile.link_table has 0 entries)", |c| {
            c.profile.as_mut().unwrap().sample[1].link = 1;
        }),
        (
            "profile.sample[1]: has 2 values but the profile has 1 sample types",
            |c| c.profile.as_mut().unwrap().sample[1].value = vec![1, 2],
        ),
        ("has one value per sample type and 2 timestamps", |c| {
            c.profile.as_mut().unwrap().sample[0]
                .timestamps_unix_nano
                .push(1_687_841_529_000_000);
        }),
        (
            "profile.function[1].name 40 out of range (profile.string_table has 6 entries)",
            |c| c.profile.as_mut().unwrap().function[1].name = 40,
        ),
        ("profile.location[0].line[0].function_index 5 out of range", |c| {
            c.profile.as_mut().unwrap().location[0].line[0].function_index = 5;
        }),
        (
            "profile.location[0].mapping_index 1 out of range (profile.mapping has 0 entries)",
            |c| c.profile.as_mut().unwrap().location[0].mapping_index = 1,
        ),
        ("profile_id must be 16 bytes, got 3", |c| {
            c.profile_id = vec![1, 2, 3];
        }),
        ("end_time_unix_nano 1 is before start_time_unix_nano", |c| {
            c.end_time_unix_nano = 1;
        }),
        ("trace_id attribute must be 16 bytes, got 2", |c| {
            c.profile.as_mut().unwrap().attribute_table[0] = kv("trace_id", Value::BytesValue(vec![1, 2]));
        }),
        ("profile has samples but no sample_type", |c| {
            c.profile.as_mut().unwrap().sample_type.clear();
        }),
        ("string_table[0] must be the empty string", |c| {
            c.profile.as_mut().unwrap().string_table[0] = "x".into();
        }),
        (
            "link 0 and its trace_id/span_id attributes name different spans",
            |c| {
                c.profile.as_mut().unwrap().link_table = vec![Link {
                    trace_id: vec![7; 16],
                    span_id: vec![7; 8],
                }];
            },
        ),
    ];
    for (expected, breakage) in cases {
        let mut broken = container(otep_profile());
        breakage(&mut broken);
        let bytes =
            request(vec![container(otep_profile()), broken, container(otep_profile())]).encode_to_vec();
        let conversion = from_protobuf(&bytes).unwrap();
        assert_eq!(
            conversion.rejected_profiles, 1,
            "{expected}: {:?}",
            conversion.errors
        );
        let err = &conversion.errors[0];
        assert!(
            err.starts_with("resource_profiles[0].scope_profiles[0].profiles[1]: "),
            "{err}"
        );
        assert!(err.contains(expected), "expected {expected:?} in {err:?}");
        let mut expected_seen = otep_expected();
        expected_seen.extend(otep_expected());
        assert_eq!(
            seen(accepted(&Conversion {
                rejected_profiles: 0,
                ..conversion
            })),
            expected_seen
        );
    }
}

#[test]
fn many_sample_types_times_long_lists_are_refused() {
    let mut profile = otep_profile();
    profile.sample_type = vec![ValueType::default(); 3000];
    profile
        .attribute_table
        .push(kv("k", Value::StringValue("v".into())));
    profile.sample = vec![Sample {
        value: vec![1; 3000],
        attributes: vec![3; 3000],
        ..Default::default()
    }];
    let conversion = from_protobuf(&request(vec![container(profile)]).encode_to_vec()).unwrap();
    assert_eq!(conversion.rejected_profiles, 1);
    assert!(
        conversion.errors[0].contains("splitting the profile into its 3000 sample types would copy"),
        "{:?}",
        conversion.errors
    );
}

#[test]
fn undecodable_input_is_an_error() {
    assert!(from_protobuf(b"\x0a\x05abc").is_err());
    assert!(from_json(b"{").is_err());
    let err =
        from_json(br#"{"resourceProfiles": [{"scopeProfiles": [{"profiles": [{"profileId": "zz"}]}]}]}"#)
            .unwrap_err()
            .to_string();
    assert!(
        err.contains("resourceProfiles[0].scopeProfiles[0].profiles[0].profileId: invalid hex id"),
        "{err}"
    );
}

/// Truncations and byte flips of a valid request never panic.
#[test]
fn mangled_bytes_never_panic() {
    let bytes = request(vec![container(otep_profile()), container(otep_profile())]).encode_to_vec();
    for cut in 0..bytes.len() {
        let _ = from_protobuf(&bytes[..cut]);
    }
    for i in 0..bytes.len() {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut mangled = bytes.clone();
            mangled[i] ^= flip;
            if let Ok(c) = from_protobuf(&mangled) {
                let _ = normalize("t", &c.request, 1);
            }
        }
    }
}
