//! `GET /metrics` of the real binary: Prometheus' own linter accepts it, the ingest
//! counters equal what was sent (counted from the capture), and a real Prometheus scrapes
//! it and sums the same over its HTTP API.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use opentelemetry_proto::tonic::collector::profiles::v1development::profiles_service_client::ProfilesServiceClient;
use prost::Message;
use serde_json::Value;
use ui_api_tests::capture;
use ui_api_tests::server::{Options, Server, free_port};
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

fn require(tool: &str) {
    let found = Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "{tool} is not installed: the metrics tests need Debian's prometheus package (apt-get install prometheus)"
    );
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
    let dir = tempfile::tempdir().unwrap();
    let target = server.http().trim_start_matches("http://").to_string();
    let config = format!(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: stackhouse\n    static_configs:\n      - targets: ['{target}']\n"
    );
    std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
    let port = free_port();
    let mut prometheus = Command::new("prometheus")
        .arg(format!(
            "--config.file={}",
            dir.path().join("prometheus.yml").display()
        ))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("tsdb").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting prometheus");
    let url = format!("http://127.0.0.1:{port}/api/v1/query?query=sum(stackhouse_ingest_samples_total)");
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut last = Value::Null;
    let got = loop {
        if let Ok(r) = ui_api_tests::http_client().get(&url).send().await
            && let Ok(body) = r.json::<Value>().await
        {
            if let Some(v) = body["data"]["result"][0]["value"][1].as_str() {
                break Some(v.parse::<f64>().unwrap());
            }
            last = body;
        }
        if Instant::now() > deadline {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let _ = prometheus.kill();
    let _ = prometheus.wait();
    assert_eq!(
        got,
        Some(expected as f64),
        "sum over Prometheus' API; last answer {last}"
    );
}
