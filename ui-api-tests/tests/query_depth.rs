//! Every query endpoint against the real binary, on a deterministic workload whose
//! expected answers are computed from its plain description (`ui_api_tests::workload`).
//!
//! One server, started and loaded by the first test that runs, serves every test of this
//! file; each check is its own test (`cargo test --test query_depth <name>` runs one).

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceResponse;
use opentelemetry_proto::tonic::collector::profiles::v1development::profiles_service_client::ProfilesServiceClient;
use prost::Message;
use serde_json::Value;
use ui_api_tests::client::{Api, gzip};
use ui_api_tests::http_query::{Http, Params, params, with};
use ui_api_tests::pprof_reader;
use ui_api_tests::server::{Options, Server};
use ui_api_tests::trees::{
    Path, decode_flamebearer, flamebearer_folded, json_diff_values, json_folded, json_node_values,
    parse_folded, parse_folded_diff,
};
use ui_api_tests::workload::{
    CPU, FROM, LINKS, MANGLED_ONLY, OFF_CPU, Obs, SECOND, T0, TO, TRACES, Workload, buckets, folded,
    node_values, top, total,
};

const TYPES: [&str; 2] = [CPU, OFF_CPU];

/// Which observations a query should select.
type Keep = Box<dyn Fn(&Obs) -> bool + Send + Sync>;

/// The server every test of this file queries, loaded with the workload once.
struct Loaded {
    server: Server,
    workload: Workload,
    obs: Vec<Obs>,
}

/// What one test works with: its own client (clients belong to their test's runtime) and
/// the shared server's data.
struct Ctx {
    http: Http,
    workload: &'static Workload,
    obs: &'static [Obs],
}

async fn ctx() -> Ctx {
    static LOADED: OnceLock<Loaded> = OnceLock::new();
    let loaded = ui_api_tests::shared(&LOADED, || async {
        let server = Server::start_for_process(Options::default()).await;
        let workload = Workload::new();
        ingest(&server, &workload).await;
        let obs = workload.observations();
        assert!(obs.len() > 150, "the workload has {} observations", obs.len());
        Loaded {
            server,
            workload,
            obs,
        }
    });
    Ctx {
        http: Http::new(loaded.server.http()),
        workload: &loaded.workload,
        obs: &loaded.obs,
    }
}

impl Ctx {
    fn of_type(&self, ty: &str) -> Vec<&Obs> {
        self.obs.iter().filter(|o| o.profile_type == ty).collect()
    }
}

fn empty_stack_total(obs: &[&Obs]) -> i64 {
    obs.iter().filter(|o| o.frames.is_empty()).map(|o| o.value).sum()
}

/// The tree the JSON flamegraph must hold: `(self, total)` per path, root included.
fn expected_tree(obs: &[&Obs]) -> BTreeMap<Path, (i64, i64)> {
    node_values(&folded(obs.iter().copied()), empty_stack_total(obs))
}

/// Group name → observations, as `group_by` keys name the first level.
fn groups<'a>(obs: &[&'a Obs], keys: &[&str]) -> BTreeMap<String, Vec<&'a Obs>> {
    let mut out: BTreeMap<String, Vec<&Obs>> = BTreeMap::new();
    for o in obs {
        out.entry(o.group_name(keys)).or_default().push(o);
    }
    out
}

fn child<'a>(node: &'a Value, name: &str) -> &'a Value {
    node["children"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no child {name:?} under {}", node["name"]))
}

fn child_names(node: &Value) -> BTreeSet<String> {
    node["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect()
}

/// Checks a grouped flamegraph: the first level is exactly the expected groups, each
/// group's total and subtree paths are exact.
fn assert_groups(json: &Value, obs: &[&Obs], keys: &[&str], what: &str) {
    let expected = groups(obs, keys);
    assert_eq!(
        child_names(&json["root"]),
        expected.keys().cloned().collect::<BTreeSet<_>>(),
        "{what}: group nodes"
    );
    assert_eq!(
        json["total"].as_i64(),
        Some(total(obs.iter().copied())),
        "{what}: total"
    );
    json_node_values(&json["root"]);
    for (name, members) in &expected {
        let node = child(&json["root"], name);
        assert_eq!(
            node["total"].as_i64(),
            Some(total(members.iter().copied())),
            "{what}: total of {name}"
        );
        assert_eq!(
            node["self"].as_i64(),
            Some(empty_stack_total(members)),
            "{what}: self of {name} (samples without frames)"
        );
        assert_eq!(
            json_folded(node),
            folded(members.iter().copied()),
            "{what}: paths under {name}"
        );
    }
    let listed: Vec<String> = json["group_by"]
        .as_array()
        .unwrap_or_else(|| panic!("{what}: group_by missing in {json}"))
        .iter()
        .map(|k| k.as_str().unwrap().to_string())
        .collect();
    assert_eq!(listed, keys, "{what}: group_by echoed");
}

fn assert_type_info(json: &Value, ty: &str, what: &str) {
    let parts: Vec<&str> = ty.split(':').collect();
    assert_eq!(json["profile_type"], ty, "{what}: profile_type");
    assert_eq!(json["sample_type"], parts[0], "{what}: sample_type");
    assert_eq!(json["sample_unit"], parts[1], "{what}: sample_unit");
    assert_eq!(json["period_type"], parts[2], "{what}: period_type");
    assert_eq!(json["period_unit"], parts[3], "{what}: period_unit");
    assert_eq!(json["unit"], parts[1], "{what}: unit");
}

async fn ingest(server: &Server, workload: &Workload) {
    let api = Api::new(server.http());
    for (i, req) in workload.requests().into_iter().enumerate() {
        let response = match i % 3 {
            0 => {
                let (status, _, body) = api
                    .post_otlp("application/x-protobuf", false, req.encode_to_vec())
                    .await;
                assert_eq!(status, 200, "OTLP/HTTP: {}", String::from_utf8_lossy(&body));
                ExportProfilesServiceResponse::decode(&body[..]).unwrap()
            }
            1 => {
                let mut client = ProfilesServiceClient::connect(server.grpc()).await.unwrap();
                client.export(req).await.expect("gRPC export").into_inner()
            }
            _ => {
                let (status, _, body) = api
                    .post_otlp("application/x-protobuf", true, gzip(&req.encode_to_vec()))
                    .await;
                assert_eq!(status, 200, "OTLP/HTTP gzip: {}", String::from_utf8_lossy(&body));
                ExportProfilesServiceResponse::decode(&body[..]).unwrap()
            }
        };
        assert!(
            response
                .partial_success
                .as_ref()
                .is_none_or(|p| p.rejected_profiles == 0),
            "request {i}: nothing rejected: {response:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn whole_flamegraphs() {
    let ctx = &ctx().await;
    for ty in TYPES {
        let obs = ctx.of_type(ty);
        let json = ctx.http.json("/api/v1/flamegraph", &params(ty, FROM, TO)).await;
        assert_type_info(&json, ty, ty);
        let period = if ty == CPU { 10_000_000 } else { 0 };
        assert_eq!(json["period"], period, "{ty}: period");
        assert_eq!(
            json["total"].as_i64(),
            Some(total(obs.iter().copied())),
            "{ty}: total"
        );
        assert_eq!(json["root"]["name"], "total");
        assert_eq!(json_node_values(&json["root"]), expected_tree(&obs), "{ty}: tree");
        let text = ctx
            .http
            .text(
                "/api/v1/flamegraph",
                &with(params(ty, FROM, TO), &[("format", "folded")]),
            )
            .await;
        assert_eq!(parse_folded(&text), folded(obs.iter().copied()), "{ty}: folded");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn trace_flamegraphs() {
    let ctx = &ctx().await;
    let cpu = ctx.of_type(CPU);
    for trace in TRACES {
        let linked: Vec<&Obs> = cpu
            .iter()
            .copied()
            .filter(|o| o.trace_id.as_deref() == Some(trace))
            .collect();
        assert!(!linked.is_empty(), "workload links samples to {trace}");
        let path = format!("/api/v1/traces/{trace}/flamegraph");
        let json = ctx.http.json(&path, &params(CPU, FROM, TO)).await;
        assert_eq!(
            json_node_values(&json["root"]),
            expected_tree(&linked),
            "trace {trace}"
        );
        let text = ctx
            .http
            .text(&path, &with(params(CPU, FROM, TO), &[("format", "folded")]))
            .await;
        assert_eq!(
            parse_folded(&text),
            folded(linked.iter().copied()),
            "trace {trace} folded"
        );

        let resp = ctx
            .http
            .get(&path, &with(params(CPU, FROM, TO), &[("format", "pprof")]))
            .await
            .ok();
        let mut per_stack: BTreeMap<String, i64> = BTreeMap::new();
        for s in pprof_reader::decode(&resp.body).samples {
            *per_stack.entry(s.frames.join(";")).or_default() += s.values[0];
        }
        assert_eq!(per_stack, folded(linked.iter().copied()), "trace {trace} pprof");

        let json = ctx
            .http
            .json(&path, &with(params(CPU, FROM, TO), &[("group_by", "span_id")]))
            .await;
        assert_groups(&json, &linked, &["span_id"], &format!("trace {trace} by span"));
        let spans: BTreeSet<&str> = LINKS
            .iter()
            .filter(|(t, _)| TRACES[*t] == trace)
            .map(|(_, s)| *s)
            .collect();
        let named: BTreeSet<String> = spans.iter().map(|s| format!("span_id={s}")).collect();
        let got = child_names(&json["root"]);
        assert!(
            got.is_subset(&named),
            "trace {trace}: spans {got:?} not all of {named:?}"
        );

        // The selector still applies inside a trace.
        let payments: Vec<&Obs> = linked
            .iter()
            .copied()
            .filter(|o| o.attr("service.name") == Some("payments"))
            .collect();
        let text = ctx
            .http
            .text(
                &path,
                &with(
                    params(CPU, FROM, TO),
                    &[("format", "folded"), ("selector", r#"{service.name="payments"}"#)],
                ),
            )
            .await;
        assert_eq!(
            parse_folded(&text),
            folded(payments.iter().copied()),
            "trace {trace} with a selector"
        );
    }
    // A well-formed trace id nothing links to: an empty flamegraph, not an error.
    let json = ctx
        .http
        .json(
            "/api/v1/traces/0123456789abcdef0123456789abcdef/flamegraph",
            &params(CPU, FROM, TO),
        )
        .await;
    assert_eq!(json["total"], 0, "unknown trace");
}

#[tokio::test(flavor = "multi_thread")]
async fn trace_span_and_profile_filters() {
    let ctx = &ctx().await;
    let cpu = ctx.of_type(CPU);
    let check = |query: Params, keep: Keep, what: String| {
        let expected = folded(cpu.iter().copied().filter(|o| keep(o)));
        let expected_total = total(cpu.iter().copied().filter(|o| keep(o)));
        let http = &ctx.http;
        async move {
            let folded_query = with(query.clone(), &[("format", "folded")]);
            assert_eq!(
                parse_folded(&http.text("/api/v1/flamegraph", &folded_query).await),
                expected,
                "{what}"
            );
            let json = http.json("/api/v1/flamegraph", &query).await;
            assert_eq!(json["total"].as_i64(), Some(expected_total), "{what}: total");
        }
    };
    let (t0, t1, t2) = (TRACES[0], TRACES[1], TRACES[2]);
    let has_trace = |ids: Vec<&'static str>| {
        Box::new(move |o: &Obs| o.trace_id.as_deref().is_some_and(|t| ids.contains(&t))) as Keep
    };
    check(
        with(params(CPU, FROM, TO), &[("trace_id", t0)]),
        has_trace(vec![t0]),
        "trace_id=one".into(),
    )
    .await;
    check(
        with(params(CPU, FROM, TO), &[("trace_id", &format!("{t0},{t2}"))]),
        has_trace(vec![t0, t2]),
        "trace_id=a,b".into(),
    )
    .await;
    check(
        with(params(CPU, FROM, TO), &[("trace_id", t1), ("trace_id", t2)]),
        has_trace(vec![t1, t2]),
        "trace_id repeated".into(),
    )
    .await;
    let (s0, s3, s4) = (LINKS[0].1, LINKS[3].1, LINKS[4].1);
    let has_span = |ids: Vec<&'static str>| {
        Box::new(move |o: &Obs| o.span_id.as_deref().is_some_and(|s| ids.contains(&s))) as Keep
    };
    check(
        with(params(CPU, FROM, TO), &[("span_id", s3)]),
        has_span(vec![s3]),
        "span_id=one".into(),
    )
    .await;
    check(
        with(params(CPU, FROM, TO), &[("span_id", &format!("{s0},{s4}"))]),
        has_span(vec![s0, s4]),
        "span_id=a,b".into(),
    )
    .await;
    // Trace and span filters together: both must hold.
    check(
        with(params(CPU, FROM, TO), &[("trace_id", t1), ("span_id", s4)]),
        has_span(vec![s4]),
        "trace_id and its span".into(),
    )
    .await;
    check(
        with(params(CPU, FROM, TO), &[("trace_id", t0), ("span_id", s4)]),
        Box::new(|_| false),
        "trace_id and another trace's span".into(),
    )
    .await;
    // Profile ids, with a time cut that keeps only part of the first profile.
    let ids: Vec<String> = ctx
        .workload
        .profiles
        .iter()
        .filter(|p| p.profile_type == CPU)
        .filter_map(|p| p.profile_id.clone())
        .take(2)
        .collect();
    let (a, b) = (ids[0].clone(), ids[1].clone());
    let keep_ids = move |o: &Obs| o.profile_id.as_deref().is_some_and(|p| p == a || p == b);
    check(
        with(
            params(CPU, FROM, TO),
            &[("profile_id", &format!("{},{}", ids[0], ids[1]))],
        ),
        Box::new(keep_ids.clone()),
        "profile_id=a,b".into(),
    )
    .await;
    let cut = T0 + 30 * SECOND;
    check(
        with(
            params(CPU, cut, TO),
            &[("profile_id", &ids[0]), ("profile_id", &ids[1])],
        ),
        Box::new(move |o: &Obs| keep_ids(o) && o.time >= cut),
        "profile_id repeated, from a cut".into(),
    )
    .await;
    // Upper-case hex names the same trace.
    check(
        with(params(CPU, FROM, TO), &[("trace_id", &t0.to_uppercase())]),
        has_trace(vec![t0]),
        "trace_id in upper case".into(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn single_profiles() {
    let ctx = &ctx().await;
    let mut checked = 0;
    for (i, p) in ctx.workload.profiles.iter().enumerate() {
        let Some(id) = &p.profile_id else { continue };
        // The first profiles of each kind (with and without sample timestamps, both types)
        // and every fifth one: enough variety, fewer requests.
        let untimed = p.samples.iter().all(|s| s.time.is_none());
        if !(i < 4 || untimed || i % 5 == 0) {
            continue;
        }
        checked += 1;
        let obs: Vec<&Obs> = ctx.obs.iter().filter(|o| o.profile == i).collect();
        let path = format!("/api/v1/profiles/{id}");
        let json = ctx.http.json(&path, &Vec::new()).await;
        let what = format!("profile {id}");
        assert_eq!(json["profile_id"], id.as_str(), "{what}: id");
        assert_eq!(json["profile_type"], p.profile_type, "{what}: type");
        assert_eq!(json["start"].as_i64(), Some(p.time), "{what}: start");
        assert_eq!(json["end"].as_i64(), Some(p.time + p.duration), "{what}: end");
        assert_eq!(
            json["duration_nanos"].as_i64(),
            Some(p.duration),
            "{what}: duration"
        );
        assert_eq!(
            json["sample_count"].as_i64(),
            Some(obs.len() as i64),
            "{what}: sample_count"
        );
        let map = |pairs: &[(String, String)]| -> Value {
            Value::Object(
                pairs
                    .iter()
                    .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                    .collect(),
            )
        };
        let mut labels = p.resource.clone();
        labels.extend(p.attrs.iter().cloned());
        assert_eq!(json["labels"], map(&labels), "{what}: labels");
        assert_eq!(json["resource"], map(&p.resource), "{what}: resource");
        assert_eq!(json["attributes"], map(&p.attrs), "{what}: attributes");
        let fg = &json["flamegraph"];
        assert_type_info(fg, p.profile_type, &what);
        assert_eq!(
            fg["total"].as_i64(),
            Some(total(obs.iter().copied())),
            "{what}: total"
        );
        assert_eq!(json_node_values(&fg["root"]), expected_tree(&obs), "{what}: tree");

        let text = ctx
            .http
            .text(&path, &vec![("format".into(), "folded".into())])
            .await;
        assert_eq!(parse_folded(&text), folded(obs.iter().copied()), "{what}: folded");
        let json = ctx
            .http
            .json(&path, &vec![("profile_type".into(), p.profile_type.into())])
            .await;
        assert_eq!(json["profile_id"], id.as_str(), "{what}: with its profile_type");
    }
    assert!(checked >= 6, "checked {checked} profiles");

    let unknown = "00000000000000000000000000000bad";
    let resp = ctx
        .http
        .get(&format!("/api/v1/profiles/{unknown}"), &Vec::new())
        .await;
    assert_eq!(resp.status, 404, "unknown profile: {}", resp.text());
    assert!(
        resp.error().contains(unknown),
        "404 names the id: {}",
        resp.error()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn flamegraph_group_by() {
    let ctx = &ctx().await;
    for ty in TYPES {
        let obs = ctx.of_type(ty);
        for keys in [
            vec!["thread.name"],
            vec!["thread.name", "service.name"],
            vec!["host.name"],
            vec!["span_id"],
            vec!["trace_id", "thread.id"],
            vec!["profile_id"],
        ] {
            let q = with(params(ty, FROM, TO), &[("group_by", &keys.join(","))]);
            let json = ctx.http.json("/api/v1/flamegraph", &q).await;
            assert_groups(&json, &obs, &keys, &format!("{ty} by {keys:?}"));
        }
    }
    // Grouping and a time cut together.
    let cut = T0 + 150 * SECOND;
    let cpu: Vec<&Obs> = ctx.of_type(CPU).into_iter().filter(|o| o.time >= cut).collect();
    let q = with(params(CPU, cut, TO), &[("group_by", "thread.name")]);
    let json = ctx.http.json("/api/v1/flamegraph", &q).await;
    assert_groups(&json, &cpu, &["thread.name"], "cpu by thread from a cut");
}

/// Checks one time series answer against the observations.
/// What a time series query asked for.
struct Buckets<'a> {
    from: i64,
    to: i64,
    step: i64,
    keys: &'a [&'a str],
    avg: bool,
}

fn assert_timeseries(json: &Value, obs: &[&Obs], q: &Buckets<'_>, what: &str) {
    let Buckets {
        from,
        to,
        step,
        keys,
        avg,
    } = *q;
    // The first bucket starts on the step's grid, at or before the range.
    assert_eq!(
        json["from"].as_i64(),
        Some(from.div_euclid(step) * step),
        "{what}: from"
    );
    assert_eq!(json["to"].as_i64(), Some(to), "{what}: to");
    assert_eq!(json["step_nanos"].as_i64(), Some(step), "{what}: step_nanos");
    assert_eq!(
        json["aggregation"],
        if avg { "avg" } else { "sum" },
        "{what}: aggregation"
    );
    let listed: Vec<&str> = json["group_by"]
        .as_array()
        .unwrap_or_else(|| panic!("{what}: group_by missing"))
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect();
    assert_eq!(listed, keys, "{what}: group_by");

    let in_range: Vec<&Obs> = obs
        .iter()
        .copied()
        .filter(|o| o.time >= from && o.time < to)
        .collect();
    let mut expected: BTreeMap<BTreeMap<String, String>, Vec<&Obs>> = BTreeMap::new();
    for o in &in_range {
        let group = keys.iter().map(|k| (k.to_string(), o.group_value(k))).collect();
        expected.entry(group).or_default().push(o);
    }
    let series = json["series"].as_array().unwrap();
    let mut got: BTreeMap<BTreeMap<String, String>, &Value> = BTreeMap::new();
    for s in series {
        let group: BTreeMap<String, String> = s["group"]
            .as_object()
            .unwrap_or_else(|| panic!("{what}: series without group: {s}"))
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
            .collect();
        assert!(
            got.insert(group.clone(), s).is_none(),
            "{what}: group {group:?} twice"
        );
    }
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>(),
        "{what}: groups"
    );
    for (group, members) in &expected {
        let s = got[group];
        let want = buckets(members.iter().copied(), from, step);
        let points: Vec<(i64, f64)> = s["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p[0].as_i64().unwrap(), p[1].as_f64().unwrap()))
            .collect();
        let times: Vec<i64> = points.iter().map(|p| p.0).collect();
        assert_eq!(
            times,
            want.keys().copied().collect::<Vec<_>>(),
            "{what} {group:?}: bucket starts"
        );
        for ((t, value), (sum, mean)) in points.iter().zip(want.values()) {
            if avg {
                assert!(
                    (value - mean).abs() <= 1e-9 * mean.abs().max(1.0),
                    "{what} {group:?} at {t}: avg {value}, expected {mean}"
                );
            } else {
                assert_eq!(*value, *sum as f64, "{what} {group:?} at {t}: sum");
            }
        }
        assert_eq!(
            s["total"].as_i64(),
            Some(total(members.iter().copied())),
            "{what} {group:?}: total"
        );
    }
    // Largest total first, then by group.
    let order: Vec<(i64, Vec<(String, String)>)> = series
        .iter()
        .map(|s| {
            let group = s["group"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                .collect();
            (-s["total"].as_i64().unwrap(), group)
        })
        .collect();
    let mut sorted = order.clone();
    sorted.sort();
    assert_eq!(order, sorted, "{what}: series order");
}

#[tokio::test(flavor = "multi_thread")]
async fn timeseries_buckets() {
    let ctx = &ctx().await;
    let resource0 = r#"{service.name="checkout",host.name="host-a"}"#;
    // (type, selector, from, to, step parameter, step in ns)
    let cases: Vec<(&str, &str, i64, i64, &str, i64)> = vec![
        // Profiles of resources 1 and 2 start 7 and 14 s past the minute: 60 s buckets from T0
        // cut them; the timestamped ones spread over two buckets.
        (CPU, "{}", T0, T0 + 300 * SECOND, "60", 60 * SECOND),
        (CPU, "{}", T0, T0 + 300 * SECOND, "1m", 60 * SECOND),
        (CPU, "{}", FROM, TO, "45s", 45 * SECOND),
        (CPU, "{}", T0 + 10 * SECOND, T0 + 40 * SECOND, "0.5", SECOND / 2),
        (CPU, "{}", T0 + 33 * SECOND, T0 + 200 * SECOND, "15", 15 * SECOND),
        // Resource 0's profiles start on the minute and last 60 s: aligned to 60 s buckets.
        (CPU, resource0, T0, T0 + 300 * SECOND, "60s", 60 * SECOND),
        (CPU, resource0, T0, T0 + 300 * SECOND, "300", 300 * SECOND),
        // Samples without timestamps sit at their profile's time.
        (OFF_CPU, "{}", T0, T0 + 300 * SECOND, "60", 60 * SECOND),
        (OFF_CPU, "{}", FROM, TO, "90s", 90 * SECOND),
    ];
    for (ty, selector, from, to, step_param, step) in cases {
        let obs: Vec<&Obs> = ctx
            .of_type(ty)
            .into_iter()
            .filter(|o| {
                selector == "{}"
                    || (o.attr("service.name") == Some("checkout") && o.attr("host.name") == Some("host-a"))
            })
            .collect();
        for keys in [vec![], vec!["thread.name"], vec!["service.name", "thread.name"]] {
            for aggregation in ["sum", "avg"] {
                let q = with(
                    params(ty, from, to),
                    &[
                        ("selector", selector),
                        ("step", step_param),
                        ("aggregation", aggregation),
                        ("group_by", &keys.join(",")),
                    ],
                );
                let json = ctx.http.json("/api/v1/timeseries", &q).await;
                let what =
                    format!("{ty} {selector} [{from}, {to}) step {step_param} {aggregation} by {keys:?}");
                assert_type_info(&json, ty, &what);
                let q = Buckets {
                    from,
                    to,
                    step,
                    keys: &keys,
                    avg: aggregation == "avg",
                };
                assert_timeseries(&json, &obs, &q, &what);
            }
        }
    }
    // Without aggregation the default is sum.
    let json = ctx
        .http
        .json(
            "/api/v1/timeseries",
            &with(params(CPU, T0, T0 + 300 * SECOND), &[("step", "60")]),
        )
        .await;
    let q = Buckets {
        from: T0,
        to: T0 + 300 * SECOND,
        step: 60 * SECOND,
        keys: &[],
        avg: false,
    };
    assert_timeseries(&json, &ctx.of_type(CPU), &q, "default aggregation");
    // The cutting case must really cut a profile: some timestamped profile spreads over
    // two 60 s buckets from T0.
    let cut = ctx.workload.profiles.iter().any(|p| {
        let buckets: BTreeSet<i64> = p
            .samples
            .iter()
            .filter_map(|s| s.time)
            .map(|t| (t - T0).div_euclid(60 * SECOND))
            .collect();
        buckets.len() > 1
    });
    assert!(cut, "the workload has a profile across a bucket boundary");
}

#[tokio::test(flavor = "multi_thread")]
async fn top_functions() {
    let ctx = &ctx().await;
    for ty in TYPES {
        for (selector, from, to) in [
            ("{}", FROM, TO),
            (r#"{thread.name="main"}"#, T0 + 60 * SECOND, TO),
        ] {
            let obs: Vec<&Obs> = ctx
                .of_type(ty)
                .into_iter()
                .filter(|o| o.time >= from && o.time < to)
                .filter(|o| selector == "{}" || o.attr("thread.name") == Some("main"))
                .collect();
            let mut expected: Vec<(String, i64, i64)> = top(obs.iter().copied())
                .into_iter()
                .map(|(n, (s, t))| (n, s, t))
                .collect();
            expected.sort_by(|a, b| b.1.cmp(&a.1).then(b.2.cmp(&a.2)).then(a.0.cmp(&b.0)));
            let what = format!("top {ty} {selector}");
            let json = ctx
                .http
                .json(
                    "/api/v1/top",
                    &with(params(ty, from, to), &[("selector", selector), ("limit", "100")]),
                )
                .await;
            assert_type_info(&json, ty, &what);
            assert_eq!(
                json["total"].as_i64(),
                Some(total(obs.iter().copied())),
                "{what}: total"
            );
            let got: Vec<(String, i64, i64)> = json["functions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| {
                    (
                        f["name"].as_str().unwrap().to_string(),
                        f["self"].as_i64().unwrap(),
                        f["total"].as_i64().unwrap(),
                    )
                })
                .collect();
            assert_eq!(got, expected, "{what}");
            if ty == CPU {
                let recurse = got.iter().find(|f| f.0 == "recurse").expect("recurse listed");
                let with_recurse = total(
                    obs.iter()
                        .copied()
                        .filter(|o| o.frames.iter().any(|f| f == "recurse")),
                );
                assert_eq!(recurse.2, with_recurse, "{what}: recursion counted once");
            }
            let json = ctx
                .http
                .json(
                    "/api/v1/top",
                    &with(params(ty, from, to), &[("selector", selector), ("limit", "3")]),
                )
                .await;
            let names: Vec<&str> = json["functions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f["name"].as_str().unwrap())
                .collect();
            let first: Vec<&str> = expected.iter().take(3).map(|f| f.0.as_str()).collect();
            assert_eq!(names, first, "{what}: limit 3");
        }
    }
}

/// `path → [baseline self, baseline total, comparison self, comparison total]`.
fn expected_diff(base: &[&Obs], comp: &[&Obs]) -> BTreeMap<Path, [i64; 4]> {
    let (b, c) = (expected_tree(base), expected_tree(comp));
    let mut out = BTreeMap::new();
    for path in b.keys().chain(c.keys()) {
        let (bs, bt) = b.get(path).copied().unwrap_or_default();
        let (cs, ct) = c.get(path).copied().unwrap_or_default();
        out.insert(path.clone(), [bs, bt, cs, ct]);
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn diff_selectors_and_windows() {
    let ctx = &ctx().await;
    let w = |t: i64| T0 + t * SECOND;
    // (type, baseline selector, from, to, comparison selector, from, to)
    let cases = [
        (
            CPU,
            r#"{service.name="checkout"}"#,
            FROM,
            TO,
            r#"{service.name="payments"}"#,
            FROM,
            TO,
        ),
        (CPU, "{}", w(0), w(100), "{}", w(100), w(300)),
        (
            OFF_CPU,
            r#"{thread.name="main"}"#,
            FROM,
            TO,
            r#"{thread.name!="main"}"#,
            w(120),
            TO,
        ),
    ];
    for (ty, bsel, bfrom, bto, csel, cfrom, cto) in cases {
        let what = format!("diff {ty} {bsel} [{bfrom},{bto}) vs {csel} [{cfrom},{cto})");
        let pick = |sel: &str, from: i64, to: i64| -> Vec<&Obs> {
            ctx.of_type(ty)
                .into_iter()
                .filter(|o| o.time >= from && o.time < to)
                .filter(|o| match sel {
                    "{}" => true,
                    r#"{service.name="checkout"}"# => o.attr("service.name") == Some("checkout"),
                    r#"{service.name="payments"}"# => o.attr("service.name") == Some("payments"),
                    r#"{thread.name="main"}"# => o.attr("thread.name") == Some("main"),
                    r#"{thread.name!="main"}"# => o.attr("thread.name") != Some("main"),
                    other => panic!("selector {other} not modelled"),
                })
                .collect()
        };
        let (base, comp) = (pick(bsel, bfrom, bto), pick(csel, cfrom, cto));
        assert!(
            !base.is_empty() && !comp.is_empty(),
            "{what}: both sides have data"
        );
        let q: Params = vec![
            ("profile_type".into(), ty.into()),
            ("baseline_selector".into(), bsel.into()),
            ("baseline_from".into(), bfrom.to_string()),
            ("baseline_to".into(), bto.to_string()),
            ("comparison_selector".into(), csel.into()),
            ("comparison_from".into(), cfrom.to_string()),
            ("comparison_to".into(), cto.to_string()),
        ];
        let expected = expected_diff(&base, &comp);

        let json = ctx.http.json("/api/v1/diff", &q).await;
        assert_type_info(&json, ty, &what);
        assert_eq!(json["root"]["name"], "total", "{what}: root");
        assert_eq!(
            json["baseline_total"].as_i64(),
            Some(total(base.iter().copied())),
            "{what}: baseline_total"
        );
        assert_eq!(
            json["comparison_total"].as_i64(),
            Some(total(comp.iter().copied())),
            "{what}: comparison_total"
        );
        assert_eq!(json_diff_values(&json["root"]), expected, "{what}: tree");

        // A node budget: kept nodes keep their exact values on both sides, the rest is
        // folded into `other` leaves.
        let json = ctx
            .http
            .json("/api/v1/diff", &with(q.clone(), &[("max_nodes", "4")]))
            .await;
        assert_eq!(json["max_nodes"], 4, "{what}: max_nodes echoed");
        let truncated = json_diff_values(&json["root"]);
        let kept = truncated
            .keys()
            .filter(|p| !p.iter().any(|f| f == "other"))
            .count();
        assert!(kept <= 4, "{what}: {kept} nodes kept, budget 4");
        assert!(truncated.len() > kept, "{what}: other nodes made");
        for (path, v) in &truncated {
            match path.iter().position(|f| f == "other") {
                None => assert_eq!(Some(v), expected.get(path), "{what}: kept node {path:?}"),
                Some(i) => {
                    assert_eq!(i, path.len() - 1, "{what}: other node {path:?} is a leaf");
                    assert_eq!(
                        (v[0], v[2]),
                        (v[1], v[3]),
                        "{what}: other node {path:?} self = total"
                    );
                }
            }
        }

        let text = ctx
            .http
            .text("/api/v1/diff", &with(q.clone(), &[("format", "folded")]))
            .await;
        let folded_expected: BTreeMap<String, (i64, i64)> = expected
            .iter()
            .filter(|(p, v)| !p.is_empty() && (v[0] != 0 || v[2] != 0))
            .map(|(p, v)| (p.join(";"), (v[0], v[2])))
            .collect();
        assert_eq!(parse_folded_diff(&text), folded_expected, "{what}: folded");

        let fb = ctx
            .http
            .json("/api/v1/diff", &with(q.clone(), &[("format", "flamebearer")]))
            .await;
        assert_eq!(fb["metadata"]["format"], "double", "{what}: flamebearer format");
        let decoded = decode_flamebearer(&fb);
        let from_fb: BTreeMap<Path, [i64; 4]> = decoded
            .into_iter()
            .map(|(p, v)| (p, [v[0][0], v[0][1], v[1][0], v[1][1]]))
            .collect();
        assert_eq!(from_fb, expected, "{what}: flamebearer");

        let resp = ctx
            .http
            .get("/api/v1/diff", &with(q.clone(), &[("format", "pprof")]))
            .await
            .ok();
        let pprof = pprof_reader::decode(&resp.body);
        let types: Vec<&str> = pprof.sample_types.iter().map(|t| t.0.as_str()).collect();
        assert_eq!(types, ["baseline", "comparison"], "{what}: pprof sample types");
        let mut per_path: BTreeMap<String, (i64, i64)> = BTreeMap::new();
        for s in &pprof.samples {
            let e = per_path.entry(s.frames.join(";")).or_default();
            e.0 += s.values[0];
            e.1 += s.values[1];
        }
        per_path.retain(|_, v| *v != (0, 0));
        let mut with_empty = folded_expected.clone();
        let root = expected[&Vec::new()];
        if root[0] != 0 || root[2] != 0 {
            with_empty.insert(String::new(), (root[0], root[2]));
        }
        assert_eq!(per_path, with_empty, "{what}: pprof per-stack values");
    }
}

/// What an event must say, as comparable text.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct EventView {
    timestamp: i64,
    value: i64,
    frames: Vec<String>,
    thread: Option<String>,
    attributes: BTreeMap<String, String>,
    labels: BTreeMap<String, String>,
    trace_id: Option<String>,
    span_id: Option<String>,
    profile_id: Option<String>,
}

fn expected_event(o: &Obs) -> EventView {
    EventView {
        timestamp: o.time,
        value: o.value,
        frames: o.frames.clone(),
        thread: o
            .sample_attrs
            .get("thread.name")
            .or_else(|| o.sample_attrs.get("thread.id"))
            .cloned(),
        attributes: o.sample_attrs.clone(),
        labels: o.labels.clone(),
        trace_id: o.trace_id.clone(),
        span_id: o.span_id.clone(),
        profile_id: o.profile_id.clone(),
    }
}

fn strings(v: &Value) -> BTreeMap<String, String> {
    v.as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .collect()
}

/// Follows `next_cursor` until it is absent; returns the events in the order served.
async fn all_events(ctx: &Ctx, query: &Params, limit: usize, expected_len: usize) -> Vec<EventView> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        pages += 1;
        assert!(
            pages <= expected_len / limit + 3,
            "too many pages ({pages}) for {expected_len} events"
        );
        let mut q = with(query.clone(), &[("limit", &limit.to_string())]);
        if let Some(c) = &cursor {
            q.push(("cursor".into(), c.clone()));
        }
        let page = ctx.http.json("/api/v1/events", &q).await;
        let events = page["events"].as_array().unwrap();
        assert!(
            events.len() <= limit,
            "page of {} events over limit {limit}",
            events.len()
        );
        for e in events {
            let stack_id = e["stack_id"].as_str().unwrap();
            let frames: Vec<String> = match page["stacks"].get(stack_id) {
                Some(f) => f
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_str().unwrap().to_string())
                    .collect(),
                None => {
                    assert!(
                        stack_id.chars().all(|c| c == '0'),
                        "stack {stack_id} missing from the page's stacks"
                    );
                    Vec::new()
                }
            };
            let series_id = e["series_id"].as_str().unwrap();
            let labels = strings(
                page["series"]
                    .get(series_id)
                    .unwrap_or_else(|| panic!("series {series_id} missing from the page")),
            );
            let id = |k: &str| e.get(k).and_then(Value::as_str).map(str::to_lowercase);
            out.push(EventView {
                timestamp: e["timestamp"].as_i64().unwrap(),
                value: e["value"].as_i64().unwrap(),
                frames,
                thread: e.get("thread").and_then(Value::as_str).map(str::to_string),
                attributes: strings(&e["attributes"]),
                labels,
                trace_id: id("trace_id"),
                span_id: id("span_id"),
                profile_id: id("profile_id"),
            });
        }
        match page.get("next_cursor").and_then(Value::as_str) {
            Some(c) => {
                assert!(!events.is_empty(), "an empty page with a next_cursor");
                cursor = Some(c.to_string());
            }
            None => return out,
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn events_paging() {
    let ctx = &ctx().await;
    let cases: Vec<(&str, Params, Keep, usize)> = vec![
        (CPU, params(CPU, FROM, TO), Box::new(|_| true), 7),
        (OFF_CPU, params(OFF_CPU, FROM, TO), Box::new(|_| true), 4),
        (
            CPU,
            params(CPU, T0 + 60 * SECOND, T0 + 190 * SECOND),
            Box::new(|o: &Obs| o.time >= T0 + 60 * SECOND && o.time < T0 + 190 * SECOND),
            13,
        ),
        (
            CPU,
            with(params(CPU, FROM, TO), &[("trace_id", TRACES[0])]),
            Box::new(|o: &Obs| o.trace_id.as_deref() == Some(TRACES[0])),
            5,
        ),
        (
            CPU,
            with(
                params(CPU, FROM, TO),
                &[("selector", r#"{thread.name="worker-1"}"#)],
            ),
            Box::new(|o: &Obs| o.attr("thread.name") == Some("worker-1")),
            1000,
        ),
    ];
    for (ty, query, keep, limit) in cases {
        let mut expected: Vec<EventView> = ctx
            .of_type(ty)
            .into_iter()
            .filter(|o| keep(o))
            .map(expected_event)
            .collect();
        let what = format!("events {query:?} limit {limit}");
        let got = all_events(ctx, &query, limit, expected.len()).await;
        assert!(
            got.windows(2).all(|w| w[0].timestamp <= w[1].timestamp),
            "{what}: time order"
        );
        let mut sorted = got.clone();
        sorted.sort();
        expected.sort();
        assert_eq!(sorted.len(), expected.len(), "{what}: count");
        assert_eq!(sorted, expected, "{what}: the union of the pages is the input");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn flamebearer_layout() {
    let ctx = &ctx().await;
    for ty in TYPES {
        for extra in [vec![], vec![("selector", r#"{host.name="host-a"}"#)]] {
            let obs: Vec<&Obs> = ctx
                .of_type(ty)
                .into_iter()
                .filter(|o| extra.is_empty() || o.attr("host.name") == Some("host-a"))
                .collect();
            let what = format!("flamebearer {ty} {extra:?}");
            let mut q = with(params(ty, FROM, TO), &extra);
            let json = ctx.http.json("/api/v1/flamegraph", &q).await;
            q.push(("format".into(), "flamebearer".into()));
            let fb = ctx.http.json("/api/v1/flamegraph", &q).await;
            assert_eq!(fb["metadata"]["format"], "single", "{what}: format");
            assert_eq!(
                fb["flamebearer"]["numTicks"].as_i64(),
                Some(total(obs.iter().copied())),
                "{what}: numTicks"
            );
            let decoded = decode_flamebearer(&fb);
            assert_eq!(
                flamebearer_folded(&decoded, 0),
                json_folded(&json["root"]),
                "{what}: = JSON"
            );
            let as_tree: BTreeMap<Path, (i64, i64)> = decoded
                .into_iter()
                .map(|(p, v)| (p, (v[0][0], v[0][1])))
                .collect();
            assert_eq!(as_tree, expected_tree(&obs), "{what}: tree");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn pprof_export() {
    let ctx = &ctx().await;
    for ty in TYPES {
        for extra in [vec![], vec![("selector", r#"{service.name="checkout"}"#)]] {
            let obs: Vec<&Obs> = ctx
                .of_type(ty)
                .into_iter()
                .filter(|o| extra.is_empty() || o.attr("service.name") == Some("checkout"))
                .collect();
            let what = format!("pprof {ty} {extra:?}");
            let q = with(params(ty, FROM, TO), &extra);
            let json = ctx.http.json("/api/v1/flamegraph", &q).await;
            let resp = ctx
                .http
                .get("/api/v1/flamegraph", &with(q.clone(), &[("format", "pprof")]))
                .await
                .ok();
            assert_eq!(
                resp.content_type, "application/octet-stream",
                "{what}: content type"
            );
            assert_eq!(resp.content_encoding, None, "{what}: no Content-Encoding");
            assert_eq!(&resp.body[..2], &[0x1f, 0x8b], "{what}: gzipped");
            let pprof = pprof_reader::decode(&resp.body);
            let parts: Vec<&str> = ty.split(':').collect();
            assert_eq!(
                pprof.sample_types,
                vec![(parts[0].to_string(), parts[1].to_string())],
                "{what}: sample types"
            );
            if !parts[2].is_empty() {
                assert_eq!(
                    pprof.period_type,
                    Some((parts[2].to_string(), parts[3].to_string())),
                    "{what}: period type"
                );
            }
            assert_eq!(pprof.period, json["period"].as_i64().unwrap(), "{what}: period");

            let mut per_stack: BTreeMap<String, i64> = BTreeMap::new();
            let mut per_labels: BTreeMap<(String, BTreeMap<String, String>), i64> = BTreeMap::new();
            for s in &pprof.samples {
                assert_eq!(s.values.len(), 1, "{what}: one value per sample");
                *per_stack.entry(s.frames.join(";")).or_default() += s.values[0];
                *per_labels
                    .entry((s.frames.join(";"), s.labels.clone()))
                    .or_default() += s.values[0];
            }
            let empty = per_stack.remove("").unwrap_or(0);
            per_stack.retain(|_, v| *v != 0);
            assert_eq!(
                per_stack,
                json_folded(&json["root"]),
                "{what}: per-stack = JSON paths"
            );
            assert_eq!(
                per_stack,
                folded(obs.iter().copied()),
                "{what}: per-stack = input"
            );
            assert_eq!(empty, empty_stack_total(&obs), "{what}: samples without frames");

            let mut expected_labels: BTreeMap<(String, BTreeMap<String, String>), i64> = BTreeMap::new();
            for o in &obs {
                let mut labels = o.labels.clone();
                labels.extend(o.sample_attrs.clone());
                *expected_labels.entry((o.frames.join(";"), labels)).or_default() += o.value;
            }
            per_labels.retain(|_, v| *v != 0);
            expected_labels.retain(|_, v| *v != 0);
            assert_eq!(per_labels, expected_labels, "{what}: values per stack and labels");
            assert!(
                pprof.samples.iter().any(|s| s.labels.contains_key("thread.name")),
                "{what}: thread.name labels"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_input() {
    let ctx = &ctx().await;
    let http = &ctx.http;
    // (path, query, status, words the message must contain)
    let bad_hex = "zz".repeat(16);
    let short = "abcdef";
    let cases: Vec<(String, Params, u16, Vec<&str>)> = vec![
        (
            "/api/v1/flamegraph".into(),
            with(params(CPU, FROM, TO), &[("trace_id", &bad_hex)]),
            400,
            vec!["trace_id", &bad_hex],
        ),
        (
            "/api/v1/flamegraph".into(),
            with(params(CPU, FROM, TO), &[("trace_id", short)]),
            400,
            vec!["trace_id", short],
        ),
        (
            "/api/v1/flamegraph".into(),
            with(
                params(CPU, FROM, TO),
                &[("trace_id", &format!("{},{short}", TRACES[0]))],
            ),
            400,
            vec!["trace_id", short],
        ),
        (
            "/api/v1/flamegraph".into(),
            with(params(CPU, FROM, TO), &[("span_id", TRACES[0])]),
            400,
            vec!["span_id", TRACES[0]],
        ),
        (
            "/api/v1/events".into(),
            with(params(CPU, FROM, TO), &[("profile_id", "nothex")]),
            400,
            vec!["profile_id", "nothex"],
        ),
        (
            "/api/v1/traces/nothex/flamegraph".into(),
            params(CPU, FROM, TO),
            400,
            vec!["nothex"],
        ),
        (
            format!("/api/v1/traces/{}/flamegraph", &TRACES[0][..30]),
            params(CPU, FROM, TO),
            400,
            vec![&TRACES[0][..30]],
        ),
        ("/api/v1/profiles/nothex".into(), Vec::new(), 400, vec!["nothex"]),
        (
            "/api/v1/flamegraph".into(),
            params("nope:count:cpu:nanoseconds", FROM, TO),
            400,
            vec!["nope:count:cpu:nanoseconds", CPU, OFF_CPU],
        ),
        (
            "/api/v1/top".into(),
            params("nope:count:cpu:nanoseconds", FROM, TO),
            400,
            vec!["nope:count:cpu:nanoseconds", CPU],
        ),
        (
            "/api/v1/timeseries".into(),
            with(params(CPU, FROM, TO), &[("step", "0.01")]),
            422,
            vec!["max_points"],
        ),
        (
            "/api/v1/timeseries".into(),
            with(params(CPU, FROM, TO), &[("step", "0")]),
            400,
            vec!["step"],
        ),
        (
            "/api/v1/timeseries".into(),
            with(params(CPU, FROM, TO), &[("step", "-5")]),
            400,
            vec!["step"],
        ),
        (
            "/api/v1/timeseries".into(),
            with(params(CPU, FROM, TO), &[("step", "-1m")]),
            400,
            vec!["step"],
        ),
        (
            "/api/v1/timeseries".into(),
            with(params(CPU, FROM, TO), &[("step", "often")]),
            400,
            vec!["step"],
        ),
        (
            "/api/v1/timeseries".into(),
            with(
                params(CPU, FROM, TO),
                &[("step", "60"), ("aggregation", "median")],
            ),
            400,
            vec!["aggregation"],
        ),
        (
            "/api/v1/flamegraph".into(),
            params(CPU, T0 + 10 * SECOND, T0),
            400,
            vec!["from"],
        ),
        (
            "/api/v1/flamegraph".into(),
            params(CPU, T0, T0),
            400,
            vec!["from"],
        ),
        (
            "/api/v1/timeseries".into(),
            with(params(CPU, TO, FROM), &[("step", "60")]),
            400,
            vec!["from"],
        ),
        (
            "/api/v1/flamegraph".into(),
            with(params(CPU, FROM, TO), &[("format", "xml")]),
            400,
            vec!["format"],
        ),
        (
            "/api/v1/events".into(),
            with(params(CPU, FROM, TO), &[("cursor", "not-a-cursor")]),
            400,
            vec!["cursor"],
        ),
        (
            "/api/v1/profiles/00000000000000000000000000000bad".into(),
            Vec::new(),
            404,
            vec!["00000000000000000000000000000bad"],
        ),
    ];
    let mut failures = Vec::new();
    for (path, query, status, words) in cases {
        let resp = http.get(&path, &query).await;
        let text = resp.text();
        if resp.status != status {
            failures.push(format!(
                "GET {}: status {} (expected {status}): {text}",
                resp.url, resp.status
            ));
            continue;
        }
        let message = match serde_json::from_slice::<Value>(&resp.body)
            .ok()
            .and_then(|v| v["error"].as_str().map(str::to_string))
        {
            Some(m) => m,
            None => {
                failures.push(format!("GET {}: no {{\"error\"}} body: {text}", resp.url));
                continue;
            }
        };
        for w in words {
            if !message.contains(w) {
                failures.push(format!(
                    "GET {}: message {message:?} does not name {w:?}",
                    resp.url
                ));
            }
        }
    }
    assert!(failures.is_empty(), "bad input:\n{}", failures.join("\n"));
}

/// The workload has what the checks rely on, and its OTLP encoding says the same as its
/// plain description (read back through the capture flattening, which knows nothing of it).
#[test]
fn workload_encoding_matches_its_description() {
    let workload = Workload::new();
    let obs = workload.observations();
    let decoded: Vec<ui_api_tests::capture::Observation> = workload
        .requests()
        .iter()
        .flat_map(ui_api_tests::capture::from_protobuf)
        .collect();
    assert_eq!(decoded.len(), obs.len());
    let view = |ty: &str,
                frames: &[String],
                attrs: Vec<(String, String)>,
                time: i64,
                value: i64,
                trace: Option<String>| {
        let mut attrs = attrs;
        attrs.sort();
        (ty.to_string(), frames.join(";"), attrs, time, value, trace)
    };
    let mut from_obs: Vec<_> = obs
        .iter()
        .map(|o| {
            let attrs = o
                .labels
                .clone()
                .into_iter()
                .chain(o.sample_attrs.clone())
                .collect();
            // The capture flattening names a frame by its function name only (the capture
            // has no function with just a system name).
            let frames: Vec<String> = o
                .frames
                .iter()
                .map(|f| {
                    if f == MANGLED_ONLY.1 {
                        String::new()
                    } else {
                        f.clone()
                    }
                })
                .collect();
            view(
                &o.profile_type,
                &frames,
                attrs,
                o.time,
                o.value,
                o.trace_id.clone(),
            )
        })
        .collect();
    let mut from_wire: Vec<_> = decoded
        .iter()
        .map(|o| {
            let attrs = o.attrs.clone().into_iter().collect();
            view(
                &o.profile_type,
                &o.frames,
                attrs,
                o.time,
                o.value,
                o.trace_id.clone(),
            )
        })
        .collect();
    from_obs.sort();
    from_wire.sort();
    if let Some((a, b)) = from_obs.iter().zip(&from_wire).find(|(a, b)| a != b) {
        panic!("description {a:?}\nwire        {b:?}");
    }

    let cpu: Vec<&Obs> = obs.iter().filter(|o| o.profile_type == CPU).collect();
    for trace in TRACES {
        assert!(
            cpu.iter().any(|o| o.trace_id.as_deref() == Some(trace)),
            "{trace}"
        );
    }
    assert!(cpu.iter().any(|o| o.trace_id.is_none()));
    assert!(obs.iter().any(|o| o.profile_id.is_none()));
    assert!(cpu.iter().any(|o| o.frames.is_empty()));
    assert!(
        obs.iter()
            .any(|o| o.attr("thread.name").is_none() && o.attr("thread.id").is_some())
    );
    assert!(
        obs.iter()
            .any(|o| o.attr("thread.name").is_none() && o.attr("thread.id").is_none())
    );
    for p in &workload.profiles {
        let untimed = p.samples.iter().filter(|s| s.time.is_none()).count();
        assert!(
            untimed == 0 || untimed == p.samples.len(),
            "a profile is timestamped or not"
        );
        for t in p.samples.iter().filter_map(|s| s.time) {
            assert!(
                t >= p.time && t < p.time + p.duration,
                "sample inside its profile"
            );
        }
    }
    assert!(
        workload
            .profiles
            .iter()
            .any(|p| p.profile_type == CPU && p.samples.iter().all(|s| s.time.is_none())),
        "a CPU profile without sample timestamps"
    );
    assert!(obs.iter().all(|o| o.time >= FROM && o.time < TO));
}
