//! `GET /metrics` of the real binary: Prometheus' own linter accepts it, the ingest
//! counters equal what was sent (counted from the capture), and a real Prometheus scrapes
//! it and sums the same over its HTTP API.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use opentelemetry_proto::tonic::collector::profiles::v1development::profiles_service_client::ProfilesServiceClient;
use prost::Message;
use serde_json::Value;
use ui_api_tests::capture;
use ui_api_tests::client::Api;
use ui_api_tests::prometheus::{Prometheus, require};
use ui_api_tests::requests::{PROFILE_TYPE, dictionary, profile, request};
use ui_api_tests::server::{Options, Server};
use ui_api_tests::testdata;

/// The samples of the shared eBPF capture, as `jq` over its JSON twin counts them too.
const CAPTURE_SAMPLES: usize = 5321;

async fn metrics_text(server: &Server) -> String {
    let response = ui_api_tests::http_client()
        .get(format!("{}/metrics", server.http()))
        .send()
        .await
        .expect("GET /metrics");
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"].to_str().unwrap().to_string();
    assert!(content_type.starts_with("text/plain"), "{content_type}");
    response.text().await.unwrap()
}

/// The value of the sample line `name{labels}` (labels exactly as rendered).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread")]
async fn ingest_counters_lint_and_a_real_prometheus_scrape() {
    require("promtool");
    require("prometheus");
    let server = Server::start(Options::default()).await;
    let bytes = std::fs::read(testdata("otlp/ebpf-cpu-offcpu.v1_10.pb")).unwrap();
    let request = ExportProfilesServiceRequest::decode(&bytes[..]).unwrap();
    let observations = capture::from_protobuf(&request);
    let expected = observations.len();
    let from = observations.iter().map(|o| o.time).min().unwrap();
    let to = observations.iter().map(|o| o.time).max().unwrap() + 1;
    assert_eq!(
        expected, CAPTURE_SAMPLES,
        "the capture's samples, counted from the input"
    );
    let profiles: usize = request
        .resource_profiles
        .iter()
        .flat_map(|r| &r.scope_profiles)
        .map(|s| s.profiles.len())
        .sum();
    ProfilesServiceClient::connect(server.grpc())
        .await
        .unwrap()
        .export(request)
        .await
        .expect("export accepted");
    // A query, so that the query side has something to show.
    let query = format!(
        "{}/api/v1/flamegraph?profile_type=samples:count:cpu:nanoseconds&from={from}&to={to}",
        server.http()
    );
    let _ = ui_api_tests::http_client().get(query).send().await.unwrap();

    let text = metrics_text(&server).await;
    let grpc = r#"{protocol="otlp_grpc"}"#;
    assert_eq!(
        sample(&text, &format!("stackhouse_ingest_samples_total{grpc}")),
        Some(expected as f64),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"stackhouse_ingest_profiles_total{protocol="otlp_grpc",outcome="stored"}"#
        ),
        Some(profiles as f64)
    );
    assert_eq!(
        sample(
            &text,
            r#"stackhouse_ingest_requests_total{protocol="otlp_grpc",outcome="ok"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(&text, &format!("stackhouse_ingest_bytes_total{grpc}")),
        Some(bytes.len() as f64)
    );
    for present in [
        "stackhouse_flush_duration_seconds_count",
        "stackhouse_segment_bytes_count",
        "stackhouse_ingest_pending_bytes",
        "stackhouse_ingest_budget_bytes",
        r#"stackhouse_http_request_duration_seconds_count{route="/api/v1/flamegraph",status="200"}"#,
        "stackhouse_query_bytes_scanned_total",
    ] {
        assert!(
            text.lines().any(|l| l.starts_with(present)),
            "{present} in\n{text}"
        );
    }

    // Prometheus' own linter over the live exposition.
    let mut lint = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut lint.stdin.take().unwrap(), text.as_bytes()).unwrap();
    let out = lint.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // A real Prometheus scraping the server every second.
    let target = server.http().trim_start_matches("http://").to_string();
    let prometheus = Prometheus::scraping(&[target], &[]);
    prometheus.ready().await;
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut last = Value::Null;
    let got = loop {
        let body = prometheus
            .get(
                "/api/v1/query",
                &[("query", "sum(stackhouse_ingest_samples_total)")],
            )
            .await;
        if let Some(v) = body["data"]["result"][0]["value"][1].as_str() {
            break Some(v.parse::<f64>().unwrap());
        }
        last = body;
        if Instant::now() > deadline {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    drop(prometheus);
    assert_eq!(
        got,
        Some(expected as f64),
        "sum over Prometheus' API; last answer {last}"
    );
}

/// Two profiles with ids, as OTLP requires: `samples` samples on the first and one on the
/// second, at `time`.
fn two_profiles(time: u64, first_id: u8, samples: usize) -> ExportProfilesServiceRequest {
    let mut first = profile(time, 1, 3);
    first.samples = (0..samples as i64)
        .map(|i| {
            let mut sample = profile(time, 1 + (i % 2) as i32, 2 + i).samples.remove(0);
            // Distinct stacks or timestamps: no two samples of a profile collapse into one.
            sample.timestamps_unix_nano = vec![time + i as u64];
            sample
        })
        .collect();
    first.profile_id = vec![first_id; 16];
    let mut second = profile(time + 1, 2, 5);
    second.profile_id = vec![first_id + 1; 16];
    request("retried", vec![first, second], dictionary())
}

/// What one request carries: (profiles, samples, the sum of their values).
fn counted(request: &ExportProfilesServiceRequest) -> (usize, usize, i64) {
    let profiles: Vec<_> = request
        .resource_profiles
        .iter()
        .flat_map(|r| &r.scope_profiles)
        .flat_map(|s| &s.profiles)
        .collect();
    let samples = profiles.iter().flat_map(|p| &p.samples);
    (
        profiles.len(),
        samples.clone().count(),
        samples.flat_map(|s| &s.values).sum(),
    )
}

/// An exporter that resends a request (its answer was lost) sends the same profiles again:
/// stored once, and counted once as stored and then as repeated, never as stored twice.
/// Resent one after the other (found in the catalog) and all at once (found among the
/// requests waiting for the same flush).
#[tokio::test(flavor = "multi_thread")]
async fn resent_profiles_count_as_repeated_not_stored() {
    let server = Server::start(Options::default()).await;
    let api = Api::new(server.http());
    let mut client = ProfilesServiceClient::connect(server.grpc()).await.unwrap();
    let time = 1_700_000_000_000_000_000;
    let mut expected = (0, 0, 0);
    for (round, request) in [two_profiles(time, 1, 4), two_profiles(time + 10, 11, 3)]
        .into_iter()
        .enumerate()
    {
        let (profiles, samples, values) = counted(&request);
        assert_eq!(profiles, 2);
        if round == 0 {
            for _ in 0..3 {
                let answer = client.export(request.clone()).await.expect("export accepted");
                assert_eq!(answer.into_inner().partial_success, None, "nothing refused");
            }
        } else {
            let sends: Vec<_> = (0..3)
                .map(|_| {
                    let (mut client, request) = (client.clone(), request.clone());
                    tokio::spawn(async move { client.export(request).await })
                })
                .collect();
            for send in sends {
                let answer = send.await.unwrap().expect("export accepted");
                assert_eq!(answer.into_inner().partial_success, None, "nothing refused");
            }
        }
        expected = (expected.0 + profiles, expected.1 + samples, expected.2 + values);
        let text = metrics_text(&server).await;
        let value = |series: &str| sample(&text, series).unwrap_or(0.0) as usize;
        let stored = value(r#"stackhouse_ingest_profiles_total{protocol="otlp_grpc",outcome="stored"}"#);
        let repeated = value(r#"stackhouse_ingest_profiles_total{protocol="otlp_grpc",outcome="repeated"}"#);
        let repeated_total = value("stackhouse_ingest_repeated_profiles_total");
        let stored_samples = value(r#"stackhouse_ingest_samples_total{protocol="otlp_grpc"}"#);
        println!(
            "after round {round} ({}): stored profiles {stored}, repeated {repeated} \
             (repeated_profiles_total {repeated_total}), samples_total {stored_samples}",
            if round == 0 {
                "one after the other"
            } else {
                "all at once"
            }
        );
        assert_eq!(stored, expected.0, "stored profiles\n{text}");
        assert_eq!(repeated, 2 * expected.0, "repeated profiles\n{text}");
        assert_eq!(repeated_total, 2 * expected.0, "{text}");
        assert_eq!(stored_samples, expected.1, "samples stored\n{text}");
    }
    let stored: i64 = api
        .folded(PROFILE_TYPE, "{}", time as i64, time as i64 + 20)
        .await
        .values()
        .sum();
    assert_eq!(
        stored, expected.2,
        "the stored values are those of one copy of each"
    );
}
