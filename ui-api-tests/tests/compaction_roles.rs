//! Compaction seen from outside: a burst of small segments is merged within 30 seconds
//! under the default flags, and the ingest, query and compactor roles run as separate
//! processes sharing one Postgres catalog and one object store.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use prost::Message;
use serde_json::Value;
use ui_api_tests::client::Api;
use ui_api_tests::requests::{PROFILE_TYPE, dictionary, profile, request};
use ui_api_tests::server::{Options, Server};
use ui_api_tests::services::PostgresDb;

const SECOND: u64 = 1_000_000_000;

/// Sample time for a burst: a few seconds ago, placed so the whole burst shares one
/// minute window (compaction merges level 0 per minute).
fn burst_time() -> u64 {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64;
    let minute = now / (60 * SECOND) * 60 * SECOND;
    (now - 5 * SECOND).max(minute + SECOND)
}

/// Sends `n` requests one after another, each acknowledged before the next, so each lands
/// in its own segment. Request `i` holds one sample of value `i + 1` on stack `1 + i % 2`.
/// Returns the folded paths the store must hold afterwards.
async fn burst(api: &Api, n: usize, time: u64) -> BTreeMap<String, i64> {
    let mut expected = BTreeMap::new();
    for i in 0..n {
        let stack = 1 + (i % 2) as i32;
        let value = i as i64 + 1;
        let req = request("burst", vec![profile(time, stack, value)], dictionary());
        let (status, _, body) = api
            .post_otlp("application/x-protobuf", false, req.encode_to_vec())
            .await;
        assert_eq!(status, 200, "request {i}: {}", String::from_utf8_lossy(&body));
        let path = if stack == 1 { "main;foo" } else { "main;foo;bar" };
        *expected.entry(path.to_string()).or_insert(0) += value;
    }
    expected
}

async fn segments(api: &Api) -> u64 {
    api.stats().await["segments"].as_u64().expect("stats.segments")
}

/// Polls until the store holds at most `want` segments; returns how long it took.
async fn wait_for_segments(api: &Api, want: u64, limit: Duration) -> Duration {
    let start = Instant::now();
    loop {
        let now = segments(api).await;
        if now <= want {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < limit,
            "still {now} segments after {limit:?}; wanted at most {want}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn assert_burst(api: &Api, expected: &BTreeMap<String, i64>, time: u64) {
    let from = time as i64 - 60 * SECOND as i64;
    let to = time as i64 + 60 * SECOND as i64;
    assert_eq!(
        &api.folded(PROFILE_TYPE, "{}", from, to).await,
        expected,
        "every acknowledged sample once, at its value"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_burst_is_compacted_within_30_seconds_by_default() {
    // The harness only shortens the flush interval and turns retention off; every
    // compaction flag keeps its default.
    let server = Server::start(Options::default()).await;
    let api = Api::new(server.http());
    let time = burst_time();
    let n = 24;
    let expected = burst(&api, n, time).await;
    let before = segments(&api).await;
    assert!(
        before > 1,
        "the burst should first land as many small segments, found {before}"
    );
    let took = wait_for_segments(&api, 1, Duration::from_secs(30)).await;
    eprintln!(
        "{n} segments ({before} when the last was acknowledged) compacted to 1, {took:?} after the last ack"
    );
    assert_burst(&api, &expected, time).await;
    let stats = api.stats().await;
    assert_eq!(
        stats["tables"]["samples"]["objects"].as_u64(),
        Some(1),
        "one samples object after compaction: {stats}"
    );
    assert_eq!(
        stats["tables"]["samples"]["rows"].as_u64(),
        Some(n as u64),
        "no sample lost or duplicated by the merge: {stats}"
    );
}

fn role(role: &str, catalog: &str, storage: &str, extra: &[&str]) -> Options {
    let mut extra_args = vec!["--role".to_string(), role.to_string()];
    extra_args.extend(extra.iter().map(|s| s.to_string()));
    Options {
        catalog: Some(catalog.to_string()),
        storage: Some(storage.to_string()),
        extra_args,
        ..Options::default()
    }
}

async fn status_of(url: &str) -> u16 {
    ui_api_tests::http_client()
        .get(url)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"))
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread")]
async fn roles_run_as_separate_processes_on_one_postgres_catalog() {
    let db = PostgresDb::create();
    let objects = tempfile::tempdir().unwrap();
    let storage = format!("file://{}", objects.path().display());
    let fast = [
        "--compaction-interval",
        "1s",
        "--compaction-l0-age",
        "1s",
        "--deletion-grace",
        "1s",
        "--cleanup-interval",
        "1s",
    ];
    let ingest = Server::start(role("ingest", &db.url, &storage, &[])).await;
    let query = Server::start(role("query", &db.url, &storage, &[])).await;
    let compactor = Server::start(role("compactor", &db.url, &storage, &fast)).await;

    // Each process serves its role's routes only; health everywhere.
    for server in [&ingest, &query, &compactor] {
        assert_eq!(status_of(&format!("{}/healthz", server.http())).await, 200);
    }
    let types = "/api/v1/profile-types?from=now-1h";
    assert_eq!(status_of(&format!("{}{types}", ingest.http())).await, 404);
    assert_eq!(status_of(&format!("{}{types}", compactor.http())).await, 404);
    assert_eq!(status_of(&format!("{}{types}", query.http())).await, 200);
    let probe = request("burst", vec![], dictionary()).encode_to_vec();
    let (status, _, _) = Api::new(query.http())
        .post_otlp("application/x-protobuf", false, probe.clone())
        .await;
    assert_eq!(status, 404, "the query role does not ingest");
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", query.grpc_port)).is_err(),
        "the query role does not listen for OTLP gRPC"
    );

    let time = burst_time();
    let n = 12;
    let expected = burst(&Api::new(ingest.http()), n, time).await;
    let query_api = Api::new(query.http());
    // The query process sees what the ingest process acknowledged, before and after the
    // compactor process merges it.
    assert_burst(&query_api, &expected, time).await;
    let took = wait_for_segments(&query_api, 1, Duration::from_secs(30)).await;
    eprintln!("{n} segments compacted by the compactor process in {took:?}");
    assert_burst(&query_api, &expected, time).await;

    // After the grace period the compactor deletes the replaced objects: the store holds
    // one samples object again, and the query process still answers exactly.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let samples = sample_objects(objects.path());
        if samples == 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{samples} samples objects left in the store 30 s after the merge"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_burst(&query_api, &expected, time).await;
    let stats: Value = query_api.stats().await;
    assert_eq!(
        stats["tables"]["samples"]["rows"].as_u64(),
        Some(n as u64),
        "{stats}"
    );
}

fn sample_objects(dir: &std::path::Path) -> usize {
    walk(dir)
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n == "samples.parquet"))
        .count()
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}
