//! Invalid references and shapes reject only the profile that has them.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

mod common;

use common::{dictionary, profile, two_profiles};
use stackhouse_ingest::otlp::{RequestError, normalize};
use stackhouse_proto::otlp_collector::ExportProfilesServiceRequest;
use stackhouse_proto::otlp_common::{AnyValue, any_value};
use stackhouse_proto::otlp_profiles::{Function, KeyValueAndUnit, Line, Link, Location, Mapping, Stack};

/// Damages a request in place.
type Breaks = fn(&mut ExportProfilesServiceRequest);

const SECOND: &str = "resource_profiles[0].scope_profiles[0].profiles[1]: ";

/// Breaks profile 1, then expects exactly it to be rejected with `message` while profile
/// 0 is kept in full (4 rows: 2 + 1 + 1 + 0 from its four samples).
fn rejects_second(message: &str, breaks: impl FnOnce(&mut ExportProfilesServiceRequest)) {
    let mut request = two_profiles();
    breaks(&mut request);
    let n = normalize("t", &request, 42).expect("a per-profile problem is not a request error");
    assert_eq!(
        (n.accepted_profiles, n.rejected_profiles),
        (1, 1),
        "{:?}",
        n.errors
    );
    assert_eq!(n.errors, vec![format!("{SECOND}{message}")]);
    assert_eq!(n.batch.samples.len(), 4, "only profile 0's rows");
    assert!(
        n.batch.samples.iter().all(|r| r.value != 100),
        "no row of profile 1"
    );
    assert_eq!(n.batch.series.len(), 1);
}

fn sample0(request: &mut ExportProfilesServiceRequest) -> &mut stackhouse_proto::otlp_profiles::Sample {
    &mut profile(request, 1).samples[0]
}

#[test]
fn out_of_range_stack_index() {
    rejects_second(
        "sample 0: stack_index 999 out of range (stack_table has 2 entries)",
        |r| sample0(r).stack_index = 999,
    );
}

#[test]
fn negative_stack_index() {
    rejects_second(
        "sample 0: stack_index -1 out of range (stack_table has 2 entries)",
        |r| sample0(r).stack_index = -1,
    );
}

#[test]
fn out_of_range_location_index() {
    rejects_second(
        "sample 0: stack_table[2]: location_index 999 out of range (location_table has 3 entries)",
        |r| {
            dictionary(r).stack_table.push(Stack {
                location_indices: vec![1, 999],
            });
            sample0(r).stack_index = 2;
        },
    );
}

#[test]
fn out_of_range_function_index() {
    rejects_second(
        "sample 0: stack_table[2]: location_table[3]: function_index 999 out of range (function_table has 3 entries)",
        |r| {
            let dict = dictionary(r);
            dict.location_table.push(Location {
                lines: vec![Line {
                    function_index: 999,
                    ..Default::default()
                }],
                ..Default::default()
            });
            dict.stack_table.push(Stack {
                location_indices: vec![3],
            });
            sample0(r).stack_index = 2;
        },
    );
}

#[test]
fn out_of_range_mapping_index() {
    rejects_second(
        "sample 0: stack_table[2]: location_table[3]: mapping_index 5 out of range (mapping_table has 2 entries)",
        |r| {
            let dict = dictionary(r);
            dict.location_table.push(Location {
                mapping_index: 5,
                ..Default::default()
            });
            dict.stack_table.push(Stack {
                location_indices: vec![3],
            });
            sample0(r).stack_index = 2;
        },
    );
}

#[test]
fn out_of_range_function_name_string() {
    rejects_second(
        "sample 0: stack_table[2]: location_table[3]: function_table[3]: name_strindex 999 out of range (string_table has 15 entries)",
        |r| {
            let dict = dictionary(r);
            dict.function_table.push(Function {
                name_strindex: 999,
                ..Default::default()
            });
            dict.location_table.push(Location {
                lines: vec![Line {
                    function_index: 3,
                    ..Default::default()
                }],
                ..Default::default()
            });
            dict.stack_table.push(Stack {
                location_indices: vec![3],
            });
            sample0(r).stack_index = 2;
        },
    );
}

#[test]
fn out_of_range_mapping_filename_string() {
    rejects_second(
        "sample 0: stack_table[2]: location_table[3]: mapping_table[2]: filename_strindex 15 out of range (string_table has 15 entries)",
        |r| {
            let dict = dictionary(r);
            dict.mapping_table.push(Mapping {
                filename_strindex: 15,
                ..Default::default()
            });
            dict.location_table.push(Location {
                mapping_index: 2,
                ..Default::default()
            });
            dict.stack_table.push(Stack {
                location_indices: vec![3],
            });
            sample0(r).stack_index = 2;
        },
    );
}

#[test]
fn out_of_range_sample_type_string() {
    rejects_second(
        "sample_type: unit_strindex 20 out of range (string_table has 15 entries)",
        |r| profile(r, 1).sample_type.as_mut().unwrap().unit_strindex = 20,
    );
}

#[test]
fn out_of_range_sample_attribute_index() {
    rejects_second(
        "sample 0: attribute_index 999 out of range (attribute_table has 4 entries)",
        |r| sample0(r).attribute_indices = vec![1, 999],
    );
}

#[test]
fn out_of_range_profile_attribute_index() {
    rejects_second(
        "attribute_index 4 out of range (attribute_table has 4 entries)",
        |r| profile(r, 1).attribute_indices = vec![4],
    );
}

#[test]
fn out_of_range_attribute_key_string() {
    rejects_second(
        "sample 0: attribute_table[4]: key_strindex 99 out of range (string_table has 15 entries)",
        |r| {
            dictionary(r).attribute_table.push(KeyValueAndUnit {
                key_strindex: 99,
                ..Default::default()
            });
            sample0(r).attribute_indices = vec![4];
        },
    );
}

#[test]
fn out_of_range_attribute_value_string() {
    rejects_second(
        "sample 0: attribute_table[4]: string_value_strindex 99 out of range (string_table has 15 entries)",
        |r| {
            dictionary(r).attribute_table.push(KeyValueAndUnit {
                key_strindex: 7,
                value: Some(AnyValue {
                    value: Some(any_value::Value::StringValueStrindex(99)),
                }),
                unit_strindex: 0,
            });
            sample0(r).attribute_indices = vec![4];
        },
    );
}

#[test]
fn out_of_range_link_index() {
    rejects_second(
        "sample 0: link_index 2 out of range (link_table has 2 entries)",
        |r| sample0(r).link_index = 2,
    );
}

#[test]
fn invalid_trace_id_length() {
    rejects_second(
        "sample 0: link_table[2]: trace_id must be empty or 16 bytes, got 5",
        |r| {
            dictionary(r).link_table.push(Link {
                trace_id: vec![1; 5],
                span_id: vec![],
            });
            sample0(r).link_index = 2;
        },
    );
}

#[test]
fn invalid_span_id_length() {
    rejects_second(
        "sample 0: link_table[2]: span_id must be empty or 8 bytes, got 16",
        |r| {
            dictionary(r).link_table.push(Link {
                trace_id: vec![1; 16],
                span_id: vec![2; 16],
            });
            sample0(r).link_index = 2;
        },
    );
}

#[test]
fn invalid_profile_id_length() {
    rejects_second("profile_id must be empty or 16 bytes, got 3", |r| {
        profile(r, 1).profile_id = vec![1, 2, 3];
    });
}

#[test]
fn values_timestamps_length_mismatch() {
    rejects_second(
        "sample 0: values has 1 entries but timestamps_unix_nano has 2",
        |r| sample0(r).timestamps_unix_nano = vec![1, 2],
    );
}

#[test]
fn timestamp_beyond_i64() {
    let t = i64::MAX as u64 + 1;
    rejects_second(
        &format!("sample 0: timestamps_unix_nano {t} does not fit in a signed 64-bit nanosecond time"),
        |r| sample0(r).timestamps_unix_nano = vec![t],
    );
}

#[test]
fn duration_overflow() {
    let t = i64::MAX as u64 - 5;
    rejects_second(
        &format!("time_unix_nano {t} + duration_nano 6 overflows a signed 64-bit nanosecond time"),
        |r| {
            profile(r, 1).time_unix_nano = t;
            profile(r, 1).duration_nano = 6;
        },
    );
}

#[test]
fn missing_sample_type() {
    rejects_second("unknown profile type: sample_type has no type name", |r| {
        profile(r, 1).sample_type = None;
    });
}

#[test]
fn invalid_resource_attribute_key_string() {
    let mut request = two_profiles();
    request.resource_profiles[0].resource.as_mut().unwrap().attributes[0].key_strindex = 50;
    let n = normalize("t", &request, 42).unwrap();
    assert_eq!(
        (n.accepted_profiles, n.rejected_profiles),
        (0, 2),
        "both share the resource"
    );
    assert!(n.batch.is_empty());
    assert_eq!(
        n.errors[0],
        "resource_profiles[0].scope_profiles[0].profiles[0]: resource.attributes[0]: key_strindex 50 out of range (string_table has 15 entries)"
    );
}

#[test]
fn non_empty_first_string_refuses_the_request() {
    let mut request = two_profiles();
    dictionary(&mut request).string_table[0] = "oops".into();
    let err = normalize("t", &request, 42).unwrap_err();
    assert_eq!(err, RequestError::NonEmptyFirstString("oops".into()));
    assert_eq!(
        err.to_string(),
        r#"dictionary.string_table[0] must be the empty string, got "oops""#
    );
}

#[test]
fn non_zero_first_entries_refuse_the_request() {
    let cases: [(&str, Breaks); 6] = [
        ("mapping_table", |r| {
            dictionary(r).mapping_table[0].memory_start = 1;
        }),
        ("location_table", |r| dictionary(r).location_table[0].address = 1),
        ("function_table", |r| {
            dictionary(r).function_table[0].name_strindex = 1;
        }),
        ("link_table", |r| dictionary(r).link_table[0].span_id = vec![1; 8]),
        ("attribute_table", |r| {
            dictionary(r).attribute_table[0].key_strindex = 1;
        }),
        ("stack_table", |r| {
            dictionary(r).stack_table[0].location_indices = vec![1];
        }),
    ];
    for (table, breaks) in cases {
        let mut request = two_profiles();
        breaks(&mut request);
        let err = normalize("t", &request, 42).unwrap_err();
        assert_eq!(err, RequestError::NonZeroFirstEntry(table));
        assert_eq!(
            err.to_string(),
            format!("dictionary.{table}[0] must be the zero value")
        );
    }
}

#[test]
fn error_messages_are_capped_but_counts_exact() {
    let mut request = two_profiles();
    let bad = {
        let mut p = profile(&mut request, 1).clone();
        p.samples[0].stack_index = 999;
        p
    };
    let profiles = &mut request.resource_profiles[0].scope_profiles[0].profiles;
    profiles.extend(std::iter::repeat_n(bad, 500));
    let n = normalize("t", &request, 42).unwrap();
    assert_eq!((n.accepted_profiles, n.rejected_profiles), (2, 500));
    assert_eq!(
        n.errors.len(),
        stackhouse_ingest::otlp::normalize::MAX_ERROR_MESSAGES
    );
}
