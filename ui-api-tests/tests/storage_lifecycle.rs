//! Deduplication across requests, durability across SIGKILL, both catalogs, and S3.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use opentelemetry_proto::tonic::collector::profiles::v1development::profiles_service_client::ProfilesServiceClient;
use prost::Message;
use serde_json::Value;
use ui_api_tests::capture::{self, Observation};
use ui_api_tests::client::Api;
use ui_api_tests::server::{Options, Server};
use ui_api_tests::services::{PostgresDb, S3Server};
use ui_api_tests::testdata;

fn capture_bytes() -> Vec<u8> {
    std::fs::read(testdata("otlp/ebpf-cpu-offcpu.v1_10.pb")).unwrap()
}

fn expected() -> Vec<Observation> {
    capture::from_protobuf(&ExportProfilesServiceRequest::decode(&capture_bytes()[..]).unwrap())
}

async fn send_grpc(server: &Server) {
    let request = ExportProfilesServiceRequest::decode(&capture_bytes()[..]).unwrap();
    let mut client = ProfilesServiceClient::connect(server.grpc()).await.unwrap();
    let response = client.export(request).await.expect("acknowledged").into_inner();
    assert!(response.partial_success.is_none_or(|p| p.rejected_profiles == 0));
}

/// Every profile type's total and folded paths equal `expected` scaled by `times`.
async fn assert_totals(api: &Api, expected: &[Observation], times: i64) {
    let mut types: Vec<&str> = expected.iter().map(|o| o.profile_type.as_str()).collect();
    types.sort();
    types.dedup();
    for ty in types {
        let of_type: Vec<&Observation> = expected.iter().filter(|o| o.profile_type == ty).collect();
        let want: std::collections::BTreeMap<String, i64> = capture::folded(of_type.iter().copied())
            .into_iter()
            .map(|(k, v)| (k, v * times))
            .collect();
        let (from, to) = ui_api_tests::checks::span(&of_type);
        assert_eq!(api.folded(ty, "{}", from, to).await, want, "{ty} x{times}");
    }
}

fn rows(stats: &Value, table: &str) -> i64 {
    stats["tables"][table]["rows"].as_i64().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread")]
async fn same_capture_twice_adds_no_symbol_rows() {
    let server = Server::start(Options::default()).await;
    let api = Api::new(server.http());
    let expected = expected();
    let observations = expected.len() as i64;

    let (status, _, body) = api
        .post_otlp("application/x-protobuf", false, capture_bytes())
        .await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let first = api.stats().await;
    assert_eq!(
        rows(&first, "samples"),
        observations,
        "one row per observation: {first}"
    );
    for table in ["stacks", "locations", "functions", "mappings"] {
        assert!(rows(&first, table) > 0, "{table} stored: {first}");
    }

    let (status, _, _) = api
        .post_otlp("application/x-protobuf", false, capture_bytes())
        .await;
    assert_eq!(status, 200);
    let second = api.stats().await;
    assert_eq!(
        rows(&second, "samples"),
        2 * observations,
        "samples doubled: {second}"
    );
    for table in ["stacks", "locations", "functions", "mappings", "attribute_sets"] {
        assert_eq!(
            rows(&second, table),
            rows(&first, table),
            "no new {table} rows: {second}"
        );
    }
    assert_totals(&api, &expected, 2).await;
}

async fn survives_sigkill(options: Options) {
    let mut server = Server::start(options).await;
    let expected = expected();
    send_grpc(&server).await;
    // Acknowledged, then killed without any chance to flush.
    server.kill();
    server.restart().await;
    assert_totals(&Api::new(server.http()), &expected, 1).await;

    // A graceful stop after an acknowledged write also keeps it.
    send_grpc(&server).await;
    assert!(server.terminate(), "clean exit on SIGTERM");
    server.restart().await;
    let api = Api::new(server.http());
    assert_totals(&api, &expected, 2).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn acknowledged_data_survives_sigkill_with_sqlite() {
    survives_sigkill(Options::default()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn acknowledged_data_survives_sigkill_with_postgres() {
    let db = PostgresDb::create();
    survives_sigkill(Options {
        catalog: Some(db.url.clone()),
        ..Default::default()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn s3_storage_with_postgres_catalog() {
    let s3 = S3Server::start().await;
    let db = PostgresDb::create();
    let options = Options {
        catalog: Some(db.url.clone()),
        storage: Some(format!("s3://{}/stackhouse", s3.bucket)),
        env: s3.env(),
        ..Default::default()
    };
    let mut server = Server::start(options).await;
    send_grpc(&server).await;
    let keys = s3.list("stackhouse/").await;
    assert!(
        keys.iter().any(|k| k.ends_with("samples.parquet")),
        "objects in the bucket: {keys:?}"
    );
    assert!(
        keys.iter()
            .all(|k| k.starts_with("stackhouse/tenants/anonymous/")),
        "{keys:?}"
    );
    server.restart().await;
    assert_totals(&Api::new(server.http()), &expected(), 1).await;
}
