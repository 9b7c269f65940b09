//! Queries across query processes, seen from outside: the binary runs three times as query
//! workers and as coordinators that hand them every scan (`--query-distribute-bytes 1`),
//! over one store and one catalog written by an ingest process. Every endpoint and format
//! answers byte for byte what a query process without workers answers, on the file store
//! with SQLite and on moto S3 with Postgres. A query that loses a worker (frozen or killed
//! mid-query) runs again over the others and still answers in full within its timeout;
//! with every worker gone it answers from the coordinator alone.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use prost::Message;
use serde_json::{Value, json};
use ui_api_tests::client::Api;
use ui_api_tests::connect_client::{call_all, rpc};
use ui_api_tests::server::{Options, Server, free_port};
use ui_api_tests::services::{PostgresDb, S3Server};
use ui_api_tests::trees::parse_folded;
use ui_api_tests::workload::{CPU, OFF_CPU, T0, Workload};

const SECRET: &str = "distributed-query-test-secret";
const SECOND: i64 = 1_000_000_000;
const Q: &str = "querier.v1.QuerierService";
const OTHER_TENANT: &str = "team-x";

/// Where every process of one cluster keeps its data.
#[derive(Clone)]
struct Backend {
    catalog: String,
    storage: String,
    env: Vec<(String, String)>,
}

fn options(backend: &Backend, extra: &[String]) -> Options {
    Options {
        catalog: Some(backend.catalog.clone()),
        storage: Some(backend.storage.clone()),
        extra_args: extra.to_vec(),
        env: backend.env.clone(),
        ..Options::default()
    }
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// A query process that serves as a worker on a fresh port; returns it and that port.
async fn worker(backend: &Backend) -> (Server, u16) {
    let port = free_port();
    let extra = args(&[
        "--role",
        "query",
        "--query-worker-addr",
        &format!("127.0.0.1:{port}"),
        "--query-cluster-secret",
        SECRET,
    ]);
    (Server::start(options(backend, &extra)).await, port)
}

/// A query process handing every scan to the workers on `ports`.
async fn coordinator(backend: &Backend, ports: &[u16], timeout: &str) -> Server {
    let workers: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let extra = args(&[
        "--role",
        "query",
        "--query-workers",
        &workers.join(","),
        "--query-distribute-bytes",
        "1",
        "--query-cluster-secret",
        SECRET,
        "--query-timeout",
        timeout,
    ]);
    Server::start(options(backend, &extra)).await
}

async fn ingest(backend: &Backend) -> (Server, Workload) {
    let server = Server::start(options(backend, &args(&["--role", "ingest"]))).await;
    let workload = Workload::new();
    // A second tenant with the same series, for the reads across tenants.
    for api in [
        Api::new(server.http()),
        Api::new(server.http()).with_tenant(OTHER_TENANT),
    ] {
        for req in workload.requests() {
            let (status, _, body) = api
                .post_otlp("application/x-protobuf", false, req.encode_to_vec())
                .await;
            assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        }
    }
    (server, workload)
}

/// Every REST endpoint and format, as `(name, path and query)`.
fn rest_calls() -> Vec<(String, String)> {
    let (from, to) = (T0 - 60 * SECOND, T0 + 10 * 60 * SECOND);
    let range = format!("from={from}&to={to}");
    let cpu = format!("profile_type={CPU}&{range}");
    let mut calls = Vec::new();
    for format in ["json", "folded", "pprof", "flamebearer"] {
        calls.push((
            format!("flamegraph {format}"),
            format!("/api/v1/flamegraph?{cpu}&format={format}"),
        ));
    }
    calls.push((
        "flamegraph grouped".into(),
        format!("/api/v1/flamegraph?{cpu}&group_by=service.name,thread.name"),
    ));
    calls.push((
        "flamegraph selected, 12 nodes".into(),
        format!("/api/v1/flamegraph?{cpu}&selector=%7Bservice.name%3D%22checkout%22%7D&max_nodes=12"),
    ));
    calls.push((
        "flamegraph off-cpu by span".into(),
        format!("/api/v1/flamegraph?profile_type={OFF_CPU}&{range}&group_by=span_id"),
    ));
    for aggregation in ["sum", "avg"] {
        calls.push((
            format!("timeseries {aggregation}"),
            format!("/api/v1/timeseries?{cpu}&step=60s&group_by=service.name&aggregation={aggregation}"),
        ));
    }
    calls.push(("top".into(), format!("/api/v1/top?{cpu}&limit=20")));
    let diff = format!(
        "/api/v1/diff?profile_type={CPU}&baseline_selector=%7Bhost.name%3D%22host-a%22%7D&baseline_from={from}&baseline_to={to}&comparison_selector=%7B%7D&comparison_from={from}&comparison_to={to}"
    );
    for format in ["json", "folded", "pprof"] {
        calls.push((format!("diff {format}"), format!("{diff}&format={format}")));
    }
    calls.push(("events".into(), format!("/api/v1/events?{cpu}&limit=25")));
    calls.push(("labels".into(), format!("/api/v1/labels?{range}")));
    calls.push(("profile types".into(), format!("/api/v1/profile-types?{range}")));
    calls
}

/// The answer as compared: JSON without the scan statistics (they tell how the query
/// ran, which is what differs), anything else byte for byte.
async fn answer(server: &Server, path: &str) -> (u16, String) {
    answer_of(server, path, None).await
}

/// [`answer`] of a read of `tenant` (`X-Scope-OrgID`).
async fn answer_of(server: &Server, path: &str, tenant: Option<&str>) -> (u16, String) {
    let mut request = server.client().get(format!("{}{path}", server.http()));
    if let Some(tenant) = tenant {
        request = request.header("X-Scope-OrgID", tenant);
    }
    let resp = request.send().await.unwrap_or_else(|e| panic!("GET {path}: {e}"));
    let status = resp.status().as_u16();
    let bytes = resp.bytes().await.unwrap();
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(mut json) => {
            strip_stats(&mut json);
            (status, json.to_string())
        }
        Err(_) => (status, bytes.iter().map(|b| format!("{b:02x}")).collect()),
    }
}

fn strip_stats(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|key, _| !key.ends_with("stats"));
            map.values_mut().for_each(strip_stats);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_stats),
        _ => {}
    }
}

/// Grafana's Connect calls, each in the binary and the JSON encoding.
fn connect_calls(type_id: &str) -> Vec<Value> {
    let (start, end) = ((T0 / 1_000_000) - 60_000, (T0 / 1_000_000) + 600_000);
    let base = json!({"profileTypeID": type_id, "labelSelector": "{}", "start": start, "end": end});
    let with = |extra: Value| {
        let mut r = base.clone();
        r.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        r
    };
    let mut calls = Vec::new();
    for binary in [true, false] {
        calls.push(rpc(
            &format!("{Q}/SelectMergeStacktraces"),
            binary,
            with(json!({"maxNodes": 1024})),
        ));
        calls.push(rpc(&format!("{Q}/SelectMergeProfile"), binary, base.clone()));
        calls.push(rpc(
            &format!("{Q}/SelectSeries"),
            binary,
            with(json!({"groupBy": ["service_name"], "step": 60.0})),
        ));
    }
    calls
}

async fn assert_same_answers(backend: &Backend) {
    let (_ingest, workload) = ingest(backend).await;
    let expected_total: i64 = workload
        .observations()
        .iter()
        .filter(|o| o.profile_type == CPU)
        .map(|o| o.value)
        .sum();
    let local = Server::start(options(backend, &args(&["--role", "query"]))).await;
    let mut workers = Vec::new();
    for _ in 0..3 {
        workers.push(worker(backend).await);
    }
    let ports: Vec<u16> = workers.iter().map(|(_, p)| *p).collect();

    let calls = rest_calls();
    let mut expected = Vec::new();
    for (name, path) in &calls {
        let (status, body) = answer(&local, path).await;
        assert_eq!(status, 200, "{name}: {body}");
        expected.push(body);
    }
    let flamegraph: Value = serde_json::from_str(&expected[0]).unwrap();
    assert_eq!(
        flamegraph["total"],
        json!(expected_total),
        "the data is what was sent"
    );

    let types = call_all(
        &local.http(),
        &[rpc(
            &format!("{Q}/ProfileTypes"),
            false,
            json!({"start": (T0 / 1_000_000) - 60_000, "end": (T0 / 1_000_000) + 600_000}),
        )],
    );
    let type_id = types[0]["response"]["profileTypes"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["periodType"] == "cpu"))
        .map(|t| t["ID"].as_str().unwrap().to_string())
        .unwrap_or_else(|| panic!("no cpu profile type: {types:?}"));
    let connect = connect_calls(&type_id);
    let expected_connect = call_all(&local.http(), &connect);
    for answer in &expected_connect {
        assert!(answer.get("response").is_some(), "{answer}");
    }

    for n in 1..=3 {
        let coordinator = coordinator(backend, &ports[..n], "60s").await;
        for ((name, path), want) in calls.iter().zip(&expected) {
            let (status, body) = answer(&coordinator, path).await;
            assert_eq!(status, 200, "{name} with {n} workers: {body}");
            assert_eq!(&body, want, "{name} with {n} workers differs from one process");
        }
        assert_eq!(
            call_all(&coordinator.http(), &connect),
            expected_connect,
            "Connect answers with {n} workers differ from one process"
        );
        let shipped = metric(&coordinator, "stackhouse_query_bytes_shipped_total").await;
        // One task is never worth a network hop: with one worker queries stay local.
        assert_eq!(shipped > 0.0, n > 1, "{n} workers: {shipped} bytes shipped");
    }
    let local_shipped = metric(&local, "stackhouse_query_bytes_shipped_total").await;
    assert_eq!(local_shipped, 0.0, "a process without workers ships nothing");

    // Reads across tenants, grouped by tenant, answer through the workers as in one
    // process: each tenant's group holds the whole workload.
    let union = format!("anonymous|{OTHER_TENANT}");
    let over_two = coordinator(backend, &ports[..2], "60s").await;
    for (name, path) in calls.iter().filter(|(name, _)| {
        [
            "flamegraph json",
            "flamegraph grouped",
            "timeseries sum",
            "top",
            "labels",
        ]
        .contains(&name.as_str())
    }) {
        let path = if name == "flamegraph json" {
            path.replace("format=json", "group_by=__tenant_id__")
        } else {
            path.replace("group_by=service.name", "group_by=service.name,__tenant_id__")
        };
        let (status, one) = answer_of(&local, &path, Some(&union)).await;
        assert_eq!(status, 200, "{name} across tenants: {one}");
        let (_, two) = answer_of(&over_two, &path, Some(&union)).await;
        assert_eq!(
            two, one,
            "{name} across tenants: 2 workers differ from one process"
        );
        if name == "flamegraph json" {
            let graph: Value = serde_json::from_str(&one).unwrap();
            assert_eq!(graph["total"], json!(2 * expected_total), "{graph}");
            for group in graph["root"]["children"].as_array().unwrap() {
                assert_eq!(group["total"], json!(expected_total), "{group}");
            }
        }
    }
    let shipped = metric(&over_two, "stackhouse_query_bytes_shipped_total").await;
    assert!(shipped > 0.0, "the reads across tenants ran on the workers");

    // A deletion request hides what it matches from the workers' scans as well: the sum
    // of what is left, computed from the workload, every process alike.
    let (from, to) = (T0 + 30 * SECOND, T0 + 150 * SECOND);
    let made = local
        .client()
        .post(format!("{}/api/v1/admin/deletes", local.http()))
        .json(&json!({"selector": "{service.name=\"checkout\"}", "from": from.to_string(), "to": to.to_string()}))
        .send()
        .await
        .unwrap();
    assert_eq!(made.status(), 201, "{}", made.text().await.unwrap());
    let left: i64 = workload
        .observations()
        .iter()
        .filter(|o| o.profile_type == CPU)
        .filter(|o| {
            !(o.labels.get("service.name").is_some_and(|s| s == "checkout") && (from..to).contains(&o.time))
        })
        .map(|o| o.value)
        .sum();
    assert!(left < expected_total, "the deletion matches some of the workload");
    let (status, alone) = answer(&local, &calls[0].1).await;
    assert_eq!(status, 200, "{alone}");
    let alone: Value = serde_json::from_str(&alone).unwrap();
    assert_eq!(alone["total"], json!(left), "one process, after the deletion");
    let coordinator = coordinator(backend, &ports[..2], "60s").await;
    for ((name, path), before) in calls.iter().zip(&expected) {
        let (status, body) = answer(&coordinator, path).await;
        assert_eq!(status, 200, "{name} after the deletion: {body}");
        let (_, one) = answer(&local, path).await;
        assert_eq!(
            body, one,
            "{name} after the deletion: 2 workers differ from one process"
        );
        if name.starts_with("flamegraph json") {
            assert_ne!(&body, before, "the deletion changed the answer");
            let graph: Value = serde_json::from_str(&body).unwrap();
            assert_eq!(graph["total"], json!(left), "2 workers, after the deletion");
        }
    }
}

/// A counter's value in a process's `/metrics` (0 when absent).
async fn metric(server: &Server, name: &str) -> f64 {
    server.metric(name, &[]).await
}

#[tokio::test(flavor = "multi_thread")]
async fn workers_answer_as_one_process_on_files_and_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Backend {
        catalog: format!("sqlite://{}?mode=rwc", dir.path().join("catalog.db").display()),
        storage: format!("file://{}", dir.path().join("objects").display()),
        env: Vec::new(),
    };
    assert_same_answers(&backend).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn workers_answer_as_one_process_on_s3_and_postgres() {
    let db = PostgresDb::create();
    let s3 = S3Server::start().await;
    let backend = Backend {
        catalog: db.url.clone(),
        storage: format!("s3://{}/distributed", s3.bucket),
        env: s3.env(),
    };
    assert_same_answers(&backend).await;
}

fn signal(server: &Server, signal: &str) {
    let pid = server.pid().expect("a running process");
    let status = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill {signal} {pid}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_query_that_loses_a_worker_runs_again_over_the_others_and_answers_in_full() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Backend {
        catalog: format!("sqlite://{}?mode=rwc", dir.path().join("catalog.db").display()),
        storage: format!("file://{}", dir.path().join("objects").display()),
        env: Vec::new(),
    };
    let (_ingest, workload) = ingest(&backend).await;
    let expected: BTreeMap<String, i64> =
        ui_api_tests::workload::folded(workload.observations().iter().filter(|o| o.profile_type == CPU));
    let mut workers = Vec::new();
    for _ in 0..3 {
        workers.push(worker(&backend).await);
    }
    let ports: Vec<u16> = workers.iter().map(|(_, p)| *p).collect();
    let timeout = Duration::from_secs(20);
    let coordinator = coordinator(&backend, &ports, "20s").await;
    let api = Api::new(coordinator.http());
    let (from, to) = (T0 - 60 * SECOND, T0 + 10 * 60 * SECOND);
    assert_eq!(api.folded(CPU, "{}", from, to).await, expected);
    let path = format!("/api/v1/flamegraph?profile_type={CPU}&from={from}&to={to}&format=folded");
    let retries = || metric(&coordinator, "stackhouse_query_worker_retries_total");

    // Frozen: the process holds its connections but answers nothing. Every worker has a
    // task of the next query, so its first run waits on the frozen one until the
    // connection's pings time out; the probe then leaves the frozen one out and the second
    // run answers from the other two, well within the query timeout.
    let before = retries().await;
    signal(&workers[0].0, "-STOP");
    let started = Instant::now();
    let (status, body) = text(coordinator.client(), format!("{}{path}", coordinator.http())).await;
    let took = started.elapsed();
    eprintln!("frozen worker: {status} after {took:?}");
    assert_eq!(status, 200, "{body}");
    assert_eq!(parse_folded(&body), expected);
    assert!(took < timeout, "the answer took {took:?}");
    assert!(retries().await > before, "the query was not run again");
    signal(&workers[0].0, "-CONT");
    workers[0].0.kill();
    // Each phase below loses one worker mid-query; a worker already gone that the planner
    // still lists would make it a double loss, which answers the documented 503.
    answering(&coordinator, 2).await;

    // Killed while queries run: each still answers in full.
    let racing = || {
        (0..4)
            .map(|_| {
                tokio::spawn(text(
                    coordinator.client(),
                    format!("{}{path}", coordinator.http()),
                ))
            })
            .collect::<Vec<_>>()
    };
    let queries = racing();
    tokio::time::sleep(Duration::from_millis(20)).await;
    workers[1].0.kill();
    all_answer(queries, &expected, timeout).await;
    answering(&coordinator, 1).await;

    // The last worker killed mid-query: the second run has none left and runs in the
    // coordinator.
    let queries = racing();
    tokio::time::sleep(Duration::from_millis(20)).await;
    workers[2].0.kill();
    all_answer(queries, &expected, timeout).await;
    assert_eq!(api.folded(CPU, "{}", from, to).await, expected);
}

/// Waits until the coordinator's probes find `n` workers answering (they run once a
/// second).
async fn answering(coordinator: &Server, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let seen = metric(coordinator, "stackhouse_query_workers_answering").await;
        if seen == n as f64 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{seen} workers answer after 10 s, not {n}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The status and body of GET `url`.
async fn text(client: reqwest::Client, url: String) -> (u16, String) {
    let resp = client.get(url).send().await.unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

/// Every query of `queries` answers in full within `timeout`.
async fn all_answer(
    queries: Vec<tokio::task::JoinHandle<(u16, String)>>,
    expected: &BTreeMap<String, i64>,
    timeout: Duration,
) {
    for query in queries {
        let (status, body) = tokio::time::timeout(timeout, query)
            .await
            .expect("a query outlived the query timeout")
            .unwrap();
        assert_eq!(status, 200, "{body}");
        assert_eq!(&parse_folded(&body), expected);
    }
}
