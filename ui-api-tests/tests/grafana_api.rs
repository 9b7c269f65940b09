//! Grafana's Pyroscope API (Connect) as Grafana's datasource and the Profiles Drilldown app
//! call it, sent by an independent client (connect-es, binary and JSON, plus the app's
//! hand-written requests), against the real binary holding the shared eBPF capture. Every
//! expected value is computed from the capture (`ui_api_tests::capture`).

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use opentelemetry_proto::tonic::collector::profiles::v1development::profiles_service_client::ProfilesServiceClient;
use prost::Message;
use serde_json::{Value, json};
use ui_api_tests::capture::{self, Observation};
use ui_api_tests::connect_client::{call_all, fetch, fetch_bytes, int, rpc, rpc_with_headers};
use ui_api_tests::grafana::{self, levels_of, levels_to_tree};
use ui_api_tests::server::{Options, Server};
use ui_api_tests::workload::{self, Obs, Workload};
use ui_api_tests::{pprof_reader, testdata};

const Q: &str = "querier.v1.QuerierService";
const MS: i64 = 1_000_000;
/// The eBPF profiler's CPU type (a count of samples, one per period of CPU time), the
/// type Grafana is served it as (each sample worth its period, as Pyroscope converts it),
/// and that type's 5-part id.
const COUNTED: &str = "samples:count:cpu:nanoseconds";
const CPU: &str = "cpu:nanoseconds:cpu:nanoseconds";
const CPU_ID: &str = "process_cpu:cpu:nanoseconds:cpu:nanoseconds";

struct Loaded {
    server: Server,
    obs: Vec<Observation>,
    /// Whether the capture names its instrumentation scopes (stored as `otel.scope.name`).
    scope_named: bool,
    /// The sampling period of the capture's CPU profiles, in nanoseconds.
    period: i64,
}

/// The period of the request's counted CPU profiles (the capture has one).
fn cpu_period(request: &ExportProfilesServiceRequest) -> i64 {
    let d = request.dictionary.as_ref().unwrap();
    let s = |i: i32| d.string_table[i as usize].as_str();
    let periods: BTreeSet<i64> = request
        .resource_profiles
        .iter()
        .flat_map(|r| &r.scope_profiles)
        .flat_map(|s| &s.profiles)
        .filter(|p| {
            let (st, pt) = (
                p.sample_type.unwrap_or_default(),
                p.period_type.unwrap_or_default(),
            );
            [
                st.type_strindex,
                st.unit_strindex,
                pt.type_strindex,
                pt.unit_strindex,
            ]
            .map(s)
                == ["samples", "count", "cpu", "nanoseconds"]
        })
        .map(|p| p.period)
        .collect();
    assert_eq!(
        periods.len(),
        1,
        "one CPU sampling period in the capture: {periods:?}"
    );
    let period = *periods.first().unwrap();
    assert!(period > 0);
    period
}

/// A server holding the capture, shared by the tests of this file.
fn loaded() -> &'static Loaded {
    static LOADED: OnceLock<Loaded> = OnceLock::new();
    ui_api_tests::shared(&LOADED, || async {
        let server = Server::start_for_process(Options::default()).await;
        let bytes = std::fs::read(testdata("otlp/ebpf-cpu-offcpu.v1_10.pb")).unwrap();
        let request = ExportProfilesServiceRequest::decode(&bytes[..]).unwrap();
        let period = cpu_period(&request);
        // Grafana is served CPU time: each counted sample is worth one period.
        let obs = capture::from_protobuf(&request)
            .into_iter()
            .map(|mut o| {
                if o.profile_type == COUNTED {
                    o.profile_type = CPU.to_string();
                    o.value *= period;
                }
                o
            })
            .collect();
        let scope_named = request
            .resource_profiles
            .iter()
            .flat_map(|r| &r.scope_profiles)
            .any(|s| s.scope.as_ref().is_some_and(|s| !s.name.is_empty()));
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
        Loaded {
            server,
            obs,
            scope_named,
            period,
        }
    })
}

impl Loaded {
    fn call(&self, calls: &[Value]) -> Vec<Value> {
        call_all(&self.server.http(), calls)
    }

    fn cpu(&self) -> Vec<&Observation> {
        self.obs.iter().filter(|o| o.profile_type == CPU).collect()
    }

    /// The capture's time range in whole milliseconds, rounded out.
    fn range_ms(&self) -> (i64, i64) {
        let min = self.obs.iter().map(|o| o.time).min().unwrap();
        let max = self.obs.iter().map(|o| o.time).max().unwrap();
        (min.div_euclid(MS), max.div_euclid(MS) + 1)
    }
}

fn response(answer: &Value) -> &Value {
    assert!(answer.get("error").is_none(), "the call failed: {answer}");
    &answer["response"]
}

fn strings(v: &Value) -> BTreeSet<String> {
    v.as_array()
        .map(|a| a.iter().map(|s| s.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

/// The service Grafana sees: the capture's resources carry no `service.name`.
fn service(o: &Observation) -> &str {
    o.attrs
        .get("service.name")
        .map_or("unknown_service", String::as_str)
}

/// `a;b;c → Σ value` of observations, as a flame graph's self values.
fn folded<'a>(obs: impl IntoIterator<Item = &'a Observation>) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for o in obs {
        if !o.frames.is_empty() {
            *out.entry(o.frames.join(";")).or_insert(0) += o.value;
        }
    }
    out.retain(|_, v| *v != 0);
    out
}

/// The flame graph of an answer, decoded as Grafana decodes it: (tree, total).
fn grafana_tree(flamegraph: &Value) -> (grafana::ProfileTree, i64) {
    let (levels, names) = levels_of(flamegraph);
    assert_eq!(
        names.first().map(String::as_str),
        Some("total"),
        "names[0] is the root"
    );
    assert_eq!(levels[0].len(), 4, "level 0 is the root alone");
    assert_eq!(
        levels[0][0], 0,
        "the root's offset slot, which Grafana reads as its name"
    );
    let tree = levels_to_tree(&levels, &names).expect("levels");
    assert_eq!(tree.name, "total");
    grafana::assert_consistent(&tree);
    assert_eq!(tree.value, int(&flamegraph["total"]), "root = total");
    (tree, int(&flamegraph["total"]))
}

#[test]
fn health_check_and_profile_types() {
    let l = loaded();
    let (start, end) = l.range_ms();
    let answers = l.call(&[
        // Grafana's "Save & test".
        rpc(
            &format!("{Q}/ProfileTypes"),
            true,
            json!({"start": 1000, "end": 4000}),
        ),
        rpc(
            &format!("{Q}/ProfileTypes"),
            true,
            json!({"start": start, "end": end}),
        ),
        rpc(
            &format!("{Q}/ProfileTypes"),
            false,
            json!({"start": start.to_string(), "end": end}),
        ),
    ]);
    assert_eq!(response(&answers[0]), &json!({}), "nothing stored in 1970");
    let expected: BTreeSet<String> = l.obs.iter().map(|o| o.profile_type.clone()).collect();
    for answer in &answers[1..] {
        let types = response(answer)["profileTypes"].as_array().unwrap();
        let ours: BTreeSet<String> = types
            .iter()
            .map(|t| {
                let id = t["ID"].as_str().unwrap();
                let parts: Vec<&str> = id.split(':').collect();
                assert_eq!(parts.len(), 5, "5-part id {id}");
                assert_eq!(t["name"], parts[0]);
                assert_eq!(t["sampleType"], parts[1]);
                parts[1..].join(":")
            })
            .collect();
        assert_eq!(ours, expected);
        let ids: Vec<&str> = types.iter().map(|t| t["ID"].as_str().unwrap()).collect();
        assert!(ids.contains(&CPU_ID), "{ids:?}");
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "sorted by id: {ids:?}");
    }
}

#[test]
fn labels_names_values_and_series() {
    let l = loaded();
    let (start, end) = l.range_ms();
    let utf8 = json!({"Accept": "*/*; allow-utf8-labelnames=true"});
    let answers = l.call(&[
        rpc(&format!("{Q}/LabelNames"), true, json!({"matchers": ["{}"], "start": start, "end": end})),
        rpc_with_headers(
            &format!("{Q}/LabelNames"),
            true,
            json!({"matchers": ["{}"], "start": start, "end": end}),
            utf8,
        ),
        rpc(
            &format!("{Q}/LabelValues"),
            true,
            json!({"name": "service_name", "matchers": ["{}"], "start": start, "end": end}),
        ),
        rpc(
            &format!("{Q}/LabelValues"),
            false,
            json!({"name": "__profile_type__", "matchers": [format!("{CPU_ID}{{}}")], "start": start, "end": end}),
        ),
        // The Drilldown app's service list, hand-written JSON without Connect headers.
        fetch(
            &format!("/{Q}/Series"),
            json!({"content-type": "application/json", "accept": "application/json; allow-utf8-labelnames=true"}),
            &json!({"start": start, "end": end, "labelNames": ["service_name", "__profile_type__"], "matchers": []})
                .to_string(),
        ),
    ]);
    let mut keys: BTreeSet<String> = l.obs.iter().flat_map(|o| o.attrs.keys().cloned()).collect();
    keys.insert("service.name".to_string());
    if l.scope_named {
        keys.insert("otel.scope.name".to_string());
    }
    let sanitized: BTreeSet<String> = keys
        .iter()
        .map(|k| match k.as_str() {
            "service.name" => "service_name".to_string(),
            k => k.replace(|c: char| !c.is_ascii_alphanumeric() && c != '_', "_"),
        })
        .collect();
    let names = strings(&response(&answers[0])["names"]);
    for needed in ["service_name", "__profile_type__", "__name__", "__service_name__"] {
        assert!(names.contains(needed), "{needed} in {names:?}");
    }
    let served: BTreeSet<String> = names.iter().filter(|n| !n.starts_with("__")).cloned().collect();
    assert_eq!(served, sanitized, "every attribute key, sanitized");
    assert!(served.iter().all(|n| !n.contains('.')));
    let utf8_names = strings(&response(&answers[1])["names"]);
    let dotted: BTreeSet<&String> = keys
        .iter()
        .filter(|k| k.contains('.') && *k != "service.name")
        .collect();
    assert!(!dotted.is_empty(), "the capture has dotted attribute names");
    for k in dotted {
        assert!(utf8_names.contains(k), "{k} served as stored to a UTF-8 client");
    }
    let services: BTreeSet<String> = l.obs.iter().map(|o| service(o).to_string()).collect();
    assert_eq!(strings(&response(&answers[2])["names"]), services);
    assert_eq!(
        strings(&response(&answers[3])["names"]),
        BTreeSet::from([CPU_ID.to_string()])
    );

    let series = &answers[4];
    assert_eq!(series["status"], 200, "{series}");
    assert_eq!(series["contentType"], "application/json");
    let body: Value = serde_json::from_str(series["body"].as_str().unwrap()).unwrap();
    let sets: BTreeSet<(String, String)> = body["labelsSet"]
        .as_array()
        .unwrap()
        .iter()
        .map(|set| {
            let labels: BTreeMap<&str, &str> = set["labels"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| (p["name"].as_str().unwrap(), p["value"].as_str().unwrap()))
                .collect();
            assert_eq!(labels.len(), 2, "only the asked labels: {labels:?}");
            (
                labels["service_name"].to_string(),
                labels["__profile_type__"].to_string(),
            )
        })
        .collect();
    let expected: BTreeSet<(String, String)> = l
        .obs
        .iter()
        .map(|o| (service(o).to_string(), o.profile_type.clone()))
        .collect();
    let got: BTreeSet<(String, String)> = sets
        .iter()
        .map(|(s, id)| (s.clone(), id.split(':').skip(1).collect::<Vec<_>>().join(":")))
        .collect();
    assert_eq!(got, expected);
}

#[test]
fn merged_stacktraces_match_the_capture_in_both_codecs() {
    let l = loaded();
    let (start, end) = l.range_ms();
    let cpu = l.cpu();
    let svc = service(cpu[0]).to_string();
    let mine: Vec<&Observation> = cpu.iter().copied().filter(|o| service(o) == svc).collect();
    let expected = folded(mine.iter().copied());
    let total: i64 = mine.iter().map(|o| o.value).sum();
    let request = json!({
        "profileTypeID": CPU_ID,
        "labelSelector": format!("{{service_name=\"{svc}\"}}"),
        "start": start, "end": end, "maxNodes": 65536,
    });
    let answers = l.call(&[
        rpc(&format!("{Q}/SelectMergeStacktraces"), true, request.clone()),
        rpc(&format!("{Q}/SelectMergeStacktraces"), false, request),
        // The app's hand-written JSON: proto names, numbers, and a format it invented.
        fetch(
            &format!("/{Q}/SelectMergeStacktraces"),
            json!({"content-type": "application/json"}),
            &json!({"profile_typeID": CPU_ID, "label_selector": format!("{{service_name=\"{svc}\"}}"),
                    "start": start, "end": end, "maxNodes": 65536,
                    "format": "PROFILE_FORMAT_SANDWICH", "sandwichFunction": "main"})
            .to_string(),
        ),
    ]);
    for answer in &answers[..2] {
        let (tree, got_total) = grafana_tree(&response(answer)["flamegraph"]);
        assert_eq!(got_total, total);
        assert_eq!(grafana::folded(&tree), expected);
    }
    let raw = &answers[2];
    assert_eq!(raw["status"], 200, "{raw}");
    let body: Value = serde_json::from_str(raw["body"].as_str().unwrap()).unwrap();
    let (tree, got_total) = grafana_tree(&body["flamegraph"]);
    assert_eq!((got_total, grafana::folded(&tree)), (total, expected));
}

#[test]
fn node_budget_call_site_and_frame_filter() {
    let l = loaded();
    let (start, end) = l.range_ms();
    let cpu = l.cpu();
    let total: i64 = cpu.iter().map(|o| o.value).sum();
    // The heaviest first two frames: a call site Grafana's progressive loading would ask for.
    let mut prefixes: BTreeMap<Vec<String>, i64> = BTreeMap::new();
    for o in cpu.iter().filter(|o| o.frames.len() >= 2) {
        *prefixes.entry(o.frames[..2].to_vec()).or_default() += o.value;
    }
    let (site, _) = prefixes.iter().max_by_key(|(_, v)| **v).unwrap();
    let frame = cpu.iter().find(|o| o.frames.len() >= 3).unwrap().frames[2].clone();
    let base = json!({"profileTypeID": CPU_ID, "labelSelector": "{}", "start": start, "end": end});
    let with = |extra: Value| {
        let mut r = base.clone();
        r.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        rpc(&format!("{Q}/SelectMergeStacktraces"), true, r)
    };
    let answers = l.call(&[
        with(json!({"maxNodes": 10})),
        with(json!({"maxNodes": 65536, "stackTraceSelector": {"callSite": site.iter().map(|n| json!({"name": n})).collect::<Vec<_>>()}})),
        with(json!({"maxNodes": 65536, "stackTraceSelector": {"frameFilter": {"excludeFunctionNames": [frame]}}})),
        with(json!({"maxNodes": 65536, "stackTraceSelector": {"frameFilter": {"includeFunctionNameRegexes": [format!("^{}$", regex_escape(&frame))]}}})),
        with(json!({"maxNodes": -1})),
        with(json!({"maxNodes": 100000000})),
    ]);
    let (tree, got) = grafana_tree(&response(&answers[0])["flamegraph"]);
    assert_eq!(got, total, "a node budget keeps the total");
    let others = count_named(&tree, "other");
    assert!(
        grafana::count(&tree) <= 10 + others,
        "{} nodes",
        grafana::count(&tree)
    );

    let under_site = cpu.iter().copied().filter(|o| o.frames.starts_with(site));
    let (tree, got) = grafana_tree(&response(&answers[1])["flamegraph"]);
    assert_eq!(grafana::folded(&tree), folded(under_site.clone()));
    assert_eq!(got, under_site.map(|o| o.value).sum::<i64>());

    let without = cpu.iter().copied().filter(|o| !o.frames.contains(&frame));
    let (tree, _) = grafana_tree(&response(&answers[2])["flamegraph"]);
    assert_eq!(grafana::folded(&tree), folded(without));
    let through = cpu.iter().copied().filter(|o| o.frames.contains(&frame));
    let (tree, _) = grafana_tree(&response(&answers[3])["flamegraph"]);
    assert_eq!(grafana::folded(&tree), folded(through));

    assert_eq!(answers[4]["error"]["code"], "invalid_argument", "{}", answers[4]);
    assert_eq!(answers[5]["error"]["code"], "invalid_argument", "{}", answers[5]);
    assert!(
        answers[5]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_nodes"),
        "{}",
        answers[5]
    );
}

fn regex_escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            let special = "\\.+*?()|[]{}^$".contains(c);
            special.then_some('\\').into_iter().chain([c])
        })
        .collect()
}

fn count_named(tree: &grafana::ProfileTree, name: &str) -> usize {
    usize::from(tree.name == name) + tree.nodes.iter().map(|c| count_named(c, name)).sum::<usize>()
}

#[test]
fn select_series_sums_to_the_flamegraph_total() {
    let l = loaded();
    let (start, end) = l.range_ms();
    let cpu = l.cpu();
    let step_s = 10.0;
    let answers = l.call(&[
        rpc(
            &format!("{Q}/SelectSeries"),
            true,
            json!({"profileTypeID": CPU_ID, "labelSelector": "{}", "start": start, "end": end,
                   "groupBy": [], "step": step_s, "exemplarType": "EXEMPLAR_TYPE_NONE"}),
        ),
        rpc(
            &format!("{Q}/SelectSeries"),
            false,
            json!({"profileTypeID": CPU_ID, "labelSelector": "{}", "start": start, "end": end,
                   "groupBy": ["thread_name"], "step": step_s}),
        ),
        rpc(
            &format!("{Q}/SelectSeries"),
            true,
            json!({"profileTypeID": CPU_ID, "labelSelector": "{}", "start": start, "end": end,
                   "groupBy": ["thread_name"], "step": step_s, "limit": 2}),
        ),
        rpc(
            &format!("{Q}/SelectMergeStacktraces"),
            true,
            json!({"profileTypeID": CPU_ID, "labelSelector": "{}", "start": start, "end": end}),
        ),
        rpc(
            &format!("{Q}/SelectSeries"),
            true,
            json!({"profileTypeID": CPU_ID, "start": start, "end": end, "step": 0.0}),
        ),
    ]);
    let step = (step_s * 1e9) as i64;
    let series = response(&answers[0])["series"].as_array().unwrap();
    assert_eq!(series.len(), 1, "no group_by: one series");
    assert!(series[0].get("labels").is_none(), "without labels");
    // Per step, from the capture: the point of the bucket [t, t+step) is stamped t+step,
    // buckets lying on the step's grid.
    let mut expected: BTreeMap<i64, f64> = BTreeMap::new();
    for o in &cpu {
        let bucket = o.time.div_euclid(step) * step;
        *expected.entry((bucket + step) / MS).or_default() += o.value as f64;
    }
    let points: BTreeMap<i64, f64> = series[0]["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (int(&p["timestamp"]), p["value"].as_f64().unwrap()))
        .collect();
    assert_eq!(points, expected);
    let flamegraph_total = int(&response(&answers[3])["flamegraph"]["total"]);
    assert_eq!(
        points.values().sum::<f64>() as i64,
        flamegraph_total,
        "points sum to the flame graph total"
    );

    let mut by_thread: BTreeMap<String, f64> = BTreeMap::new();
    for o in &cpu {
        *by_thread
            .entry(o.attrs.get("thread.name").cloned().unwrap_or_default())
            .or_default() += o.value as f64;
    }
    let grouped: BTreeMap<String, f64> = response(&answers[1])["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let labels = s["labels"].as_array().unwrap();
            assert_eq!(labels[0]["name"], "thread_name", "{s}");
            let sum: f64 = s["points"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["value"].as_f64().unwrap())
                .sum();
            (labels[0]["value"].as_str().unwrap().to_string(), sum)
        })
        .collect();
    by_thread.remove("");
    assert_eq!(grouped, by_thread);
    let mut top: Vec<f64> = by_thread.values().copied().collect();
    top.sort_by(|a, b| b.total_cmp(a));
    let limited: Vec<f64> = response(&answers[2])["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            s["points"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["value"].as_f64().unwrap())
                .sum()
        })
        .collect();
    assert_eq!(limited, top[..2.min(top.len())], "limit keeps the top series");
    assert_eq!(answers[4]["error"]["code"], "invalid_argument", "{}", answers[4]);
}

#[test]
fn diff_ticks_are_each_sides_total() {
    let l = loaded();
    let (start, end) = l.range_ms();
    let mid = (start + end) / 2;
    let cpu = l.cpu();
    let side = |from: i64, to: i64| -> Vec<&Observation> {
        cpu.iter()
            .copied()
            .filter(|o| o.time >= from * MS && o.time < to * MS)
            .collect()
    };
    let (left, right) = (side(start, mid), side(mid, end));
    let request = |s: i64, e: i64| json!({"profileTypeID": CPU_ID, "labelSelector": "{}", "start": s, "end": e, "maxNodes": 65536});
    let answers = l.call(&[
        rpc(&format!("{Q}/Diff"), true, json!({"left": request(start, mid), "right": request(mid, end)})),
        fetch(
            &format!("/{Q}/Diff"),
            json!({"content-type": "application/json"}),
            &json!({"left": {"profileTypeID": CPU_ID, "labelSelector": "{}", "start": start, "end": mid, "maxNodes": 65536},
                    "right": {"profile_typeID": CPU_ID, "label_selector": "{}", "start": mid, "end": end}})
            .to_string(),
        ),
    ]);
    let left_total: i64 = left.iter().map(|o| o.value).sum();
    let right_total: i64 = right.iter().map(|o| o.value).sum();
    assert!(left_total > 0 && right_total > 0, "both halves have samples");
    let binary = response(&answers[0])["flamegraph"].clone();
    let raw: Value = serde_json::from_str(answers[1]["body"].as_str().unwrap()).unwrap();
    for fg in [&binary, &raw["flamegraph"]] {
        assert_eq!(int(&fg["leftTicks"]), left_total);
        assert_eq!(int(&fg["rightTicks"]), right_total);
        assert_eq!(int(&fg["total"]), left_total + right_total);
        // The 7-number layout, checked and decoded as a double flamebearer.
        let (levels, names) = levels_of(fg);
        let body = json!({"version": 1, "metadata": {"format": "double"}, "flamebearer": {
            "names": names, "levels": levels, "numTicks": left_total + right_total,
            "leftTicks": left_total, "rightTicks": right_total, "maxSelf": int(&fg["maxSelf"])}});
        let decoded = ui_api_tests::trees::decode_flamebearer(&body);
        assert_eq!(
            ui_api_tests::trees::flamebearer_folded(&decoded, 0),
            folded(left.iter().copied())
        );
        assert_eq!(
            ui_api_tests::trees::flamebearer_folded(&decoded, 1),
            folded(right.iter().copied())
        );
    }
}

/// Protobuf by hand, as the Drilldown app builds its pprof download request.
fn hand_encoded_select_merge_profile(type_id: &str, selector: &str, start: i64, end: i64) -> Vec<u8> {
    fn varint(mut v: u64, out: &mut Vec<u8>) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    let mut out = Vec::new();
    for (field, text) in [(1u64, type_id), (2, selector)] {
        varint(field << 3 | 2, &mut out);
        varint(text.len() as u64, &mut out);
        out.extend(text.as_bytes());
    }
    for (field, value) in [(3u64, start as u64), (4, end as u64), (5, 16384)] {
        varint(field << 3, &mut out);
        varint(value, &mut out);
    }
    out
}

#[test]
fn select_merge_profile_binary_and_json() {
    let l = loaded();
    let (start, end) = l.range_ms();
    let cpu = l.cpu();
    let total: i64 = cpu.iter().map(|o| o.value).sum();
    let answers = l.call(&[
        fetch_bytes(
            &format!("/{Q}/SelectMergeProfile"),
            json!({"content-type": "application/proto"}),
            &hand_encoded_select_merge_profile(CPU_ID, "{}", start, end),
        ),
        fetch(
            &format!("/{Q}/SelectMergeProfile"),
            json!({"content-type": "application/json"}),
            &json!({"profile_typeID": CPU_ID, "label_selector": "{}", "start": start, "end": end,
                    "stackTraceSelector": {"call_site": []}, "maxNodes": 16384})
            .to_string(),
        ),
    ]);
    assert_eq!(answers[0]["status"], 200, "{}", answers[0]["body"]);
    assert_eq!(answers[0]["contentType"], "application/proto");
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(answers[0]["bodyBase64"].as_str().unwrap())
        .unwrap();
    // Read by npm's pprof-format: a google.v1.Profile is pprof on the wire.
    let profile = pprof_reader::decode(&bytes);
    assert_eq!(profile.samples.iter().map(|s| s.values[0]).sum::<i64>(), total);
    let mut got = BTreeMap::new();
    for s in &profile.samples {
        *got.entry(s.frames.join(";")).or_insert(0) += s.values[0];
    }
    got.retain(|k: &String, v: &mut i64| !k.is_empty() && *v != 0);
    assert_eq!(got, folded(cpu.iter().copied()));

    assert_eq!(answers[1]["status"], 200, "{}", answers[1]["body"]);
    let json: Value = serde_json::from_str(answers[1]["body"].as_str().unwrap()).unwrap();
    let sum: i64 = json["sample"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| int(&s["value"][0]))
        .sum();
    assert_eq!(sum, total, "protojson pprof: int64 as strings");
}

#[test]
fn profile_stats_analyze_and_unknown_methods() {
    let l = loaded();
    let json_headers = json!({"content-type": "application/json"});
    let answers = l.call(&[
        fetch(&format!("/{Q}/GetProfileStats"), json_headers.clone(), "{}"),
        fetch(&format!("/{Q}/AnalyzeQuery"), json_headers.clone(), r#"{"start":1,"end":2,"query":""}"#),
        fetch("/settings.v1.RecordingRulesService/ListRecordingRules", json_headers.clone(), "{}"),
        fetch("/adhocprofiles.v1.AdHocProfileService/Get", json_headers.clone(), "{}"),
        fetch("/nothing/here", json_headers.clone(), "{}"),
        fetch(&format!("/{Q}/ProfileTypes"), json!({"content-type": "text/plain"}), "{}"),
        fetch(&format!("/{Q}/LabelNames"), json_headers.clone(), r#"{"matchers":["{a="]}"#),
        fetch(&format!("/{Q}/LabelNames"), json_headers, r#"{"matchers": 5}"#),
        rpc(
            &format!("{Q}/SelectMergeStacktraces"),
            true,
            json!({"profileTypeID": CPU_ID, "labelSelector": "{}", "start": 1, "end": 2, "traceIdSelector": ["xyz"]}),
        ),
        rpc(&format!("{Q}/SelectMergeStacktraces"), true, json!({"profileTypeID": "cpu", "start": 1, "end": 2})),
    ]);
    let body = |i: usize| -> Value { serde_json::from_str(answers[i]["body"].as_str().unwrap()).unwrap() };
    assert_eq!(answers[0]["status"], 200);
    let stats = body(0);
    assert_eq!(stats["dataIngested"], true);
    let oldest = l.obs.iter().map(|o| o.time).min().unwrap() / MS;
    let newest = l.obs.iter().map(|o| o.time).max().unwrap() / MS;
    assert_eq!(
        (int(&stats["oldestProfileTime"]), int(&stats["newestProfileTime"])),
        (oldest, newest)
    );
    assert_eq!((answers[1]["status"].clone(), body(1)), (json!(200), json!({})));
    // Recording rules are served (ui-api-tests/tests/recording_rules.rs): none stored yet.
    assert_eq!((answers[2]["status"].clone(), body(2)), (json!(200), json!({})));
    assert_eq!(answers[3]["status"], 501, "{}", answers[3]);
    assert_eq!(body(3)["code"], "unimplemented");
    assert_eq!(answers[4]["status"], 404);
    assert_eq!(answers[5]["status"], 415);
    for i in [6, 7] {
        assert_eq!(answers[i]["status"], 400, "{}", answers[i]);
        assert_eq!(body(i)["code"], "invalid_argument");
    }
    assert!(
        body(6)["message"].as_str().unwrap().contains("invalid selector"),
        "{}",
        body(6)
    );
    assert!(
        body(7)["message"]
            .as_str()
            .unwrap()
            .contains("types.v1.LabelNamesRequest"),
        "{}",
        body(7)
    );
    assert_eq!(answers[8]["error"]["code"], "invalid_argument");
    assert!(
        answers[8]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("trace id"),
        "{}",
        answers[8]
    );
    assert_eq!(answers[9]["error"]["code"], "invalid_argument");
    assert!(
        answers[9]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("profile type id"),
        "{}",
        answers[9]
    );
}

#[test]
fn pyroscope_render_and_render_diff() {
    let l = loaded();
    let (start, end) = l.range_ms();
    let cpu = l.cpu();
    let total: i64 = cpu.iter().map(|o| o.value).sum();
    let http = ui_api_tests::http_client();
    let get = |path: String| {
        let http = http.clone();
        let url = format!("{}{path}", l.server.http());
        std::thread::spawn(move || {
            tokio::runtime::Runtime::new().unwrap().block_on(async move {
                let r = http.get(url).send().await.unwrap();
                (r.status().as_u16(), r.json::<Value>().await.unwrap())
            })
        })
        .join()
        .unwrap()
    };
    let query = urlencode(&format!("{CPU_ID}{{}}"));
    let (status, body) = get(format!(
        "/pyroscope/render?query={query}&from={start}&until={end}&max-nodes=65536"
    ));
    assert_eq!(status, 200, "{body}");
    assert_eq!(int(&body["flamebearer"]["numTicks"]), total);
    let decoded = ui_api_tests::trees::decode_flamebearer(&body);
    assert_eq!(
        ui_api_tests::trees::flamebearer_folded(&decoded, 0),
        folded(cpu.iter().copied())
    );
    let timeline: i64 = body["timeline"]["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .sum();
    assert_eq!(timeline, total, "the time line holds every sample");
    assert!(body["timeline"]["durationDelta"].as_i64().unwrap() >= 15);

    let mid = (start + end) / 2;
    let (status, body) = get(format!(
        "/pyroscope/render-diff?leftQuery={query}&leftFrom={start}&leftUntil={mid}&rightQuery={query}&rightFrom={mid}&rightUntil={end}"
    ));
    assert_eq!(status, 200, "{body}");
    let left: i64 = cpu.iter().filter(|o| o.time < mid * MS).map(|o| o.value).sum();
    assert_eq!(int(&body["flamebearer"]["leftTicks"]), left);
    assert_eq!(int(&body["flamebearer"]["rightTicks"]), total - left);
    assert_eq!(body["metadata"]["format"], "double");
    let (status, body) = get("/pyroscope/render?query=%7B%7D".to_string());
    assert_eq!(status, 400, "{body}");
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b':' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn settings_are_per_tenant_and_survive_a_restart() {
    let mut server = Server::start(Options::default()).await;
    let base = server.http();
    let plugin = r#"{"maxNodes":16384,"enableFlameGraphDotComExport":true}"#;
    let set = |tenant: &str, value: &str| {
        fetch(
            "/settings.v1.SettingsService/Set",
            json!({"content-type": "application/json", "X-Scope-OrgID": tenant}),
            &json!({"setting": {"name": "pluginSettings", "value": value}}).to_string(),
        )
    };
    let answers = tokio::task::spawn_blocking(move || {
        call_all(
            &base,
            &[
                fetch(
                    "/settings.v1.SettingsService/Get",
                    json!({"content-type": "application/json"}),
                    "{}",
                ),
                set("team-a", plugin),
                set("team-b", "{}"),
            ],
        )
    })
    .await
    .unwrap();
    assert_eq!(answers[0]["body"], "{}", "no settings yet");
    let stored: Value = serde_json::from_str(answers[1]["body"].as_str().unwrap()).unwrap();
    assert_eq!(stored["setting"]["value"], plugin);
    assert!(int(&stored["setting"]["modifiedAt"]) > 0, "stamped when set");

    server.restart().await;
    let base = server.http();
    let answers = tokio::task::spawn_blocking(move || {
        call_all(
            &base,
            &[
                rpc_with_headers(
                    "settings.v1.SettingsService/Get",
                    true,
                    json!({}),
                    json!({"X-Scope-OrgID": "team-a"}),
                ),
                rpc_with_headers(
                    "settings.v1.SettingsService/Delete",
                    false,
                    json!({"name": "pluginSettings"}),
                    json!({"X-Scope-OrgID": "team-b"}),
                ),
                rpc_with_headers(
                    "settings.v1.SettingsService/Get",
                    false,
                    json!({}),
                    json!({"X-Scope-OrgID": "team-b"}),
                ),
            ],
        )
    })
    .await
    .unwrap();
    let settings = response(&answers[0])["settings"].as_array().unwrap().clone();
    assert_eq!(settings.len(), 1);
    assert_eq!(
        (settings[0]["name"].as_str(), settings[0]["value"].as_str()),
        (Some("pluginSettings"), Some(plugin))
    );
    response(&answers[1]);
    assert_eq!(response(&answers[2]), &json!({}), "deleted for team-b only");
}

/// A server holding the generated workload, whose samples link traces and spans and whose
/// profiles have ids (the capture has none of these).
fn linked() -> &'static (Server, Vec<Obs>) {
    static LINKED: OnceLock<(Server, Vec<Obs>)> = OnceLock::new();
    ui_api_tests::shared(&LINKED, || async {
        let server = Server::start_for_process(Options::default()).await;
        let workload = Workload::new();
        let mut obs = workload.export_grpc(server.grpc()).await;
        // As Grafana is served CPU: each counted sample is worth its profile's period.
        for o in obs.iter_mut().filter(|o| o.profile_type == workload::CPU) {
            o.value *= workload.profiles[o.profile].period;
        }
        (server, obs)
    })
}

#[test]
fn trace_span_and_profile_id_selectors() {
    let (server, obs) = linked();
    let cpu: Vec<&Obs> = obs.iter().filter(|o| o.profile_type == workload::CPU).collect();
    let start = obs.iter().map(|o| o.time).min().unwrap() / MS;
    let end = obs.iter().map(|o| o.time).max().unwrap() / MS + 1;
    let linked = cpu
        .iter()
        .find(|o| o.trace_id.is_some() && o.span_id.is_some())
        .expect("linked samples");
    let (trace, span) = (linked.trace_id.clone().unwrap(), linked.span_id.clone().unwrap());
    let profile = cpu
        .iter()
        .find_map(|o| o.profile_id.clone())
        .expect("profile ids");
    // Grafana sends profile ids as UUIDs.
    let uuid = format!(
        "{}-{}-{}-{}-{}",
        &profile[..8],
        &profile[8..12],
        &profile[12..16],
        &profile[16..20],
        &profile[20..]
    );
    let sum = |keep: &dyn Fn(&Obs) -> bool| {
        cpu.iter()
            .copied()
            .filter(|o| keep(o))
            .map(|o| o.value)
            .sum::<i64>()
    };
    let base = |extra: Value| {
        let mut r = json!({"profileTypeID": CPU_ID, "labelSelector": "{}", "start": start, "end": end});
        r.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        r
    };
    let answers = call_all(
        &server.http(),
        &[
            rpc(
                &format!("{Q}/SelectMergeStacktraces"),
                true,
                base(json!({"traceIdSelector": [trace]})),
            ),
            rpc(
                &format!("{Q}/SelectMergeStacktraces"),
                false,
                base(json!({"spanSelector": [span]})),
            ),
            rpc(
                &format!("{Q}/SelectMergeSpanProfile"),
                true,
                base(json!({"spanSelector": [span]})),
            ),
            rpc(
                &format!("{Q}/SelectMergeStacktraces"),
                true,
                base(json!({"profileIdSelector": [uuid]})),
            ),
        ],
    );
    let totals: Vec<i64> = answers
        .iter()
        .map(|a| grafana_tree(&response(a)["flamegraph"]).1)
        .collect();
    let by_trace = sum(&|o| o.trace_id.as_deref() == Some(trace.as_str()));
    let by_span = sum(&|o| o.span_id.as_deref() == Some(span.as_str()));
    let by_profile = sum(&|o| o.profile_id.as_deref() == Some(profile.as_str()));
    assert!(by_trace > 0 && by_span > 0 && by_profile > 0);
    assert!(by_span < sum(&|_| true), "a span selects part of the data");
    assert_eq!(totals, [by_trace, by_span, by_span, by_profile]);
}

/// A blocking GET of `path`: status, content type and body text.
fn http_get(base: &str, path: &str) -> (u16, String, String) {
    let http = ui_api_tests::http_client();
    let url = format!("{base}{path}");
    std::thread::spawn(move || {
        tokio::runtime::Runtime::new().unwrap().block_on(async move {
            let r = http.get(url).send().await.unwrap();
            let content_type = r
                .headers()
                .get("content-type")
                .map(|v| v.to_str().unwrap().to_string())
                .unwrap_or_default();
            (r.status().as_u16(), content_type, r.text().await.unwrap())
        })
    })
    .join()
    .unwrap()
}

#[test]
fn cpu_is_time_over_connect_and_counts_over_rest() {
    let l = loaded();
    let (start, end) = l.range_ms();
    let nanos: i64 = l.cpu().iter().map(|o| o.value).sum();
    assert_eq!(nanos % l.period, 0);
    let counts = nanos / l.period;
    // Our REST API keeps the stored counts and names the period that converts them.
    let (status, _, body) = http_get(
        &l.server.http(),
        &format!("/api/v1/profile-types?from={}&to={}", start * MS, end * MS),
    );
    assert_eq!(status, 200, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    let entry = body["profile_types"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == COUNTED)
        .unwrap_or_else(|| panic!("{COUNTED} listed: {body}"));
    assert_eq!(entry["periods"], json!([l.period]));
    assert_eq!(entry["time_type"], CPU);
    let (status, _, body) = http_get(
        &l.server.http(),
        &format!(
            "/api/v1/flamegraph?profile_type={COUNTED}&from={}&to={}",
            start * MS,
            end * MS
        ),
    );
    assert_eq!(status, 200, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(int(&body["total"]), counts, "REST serves the stored counts");

    let request = |id: &str| json!({"profileTypeID": id, "labelSelector": "{}", "start": start, "end": end});
    let answers = l.call(&[
        rpc(&format!("{Q}/SelectMergeStacktraces"), true, request(CPU_ID)),
        // The id served before CPU was shown in time still selects the counts.
        rpc(
            &format!("{Q}/SelectMergeStacktraces"),
            true,
            request("process_cpu:samples:count:cpu:nanoseconds"),
        ),
        rpc(
            &format!("{Q}/ProfileTypes"),
            true,
            json!({"start": start, "end": end}),
        ),
    ]);
    assert_eq!(grafana_tree(&response(&answers[0])["flamegraph"]).1, nanos);
    assert_eq!(grafana_tree(&response(&answers[1])["flamegraph"]).1, counts);
    let cpu_type = response(&answers[2])["profileTypes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["ID"] == CPU_ID)
        .cloned()
        .unwrap();
    assert_eq!(
        cpu_type,
        json!({"ID": CPU_ID, "name": "process_cpu", "sampleType": "cpu", "sampleUnit": "nanoseconds",
               "periodType": "cpu", "periodUnit": "nanoseconds"})
    );
}

/// Pyroscope's tree serialization read back, written from the format's description:
/// depth first, per node `uvarint(len) name uvarint(self) uvarint(children)`, under a
/// nameless virtual root. Folded stacks of the non-zero self values.
fn read_tree(bytes: &[u8]) -> BTreeMap<String, i64> {
    fn uvarint(b: &[u8], at: &mut usize) -> u64 {
        let (mut v, mut shift) = (0u64, 0);
        loop {
            let byte = b[*at];
            *at += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return v;
            }
            shift += 7;
        }
    }
    let mut out = BTreeMap::new();
    // (path, children left) of the nodes still open.
    let mut open: Vec<(Vec<String>, u64)> = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let len = uvarint(bytes, &mut at) as usize;
        let name = String::from_utf8(bytes[at..at + len].to_vec()).unwrap();
        at += len;
        let value = uvarint(bytes, &mut at) as i64;
        let children = uvarint(bytes, &mut at);
        while open.last().is_some_and(|(_, left)| *left == 0) {
            open.pop();
        }
        let mut path = match open.last_mut() {
            Some((parent, left)) => {
                *left -= 1;
                let mut p = parent.clone();
                p.push(name);
                p
            }
            None => Vec::new(),
        };
        if value != 0 && !path.is_empty() {
            *out.entry(path.join(";")).or_insert(0) += value;
        }
        open.push((std::mem::take(&mut path), children));
    }
    out
}

/// Flat (self) and cumulative values per function, from the observations.
fn flat_and_cum(obs: &[&Observation]) -> BTreeMap<String, (i64, i64)> {
    let mut out: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for o in obs {
        if let Some(leaf) = o.frames.last() {
            out.entry(leaf.clone()).or_default().0 += o.value;
        }
        let distinct: BTreeSet<&String> = o.frames.iter().collect();
        for f in distinct {
            out.entry(f.clone()).or_default().1 += o.value;
        }
    }
    out
}

/// Checks a DOT text with Graphviz (`dot -Tplain`, which fails on a syntax error) and
/// returns each node's label.
fn graphviz_labels(text: &str) -> Vec<String> {
    use std::io::Write;
    let mut child = std::process::Command::new("dot")
        .arg("-Tplain")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("Graphviz's dot is required (Debian package graphviz; .ci/run installs it)");
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "dot refused the graph: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plain = String::from_utf8(out.stdout).unwrap();
    let drawn = plain.lines().filter(|l| l.starts_with("node ")).count();
    let labels: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with('N') && !l.contains(" -> "))
        .map(|l| {
            let start = l.find("label=\"").unwrap() + 7;
            let end = l[start..].find("\" id=").unwrap() + start;
            l[start..end].to_string()
        })
        .collect();
    // The legend is a node too.
    assert_eq!(drawn, labels.len() + 1, "{plain}");
    labels
}

/// The label our call graph gives a function.
fn dot_label(name: &str, flat: i64, cum: i64, total: i64) -> String {
    let pct = |v: i64| format!("{:.2}%", v as f64 * 100.0 / total as f64);
    format!(
        "{}\\n{flat} ({})\\nof {cum} ({})",
        name.replace('\\', "\\\\").replace('"', "\\\""),
        pct(flat),
        pct(cum)
    )
}

#[test]
fn tree_and_dot_formats() {
    let l = loaded();
    let (start, end) = l.range_ms();
    let cpu = l.cpu();
    let total: i64 = cpu.iter().map(|o| o.value).sum();
    let request = |format: &str, max_nodes: i64| {
        json!({"profileTypeID": CPU_ID, "labelSelector": "{}", "start": start, "end": end,
               "format": format, "maxNodes": max_nodes})
    };
    let answers = l.call(&[
        rpc(
            &format!("{Q}/SelectMergeStacktraces"),
            true,
            request("PROFILE_FORMAT_TREE", 65536),
        ),
        rpc(
            &format!("{Q}/SelectMergeStacktraces"),
            false,
            request("PROFILE_FORMAT_DOT", 7),
        ),
    ]);
    use base64::Engine;
    let tree = base64::engine::general_purpose::STANDARD
        .decode(response(&answers[0])["tree"].as_str().unwrap())
        .unwrap();
    assert_eq!(read_tree(&tree), folded(cpu.iter().copied()));

    let functions = flat_and_cum(&cpu);
    let mut ranked: Vec<(&String, &(i64, i64))> = functions.iter().collect();
    ranked.sort_by(|a, b| b.1.1.cmp(&a.1.1).then_with(|| a.0.cmp(b.0)));
    let expected = |n: usize| -> Vec<String> {
        ranked
            .iter()
            .take(n)
            .map(|(name, (flat, cum))| dot_label(name, *flat, *cum, total))
            .collect()
    };
    let labels = graphviz_labels(response(&answers[1])["dot"].as_str().unwrap());
    assert_eq!(labels, expected(7));

    let query = urlencode(&format!("{CPU_ID}{{}}"));
    let (status, content_type, body) = http_get(
        &l.server.http(),
        &format!("/pyroscope/render?query={query}&from={start}&until={end}&format=dot&max-nodes=12"),
    );
    assert_eq!(status, 200, "{body}");
    assert!(content_type.starts_with("text/plain"), "{content_type}");
    assert_eq!(graphviz_labels(&body), expected(12));
    assert!(body.contains(&format!("of {total} {}", "nanoseconds total")));
    // Nothing selected: an empty body, as Pyroscope answers.
    let (status, _, body) = http_get(
        &l.server.http(),
        &format!("/pyroscope/render?query={query}&from=1000&until=2000&format=dot"),
    );
    assert_eq!((status, body.as_str()), (200, ""));
}

/// Folded stacks of a pprof profile in protojson, as the Drilldown app reads it.
fn pprof_json_folded(p: &Value) -> BTreeMap<String, i64> {
    let strings: Vec<&str> = p["stringTable"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    let functions: BTreeMap<i64, &str> = p["function"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (int(&f["id"]), strings[int(&f["name"]) as usize]))
        .collect();
    let locations: BTreeMap<i64, Vec<&str>> = p["location"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let lines = l["line"].as_array().map(Vec::as_slice).unwrap_or_default();
            (
                int(&l["id"]),
                lines
                    .iter()
                    .map(|line| functions[&int(&line["functionId"])])
                    .collect(),
            )
        })
        .collect();
    let mut out = BTreeMap::new();
    for s in p["sample"].as_array().unwrap() {
        let mut frames: Vec<&str> = Vec::new();
        for loc in s["locationId"].as_array().unwrap().iter().rev() {
            frames.extend(locations[&int(loc)].iter().rev());
        }
        *out.entry(frames.join(";")).or_insert(0) += int(&s["value"][0]);
    }
    out.retain(|k, v| !k.is_empty() && *v != 0);
    out
}

#[test]
fn merge_profile_and_series_honour_max_nodes_and_the_stack_selector() {
    let l = loaded();
    let (start, end) = l.range_ms();
    let cpu = l.cpu();
    let total: i64 = cpu.iter().map(|o| o.value).sum();
    // The heaviest call site of the shortest length that does not hold everything.
    let site = (1..8)
        .find_map(|len| {
            let mut prefixes: BTreeMap<Vec<String>, i64> = BTreeMap::new();
            for o in cpu.iter().filter(|o| o.frames.len() >= len) {
                *prefixes.entry(o.frames[..len].to_vec()).or_default() += o.value;
            }
            prefixes
                .into_iter()
                .filter(|(_, v)| *v < total)
                .max_by_key(|(_, v)| *v)
                .map(|(site, _)| site)
        })
        .expect("the capture branches");
    let site = &site;
    let under: Vec<&Observation> = cpu
        .iter()
        .copied()
        .filter(|o| o.frames.starts_with(site))
        .collect();
    let under_total: i64 = under.iter().map(|o| o.value).sum();
    let call_site: Vec<Value> = site.iter().map(|f| json!({"name": f})).collect();
    let profile = |extra: Value| {
        let mut r = json!({"profile_typeID": CPU_ID, "label_selector": "{}", "start": start, "end": end});
        r.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        fetch(
            &format!("/{Q}/SelectMergeProfile"),
            json!({"content-type": "application/json"}),
            &r.to_string(),
        )
    };
    let answers = l.call(&[
        profile(json!({"stackTraceSelector": {"call_site": call_site}})),
        profile(json!({"maxNodes": 8})),
        rpc(
            &format!("{Q}/SelectMergeStacktraces"),
            true,
            json!({"profileTypeID": CPU_ID, "labelSelector": "{}", "start": start, "end": end, "maxNodes": 8}),
        ),
        rpc(
            &format!("{Q}/SelectSeries"),
            true,
            json!({"profileTypeID": CPU_ID, "labelSelector": "{}", "start": start, "end": end, "step": 15.0,
                   "stackTraceSelector": {"callSite": call_site}}),
        ),
    ]);
    let body = |i: usize| -> Value {
        assert_eq!(answers[i]["status"], 200, "{}", answers[i]);
        serde_json::from_str(answers[i]["body"].as_str().unwrap()).unwrap()
    };
    assert_eq!(pprof_json_folded(&body(0)), folded(under.iter().copied()));

    let cut = pprof_json_folded(&body(1));
    let framed: i64 = cpu.iter().filter(|o| !o.frames.is_empty()).map(|o| o.value).sum();
    assert_eq!(
        cut.values().sum::<i64>(),
        framed,
        "a cut profile keeps every value"
    );
    let mut nodes: BTreeSet<String> = BTreeSet::new();
    for path in cut.keys() {
        let frames: Vec<&str> = path.split(';').collect();
        for i in 1..=frames.len() {
            if frames[i - 1] != "other" {
                nodes.insert(frames[..i].join(";"));
            }
        }
    }
    assert!(nodes.len() < 8, "at most 8 nodes with the root: {nodes:?}");
    assert!(cut.keys().any(|k| k.ends_with("other")), "{cut:?}");
    let (tree, _) = grafana_tree(&response(&answers[2])["flamegraph"]);
    assert_eq!(cut, grafana::folded(&tree), "the same cut as the flame graph's");

    let series = response(&answers[3])["series"].as_array().unwrap();
    let points: f64 = series
        .iter()
        .flat_map(|s| s["points"].as_array().unwrap())
        .map(|p| p["value"].as_f64().unwrap())
        .sum();
    assert_eq!(points as i64, under_total);
    assert!(under_total < total);
}

#[test]
fn connect_deadline_and_invalid_utf8() {
    let l = loaded();
    let (start, end) = l.range_ms();
    let body =
        json!({"profileTypeID": CPU_ID, "labelSelector": "{}", "start": start, "end": end}).to_string();
    let with_timeout = |t: &str| {
        fetch(
            &format!("/{Q}/SelectMergeStacktraces"),
            json!({"content-type": "application/json", "connect-timeout-ms": t}),
            &body,
        )
    };
    let bad_utf8 = b"{\"start\": 1, \"unknownField\": \"\xff\xfe\"}";
    let answers = l.call(&[
        with_timeout("0"),
        with_timeout("abc"),
        with_timeout("600000"),
        fetch_bytes(
            &format!("/{Q}/LabelNames"),
            json!({"content-type": "application/json"}),
            bad_utf8,
        ),
        fetch_bytes(
            "/push.v1.PusherService/Push",
            json!({"content-type": "application/json"}),
            bad_utf8,
        ),
    ]);
    let code = |i: usize| -> (i64, String) {
        let body: Value = serde_json::from_str(answers[i]["body"].as_str().unwrap()).unwrap_or(Value::Null);
        (
            answers[i]["status"].as_i64().unwrap(),
            body["code"].as_str().unwrap_or_default().to_string(),
        )
    };
    assert_eq!(code(0), (504, "deadline_exceeded".to_string()), "{}", answers[0]);
    assert_eq!(code(1), (400, "invalid_argument".to_string()), "{}", answers[1]);
    assert_eq!(answers[2]["status"], 200, "{}", answers[2]);
    for i in [3, 4] {
        assert_eq!(code(i), (400, "invalid_argument".to_string()), "{}", answers[i]);
        assert!(
            answers[i]["body"].as_str().unwrap().contains("UTF-8"),
            "{}",
            answers[i]
        );
    }
}
