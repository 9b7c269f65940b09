//! The monitoring mixin shipped in the Helm chart (`deploy/helm/stackhouse/rules/` and
//! `dashboards/`): the alert rules pass `promtool check rules` and their unit tests
//! (`promtool test rules`, one firing and one quiet case per alert), every alert links its
//! own runbook section in docs/operations.md, the dashboards are well-formed Grafana JSON,
//! and every PromQL expression of both is evaluated by a real Prometheus scraping the real
//! binary under load: each names only metrics `/metrics` exposes, and each returns data.
//!
//! promtool and prometheus come from Debian's `prometheus` package (`.ci/run` installs it);
//! without them the tests fail.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use opentelemetry_proto::tonic::collector::profiles::v1development::profiles_service_client::ProfilesServiceClient;
use prost::Message;
use regex::Regex;
use serde_json::Value as Json;
use serde_yaml::Value as Yaml;
use ui_api_tests::capture;
use ui_api_tests::prometheus::{Prometheus, require};
use ui_api_tests::server::{Options, Server, free_port};
use ui_api_tests::services::PostgresDb;
use ui_api_tests::{testdata, workspace_dir};

fn chart() -> PathBuf {
    workspace_dir().join("deploy/helm/stackhouse")
}

fn rules_file() -> PathBuf {
    chart().join("rules/stackhouse-alerts.yaml")
}

fn yaml(path: &std::path::Path) -> Yaml {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every alert of the rule file: (name, expr, the whole rule).
fn alerts() -> Vec<(String, String, Yaml)> {
    let rules = yaml(&rules_file());
    let mut out = Vec::new();
    for group in rules["groups"].as_sequence().expect("groups") {
        for rule in group["rules"].as_sequence().expect("rules") {
            let name = rule["alert"].as_str().expect("only alerting rules").to_string();
            let expr = rule["expr"].as_str().expect("expr").trim().to_string();
            out.push((name, expr, rule.clone()));
        }
    }
    out
}

/// Every dashboard file: (file name, parsed JSON).
fn dashboards() -> Vec<(String, Json)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(chart().join("dashboards")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            let text = std::fs::read_to_string(&path).unwrap();
            let json: Json =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            out.push((path.file_name().unwrap().to_string_lossy().into_owned(), json));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Every panel target's expression: (where, expr).
fn dashboard_exprs() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (file, dash) in dashboards() {
        for panel in dash["panels"].as_array().unwrap() {
            for target in panel["targets"].as_array().into_iter().flatten() {
                let expr = target["expr"].as_str().expect("every target has an expr");
                out.push((
                    format!("{file}: {}", panel["title"].as_str().unwrap()),
                    expr.to_string(),
                ));
            }
        }
    }
    out
}

fn metric_names(expr: &str) -> BTreeSet<String> {
    let re = Regex::new(r"\b(stackhouse_[a-z0-9_]+)\b").unwrap();
    re.captures_iter(expr).map(|c| c[1].to_string()).collect()
}

#[test]
fn promtool_checks_and_unit_tests_every_alert() {
    require("promtool");
    let out = Command::new("promtool")
        .args(["check", "rules"])
        .arg(rules_file())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool check rules: {text}");
    assert!(
        text.contains(&format!("SUCCESS: {} rules found", alerts().len())),
        "{text}"
    );

    let tests_dir = chart().join("rules/tests");
    let out = Command::new("promtool")
        .args(["test", "rules", "stackhouse-alerts.test.yaml"])
        .current_dir(&tests_dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "promtool test rules: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // Each alert has a case where it fires and one where it stays quiet.
    let tests = yaml(&tests_dir.join("stackhouse-alerts.test.yaml"));
    let mut fires = BTreeSet::new();
    let mut quiet = BTreeSet::new();
    for test in tests["tests"].as_sequence().unwrap() {
        for case in test["alert_rule_test"].as_sequence().into_iter().flatten() {
            let name = case["alertname"].as_str().unwrap().to_string();
            match case["exp_alerts"].as_sequence() {
                Some(a) if !a.is_empty() => fires.insert(name),
                _ => quiet.insert(name),
            };
        }
    }
    for (name, _, _) in alerts() {
        assert!(fires.contains(&name), "no promtool case where {name} fires");
        assert!(quiet.contains(&name), "no promtool case where {name} stays quiet");
    }
}

#[test]
fn every_alert_has_annotations_and_its_own_runbook_section() {
    let docs = std::fs::read_to_string(workspace_dir().join("docs/operations.md")).unwrap();
    assert!(
        docs.contains("\n## Runbooks\n"),
        "docs/operations.md has no Runbooks section"
    );
    let runbooks = &docs[docs.find("\n## Runbooks\n").unwrap()..];
    let threshold = Regex::new(r"(>|<|==|!=|>=|<=)\s*[0-9.eE+-]+\s*$").unwrap();
    let mut names = BTreeSet::new();
    for (name, expr, rule) in alerts() {
        assert!(names.insert(name.clone()), "{name} twice");
        for key in ["summary", "description", "runbook_url"] {
            let v = rule["annotations"][key].as_str().unwrap_or_default();
            assert!(!v.trim().is_empty(), "{name} has no {key}");
        }
        assert!(
            rule["labels"]["severity"].as_str().is_some(),
            "{name} has no severity"
        );
        let url = rule["annotations"]["runbook_url"].as_str().unwrap();
        let anchor = format!("docs/operations.md#{}", name.to_lowercase());
        assert!(
            url.ends_with(&anchor),
            "{name}: runbook_url {url} is not its own section"
        );
        let section = format!("\n### {name}\n");
        let start = runbooks
            .find(&section)
            .unwrap_or_else(|| panic!("docs/operations.md has no runbook section for {name}"));
        let body = &runbooks[start + section.len()..];
        let body = &body[..body.find("\n### ").unwrap_or(body.len())];
        for part in ["**Means:**", "**Confirm:**", "**Do:**"] {
            assert!(body.contains(part), "the runbook of {name} has no {part}");
        }
        // The chart replaces this last comparison with prometheusRule.alerts.<name>.threshold.
        assert!(
            threshold.is_match(expr.trim()) || expr.contains(" unless "),
            "{name}: its threshold is not the last comparison of its expr"
        );
    }
}

#[test]
fn dashboards_are_grafana_json_with_unique_ids() {
    let mut uids = BTreeSet::new();
    let all = dashboards();
    assert_eq!(all.len(), 5, "ingest, query, lifecycle, storage, tenants");
    for (file, dash) in all {
        let uid = dash["uid"].as_str().expect("uid");
        assert!(uids.insert(uid.to_string()), "{file}: uid {uid} twice");
        assert_eq!(format!("{uid}.json"), file);
        assert!(
            dash["title"]
                .as_str()
                .is_some_and(|t| t.starts_with("Stackhouse / "))
        );
        let vars: Vec<&str> = dash["templating"]["list"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["name"].as_str().unwrap())
            .collect();
        assert!(
            vars.contains(&"datasource") && vars.contains(&"job"),
            "{file}: {vars:?}"
        );
        let mut ids = BTreeSet::new();
        let mut targets = 0;
        for panel in dash["panels"].as_array().unwrap() {
            let id = panel["id"].as_u64().expect("panel id");
            assert!(ids.insert(id), "{file}: panel id {id} twice");
            assert!(
                panel["gridPos"]["w"].as_u64().is_some(),
                "{file}: panel {id} gridPos"
            );
            if panel["type"] == "row" {
                continue;
            }
            assert_eq!(panel["datasource"]["uid"], "${datasource}", "{file}: panel {id}");
            for target in panel["targets"].as_array().unwrap() {
                targets += 1;
                let expr = target["expr"].as_str().unwrap();
                assert!(expr.contains(r#"job=~"$job""#), "{file}: {expr} ignores $job");
            }
        }
        assert!(targets > 0, "{file} has no queries");
    }
}

/// Grafana's variables, as the dashboards' "All" choice sets them.
fn concrete(expr: &str) -> String {
    expr.replace("$__rate_interval", "1m")
        .replace("$job", ".*")
        .replace("$tenant", ".*")
}

/// What an alert's expression measures, its threshold taken off: the part before ` unless `
/// without its last comparison.
fn signal(expr: &str) -> String {
    let left = expr.split(" unless ").next().unwrap().trim();
    let re = Regex::new(r"\s*(>|<|==|!=|>=|<=)\s*[0-9.eE+-]+\s*(\)?)\s*$").unwrap();
    re.replace(left, "$2").into_owned()
}

/// The instant vector `expr` evaluates to now; panics on a PromQL error.
async fn query(prometheus: &Prometheus, expr: &str) -> Vec<Json> {
    let body = prometheus.get("/api/v1/query", &[("query", expr)]).await;
    assert_eq!(body["status"], "success", "{expr}: {body}");
    assert_eq!(body["data"]["resultType"], "vector", "{expr}: {body}");
    body["data"]["result"].as_array().unwrap().clone()
}

/// Every metric name Prometheus holds.
async fn scraped_names(prometheus: &Prometheus) -> BTreeSet<String> {
    let body = prometheus.get("/api/v1/label/__name__/values", &[]).await;
    body["data"]
        .as_array()
        .map(|a| a.iter().map(|v| v.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

async fn pyroscope_ingest(server: &Server, name: &str, lines: &str) -> reqwest::StatusCode {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    ui_api_tests::http_client()
        .post(format!(
            "{}/ingest?name={name}&from={}&until={}",
            server.http(),
            now - 20,
            now - 10
        ))
        .body(lines.to_string())
        .send()
        .await
        .unwrap()
        .status()
}

const SECRET: &str = "monitoring-mixin-secret";

#[tokio::test(flavor = "multi_thread")]
async fn every_expression_returns_data_from_a_real_prometheus_scraping_stackhouse() {
    require("prometheus");
    // One catalog (a real Postgres database) and store for a query worker, a process
    // running every role that hands scans to it (and to a second worker that never
    // answers), and a query process whose queries time out.
    let db = PostgresDb::create();
    let shared = tempfile::tempdir().unwrap();
    let catalog = db.url.clone();
    let storage = format!("file://{}", shared.path().join("objects").display());
    std::fs::create_dir_all(shared.path().join("objects")).unwrap();
    let options = |extra: Vec<String>| Options {
        catalog: Some(catalog.clone()),
        storage: Some(storage.clone()),
        extra_args: extra,
        ..Options::default()
    };
    let worker_port = free_port();
    let dead_port = free_port();
    let worker = Server::start(options(
        [
            "--role",
            "query",
            "--query-worker-addr",
            &format!("127.0.0.1:{worker_port}"),
            "--query-cluster-secret",
            SECRET,
        ]
        .map(String::from)
        .to_vec(),
    ))
    .await;
    let groups = r#"{"web":"{}","sampled":{"selector":"{}","sample_rate":0.5}}"#;
    let server = Server::start(options(
        [
            "--compaction-interval",
            "1s",
            "--retention-interval",
            "1s",
            "--query-workers",
            &format!("127.0.0.1:{worker_port},127.0.0.1:{dead_port}"),
            "--query-distribute-bytes",
            "1",
            "--query-cluster-secret",
            SECRET,
            "--usage-groups",
            groups,
            "--max-message-bytes",
            "1048576",
        ]
        .map(String::from)
        .to_vec(),
    ))
    .await;
    let impatient = Server::start(options(
        ["--role", "query", "--query-timeout", "1ms"]
            .map(String::from)
            .to_vec(),
    ))
    .await;
    // Reads the objects after they are damaged (a fresh process: nothing cached).
    let mut reader = Server::start(options(["--role", "query"].map(String::from).to_vec())).await;
    let targets =
        [&server, &worker, &impatient, &reader].map(|s| s.http().trim_start_matches("http://").to_string());
    let prometheus = Prometheus::scraping(&targets, &[&rules_file()]);
    prometheus.ready().await;

    // Ingest: the eBPF capture over OTLP/gRPC, Pyroscope /ingest profiles, a bad request.
    let bytes = std::fs::read(testdata("otlp/ebpf-cpu-offcpu.v1_10.pb")).unwrap();
    let request = ExportProfilesServiceRequest::decode(&bytes[..]).unwrap();
    let observations = capture::from_protobuf(&request);
    let from = observations.iter().map(|o| o.time).min().unwrap();
    let to = observations.iter().map(|o| o.time).max().unwrap() + 1;
    ProfilesServiceClient::connect(server.grpc())
        .await
        .unwrap()
        .export(request)
        .await
        .expect("export accepted");
    for i in 0..20 {
        let status = pyroscope_ingest(
            &server,
            &format!("app{i}.cpu"),
            &format!("main;work;f{i} {}\nmain;idle 3\n", i + 1),
        )
        .await;
        assert!(status.is_success(), "{status}");
    }
    // Refused (no stack): a rejection by reason.
    let _ = pyroscope_ingest(&server, "bad.cpu", "this is not collapsed stacks").await;
    // Queries, over the workers; one that is refused.
    let client = ui_api_tests::http_client();
    for _ in 0..3 {
        let r = client
            .get(format!(
                "{}/api/v1/flamegraph?profile_type=samples:count:cpu:nanoseconds&from={from}&to={to}",
                server.http()
            ))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    }
    let _ = client
        .get(format!("{}/api/v1/flamegraph?profile_type=nope", server.http()))
        .send()
        .await
        .unwrap();

    // Wait until compaction and retention have run, segments were flushed, the workers
    // were probed, and Prometheus has scraped it all at least a few times.
    let wanted = [
        "stackhouse_compaction_runs_total",
        "stackhouse_retention_runs_total",
        "stackhouse_flush_duration_seconds_bucket",
        "stackhouse_query_workers_answering",
        "stackhouse_query_bytes_shipped_total",
        "stackhouse_usage_sampled_out_profiles_total",
    ];
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let names = scraped_names(&prometheus).await;
        let missing: Vec<_> = wanted.iter().filter(|n| !names.contains(**n)).collect();
        if missing.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus never scraped {missing:?}; it has {names:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Enough points for rate() over 1m and a second pass of the load counted in them.
    tokio::time::sleep(Duration::from_secs(5)).await;
    for i in 0..5 {
        pyroscope_ingest(&server, &format!("late{i}.cpu"), "main;late 2\n").await;
    }
    tokio::time::sleep(Duration::from_secs(5)).await;

    // Faults, so that the error series exist as well: a request over --max-message-bytes,
    // the catalog's segments table gone for a few seconds (ingest, flushes, queries,
    // compaction and retention fail), queries over --query-timeout, and damaged symbol
    // objects (last: queries of this tenant keep failing).
    let status = pyroscope_ingest(&server, "huge.cpu", &"main;big 1\n".repeat(200_000)).await;
    assert_eq!(status, 413, "a body over --max-message-bytes");
    db.query("ALTER TABLE segments RENAME TO segments_away");
    // Ingest until a flush and an ingest request have failed (senders wait for the flush).
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut senders = Vec::new();
    for i in 0.. {
        let http = server.http();
        senders.push(tokio::spawn(async move {
            let _ = ui_api_tests::http_client()
                .post(format!("{http}/ingest?name=fault{i}.cpu"))
                .body(format!("main;fault{i} 1\n"))
                .send()
                .await;
        }));
        tokio::time::sleep(Duration::from_millis(500)).await;
        let flush_errors = server
            .metric("stackhouse_flush_duration_seconds_count", &[r#"outcome="error""#])
            .await;
        let ingest_errors = server
            .metric("stackhouse_ingest_requests_total", &[r#"outcome="unavailable""#])
            .await
            + server
                .metric("stackhouse_ingest_requests_total", &[r#"outcome="internal""#])
                .await;
        if flush_errors > 0.0 && ingest_errors > 0.0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no failed flush ({flush_errors}) and ingest request ({ingest_errors}) without the segments table"
        );
    }
    let flamegraph = |s: &Server| {
        format!(
            "{}/api/v1/flamegraph?profile_type=samples:count:cpu:nanoseconds&from={from}&to={to}",
            s.http()
        )
    };
    let r = client.get(flamegraph(&server)).send().await.unwrap();
    assert!(!r.status().is_success(), "a query without the segments table");
    tokio::time::sleep(Duration::from_secs(4)).await;
    db.query("ALTER TABLE segments_away RENAME TO segments");
    for sender in senders {
        let _ = sender.await;
    }
    assert!(server.metric("stackhouse_catalog_errors_total", &[]).await > 0.0);
    for _ in 0..3 {
        let _ = client.get(flamegraph(&impatient)).send().await.unwrap();
    }
    for entry in walk(&shared.path().join("objects")) {
        if entry.components().any(|c| c.as_os_str() == "symbols") {
            // Same length, so the sizes in the catalog still match: only the content is wrong.
            let bytes = std::fs::read(&entry).unwrap();
            let garbage: Vec<u8> = bytes.iter().enumerate().map(|(i, b)| b ^ (i as u8 | 1)).collect();
            std::fs::write(&entry, garbage).unwrap();
        }
    }
    reader.restart().await;
    let r = client.get(flamegraph(&reader)).send().await.unwrap();
    assert!(!r.status().is_success(), "a query over damaged symbols");
    assert!(reader.metric("stackhouse_store_errors_total", &[]).await > 0.0);
    tokio::time::sleep(Duration::from_secs(5)).await;

    let names = scraped_names(&prometheus).await;
    let mut exprs: Vec<(String, String)> = dashboard_exprs()
        .into_iter()
        .map(|(w, e)| (w, concrete(&e)))
        .collect();
    for (name, expr, _) in alerts() {
        // The whole expression must be valid PromQL here too; its data is its signal's.
        query(&prometheus, &expr).await;
        exprs.push((format!("alert {name}"), signal(&expr)));
    }
    let selector = Regex::new(r"(stackhouse_[a-z0-9_]+)\{([^}]*)\}").unwrap();
    let mut failures = Vec::new();
    let mut zero = Vec::new();
    for (place, expr) in &exprs {
        for name in metric_names(expr) {
            let base = name
                .strip_suffix("_bucket")
                .or_else(|| name.strip_suffix("_count"))
                .or_else(|| name.strip_suffix("_sum"))
                .unwrap_or(&name);
            if !names.contains(&name) {
                failures.push(format!(
                    "{place}: {name} is not a scraped series (histogram base {base})"
                ));
            }
        }
        if !query(&prometheus, expr).await.is_empty() {
            continue;
        }
        // Empty: legitimate only for query timeouts (the 1 ms --query-timeout above may
        // still let a query through on a fast machine) while the metric itself is there.
        // The load and faults above give every other expression data.
        let mut explained = None;
        for c in selector.captures_iter(expr) {
            if !c[2].contains(r#"outcome="timeout""#) {
                continue;
            }
            let filtered = query(&prometheus, &format!("count({})", &c[0])).await;
            let bare = query(&prometheus, &format!("count({})", &c[1])).await;
            if filtered.is_empty() && !bare.is_empty() {
                explained = Some(c[0].to_string());
                break;
            }
        }
        match explained {
            Some(s) => zero.push(format!("{place}: no series {s} yet")),
            None => failures.push(format!("{place}: {expr} returned nothing")),
        }
    }
    eprintln!(
        "{} expressions evaluated; {} legitimately without data:\n{}",
        exprs.len(),
        zero.len(),
        zero.join("\n")
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    // Prometheus itself evaluates every rule without error.
    let body = prometheus.get("/api/v1/rules", &[]).await;
    let mut healthy = BTreeMap::new();
    for group in body["data"]["groups"].as_array().unwrap() {
        for rule in group["rules"].as_array().unwrap() {
            healthy.insert(
                rule["name"].as_str().unwrap().to_string(),
                (rule["health"].clone(), rule["lastError"].clone()),
            );
        }
    }
    for (name, _, _) in alerts() {
        let (health, error) = healthy
            .get(&name)
            .unwrap_or_else(|| panic!("{name} not loaded: {body}"));
        assert_eq!(health, "ok", "{name}: {error}");
    }
    drop(worker);
    drop(impatient);
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}
