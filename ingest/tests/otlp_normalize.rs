//! What a small hand-built request normalizes into, field by field.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

mod common;

use common::{PROFILE_ID, SPAN_ID, TRACE_ID, dictionary, profile, two_profiles};
use stackhouse_ingest::otlp::normalize;
use stackhouse_proto::otlp_common::{AnyValue, KeyValue, any_value};
use stackhouse_proto::otlp_profiles::KeyValueAndUnit;
use stackhouse_storage::model::{Batch, Labels, ProfileRecord, SymbolId};

fn label_map(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Function names of a stack, leaf first, by walking the normalized stack tree.
fn frames(batch: &Batch, mut stack: SymbolId) -> Vec<String> {
    let mut names = Vec::new();
    while !stack.is_zero() {
        let node = batch.stacks[&stack];
        for line in &batch.locations[&node.location_id].lines {
            names.push(batch.functions[&line.function_id].name.clone());
        }
        stack = node.parent_id;
    }
    names
}

#[test]
fn normalizes_every_field() {
    let request = two_profiles();
    let n = normalize("tenant-a", &request, 777).unwrap();
    assert_eq!(
        (n.accepted_profiles, n.rejected_profiles),
        (2, 0),
        "{:?}",
        n.errors
    );
    let batch = &n.batch;
    assert_eq!(batch.tenant, "tenant-a");

    let cpu = batch
        .series
        .values()
        .find(|s| s.profile_type.id() == "samples:count:cpu:nanoseconds")
        .expect("cpu series");
    assert_eq!(cpu.period, 10_000_000);
    let labels: Vec<(&str, &str)> = cpu.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(
        labels,
        [
            ("host.name", "box"),
            ("otel.scope.name", "test-profiler"),
            ("service.name", "svc"),
            ("thread.name", "7"),
        ]
    );
    let other = batch.series.values().find(|s| s.id != cpu.id).unwrap();
    assert_eq!(other.profile_type.id(), "samples:count::", "no period type");

    let rows: Vec<_> = batch.samples.iter().filter(|r| r.series_id == cpu.id).collect();
    let shape: Vec<(i64, i64)> = rows.iter().map(|r| (r.time_nanos, r.value)).collect();
    assert_eq!(
        shape,
        [
            (1_100_000_000, 3),
            (1_200_000_000, 4),
            (1_000_000_000, 5),
            (1_300_000_000, 1)
        ]
    );
    assert!(rows.iter().all(|r| r.profile_id == Some(PROFILE_ID)));
    assert_eq!(rows[0].trace_id, Some(TRACE_ID));
    assert_eq!(rows[0].span_id, Some(SPAN_ID));
    assert_eq!((rows[2].trace_id, rows[2].span_id), (None, None));
    assert_eq!(frames(batch, rows[0].stack_id), ["foo", "main"]);
    assert_eq!(rows[0].stack_id, rows[2].stack_id);
    assert_eq!(
        rows[3].stack_id,
        SymbolId::ZERO,
        "stack_index 0 is the empty stack"
    );

    let attrs = &batch.attr_sets[&rows[0].attr_set_id];
    assert_eq!(attrs.get("thread.name"), Some("t1"));
    assert_eq!(rows[2].attr_set_id, SymbolId::ZERO);

    let location = &batch.locations[&batch.stacks[&rows[0].stack_id].location_id];
    assert_eq!(
        (location.address, location.lines[0].line, location.lines[0].column),
        (0x1020, 10, 2)
    );
    let mapping = &batch.mappings[&location.mapping_id];
    assert_eq!(
        (mapping.filename.as_str(), mapping.build_id.as_str()),
        ("/bin/app", "abc123")
    );
    assert_eq!((mapping.memory_start, mapping.memory_limit), (0x1000, 0x9000));
    let function = &batch.functions[&location.lines[0].function_id];
    assert_eq!((function.filename.as_str(), function.start_line), ("app.c", 9));

    assert_eq!(
        batch.profiles,
        [ProfileRecord {
            profile_id: PROFILE_ID,
            series_id: cpu.id,
            start_nanos: 1_000_000_000,
            end_nanos: 6_000_000_000,
            sample_count: 4,
            resource: label_map(&[("host.name", "box")]),
            attributes: label_map(&[("service.name", "svc")]),
        }]
    );
    let other_rows: Vec<_> = batch.samples.iter().filter(|r| r.series_id == other.id).collect();
    assert_eq!(other_rows.len(), 1);
    assert_eq!(
        other_rows[0].time_nanos, 777,
        "time_unix_nano 0 falls back to the receive time"
    );
    assert_eq!(other_rows[0].profile_id, None);
}

#[test]
fn profile_attributes_override_scope_and_resource() {
    let mut request = two_profiles();
    request.resource_profiles[0].resource.as_mut().unwrap().attributes[0].key = "service.name".into();
    let n = normalize("t", &request, 0).unwrap();
    let cpu = n.batch.series.values().find(|s| s.period == 10_000_000).unwrap();
    assert_eq!(cpu.labels["service.name"], "svc");
}

#[test]
fn profile_record_keeps_resource_and_profile_attributes_apart() {
    let mut request = two_profiles();
    let int = |i| {
        Some(AnyValue {
            value: Some(any_value::Value::IntValue(i)),
        })
    };
    let resource = request.resource_profiles[0].resource.as_mut().unwrap();
    resource.attributes.extend([
        // The profile attribute of the same key wins in the series labels, not here.
        KeyValue {
            key: "service.name".into(),
            value: int(1),
            key_strindex: 0,
        },
        // Keyed through the string table.
        KeyValue {
            key: String::new(),
            value: int(42),
            key_strindex: 7,
        },
        // No key: dropped, as in the series labels.
        KeyValue {
            key: String::new(),
            value: int(3),
            key_strindex: 0,
        },
    ]);
    let dict = dictionary(&mut request);
    dict.attribute_table.push(KeyValueAndUnit {
        key_strindex: 14,
        value: int(-5),
        unit_strindex: 0,
    });
    let extra = (dict.attribute_table.len() - 1) as i32;
    profile(&mut request, 0).attribute_indices = vec![2, 0, extra];
    // The second profile carries an id too, and no attributes of its own.
    profile(&mut request, 1).profile_id = vec![0x02; 16];

    let n = normalize("t", &request, 0).unwrap();
    assert_eq!(n.rejected_profiles, 0, "{:?}", n.errors);
    let resource = label_map(&[("host.name", "box"), ("service.name", "1"), ("thread.name", "42")]);
    let [first, second] = &n.batch.profiles[..] else {
        panic!("two profile records, got {:?}", n.batch.profiles);
    };
    assert_eq!(first.resource, resource);
    assert_eq!(
        first.attributes,
        label_map(&[("app.c", "-5"), ("service.name", "svc")])
    );
    assert_eq!(second.resource, resource);
    assert_eq!(second.attributes, Labels::new());

    let series = &n.batch.series[&first.series_id];
    assert_eq!(series.labels["service.name"], "svc");
    assert_eq!(
        series.labels["thread.name"], "7",
        "the scope attribute beats the resource"
    );
    assert_eq!(series.labels["app.c"], "-5");
}

#[test]
fn all_zero_ids_mean_absent() {
    let mut request = two_profiles();
    dictionary(&mut request).link_table[1].trace_id = vec![0; 16];
    profile(&mut request, 0).profile_id = vec![0; 16];
    let n = normalize("t", &request, 0).unwrap();
    assert!(
        n.batch
            .samples
            .iter()
            .all(|r| r.trace_id.is_none() && r.profile_id.is_none())
    );
    assert_eq!(n.batch.samples[0].span_id, Some(SPAN_ID));
    assert!(n.batch.profiles.is_empty());
}

#[test]
fn missing_dictionary_allows_only_zero_references() {
    let mut request = two_profiles();
    request.dictionary = None;
    let n = normalize("t", &request, 0).unwrap();
    assert_eq!(n.rejected_profiles, 2, "they name strings that do not exist");
    assert_eq!(
        n.errors[1],
        "resource_profiles[0].scope_profiles[0].profiles[1]: scope.attributes[0]: key_strindex 7 out of range (string_table has 0 entries)"
    );
    request.resource_profiles[0].scope_profiles[0].scope = None;
    let n = normalize("t", &request, 0).unwrap();
    assert!(n.errors[1].ends_with("sample_type: type_strindex 1 out of range (string_table has 0 entries)"));
}

#[test]
fn same_content_gets_same_ids_across_requests() {
    let a = normalize("t", &two_profiles(), 0).unwrap().batch;
    let mut reordered = two_profiles();
    // Same frames under different dictionary positions.
    let dict = dictionary(&mut reordered);
    dict.location_table.swap(1, 2);
    dict.stack_table[1].location_indices = vec![1, 2];
    let b = normalize("t", &reordered, 0).unwrap().batch;
    assert_eq!(a.samples, b.samples);
}
