//! The shared eBPF capture, queried with group_by, time series and a node budget; every
//! expected value comes from the capture itself (`ui_api_tests::capture`).

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::collections::{BTreeMap, BTreeSet};

use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use opentelemetry_proto::tonic::collector::profiles::v1development::profiles_service_client::ProfilesServiceClient;
use prost::Message;
use serde_json::Value;
use ui_api_tests::capture::{self, Observation};
use ui_api_tests::http_query::{Http, params, with};
use ui_api_tests::server::{Options, Server};
use ui_api_tests::testdata;
use ui_api_tests::trees::{json_folded, json_node_values};
use ui_api_tests::workload::node_values;

const SECOND: i64 = 1_000_000_000;

fn thread(o: &Observation) -> String {
    o.attrs.get("thread.name").cloned().unwrap_or_default()
}

/// Bucket start → summed value, buckets of `step` from `from`.
fn bucket_sums<'a>(
    obs: impl IntoIterator<Item = &'a Observation>,
    from: i64,
    step: i64,
) -> BTreeMap<i64, i64> {
    let mut out = BTreeMap::new();
    for o in obs {
        *out.entry(from + (o.time - from).div_euclid(step) * step)
            .or_insert(0) += o.value;
    }
    out
}

fn points(series: &Value) -> BTreeMap<i64, i64> {
    series["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let v = p[1].as_f64().unwrap();
            assert_eq!(v.fract(), 0.0, "a sum of integers: {p}");
            (p[0].as_i64().unwrap(), v as i64)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn capture_group_by_timeseries_and_max_nodes() {
    let server = Server::start(Options::default()).await;
    let bytes = std::fs::read(testdata("otlp/ebpf-cpu-offcpu.v1_10.pb")).unwrap();
    let request = ExportProfilesServiceRequest::decode(&bytes[..]).unwrap();
    let observations = capture::from_protobuf(&request);
    let response = ProfilesServiceClient::connect(server.grpc())
        .await
        .unwrap()
        .export(request)
        .await
        .expect("export accepted")
        .into_inner();
    assert!(
        response
            .partial_success
            .as_ref()
            .is_none_or(|p| p.rejected_profiles == 0),
        "nothing rejected: {response:?}"
    );
    let http = Http::new(server.http());

    let types: BTreeSet<&str> = observations.iter().map(|o| o.profile_type.as_str()).collect();
    assert!(types.len() >= 2, "the capture has CPU and off-CPU profiles");
    for ty in types {
        let obs: Vec<&Observation> = observations.iter().filter(|o| o.profile_type == ty).collect();
        let min = obs.iter().map(|o| o.time).min().unwrap();
        let max = obs.iter().map(|o| o.time).max().unwrap();
        // Round 10 s boundaries, as a dashboard would ask.
        let (from, to) = (min - min.rem_euclid(10 * SECOND), max + 1);
        let mut by_thread: BTreeMap<String, Vec<&Observation>> = BTreeMap::new();
        for o in &obs {
            by_thread.entry(thread(o)).or_default().push(o);
        }
        assert!(by_thread.len() > 2, "{ty}: several threads");

        // Flamegraph grouped by thread.
        let json = http
            .json(
                "/api/v1/flamegraph",
                &with(params(ty, from, to), &[("group_by", "thread.name")]),
            )
            .await;
        json_node_values(&json["root"]);
        let names: BTreeSet<String> = json["root"]["children"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_string())
            .collect();
        let expected_names: BTreeSet<String> = by_thread.keys().map(|t| format!("thread.name={t}")).collect();
        assert_eq!(names, expected_names, "{ty}: one group per thread");
        for (t, members) in &by_thread {
            let name = format!("thread.name={t}");
            let node = json["root"]["children"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["name"] == name.as_str())
                .unwrap();
            assert_eq!(
                node["total"].as_i64(),
                Some(capture::total(members.iter().copied())),
                "{ty}: total of {name}"
            );
            assert_eq!(
                json_folded(node),
                capture::folded(members.iter().copied()),
                "{ty}: paths of {name}"
            );
        }

        // Time series, ungrouped and by thread. The capture spans about 5 s: 10 s buckets
        // hold it in one or two, the finer steps cut it and its profiles.
        for (step_param, step) in [("10s", 10 * SECOND), ("1s", SECOND), ("0.25", SECOND / 4)] {
            let from = min - min.rem_euclid(step);
            let what = format!("{ty} step {step_param}");
            if step < 10 * SECOND {
                assert!(
                    bucket_sums(obs.iter().copied(), from, step).len() > 2,
                    "{what}: several buckets"
                );
            }
            let json = http
                .json(
                    "/api/v1/timeseries",
                    &with(params(ty, from, to), &[("step", step_param)]),
                )
                .await;
            assert_eq!(json["step_nanos"].as_i64(), Some(step), "{what}: step");
            let series = json["series"].as_array().unwrap();
            assert_eq!(series.len(), 1, "{what}: one series without group_by");
            assert_eq!(
                points(&series[0]),
                bucket_sums(obs.iter().copied(), from, step),
                "{what}: sums per bucket"
            );
            assert_eq!(
                series[0]["total"].as_i64(),
                Some(capture::total(obs.iter().copied())),
                "{what}: series total"
            );
            let json = http
                .json(
                    "/api/v1/timeseries",
                    &with(
                        params(ty, from, to),
                        &[("step", step_param), ("group_by", "thread.name")],
                    ),
                )
                .await;
            let got: BTreeMap<String, BTreeMap<i64, i64>> = json["series"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| {
                    let group = s["group"]["thread.name"]
                        .as_str()
                        .unwrap_or_else(|| panic!("{what}: series without thread.name group: {s}"))
                        .to_string();
                    (group, points(s))
                })
                .collect();
            let expected: BTreeMap<String, BTreeMap<i64, i64>> = by_thread
                .iter()
                .map(|(t, members)| (t.clone(), bucket_sums(members.iter().copied(), from, step)))
                .collect();
            assert_eq!(got, expected, "{what}: sums per thread and bucket");
        }

        // A node budget of 10: kept nodes have their exact values, the rest is in `other`.
        let json = http
            .json(
                "/api/v1/flamegraph",
                &with(params(ty, from, to), &[("max_nodes", "10")]),
            )
            .await;
        assert_eq!(json["max_nodes"], 10, "{ty}: max_nodes echoed");
        assert_eq!(
            json["total"].as_i64(),
            Some(capture::total(obs.iter().copied())),
            "{ty}: exact total under truncation"
        );
        let empty: i64 = obs.iter().filter(|o| o.frames.is_empty()).map(|o| o.value).sum();
        let full = node_values(&capture::folded(obs.iter().copied()), empty);
        assert!(
            full.keys().all(|p| !p.iter().any(|f| f == "other")),
            "{ty}: no real frame named other"
        );
        assert!(full.len() > 10, "{ty}: the capture has more than 10 nodes");
        let got = json_node_values(&json["root"]);
        let kept: Vec<&Vec<String>> = got.keys().filter(|p| !p.iter().any(|f| f == "other")).collect();
        assert!(kept.len() <= 10, "{ty}: {} nodes kept, budget 10", kept.len());
        let others = got.len() - kept.len();
        assert!(others >= 1, "{ty}: truncation made other nodes");
        assert!(others <= kept.len(), "{ty}: at most one other node per kept node");
        for (path, values) in &got {
            match path.iter().position(|f| f == "other") {
                None => assert_eq!(Some(values), full.get(path), "{ty}: kept node {path:?}"),
                Some(i) => {
                    assert_eq!(i, path.len() - 1, "{ty}: other node {path:?} is a leaf");
                    assert_eq!(values.0, values.1, "{ty}: other node {path:?} self = total");
                }
            }
        }
    }
}
