//! Per-tenant ingestion rates on the real binary: Pyroscope ingest over HTTP (429 with
//! `Retry-After`, 413 for a request over the burst) and OTLP gRPC with the independent
//! client (RESOURCE_EXHAUSTED, with RetryInfo only when a retry can succeed). Nothing of a
//! refused request is stored: totals are the sum of the accepted requests' input.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::time::Duration;

use opentelemetry_proto::tonic::collector::profiles::v1development::profiles_service_client::ProfilesServiceClient;
use serde_json::Value;
use tonic_types::StatusExt;
use ui_api_tests::server::{Options, Server};
use ui_api_tests::workload::{self, Workload};

/// Unix seconds of the folded uploads.
const AT: i64 = 1_700_000_000;
const NANOS: i64 = 1_000_000_000;

/// `lines` distinct stacks of value 1 each: one sample per line.
fn folded(lines: usize, tag: &str) -> Vec<u8> {
    (0..lines)
        .map(|i| format!("main;{tag}_{i} 1\n"))
        .collect::<String>()
        .into_bytes()
}

/// POSTs a folded body to `/ingest` as `tenant`: status and `Retry-After`.
async fn ingest(server: &Server, tenant: &str, body: Vec<u8>) -> (u16, Option<String>, String) {
    let response = ui_api_tests::http_client()
        .post(format!("{}/ingest", server.http()))
        .query(&[
            ("name", "app"),
            ("from", &AT.to_string()),
            ("until", &(AT + 10).to_string()),
        ])
        .header("x-scope-orgid", tenant)
        .header("content-type", "application/octet-stream")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    (status, retry_after, response.text().await.unwrap())
}

async fn total(server: &Server, tenant: &str, profile_type: &str, from: i64, to: i64) -> i64 {
    let body: Value = ui_api_tests::http_client()
        .get(format!(
            "{}/api/v1/flamegraph?profile_type={profile_type}&from={from}&to={to}",
            server.http()
        ))
        .header("x-scope-orgid", tenant)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    body["total"]
        .as_i64()
        .unwrap_or_else(|| panic!("a total: {body}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn tenants_over_their_rate_are_told_when_to_retry() {
    let work = Workload::new();
    let first = work.requests().remove(0);
    let obs = work.observations();
    // The first request holds the first resource's samples.
    let first_resource = workload::resources().remove(0);
    let in_first: Vec<_> = obs
        .iter()
        .filter(|o| first_resource.iter().all(|(k, v)| o.labels.get(k) == Some(v)))
        .collect();
    let samples = in_first.len();
    let server = Server::start(Options {
        extra_args: [
            "--ingest-rate-samples",
            "100",
            "--ingest-burst-seconds",
            "1",
            "--tenant-ingest-rate-samples",
        ]
        .map(String::from)
        .into_iter()
        .chain([format!("vip=0,tiny=10,grpc={}", samples * 3 / 2)])
        .collect(),
        ..Options::default()
    })
    .await;

    // HTTP: 60 of the burst of 100, then 60 more is over: 429 with Retry-After.
    let (status, _, body) = ingest(&server, "t", folded(60, "a")).await;
    assert_eq!(status, 200, "{body}");
    let (status, retry_after, body) = ingest(&server, "t", folded(60, "b")).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(retry_after.as_deref(), Some("1"), "Retry-After");
    assert!(body.contains("ingestion rate"), "the message says why: {body}");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (status, _, body) = ingest(&server, "t", folded(60, "c")).await;
    assert_eq!(status, 200, "after Retry-After: {body}");
    // More than the whole burst can never pass: 413, no Retry-After.
    let (status, retry_after, body) = ingest(&server, "t", folded(150, "d")).await;
    assert_eq!((status, retry_after), (413, None), "{body}");
    // A tenant without a limit is not held back.
    let (status, _, body) = ingest(&server, "vip", folded(500, "v")).await;
    assert_eq!(status, 200, "{body}");
    let (from, to) = ((AT - 60) * NANOS, (AT + 60) * NANOS);
    let pyroscope_type = "cpu:count::";
    assert_eq!(
        total(&server, "t", pyroscope_type, from, to).await,
        120,
        "the accepted requests only"
    );
    assert_eq!(total(&server, "vip", pyroscope_type, from, to).await, 500);

    // gRPC: over the burst is RESOURCE_EXHAUSTED without RetryInfo (never retried) ...
    let mut client = ProfilesServiceClient::connect(server.grpc()).await.unwrap();
    let with_tenant = |tenant: &str| {
        let mut request = tonic::Request::new(first.clone());
        request
            .metadata_mut()
            .insert("x-scope-orgid", tenant.parse().unwrap());
        request
    };
    let status = client.export(with_tenant("tiny")).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    assert!(
        status.get_details_retry_info().is_none(),
        "a request over the burst is not retried"
    );
    // ... and over the rate, with RetryInfo so OTLP exporters retry.
    client
        .export(with_tenant("grpc"))
        .await
        .expect("within the burst");
    let status = client.export(with_tenant("grpc")).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    let retry = status.get_details_retry_info().expect("RetryInfo");
    assert!(
        retry.retry_delay.is_some_and(|d| d >= Duration::from_secs(1)),
        "{retry:?}"
    );
    let cpu: i64 = in_first
        .iter()
        .filter(|o| o.profile_type == workload::CPU)
        .map(|o| o.value)
        .sum();
    assert_eq!(
        total(&server, "grpc", workload::CPU, workload::FROM, workload::TO).await,
        cpu,
        "one export stored, the refused one not"
    );
}
