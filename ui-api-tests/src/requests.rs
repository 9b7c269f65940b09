//! Small OTLP requests built with the independent `opentelemetry-proto` types.

use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::profiles::v1development::{
    Function, KeyValueAndUnit, Line, Location, Profile, ProfilesDictionary, ResourceProfiles, Sample,
    ScopeProfiles, Stack, ValueType,
};
use opentelemetry_proto::tonic::resource::v1::Resource;

pub const STRINGS: &[&str] = &[
    "",
    "samples",
    "count",
    "cpu",
    "nanoseconds",
    "main",
    "foo",
    "bar",
    "thread.name",
    "t1",
];
pub const PROFILE_TYPE: &str = "samples:count:cpu:nanoseconds";

fn s(name: &str) -> i32 {
    STRINGS.iter().position(|x| *x == name).unwrap() as i32
}

/// A dictionary with functions main, foo, bar; stack 1 = main;foo, stack 2 = main;foo;bar;
/// attribute 1 = thread.name=t1.
pub fn dictionary() -> ProfilesDictionary {
    let function = |name: &str| Function {
        name_strindex: s(name),
        ..Default::default()
    };
    let location = |f: i32| Location {
        lines: vec![Line {
            function_index: f,
            line: 0,
            column: 0,
        }],
        ..Default::default()
    };
    ProfilesDictionary {
        string_table: STRINGS.iter().map(|x| x.to_string()).collect(),
        function_table: vec![
            Function::default(),
            function("main"),
            function("foo"),
            function("bar"),
        ],
        location_table: vec![Location::default(), location(1), location(2), location(3)],
        stack_table: vec![
            Stack::default(),
            Stack {
                location_indices: vec![2, 1],
            },
            Stack {
                location_indices: vec![3, 2, 1],
            },
        ],
        attribute_table: vec![
            KeyValueAndUnit::default(),
            KeyValueAndUnit {
                key_strindex: s("thread.name"),
                value: Some(AnyValue {
                    value: Some(any_value::Value::StringValue("t1".into())),
                }),
                unit_strindex: 0,
            },
        ],
        link_table: vec![Default::default()],
        mapping_table: vec![Default::default()],
    }
}

/// A CPU profile at `time` with one sample of `value` on `stack`.
pub fn profile(time: u64, stack: i32, value: i64) -> Profile {
    Profile {
        sample_type: Some(ValueType {
            type_strindex: s("samples"),
            unit_strindex: s("count"),
        }),
        period_type: Some(ValueType {
            type_strindex: s("cpu"),
            unit_strindex: s("nanoseconds"),
        }),
        period: 10_000_000,
        time_unix_nano: time,
        duration_nano: 1_000_000_000,
        samples: vec![Sample {
            stack_index: stack,
            values: vec![value],
            attribute_indices: vec![1],
            ..Default::default()
        }],
        ..Default::default()
    }
}

pub fn request(
    service: &str,
    profiles: Vec<Profile>,
    dictionary: ProfilesDictionary,
) -> ExportProfilesServiceRequest {
    ExportProfilesServiceRequest {
        resource_profiles: vec![ResourceProfiles {
            resource: Some(Resource {
                attributes: vec![KeyValue {
                    key: "service.name".into(),
                    value: Some(AnyValue {
                        value: Some(any_value::Value::StringValue(service.into())),
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            scope_profiles: vec![ScopeProfiles {
                profiles,
                ..Default::default()
            }],
            ..Default::default()
        }],
        dictionary: Some(dictionary),
    }
}
