//! Exemplars and heatmaps over Connect, as Grafana's datasource reads them: `SelectSeries`
//! with `exemplar_type` INDIVIDUAL and SPAN, `SelectHeatmap` with both query types, and the
//! round trip from an exemplar's "view profile" / "view trace" link back into
//! `SelectMergeStacktraces`. Sent by the independent connect-es client (binary and JSON)
//! to the real binary holding a generated workload: several profiles per minute with
//! known totals, samples linked to spans. Every expected value is computed from that
//! workload, with Pyroscope's rules: one exemplar per point, the largest; heatmap value
//! buckets 20 linear steps from the smallest to the largest total.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use serde_json::{Value, json};
use ui_api_tests::connect_client::{call_all, int, rpc};
use ui_api_tests::grafana::{self, levels_of, levels_to_tree};
use ui_api_tests::server::{Options, Server};
use ui_api_tests::workload::{self, Loc, Obs, ProfileSpec, SECOND, SampleSpec, T0, Workload};

const Q: &str = "querier.v1.QuerierService";
const MS: i64 = 1_000_000;
const CPU_ID: &str = "process_cpu:cpu:nanoseconds:cpu:nanoseconds";
const PERIOD: i64 = 10_000_000;
const STEP: i64 = 60 * SECOND;
/// The query range: a minute before the data to a minute after it; minute-aligned, so
/// buckets are the minutes.
const FROM: i64 = T0 - 60 * SECOND;
const TO: i64 = T0 + 4 * 60 * SECOND;
/// Pyroscope's `DefaultYAxisBuckets`.
const Y_BUCKETS: usize = 20;

fn kv(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn span_of(minute: usize, slot: usize) -> (String, String) {
    (
        workload::TRACES[slot % 3].to_string(),
        format!("5a{minute:02x}{slot:02x}{}", "e1".repeat(5)),
    )
}

/// Three minutes; per minute and resource two CPU profiles with ids, 3 to 5 samples each
/// at their own times, two of three linked to one of four spans per minute (spans are
/// shared by profiles and resources). One profile has a sample in the next minute.
fn exemplar_workload() -> Workload {
    let stacks: [Vec<Loc>; 3] = [
        vec![Loc::Func("main"), Loc::Func("handle"), Loc::Func("parse")],
        vec![Loc::Func("main"), Loc::Func("compute")],
        vec![Loc::Func("main"), Loc::Func("handle")],
    ];
    let mut profiles = Vec::new();
    for minute in 0..3usize {
        for (r, resource) in workload::resources().into_iter().enumerate() {
            for k in 0..2usize {
                let time = T0 + minute as i64 * 60 * SECOND + (r * 2 + k) as i64 * 5 * SECOND;
                let mut samples: Vec<SampleSpec> = (0..3 + (minute + r + k) % 3)
                    .map(|i| SampleSpec {
                        stack: stacks[(i + k) % 3].clone(),
                        value: 1 + ((minute * 7 + r * 5 + k * 3 + i * 11) % 17) as i64,
                        time: Some(time + i as i64 * 2 * SECOND),
                        attrs: Vec::new(),
                        link: (i % 3 != 2).then(|| span_of(minute, (r + i) % 4)),
                    })
                    .collect();
                if (minute, r, k) == (1, 0, 0) {
                    samples.push(SampleSpec {
                        stack: stacks[0].clone(),
                        value: 4,
                        time: Some(T0 + 2 * 60 * SECOND + SECOND),
                        attrs: Vec::new(),
                        link: Some(span_of(2, 1)),
                    });
                }
                profiles.push(ProfileSpec {
                    profile_type: workload::CPU,
                    resource: resource.clone(),
                    attrs: if k == 1 {
                        kv(&[("profile.mode", "sampled")])
                    } else {
                        Vec::new()
                    },
                    time,
                    duration: 10 * SECOND,
                    period: PERIOD,
                    profile_id: Some(format!("{minute:02x}{r:02x}{k:02x}{}", "cd".repeat(13))),
                    samples,
                });
            }
        }
    }
    Workload { profiles }
}

/// A server holding the workload; its observations with values in CPU time, as Grafana
/// is served them (each sample worth its period).
fn loaded() -> &'static (Server, Vec<Obs>) {
    static LOADED: OnceLock<(Server, Vec<Obs>)> = OnceLock::new();
    ui_api_tests::shared(&LOADED, || async {
        let server = Server::start_for_process(Options::default()).await;
        let mut obs = exemplar_workload().export_grpc(server.grpc()).await;
        for o in &mut obs {
            o.value *= PERIOD;
        }
        (server, obs)
    })
}

fn response(answer: &Value) -> &Value {
    assert!(answer.get("error").is_none(), "the call failed: {answer}");
    &answer["response"]
}

/// A Select request over the whole range with `extra` fields.
fn select(extra: Value) -> Value {
    let mut r = json!({
        "profileTypeID": CPU_ID,
        "labelSelector": "{}",
        "start": FROM / MS,
        "end": TO / MS,
    });
    r.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    r
}

/// [`select`] bucketed by the step.
fn request(mut extra: Value) -> Value {
    extra["step"] = json!((STEP / SECOND) as f64);
    select(extra)
}

fn uuid(hex: &str) -> String {
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// A label name as served to a client without the UTF-8 capability.
fn wire_name(name: &str) -> String {
    match name {
        "service.name" => "service_name".to_string(),
        n => n.replace(|c: char| !c.is_ascii_alphanumeric() && c != '_', "_"),
    }
}

/// Per group (its values) and bucket start: the expected exemplars.
type ByGroup = BTreeMap<Vec<String>, BTreeMap<i64, Vec<Expected>>>;

/// What an exemplar stands for, in a group: a profile or a span.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Profile,
    Span,
}

/// One expected exemplar: a profile's or span's sum in one bucket of one group.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Expected {
    /// Profile id as a UUID, or span id.
    id: String,
    trace_id: String,
    value: i64,
    /// Earliest sample in the bucket, ms.
    timestamp: i64,
    /// The labels every series of its samples has, without the grouped ones (not `__*`).
    labels: BTreeMap<String, String>,
}

/// Per group value and bucket start: every profile (or span) with its sum, largest first
/// (ties: smaller id first), as the workload defines them.
fn expected(obs: &[Obs], kind: Kind, group_by: &[&str]) -> ByGroup {
    /// A profile's or span's samples in one bucket of one group.
    #[derive(Default)]
    struct Sum {
        value: i64,
        time: Option<i64>,
        trace_id: String,
        labels: Option<BTreeSet<(String, String)>>,
    }
    let mut sums: BTreeMap<(Vec<String>, i64, String), Sum> = BTreeMap::new();
    for o in obs {
        let id = match kind {
            Kind::Profile => o.profile_id.as_deref().map(uuid),
            Kind::Span => o.span_id.clone(),
        };
        let Some(id) = id else { continue };
        let group: Vec<String> = group_by.iter().map(|k| o.labels[*k].clone()).collect();
        let bucket = FROM + (o.time - FROM).div_euclid(STEP) * STEP;
        let labels: BTreeSet<(String, String)> = o
            .labels
            .iter()
            .filter(|(k, _)| !group_by.contains(&k.as_str()))
            .map(|(k, v)| (wire_name(k), v.clone()))
            .collect();
        let e = sums.entry((group, bucket, id)).or_default();
        e.value += o.value;
        e.time = Some(e.time.map_or(o.time, |t| t.min(o.time)));
        if kind == Kind::Span {
            e.trace_id = o.trace_id.clone().unwrap();
        }
        e.labels = Some(match e.labels.take() {
            None => labels,
            Some(common) => common.intersection(&labels).cloned().collect(),
        });
    }
    let mut out: ByGroup = BTreeMap::new();
    for ((group, bucket, id), sum) in sums {
        out.entry(group)
            .or_default()
            .entry(bucket)
            .or_default()
            .push(Expected {
                id,
                trace_id: sum.trace_id,
                value: sum.value,
                timestamp: sum.time.unwrap() / MS,
                labels: sum.labels.unwrap().into_iter().collect(),
            });
    }
    for buckets in out.values_mut() {
        for list in buckets.values_mut() {
            list.sort_by(|a, b| b.value.cmp(&a.value).then_with(|| a.id.cmp(&b.id)));
        }
    }
    out
}

/// An exemplar as Grafana's datasource reads it (protojson): the id its link uses, the
/// trace id, value, time and the labels it shows, without Pyroscope's `__*` ones.
fn decode_exemplar(e: &Value, kind: Kind) -> Expected {
    let labels: BTreeMap<String, String> = e["labels"]
        .as_array()
        .map(|ls| {
            ls.iter()
                .map(|l| {
                    (
                        l["name"].as_str().unwrap().to_string(),
                        l["value"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let id_field = match kind {
        Kind::Profile => {
            assert!(e.get("spanId").is_none(), "a profile exemplar names no span: {e}");
            "profileId"
        }
        Kind::Span => {
            assert!(
                e.get("profileId").is_none(),
                "a span exemplar names no profile: {e}"
            );
            "spanId"
        }
    };
    Expected {
        id: e[id_field].as_str().unwrap_or_default().to_string(),
        trace_id: e["traceId"].as_str().unwrap_or_default().to_string(),
        value: int(&e["value"]),
        timestamp: int(&e["timestamp"]),
        labels: labels.into_iter().filter(|(k, _)| !k.starts_with("__")).collect(),
    }
}

/// The labels of a protojson series as (name, value), in order.
fn labels_of(series: &Value) -> Vec<String> {
    series["labels"]
        .as_array()
        .map(|ls| {
            ls.iter()
                .map(|l| l["value"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Checks every point of a `SelectSeries` answer: one exemplar, the largest of its
/// bucket; returns the exemplars seen.
fn check_series_exemplars(answer: &Value, kind: Kind, want: &ByGroup) -> Vec<Expected> {
    let series = answer["series"].as_array().expect("series");
    assert_eq!(series.len(), want.len(), "one series per group");
    let mut seen = Vec::new();
    let mut chosen_among_several = 0;
    for s in series {
        let group = labels_of(s);
        let buckets = &want[&group];
        let points = s["points"].as_array().unwrap();
        assert_eq!(
            points.len(),
            buckets.len(),
            "a point per bucket with exemplars in {group:?}"
        );
        for (p, (bucket, list)) in points.iter().zip(buckets) {
            assert_eq!(
                int(&p["timestamp"]),
                (bucket + STEP) / MS,
                "the bucket's right edge"
            );
            let exemplars = p["exemplars"].as_array().expect("exemplars on every point");
            assert_eq!(exemplars.len(), 1, "one exemplar per point, as Pyroscope: {p}");
            let got = decode_exemplar(&exemplars[0], kind);
            assert_eq!(got, list[0], "the largest of {group:?} at {bucket}: {list:?}");
            if list.len() > 1 {
                chosen_among_several += 1;
                assert!(list[0].value >= list[1].value);
            }
            let all: BTreeSet<String> = exemplars[0]["labels"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l["name"].as_str().unwrap().to_string())
                .collect();
            assert!(
                all.contains("__profile_type__"),
                "Pyroscope's series labels too: {all:?}"
            );
            seen.push(got);
        }
    }
    assert!(chosen_among_several > 0, "some points choose among several");
    seen
}

#[test]
fn select_series_exemplars_are_the_largest_profile_or_span_per_point() {
    let (server, obs) = loaded();
    let answers = call_all(
        &server.http(),
        &[
            rpc(
                &format!("{Q}/SelectSeries"),
                true,
                request(json!({"exemplarType": "EXEMPLAR_TYPE_INDIVIDUAL"})),
            ),
            rpc(
                &format!("{Q}/SelectSeries"),
                false,
                request(json!({"exemplarType": "EXEMPLAR_TYPE_SPAN", "groupBy": ["service_name"]})),
            ),
            rpc(
                &format!("{Q}/SelectSeries"),
                false,
                request(json!({"exemplarType": "EXEMPLAR_TYPE_INDIVIDUAL", "groupBy": ["host_name"]})),
            ),
            rpc(
                &format!("{Q}/SelectSeries"),
                true,
                request(json!({"exemplarType": "EXEMPLAR_TYPE_NONE"})),
            ),
            rpc(&format!("{Q}/SelectSeries"), true, request(json!({}))),
        ],
    );
    let individual = expected(obs, Kind::Profile, &[]);
    assert!(
        individual[&Vec::<String>::new()].values().all(|l| l.len() >= 6),
        "six profiles or more per minute"
    );
    check_series_exemplars(response(&answers[0]), Kind::Profile, &individual);
    let spans = check_series_exemplars(
        response(&answers[1]),
        Kind::Span,
        &expected(obs, Kind::Span, &["service.name"]),
    );
    assert!(spans.iter().all(|e| e.trace_id.len() == 32 && e.id.len() == 16));
    check_series_exemplars(
        response(&answers[2]),
        Kind::Profile,
        &expected(obs, Kind::Profile, &["host.name"]),
    );
    for none in &answers[3..] {
        let series = response(none)["series"].as_array().unwrap();
        assert!(!series.is_empty());
        for p in series.iter().flat_map(|s| s["points"].as_array().unwrap()) {
            assert!(p.get("exemplars").is_none(), "no exemplars unless asked: {p}");
        }
    }
}

/// Pyroscope's value buckets for totals in `[min, max]`.
fn y_buckets(min: i64, max: i64) -> Vec<(i64, i64)> {
    let max = if min == max { min + 1 } else { max };
    let size = (max - min) as f64 / Y_BUCKETS as f64;
    let mut b: Vec<(i64, i64)> = (0..Y_BUCKETS)
        .map(|i| {
            (
                min + (i as f64 * size) as i64,
                min + ((i + 1) as f64 * size) as i64,
            )
        })
        .collect();
    b[Y_BUCKETS - 1].1 = max;
    b
}

fn y_index(value: i64, buckets: &[(i64, i64)]) -> usize {
    buckets
        .iter()
        .position(|&(lo, hi)| value >= lo && value < hi)
        .unwrap_or(Y_BUCKETS - 1)
}

/// Checks a `SelectHeatmap` answer against the workload: per group and slot, the count of
/// profiles (spans) per value bucket and the largest of each cell as exemplar.
fn check_heatmap(answer: &Value, kind: Kind, want: &ByGroup) {
    let values = want.values().flat_map(|b| b.values().flatten().map(|e| e.value));
    let (min, max) = (values.clone().min().unwrap(), values.max().unwrap());
    let buckets = y_buckets(min, max);
    let series = answer["series"].as_array().expect("series");
    assert_eq!(series.len(), want.len());
    let mut counted = 0;
    for s in series {
        let group = labels_of(s);
        let slots = s["slots"].as_array().unwrap();
        let expected_slots = &want[&group];
        assert_eq!(slots.len(), expected_slots.len(), "{group:?}");
        for (slot, (bucket, list)) in slots.iter().zip(expected_slots) {
            assert_eq!(int(&slot["timestamp"]), (bucket + STEP) / MS);
            let y_min: Vec<i64> = slot["yMin"]
                .as_array()
                .unwrap()
                .iter()
                .map(|y| y.as_f64().unwrap() as i64)
                .collect();
            assert_eq!(y_min, buckets.iter().map(|b| b.0).collect::<Vec<_>>());
            let counts: Vec<i64> = slot["counts"].as_array().unwrap().iter().map(int).collect();
            let mut want_counts = vec![0i64; Y_BUCKETS];
            let mut best: Vec<Option<&Expected>> = vec![None; Y_BUCKETS];
            for e in list {
                let y = y_index(e.value, &buckets);
                want_counts[y] += 1;
                best[y].get_or_insert(e);
            }
            assert_eq!(counts, want_counts, "{group:?} at {bucket}");
            counted += counts.iter().sum::<i64>();
            let got: Vec<Expected> = slot["exemplars"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| decode_exemplar(e, kind))
                .collect();
            let want_best: Vec<Expected> = best.into_iter().flatten().cloned().collect();
            assert_eq!(got, want_best, "the largest of each cell, {group:?} at {bucket}");
        }
    }
    let total: usize = want.values().flat_map(|b| b.values().map(Vec::len)).sum();
    assert_eq!(
        counted as usize, total,
        "every profile (span) counted once per slot"
    );
}

#[test]
fn select_heatmap_counts_profiles_and_spans_per_slot() {
    let (server, obs) = loaded();
    let answers = call_all(
        &server.http(),
        &[
            rpc(
                &format!("{Q}/SelectHeatmap"),
                true,
                request(
                    json!({"queryType": "HEATMAP_QUERY_TYPE_INDIVIDUAL", "exemplarType": "EXEMPLAR_TYPE_INDIVIDUAL"}),
                ),
            ),
            rpc(
                &format!("{Q}/SelectHeatmap"),
                false,
                request(json!({
                    "queryType": "HEATMAP_QUERY_TYPE_SPAN",
                    "exemplarType": "EXEMPLAR_TYPE_SPAN",
                    "groupBy": ["service_name"],
                })),
            ),
            rpc(
                &format!("{Q}/SelectHeatmap"),
                false,
                request(json!({
                    "queryType": "HEATMAP_QUERY_TYPE_INDIVIDUAL",
                    "exemplarType": "EXEMPLAR_TYPE_NONE",
                    "groupBy": ["service_name"],
                    "limit": 1,
                })),
            ),
        ],
    );
    check_heatmap(
        response(&answers[0]),
        Kind::Profile,
        &expected(obs, Kind::Profile, &[]),
    );
    check_heatmap(
        response(&answers[1]),
        Kind::Span,
        &expected(obs, Kind::Span, &["service.name"]),
    );
    // limit: the service with the largest total; no exemplars unless asked.
    let by_service = expected(obs, Kind::Profile, &["service.name"]);
    let (top, _) = by_service
        .iter()
        .map(|(g, b)| (g, b.values().flatten().map(|e| e.value).sum::<i64>()))
        .max_by_key(|(_, total)| *total)
        .unwrap();
    let limited = response(&answers[2])["series"].as_array().unwrap();
    assert_eq!(limited.len(), 1);
    assert_eq!(&labels_of(&limited[0]), top);
    for slot in limited[0]["slots"].as_array().unwrap() {
        assert!(slot.get("exemplars").is_none(), "{slot}");
    }
}

#[test]
fn exemplar_links_open_exactly_that_profile_or_span() {
    let (server, obs) = loaded();
    let series = call_all(
        &server.http(),
        &[
            rpc(
                &format!("{Q}/SelectSeries"),
                false,
                request(json!({"exemplarType": "EXEMPLAR_TYPE_INDIVIDUAL"})),
            ),
            rpc(
                &format!("{Q}/SelectSeries"),
                true,
                request(json!({"exemplarType": "EXEMPLAR_TYPE_SPAN"})),
            ),
        ],
    );
    let exemplar_ids = |answer: &Value, field: &str| -> Vec<String> {
        response(answer)["series"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|s| s["points"].as_array().unwrap())
            .flat_map(|p| p["exemplars"].as_array().unwrap())
            .map(|e| e[field].as_str().unwrap().to_string())
            .collect()
    };
    let profiles = exemplar_ids(&series[0], "profileId");
    let spans = exemplar_ids(&series[1], "spanId");
    assert!(profiles.len() >= 3 && spans.len() >= 3);
    let mut calls = Vec::new();
    for (i, p) in profiles.iter().enumerate() {
        calls.push(rpc(
            &format!("{Q}/SelectMergeStacktraces"),
            i % 2 == 0,
            select(json!({"profileIdSelector": [p]})),
        ));
    }
    for (i, s) in spans.iter().enumerate() {
        calls.push(rpc(
            &format!("{Q}/SelectMergeStacktraces"),
            i % 2 == 1,
            select(json!({"spanSelector": [s]})),
        ));
    }
    let answers = call_all(&server.http(), &calls);
    let total = |keep: &dyn Fn(&Obs) -> bool| obs.iter().filter(|o| keep(o)).map(|o| o.value).sum::<i64>();
    let want: Vec<i64> = profiles
        .iter()
        .map(|p| total(&|o| o.profile_id.as_deref().map(uuid).as_deref() == Some(p.as_str())))
        .chain(
            spans
                .iter()
                .map(|s| total(&|o| o.span_id.as_deref() == Some(s.as_str()))),
        )
        .collect();
    assert!(want.iter().all(|&t| t > 0));
    let got: Vec<i64> = answers
        .iter()
        .map(|a| {
            let flamegraph = &response(a)["flamegraph"];
            let (levels, names) = levels_of(flamegraph);
            let tree = levels_to_tree(&levels, &names).expect("a flame graph");
            grafana::assert_consistent(&tree);
            tree.value
        })
        .collect();
    assert_eq!(
        got, want,
        "each link opens exactly its profile's or span's samples"
    );
}

#[test]
fn heatmap_requests_are_validated_as_select_series() {
    let (server, _) = loaded();
    let answers = call_all(
        &server.http(),
        &[
            rpc(
                &format!("{Q}/SelectHeatmap"),
                true,
                select(json!({"step": 0.0001, "queryType": "HEATMAP_QUERY_TYPE_INDIVIDUAL"})),
            ),
            rpc(
                &format!("{Q}/SelectSeries"),
                true,
                select(json!({"step": 0.0001})),
            ),
            rpc(
                &format!("{Q}/SelectHeatmap"),
                false,
                request(json!({"queryType": 7})),
            ),
            rpc(&format!("{Q}/SelectHeatmap"), true, request(json!({"limit": -1}))),
        ],
    );
    for (i, a) in answers.iter().enumerate() {
        assert_eq!(a["error"]["code"], "invalid_argument", "call {i}: {a}");
    }
    assert_eq!(answers[0]["error"]["message"], answers[1]["error"]["message"]);
}

#[test]
fn exemplars_count_only_the_stacks_the_selector_keeps() {
    let (server, obs) = loaded();
    let selector = json!({"callSite": [{"name": "main"}, {"name": "handle"}]});
    let answers = call_all(
        &server.http(),
        &[rpc(
            &format!("{Q}/SelectSeries"),
            true,
            request(json!({"exemplarType": "EXEMPLAR_TYPE_INDIVIDUAL", "stackTraceSelector": selector})),
        )],
    );
    let kept: Vec<Obs> = obs
        .iter()
        .filter(|o| o.frames.starts_with(&["main".to_string(), "handle".to_string()]))
        .cloned()
        .collect();
    assert!(kept.len() < obs.len() && !kept.is_empty());
    check_series_exemplars(
        response(&answers[0]),
        Kind::Profile,
        &expected(&kept, Kind::Profile, &[]),
    );
}
