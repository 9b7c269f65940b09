//! Recording rules end to end: profiles sent over OTLP gRPC by the independent
//! `opentelemetry-proto` client; rules made over REST and over Connect (connect-es, as
//! Grafana's Profiles Drilldown makes them); a real Prometheus (Debian's package, its
//! remote-write receiver on) receives the series. What Prometheus holds is compared with
//! per-minute sums computed here from the samples sent, for a plain, a grouped and a
//! function-filtered rule, before and after Prometheus is down for two minutes. Then the
//! Connect and REST contracts: generations, the rule limit, read-only configured rules and
//! invalid rules refused with messages naming the field.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use opentelemetry_proto::tonic::collector::profiles::v1development::profiles_service_client::ProfilesServiceClient;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::profiles::v1development::{
    Function, Line, Location, Profile, ProfilesDictionary, ResourceProfiles, Sample, ScopeProfiles, Stack,
    ValueType,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use reqwest::Method;
use serde_json::{Value, json};
use ui_api_tests::connect_client::{call_all, rpc_with_headers};
use ui_api_tests::prometheus::Prometheus;
use ui_api_tests::server::{Options, Server};

const TYPE_ID: &str = "memory:alloc_space:bytes:space:bytes";
const SEC: i64 = 1_000_000_000;
const MIN: i64 = 60 * SEC;
const MS: i64 = 1_000_000;

/// Stacks (root first) by index; `work` recurses in the third, so a function filter on
/// it must count that stack once.
const STACKS: [&[&str]; 4] = [
    &["main", "foo"],
    &["main", "foo", "bar"],
    &["main", "work", "work"],
    &["main", "work", "bar"],
];
const SERVICES: [&str; 2] = ["api", "web"];
const REGIONS: [&str; 2] = ["eu", "us"];

/// One sample as sent.
#[derive(Clone, Copy, Debug)]
struct Sent {
    time: i64,
    service: usize,
    region: usize,
    stack: usize,
    value: i64,
}

fn now_nanos() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as i64
}

fn text(s: &str) -> Option<AnyValue> {
    Some(AnyValue {
        value: Some(any_value::Value::StringValue(s.into())),
    })
}

/// One request: a resource per (service, region), a profile per sample.
fn request(samples: &[Sent]) -> ExportProfilesServiceRequest {
    let mut strings = vec![
        String::new(),
        "alloc_space".into(),
        "bytes".into(),
        "space".into(),
    ];
    let mut index = |s: &str| match strings.iter().position(|x| x == s) {
        Some(i) => i as i32,
        None => {
            strings.push(s.to_string());
            strings.len() as i32 - 1
        }
    };
    let names = ["main", "foo", "bar", "work"];
    let mut function_table = vec![Function::default()];
    let mut location_table = vec![Location::default()];
    for name in names {
        function_table.push(Function {
            name_strindex: index(name),
            ..Default::default()
        });
        location_table.push(Location {
            lines: vec![Line {
                function_index: function_table.len() as i32 - 1,
                line: 0,
                column: 0,
            }],
            ..Default::default()
        });
    }
    let location = |name: &str| names.iter().position(|n| *n == name).unwrap() as i32 + 1;
    let mut stack_table = vec![Stack::default()];
    for frames in STACKS {
        // OTLP lists a stack leaf first.
        stack_table.push(Stack {
            location_indices: frames.iter().rev().map(|f| location(f)).collect(),
        });
    }
    let value_type = |t: &str, u: &str| ValueType {
        type_strindex: strings.iter().position(|x| x == t).unwrap() as i32,
        unit_strindex: strings.iter().position(|x| x == u).unwrap() as i32,
    };
    let sample_type = value_type("alloc_space", "bytes");
    let period_type = value_type("space", "bytes");
    let mut resource_profiles = Vec::new();
    for (service, s_name) in SERVICES.iter().enumerate() {
        for (region, r_name) in REGIONS.iter().enumerate() {
            let profiles: Vec<Profile> = samples
                .iter()
                .filter(|x| x.service == service && x.region == region)
                .map(|x| Profile {
                    sample_type: Some(sample_type),
                    period_type: Some(period_type),
                    period: 524_288,
                    time_unix_nano: x.time as u64,
                    duration_nano: 1_000_000_000,
                    samples: vec![Sample {
                        stack_index: x.stack as i32 + 1,
                        values: vec![x.value],
                        ..Default::default()
                    }],
                    ..Default::default()
                })
                .collect();
            if profiles.is_empty() {
                continue;
            }
            resource_profiles.push(ResourceProfiles {
                resource: Some(Resource {
                    attributes: vec![
                        KeyValue {
                            key: "service.name".into(),
                            value: text(s_name),
                            ..Default::default()
                        },
                        KeyValue {
                            key: "region".into(),
                            value: text(r_name),
                            ..Default::default()
                        },
                    ],
                    ..Default::default()
                }),
                scope_profiles: vec![ScopeProfiles {
                    profiles,
                    ..Default::default()
                }],
                ..Default::default()
            });
        }
    }
    ExportProfilesServiceRequest {
        resource_profiles,
        dictionary: Some(ProfilesDictionary {
            string_table: strings,
            function_table,
            location_table,
            stack_table,
            attribute_table: vec![Default::default()],
            link_table: vec![Default::default()],
            mapping_table: vec![Default::default()],
        }),
    }
}

async fn send(server: &Server, samples: &[Sent]) {
    let response = ProfilesServiceClient::connect(server.grpc())
        .await
        .unwrap()
        .export(request(samples))
        .await
        .expect("export accepted")
        .into_inner();
    assert!(
        response
            .partial_success
            .as_ref()
            .is_none_or(|p| p.rejected_profiles == 0),
        "{response:?}"
    );
}

/// Per-minute sums as recorded series carry them: keyed by the minute's end in ms.
fn per_minute<'a>(samples: impl Iterator<Item = &'a Sent>) -> BTreeMap<i64, f64> {
    let mut out = BTreeMap::new();
    for s in samples {
        let end = (s.time.div_euclid(MIN) + 1) * MIN / MS;
        *out.entry(end).or_insert(0.0) += s.value as f64;
    }
    out
}

/// The three rules of the test, with what Prometheus must hold of each.
struct Expected {
    plain: BTreeMap<i64, f64>,
    by_region: BTreeMap<String, BTreeMap<i64, f64>>,
    work: BTreeMap<i64, f64>,
}

fn expected(sent: &[Sent]) -> Expected {
    Expected {
        plain: per_minute(sent.iter().filter(|s| s.service == 0)),
        by_region: REGIONS
            .iter()
            .enumerate()
            .map(|(r, name)| {
                (
                    name.to_string(),
                    per_minute(sent.iter().filter(|s| s.region == r)),
                )
            })
            .collect(),
        // Stacks 2 and 3 pass through `work`.
        work: per_minute(sent.iter().filter(|s| s.stack >= 2)),
    }
}

async fn rules(server: &Server) -> Vec<Value> {
    let body: Value = ui_api_tests::http_client()
        .get(format!("{}/api/v1/recording-rules", server.http()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    body["rules"].as_array().unwrap().clone()
}

/// Waits until every rule has been evaluated up to `until` (ns).
async fn evaluated(server: &Server, until: i64) {
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        let rules = rules(server).await;
        if rules
            .iter()
            .all(|r| r["evaluated_until"].as_i64().is_some_and(|t| t >= until))
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "rules not evaluated up to {until}: {rules:#?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// What Prometheus holds of the three rules equals `want`.
async fn check(prometheus: &Prometheus, ids: &BTreeMap<&str, String>, want: &Expected) {
    let plain = prometheus.points("profiles_recorded_api_alloc", "8h").await;
    let only = BTreeMap::from([("profiles_rule_id".to_string(), ids["plain"].clone())]);
    assert_eq!(plain.keys().collect::<Vec<_>>(), vec![&only], "one plain series");
    assert_eq!(plain[&only], want.plain, "plain rule, per minute");

    let grouped = prometheus.points("profiles_recorded_alloc_by_region", "8h").await;
    let mut by_region = BTreeMap::new();
    for (labels, points) in grouped {
        assert_eq!(labels["team"], "core", "external label");
        assert_eq!(labels["profiles_rule_id"], ids["grouped"]);
        by_region.insert(labels["region"].clone(), points);
    }
    assert_eq!(by_region, want.by_region, "grouped rule, per region and minute");

    let work = prometheus.points("profiles_recorded_work", "8h").await;
    assert_eq!(work.len(), 1, "one function-filtered series: {work:?}");
    assert_eq!(
        work.values().next().unwrap(),
        &want.work,
        "stacks through work, each counted once"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn rules_record_exact_minutes_and_survive_a_prometheus_outage() {
    let mut prometheus = Prometheus::start();
    prometheus.ready().await;
    let server = Server::start(Options {
        extra_args: vec![
            format!("--recording-rules-remote-write-url={}", prometheus.write_url()),
            "--recording-rules-interval=1s".into(),
            "--recording-rules-delay=10s".into(),
        ],
        ..Options::default()
    })
    .await;

    // Three hours of history: a sample every 37 seconds, services, regions and stacks in
    // turn, values spread out.
    let now = now_nanos();
    let start = now - 3 * 3600 * SEC;
    let mut sent: Vec<Sent> = (0..290)
        .map(|i: i64| Sent {
            time: start + i * 37 * SEC + (i % 5) * 1_700_000,
            service: (i % 2) as usize,
            region: ((i / 2) % 2) as usize,
            stack: (i % 4) as usize,
            value: 100 + (i * 7919) % 900,
        })
        .collect();
    send(&server, &sent).await;

    // Two rules over REST, one over Connect as the Drilldown app makes it (JSON).
    let client = ui_api_tests::http_client();
    let post = |body: Value| {
        let client = client.clone();
        let url = format!("{}/api/v1/recording-rules", server.http());
        async move {
            let r = client.post(url).json(&body).send().await.unwrap();
            assert_eq!(r.status(), 201);
            r.json::<Value>().await.unwrap()["id"]
                .as_str()
                .unwrap()
                .to_string()
        }
    };
    let type_matcher = format!("{{__profile_type__=\"{TYPE_ID}\"}}");
    let mut ids = BTreeMap::new();
    ids.insert(
        "plain",
        post(json!({
            "metric_name": "profiles_recorded_api_alloc",
            "matchers": [format!("{{__profile_type__=\"{TYPE_ID}\", service_name=\"api\"}}")],
        }))
        .await,
    );
    ids.insert(
        "grouped",
        post(json!({
            "metric_name": "profiles_recorded_alloc_by_region",
            "matchers": [type_matcher.clone()],
            "group_by": ["region"],
            "external_labels": {"team": "core"},
        }))
        .await,
    );
    let base = server.http();
    let connect = tokio::task::spawn_blocking(move || {
        call_all(
            &base,
            &[rpc_with_headers(
                "settings.v1.RecordingRulesService/UpsertRecordingRule",
                false,
                json!({
                    "metricName": "profiles_recorded_work",
                    "matchers": [type_matcher],
                    "stacktraceFilter": {"functionName": {"functionName": "work", "metricType": "TOTAL"}},
                }),
                json!({}),
            )],
        )
    })
    .await
    .unwrap();
    let rule = &connect[0]["response"]["rule"];
    assert_eq!(rule["profileType"], TYPE_ID, "{connect:?}");
    assert_eq!(rule["generation"], "1");
    ids.insert("work", rule["id"].as_str().unwrap().to_string());

    // Backfilled from the oldest sample's hour, every minute exact.
    let last = sent.iter().map(|s| s.time).max().unwrap();
    evaluated(&server, (last.div_euclid(MIN) + 1) * MIN).await;
    check(&prometheus, &ids, &expected(&sent)).await;
    for r in rules(&server).await {
        assert_eq!(r["hourly"], json!([]), "raw samples answer every minute: {r}");
    }

    // Prometheus down for two minutes while profiles keep arriving.
    prometheus.stop();
    let outage = Instant::now();
    let mut i = 0;
    while outage.elapsed() < Duration::from_secs(120) {
        let sample = Sent {
            time: now_nanos() - SEC,
            service: i % 2,
            region: (i / 2) % 2,
            stack: i % 4,
            value: 1_000 + i as i64,
        };
        send(&server, &[sample]).await;
        sent.push(sample);
        i += 1;
        tokio::time::sleep(Duration::from_secs(7)).await;
    }
    let failures = server
        .metric(
            "stackhouse_recording_rules_failures_total",
            &["reason=\"unavailable\""],
        )
        .await;
    assert!(failures > 0.0, "the outage was noticed");
    let stuck = rules(&server).await;
    prometheus.spawn();
    prometheus.ready().await;

    // Once it is back, the missed minutes arrive with their own timestamps: no gap, no
    // point twice, nothing else.
    let last = sent.iter().map(|s| s.time).max().unwrap();
    evaluated(&server, (last.div_euclid(MIN) + 1) * MIN).await;
    check(&prometheus, &ids, &expected(&sent)).await;
    for (before, after) in stuck.iter().zip(rules(&server).await) {
        assert!(
            after["evaluated_until"].as_i64() > before["evaluated_until"].as_i64(),
            "marks moved on after the outage: {before} → {after}"
        );
    }
    assert!(
        server
            .metric("stackhouse_recording_rules_samples_sent_total", &[])
            .await
            > 0.0
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn connect_and_rest_follow_pyroscopes_contract() {
    let configured = json!([{
        "id": "fromconfig",
        "metric_name": "profiles_recorded_configured",
        "matchers": [format!("{{__profile_type__=\"{TYPE_ID}\"}}")],
    }]);
    let server = Server::start(Options {
        extra_args: vec![
            "--recording-rules-max=2".into(),
            format!("--recording-rules={configured}"),
        ],
        ..Options::default()
    })
    .await;
    let matchers = json!([format!(
        "{{__profile_type__=\"{TYPE_ID}\", service_name=\"api\"}}"
    )]);
    let upsert = |request: Value| {
        rpc_with_headers(
            "settings.v1.RecordingRulesService/UpsertRecordingRule",
            false,
            request,
            json!({"X-Scope-OrgID": "team-a"}),
        )
    };
    let base = server.http();
    let m = matchers.clone();
    let first = tokio::task::spawn_blocking(move || {
        call_all(
            &base,
            &[upsert(
                json!({"metricName": "profiles_recorded_a", "matchers": m}),
            )],
        )
    })
    .await
    .unwrap();
    let rule = first[0]["response"]["rule"].clone();
    let id = rule["id"].as_str().unwrap().to_string();
    assert!(id.chars().all(|c| c.is_ascii_alphabetic()), "{id}");
    assert_eq!(rule["generation"], "1");

    let base = server.http();
    let (m, rid) = (matchers.clone(), id.clone());
    let tenant = json!({"X-Scope-OrgID": "team-a"});
    let answers = tokio::task::spawn_blocking(move || {
        let call = |method: &str, request: Value| {
            rpc_with_headers(
                &format!("settings.v1.RecordingRulesService/{method}"),
                true,
                request,
                tenant.clone(),
            )
        };
        call_all(
            &base,
            &[
                // 0: a change at the generation read.
                upsert(
                    json!({"id": rid, "generation": 1, "metricName": "profiles_recorded_b", "matchers": m}),
                ),
                // 1: the same generation again: stale.
                upsert(
                    json!({"id": rid, "generation": 1, "metricName": "profiles_recorded_c", "matchers": m}),
                ),
                // 2: a second rule, the most allowed; 3: a third, over the limit.
                upsert(json!({"metricName": "profiles_recorded_two", "matchers": m})),
                upsert(json!({"metricName": "profiles_recorded_three", "matchers": m})),
                // 4-7: invalid rules, each naming its field.
                upsert(json!({"metricName": "cpu_total", "matchers": m})),
                upsert(json!({"metricName": "profiles_recorded_x", "matchers": ["{service_name=\"api\"}"]})),
                upsert(
                    json!({"metricName": "profiles_recorded_x", "matchers": m, "groupBy": ["service.name"]}),
                ),
                upsert(json!({"metricName": "profiles_recorded_x", "matchers": ["{service_name="]})),
                // 8: the list, configured rule first; 9: one rule.
                call("ListRecordingRules", json!({})),
                call("GetRecordingRule", json!({"id": rid})),
                // 10: a configured rule is read-only; 11: an unknown id.
                call("DeleteRecordingRule", json!({"id": "fromconfig"})),
                call("DeleteRecordingRule", json!({"id": "nosuchrule"})),
                // 12, 13: deleted, then gone.
                call("DeleteRecordingRule", json!({"id": rid})),
                call("GetRecordingRule", json!({"id": rid})),
            ],
        )
    })
    .await
    .unwrap();
    let error = |i: usize| {
        (
            answers[i]["error"]["code"].clone(),
            answers[i]["error"]["message"].to_string(),
        )
    };
    assert_eq!(
        answers[0]["response"]["rule"]["generation"], "2",
        "{}",
        answers[0]
    );
    assert_eq!(
        answers[0]["response"]["rule"]["metricName"],
        "profiles_recorded_b"
    );
    let (code, message) = error(1);
    assert_eq!(code, "already_exists", "{}", answers[1]);
    assert!(message.contains("generation 1 given, 2 stored"), "{message}");
    assert!(answers[2]["response"]["rule"]["id"].is_string(), "{}", answers[2]);
    let (code, message) = error(3);
    assert_eq!(code, "invalid_argument");
    assert!(message.contains("--recording-rules-max"), "{message}");
    for (i, field) in [
        (
            4,
            "metric_name \\\"cpu_total\\\" is invalid: must start with profiles_recorded_",
        ),
        (
            5,
            "matchers must contain exactly one \\\"__profile_type__\\\" matcher",
        ),
        (6, "group_by label \\\"service.name\\\" must match"),
        (7, "matcher \\\"{service_name=\\\" is invalid"),
    ] {
        let (code, message) = error(i);
        assert_eq!(code, "invalid_argument", "{}", answers[i]);
        assert!(message.contains(field), "{message} should name {field}");
    }
    let listed = answers[8]["response"]["rules"].as_array().unwrap();
    assert_eq!(listed.len(), 3, "{listed:?}");
    assert_eq!(listed[0]["id"], "fromconfig");
    assert_eq!(listed[0]["provisioned"], true);
    assert_eq!(listed[0]["profileType"], TYPE_ID);
    assert_eq!(
        answers[9]["response"]["rule"]["metricName"],
        "profiles_recorded_b"
    );
    assert_eq!(error(10).0, "failed_precondition", "{}", answers[10]);
    assert_eq!(error(11).0, "not_found");
    assert!(answers[12]["response"].is_object(), "{}", answers[12]);
    assert_eq!(error(13).0, "not_found");

    // The same through REST, for another tenant (its own limit and its own rules).
    let url = format!("{}/api/v1/recording-rules", server.http());
    let created = rest(
        Method::POST,
        &url,
        Some(json!({"metric_name": "profiles_recorded_rest", "matchers": matchers, "function_name": "work"})),
    )
    .await;
    assert_eq!(created.0, 201);
    let created = created.1;
    assert_eq!(created["generation"], 1);
    assert_eq!(created["rule"]["function_name"], "work");
    let rule_url = format!("{url}/{}", created["id"].as_str().unwrap());
    let change =
        json!({"generation": 1, "rule": {"metric_name": "profiles_recorded_rest2", "matchers": matchers}});
    assert_eq!(rest(Method::PUT, &rule_url, Some(change.clone())).await.0, 200);
    assert_eq!(
        rest(Method::PUT, &rule_url, Some(change)).await.0,
        409,
        "stale generation"
    );
    let bad = json!({"metric_name": "profiles_recorded_x", "matchers": matchers, "group_by": ["a", "a"]});
    let (status, body) = rest(Method::POST, &url, Some(bad)).await;
    assert_eq!(status, 400);
    let message = body["error"].as_str().unwrap();
    assert!(
        message.contains("group_by label \"a\" is given twice"),
        "{message}"
    );
    let (_, listed) = rest(Method::GET, &url, None).await;
    let ids: Vec<&str> = listed["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec!["fromconfig", created["id"].as_str().unwrap()]);
    assert_eq!(rest(Method::DELETE, &rule_url, None).await.0, 204);
    assert_eq!(rest(Method::GET, &rule_url, None).await.0, 404);
}

/// A REST call as tenant `team-b`: the status and the JSON answer (`null` without one).
async fn rest(method: Method, url: &str, body: Option<Value>) -> (u16, Value) {
    let mut request = ui_api_tests::http_client()
        .request(method, url)
        .header("X-Scope-OrgID", "team-b");
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}
