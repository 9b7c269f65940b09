//! Requests built by hand, small enough to know every expected output.

#![allow(dead_code)] // each test binary uses a different part

use stackhouse_proto::otlp_collector::ExportProfilesServiceRequest;
use stackhouse_proto::otlp_common::{AnyValue, InstrumentationScope, KeyValue, any_value};
use stackhouse_proto::otlp_profiles::{
    Function, KeyValueAndUnit, Line, Link, Location, Mapping, Profile, ProfilesDictionary, ResourceProfiles,
    Sample, ScopeProfiles, Stack, ValueType,
};
use stackhouse_proto::otlp_resource::Resource;

pub(crate) const CAPTURE_PB: &str = "/work/shared/testdata/otlp/ebpf-cpu-offcpu.v1_10.pb";
pub(crate) const CAPTURE_JSON: &str = "/work/shared/testdata/otlp/ebpf-cpu-offcpu.v1_10.json";

pub(crate) const TRACE_ID: [u8; 16] = [
    0x5b, 0x8e, 0xff, 0xf7, 0x98, 0x03, 0x81, 0x03, 0xd2, 0x69, 0xb6, 0x33, 0x81, 0x3f, 0xc6, 0x0c,
];
pub(crate) const SPAN_ID: [u8; 8] = [0xee, 0xe1, 0x9b, 0x7e, 0xc3, 0xc1, 0xb1, 0x74];
pub(crate) const PROFILE_ID: [u8; 16] = [0x01; 16];

pub(crate) const STRINGS: &[&str] = &[
    "",                                // 0
    "samples",                         // 1
    "count",                           // 2
    "cpu",                             // 3
    "nanoseconds",                     // 4
    "main",                            // 5
    "foo",                             // 6
    "thread.name",                     // 7
    "t1",                              // 8
    "service.name",                    // 9
    "svc",                             // 10
    "/bin/app",                        // 11
    "process.executable.build_id.gnu", // 12
    "abc123",                          // 13
    "app.c",                           // 14
];

fn string_value(s: &str) -> Option<AnyValue> {
    Some(AnyValue {
        value: Some(any_value::Value::StringValue(s.to_string())),
    })
}

/// Stack 1 is foo (leaf) called by main, both in /bin/app; profile 0 is valid and
/// complete, profile 1 is a minimal valid profile that tests break in different ways.
pub(crate) fn two_profiles() -> ExportProfilesServiceRequest {
    let dictionary = ProfilesDictionary {
        string_table: STRINGS.iter().map(|s| s.to_string()).collect(),
        function_table: vec![
            Function::default(),
            Function {
                name_strindex: 5,
                filename_strindex: 14,
                start_line: 3,
                ..Default::default()
            },
            Function {
                name_strindex: 6,
                filename_strindex: 14,
                start_line: 9,
                ..Default::default()
            },
        ],
        mapping_table: vec![
            Mapping::default(),
            Mapping {
                memory_start: 0x1000,
                memory_limit: 0x9000,
                file_offset: 0,
                filename_strindex: 11,
                attribute_indices: vec![3],
            },
        ],
        location_table: vec![
            Location::default(),
            Location {
                mapping_index: 1,
                address: 0x1010,
                lines: vec![Line {
                    function_index: 1,
                    line: 4,
                    column: 0,
                }],
                attribute_indices: vec![],
            },
            Location {
                mapping_index: 1,
                address: 0x1020,
                lines: vec![Line {
                    function_index: 2,
                    line: 10,
                    column: 2,
                }],
                attribute_indices: vec![],
            },
        ],
        stack_table: vec![
            Stack::default(),
            Stack {
                location_indices: vec![2, 1],
            },
        ],
        attribute_table: vec![
            KeyValueAndUnit::default(),
            KeyValueAndUnit {
                key_strindex: 7,
                value: string_value("t1"),
                unit_strindex: 0,
            },
            KeyValueAndUnit {
                key_strindex: 9,
                value: Some(AnyValue {
                    value: Some(any_value::Value::StringValueStrindex(10)),
                }),
                unit_strindex: 0,
            },
            KeyValueAndUnit {
                key_strindex: 12,
                value: string_value("abc123"),
                unit_strindex: 0,
            },
        ],
        link_table: vec![
            Link::default(),
            Link {
                trace_id: TRACE_ID.to_vec(),
                span_id: SPAN_ID.to_vec(),
            },
        ],
    };
    let cpu = Profile {
        sample_type: Some(ValueType {
            type_strindex: 1,
            unit_strindex: 2,
        }),
        period_type: Some(ValueType {
            type_strindex: 3,
            unit_strindex: 4,
        }),
        period: 10_000_000,
        time_unix_nano: 1_000_000_000,
        duration_nano: 5_000_000_000,
        profile_id: PROFILE_ID.to_vec(),
        attribute_indices: vec![2],
        samples: vec![
            // Values and timestamps: one row per pair.
            Sample {
                stack_index: 1,
                attribute_indices: vec![1],
                link_index: 1,
                values: vec![3, 4],
                timestamps_unix_nano: vec![1_100_000_000, 1_200_000_000],
            },
            // Values only: at the profile's time.
            Sample {
                stack_index: 1,
                values: vec![5],
                ..Default::default()
            },
            // Timestamps only: one per timestamp.
            Sample {
                stack_index: 0,
                timestamps_unix_nano: vec![1_300_000_000],
                ..Default::default()
            },
            // Neither: nothing.
            Sample {
                stack_index: 1,
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    let other = Profile {
        sample_type: Some(ValueType {
            type_strindex: 1,
            unit_strindex: 2,
        }),
        samples: vec![Sample {
            stack_index: 1,
            values: vec![100],
            ..Default::default()
        }],
        ..Default::default()
    };
    ExportProfilesServiceRequest {
        dictionary: Some(dictionary),
        resource_profiles: vec![ResourceProfiles {
            resource: Some(Resource {
                attributes: vec![KeyValue {
                    key: "host.name".into(),
                    value: string_value("box"),
                    key_strindex: 0,
                }],
                ..Default::default()
            }),
            scope_profiles: vec![ScopeProfiles {
                scope: Some(InstrumentationScope {
                    name: "test-profiler".into(),
                    attributes: vec![KeyValue {
                        key: String::new(),
                        value: Some(AnyValue {
                            value: Some(any_value::Value::IntValue(7)),
                        }),
                        key_strindex: 7,
                    }],
                    ..Default::default()
                }),
                profiles: vec![cpu, other],
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
    }
}

pub(crate) fn dictionary(request: &mut ExportProfilesServiceRequest) -> &mut ProfilesDictionary {
    request.dictionary.as_mut().unwrap()
}

pub(crate) fn profile(request: &mut ExportProfilesServiceRequest, index: usize) -> &mut Profile {
    &mut request.resource_profiles[0].scope_profiles[0].profiles[index]
}
