//! The real OTel eBPF profiler capture: both encodings decode to the same request, and
//! normalization keeps every observation. Expectations are computed by walking the raw
//! request here, not with the code under test.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

mod common;

use std::collections::BTreeMap;

use common::{CAPTURE_JSON, CAPTURE_PB};
use stackhouse_ingest::otlp::{decode_json, decode_protobuf, normalize};
use stackhouse_proto::otlp_collector::ExportProfilesServiceRequest;
use stackhouse_proto::otlp_common::any_value::Value;
use stackhouse_proto::otlp_profiles::{ProfilesDictionary, ValueType};
use stackhouse_storage::model::{Batch, SymbolId};

fn capture() -> ExportProfilesServiceRequest {
    decode_protobuf(&std::fs::read(CAPTURE_PB).unwrap()).unwrap()
}

fn type_id(dict: &ProfilesDictionary, sample: Option<ValueType>, period: Option<ValueType>) -> String {
    let s = |t: Option<ValueType>, unit: bool| {
        t.map_or(String::new(), |t| {
            dict.string_table[if unit { t.unit_strindex } else { t.type_strindex } as usize].clone()
        })
    };
    format!(
        "{}:{}:{}:{}",
        s(sample, false),
        s(sample, true),
        s(period, false),
        s(period, true)
    )
}

#[derive(Debug, Default, PartialEq, Eq)]
struct Totals {
    value: i64,
    rows: usize,
}

/// Per profile type: the sum of values (a sample with only timestamps counts one per
/// timestamp) and the number of observations.
fn expected_totals(request: &ExportProfilesServiceRequest) -> BTreeMap<String, Totals> {
    let dict = request.dictionary.as_ref().unwrap();
    let mut totals: BTreeMap<String, Totals> = BTreeMap::new();
    for rp in &request.resource_profiles {
        for sp in &rp.scope_profiles {
            for p in &sp.profiles {
                let t = totals
                    .entry(type_id(dict, p.sample_type, p.period_type))
                    .or_default();
                for s in &p.samples {
                    if s.values.is_empty() {
                        t.value += s.timestamps_unix_nano.len() as i64;
                        t.rows += s.timestamps_unix_nano.len();
                    } else {
                        t.value += s.values.iter().sum::<i64>();
                        t.rows += s.values.len();
                    }
                }
            }
        }
    }
    totals
}

fn actual_totals(batch: &Batch) -> BTreeMap<String, Totals> {
    let mut totals: BTreeMap<String, Totals> = BTreeMap::new();
    for row in &batch.samples {
        let t = totals
            .entry(batch.series[&row.series_id].profile_type.id())
            .or_default();
        t.value += row.value;
        t.rows += 1;
    }
    totals
}

#[test]
fn protobuf_and_json_decode_to_the_same_request() {
    let from_json = decode_json(&std::fs::read(CAPTURE_JSON).unwrap()).unwrap();
    let from_pb = capture();
    assert_eq!(from_pb.resource_profiles.len(), 77);
    assert_eq!(from_json, from_pb);
}

#[test]
fn normalization_keeps_every_observation() {
    let request = capture();
    let expected = expected_totals(&request);
    assert_eq!(
        expected.keys().collect::<Vec<_>>(),
        ["off_cpu:nanoseconds::", "samples:count:cpu:nanoseconds"],
        "the capture has both profile types"
    );
    let n = normalize("t", &request, 1).unwrap();
    assert_eq!(
        (n.accepted_profiles, n.rejected_profiles),
        (82, 0),
        "{:?}",
        n.errors
    );
    assert_eq!(actual_totals(&n.batch), expected);
    assert_eq!(
        n.batch.samples.len(),
        expected.values().map(|t| t.rows).sum::<usize>()
    );
}

/// (address, function names of its lines) of each location of a stack, leaf first.
type Frames = Vec<(u64, Vec<String>)>;

fn raw_frames(dict: &ProfilesDictionary, stack_index: i32) -> Frames {
    dict.stack_table[stack_index as usize]
        .location_indices
        .iter()
        .map(|&l| {
            let location = &dict.location_table[l as usize];
            let names = location
                .lines
                .iter()
                .map(|line| {
                    let f = &dict.function_table[line.function_index as usize];
                    dict.string_table[f.name_strindex as usize].clone()
                })
                .collect();
            (location.address, names)
        })
        .collect()
}

fn normalized_frames(batch: &Batch, mut stack: SymbolId) -> Frames {
    let mut frames = Vec::new();
    while !stack.is_zero() {
        let node = batch.stacks[&stack];
        let location = &batch.locations[&node.location_id];
        let names = location
            .lines
            .iter()
            .map(|l| batch.functions[&l.function_id].name.clone())
            .collect();
        frames.push((location.address, names));
        stack = node.parent_id;
    }
    frames
}

#[test]
fn every_row_points_at_its_stack_and_attributes() {
    let request = capture();
    let dict = request.dictionary.as_ref().unwrap();
    let n = normalize("t", &request, 1).unwrap();
    let mut rows = n.batch.samples.iter();
    for rp in &request.resource_profiles {
        let pid = rp
            .resource
            .as_ref()
            .unwrap()
            .attributes
            .iter()
            .find(|kv| kv.key == "process.pid")
            .unwrap();
        let Some(Value::IntValue(pid)) = pid.value.as_ref().and_then(|v| v.value.as_ref()) else {
            panic!("process.pid is an int")
        };
        for sp in &rp.scope_profiles {
            for p in &sp.profiles {
                for s in &p.samples {
                    let thread = s
                        .attribute_indices
                        .iter()
                        .map(|&i| &dict.attribute_table[i as usize])
                        .find(|a| dict.string_table[a.key_strindex as usize] == "thread.name");
                    for _ in 0..s.values.len().max(s.timestamps_unix_nano.len()) {
                        // Rows come out in request order.
                        let row = rows.next().unwrap();
                        assert_eq!(
                            normalized_frames(&n.batch, row.stack_id),
                            raw_frames(dict, s.stack_index)
                        );
                        let series = &n.batch.series[&row.series_id];
                        assert_eq!(series.labels["process.pid"], pid.to_string());
                        if let Some(thread) = thread {
                            let Some(Value::StringValue(name)) =
                                thread.value.as_ref().and_then(|v| v.value.as_ref())
                            else {
                                panic!("thread.name is a string")
                            };
                            assert_eq!(
                                n.batch.attr_sets[&row.attr_set_id].get("thread.name"),
                                Some(name.as_str())
                            );
                        }
                    }
                }
            }
        }
    }
    assert!(rows.next().is_none());
}
