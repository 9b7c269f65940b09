//! The seed format, OTLP profiles `v1experimental` (OTEP 239, opentelemetry-proto v1.3),
//! declared here from the OTEP's field numbers so the tests encode it without Stackhouse's
//! own protos, plus the OTEP's example payload.

use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use serde_json::{Value, json};

#[derive(Clone, PartialEq, prost::Message)]
pub struct ExportProfilesServiceRequest {
    #[prost(message, repeated, tag = "1")]
    pub resource_profiles: Vec<ResourceProfiles>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ExportProfilesServiceResponse {
    #[prost(message, optional, tag = "1")]
    pub partial_success: Option<ExportProfilesPartialSuccess>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ExportProfilesPartialSuccess {
    #[prost(int64, tag = "1")]
    pub rejected_profiles: i64,
    #[prost(string, tag = "2")]
    pub error_message: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ResourceProfiles {
    #[prost(message, optional, tag = "1")]
    pub resource: Option<Resource>,
    #[prost(message, repeated, tag = "2")]
    pub scope_profiles: Vec<ScopeProfiles>,
    #[prost(string, tag = "3")]
    pub schema_url: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ScopeProfiles {
    #[prost(message, optional, tag = "1")]
    pub scope: Option<InstrumentationScope>,
    #[prost(message, repeated, tag = "2")]
    pub profiles: Vec<ProfileContainer>,
    #[prost(string, tag = "3")]
    pub schema_url: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ProfileContainer {
    #[prost(bytes = "vec", tag = "1")]
    pub profile_id: Vec<u8>,
    #[prost(fixed64, tag = "2")]
    pub start_time_unix_nano: u64,
    #[prost(fixed64, tag = "3")]
    pub end_time_unix_nano: u64,
    #[prost(message, repeated, tag = "4")]
    pub attributes: Vec<KeyValue>,
    #[prost(uint32, tag = "5")]
    pub dropped_attributes_count: u32,
    #[prost(string, tag = "6")]
    pub original_payload_format: String,
    #[prost(bytes = "vec", tag = "7")]
    pub original_payload: Vec<u8>,
    #[prost(message, optional, tag = "8")]
    pub profile: Option<Profile>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Profile {
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<Mapping>,
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    #[prost(int64, repeated, tag = "15")]
    pub location_indices: Vec<i64>,
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    #[prost(message, repeated, tag = "16")]
    pub attribute_table: Vec<KeyValue>,
    #[prost(message, repeated, tag = "18")]
    pub link_table: Vec<Link>,
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<ValueType>,
    #[prost(int64, tag = "12")]
    pub period: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Link {
    #[prost(bytes = "vec", tag = "1")]
    pub trace_id: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub span_id: Vec<u8>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ValueType {
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    #[prost(int64, tag = "2")]
    pub unit: i64,
    #[prost(int32, tag = "3")]
    pub aggregation_temporality: i32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Sample {
    /// Deprecated: leaf first.
    #[prost(uint64, repeated, tag = "1")]
    pub location_index: Vec<u64>,
    #[prost(uint64, tag = "7")]
    pub locations_start_index: u64,
    #[prost(uint64, tag = "8")]
    pub locations_length: u64,
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    /// Deprecated: superseded by `attributes`.
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
    #[prost(uint64, repeated, tag = "10")]
    pub attributes: Vec<u64>,
    #[prost(uint64, tag = "12")]
    pub link: u64,
    #[prost(uint64, repeated, tag = "13")]
    pub timestamps: Vec<u64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Label {
    #[prost(int64, tag = "1")]
    pub key: i64,
    #[prost(int64, tag = "2")]
    pub str: i64,
    #[prost(int64, tag = "3")]
    pub num: i64,
    #[prost(int64, tag = "4")]
    pub num_unit: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Mapping {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(int64, tag = "5")]
    pub filename: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Location {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    pub mapping_index: u64,
    #[prost(uint64, tag = "3")]
    pub address: u64,
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Line {
    #[prost(uint64, tag = "1")]
    pub function_index: u64,
    #[prost(int64, tag = "2")]
    pub line: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Function {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(int64, tag = "2")]
    pub name: i64,
}

pub const PATH: &str = "/opentelemetry.proto.collector.profiles.v1experimental.ProfilesService/Export";

/// The OTEP example's facts.
pub const TRACE_ID: &str = "01020304010203040102030401020304";
pub const SPAN_ID: &str = "9999999999999999";
pub const TIMESTAMP: u64 = 1_687_841_528_000_000;
pub const START: u64 = 1_687_841_520_000_000;
pub const END: u64 = 1_687_841_530_000_000;
/// `sample_type {type: "cpu", unit: "samples"}`, no period.
pub const PROFILE_TYPE: &str = "cpu:samples::";

fn string_attr(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.into())),
        }),
        ..Default::default()
    }
}

/// The OTEP's example profile: locations `foo`, `bar`, `baz` sliced through
/// `location_indices` as the OTEP's example does (`[0, 3)` is `foo;bar;baz`, `[0, 2)` is
/// `foo;bar`); `region=us` through `attribute_table` on both samples; the trace link and the
/// timestamp on the first. `link_table[0]` is an empty link so that `link: 0` on the second
/// sample means "no link" under either reading of the index.
pub fn otep_profile() -> Profile {
    Profile {
        sample_type: vec![ValueType {
            r#type: 4,
            unit: 5,
            aggregation_temporality: 1,
        }],
        sample: vec![
            Sample {
                locations_start_index: 0,
                locations_length: 3,
                value: vec![100],
                attributes: vec![0],
                link: 1,
                timestamps: vec![TIMESTAMP],
                ..Default::default()
            },
            Sample {
                locations_start_index: 0,
                locations_length: 2,
                value: vec![200],
                attributes: vec![0],
                ..Default::default()
            },
        ],
        location: (0..3)
            .map(|i| Location {
                line: vec![Line {
                    function_index: i,
                    line: 0,
                }],
                ..Default::default()
            })
            .collect(),
        location_indices: vec![0, 1, 2],
        function: (1..=3).map(|n| Function { id: 0, name: n }).collect(),
        attribute_table: vec![string_attr("region", "us")],
        link_table: vec![
            Link::default(),
            Link {
                trace_id: hex::decode(TRACE_ID).unwrap(),
                span_id: hex::decode(SPAN_ID).unwrap(),
            },
        ],
        string_table: ["", "foo", "bar", "baz", "cpu", "samples"]
            .map(String::from)
            .to_vec(),
        ..Default::default()
    }
}

/// The same samples through the deprecated fields: `location_index` (leaf first) and
/// string `label`s instead of attributes.
pub fn otep_profile_deprecated_fields() -> Profile {
    let mut p = otep_profile();
    p.location_indices.clear();
    p.string_table.extend(["region", "us"].map(String::from));
    p.attribute_table.clear();
    let label = Label {
        key: 6,
        str: 7,
        ..Default::default()
    };
    for (s, leaf_first) in p.sample.iter_mut().zip([vec![2, 1, 0], vec![1, 0]]) {
        s.locations_start_index = 0;
        s.locations_length = 0;
        s.location_index = leaf_first;
        s.attributes.clear();
        s.label = vec![label.clone()];
    }
    p
}

pub fn container(profile: Profile) -> ProfileContainer {
    ProfileContainer {
        start_time_unix_nano: START,
        end_time_unix_nano: END,
        profile: Some(profile),
        ..Default::default()
    }
}

pub fn request(service: &str, containers: Vec<ProfileContainer>) -> ExportProfilesServiceRequest {
    ExportProfilesServiceRequest {
        resource_profiles: vec![ResourceProfiles {
            resource: Some(Resource {
                attributes: vec![string_attr("service.name", service)],
                ..Default::default()
            }),
            scope_profiles: vec![ScopeProfiles {
                scope: Some(InstrumentationScope {
                    name: "otep-239".into(),
                    ..Default::default()
                }),
                profiles: containers,
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
    }
}

/// OTLP/JSON of the OTEP example (protojson: lowerCamelCase, 64-bit integers as strings,
/// trace and span ids in hex as OTLP/JSON writes them).
pub fn otep_json(service: &str) -> Value {
    json!({
        "resourceProfiles": [{
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
            "scopeProfiles": [{
                "scope": {"name": "otep-239"},
                "profiles": [{
                    "startTimeUnixNano": START.to_string(),
                    "endTimeUnixNano": END.to_string(),
                    "profile": {
                        "sampleType": [{"type": "4", "unit": "5", "aggregationTemporality": 1}],
                        "sample": [
                            {
                                "locationsStartIndex": "0",
                                "locationsLength": "3",
                                "value": ["100"],
                                "attributes": ["0"],
                                "link": "1",
                                "timestamps": [TIMESTAMP.to_string()]
                            },
                            {
                                "locationsStartIndex": "0",
                                "locationsLength": "2",
                                "value": ["200"],
                                "attributes": ["0"]
                            }
                        ],
                        "location": [
                            {"line": [{"functionIndex": "0"}]},
                            {"line": [{"functionIndex": "1"}]},
                            {"line": [{"functionIndex": "2"}]}
                        ],
                        "locationIndices": ["0", "1", "2"],
                        "function": [{"name": "1"}, {"name": "2"}, {"name": "3"}],
                        "attributeTable": [{"key": "region", "value": {"stringValue": "us"}}],
                        "linkTable": [{}, {"traceId": TRACE_ID, "spanId": SPAN_ID}],
                        "stringTable": ["", "foo", "bar", "baz", "cpu", "samples"]
                    }
                }]
            }]
        }]
    })
}
