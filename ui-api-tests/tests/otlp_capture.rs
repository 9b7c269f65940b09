//! The eBPF profiler capture, sent by independent clients over gRPC and OTLP/HTTP JSON,
//! queried back and compared with values computed from the input itself.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use opentelemetry_proto::tonic::collector::profiles::v1development::profiles_service_client::ProfilesServiceClient;
use prost::Message;
use ui_api_tests::checks::assert_api_matches;
use ui_api_tests::client::{Api, gzip};
use ui_api_tests::server::{Options, Server};
use ui_api_tests::{capture, testdata};

pub fn capture_request() -> ExportProfilesServiceRequest {
    let bytes = std::fs::read(testdata("otlp/ebpf-cpu-offcpu.v1_10.pb")).unwrap();
    ExportProfilesServiceRequest::decode(&bytes[..]).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn grpc_capture_matches_input() {
    let server = Server::start(Options::default()).await;
    let request = capture_request();
    let expected = capture::from_protobuf(&request);
    assert!(expected.len() > 100, "the capture has many observations");

    let mut client = ProfilesServiceClient::connect(server.grpc())
        .await
        .unwrap()
        .send_compressed(tonic::codec::CompressionEncoding::Gzip);
    let response = client
        .export(request)
        .await
        .expect("export accepted")
        .into_inner();
    assert!(
        response
            .partial_success
            .as_ref()
            .is_none_or(|p| p.rejected_profiles == 0),
        "nothing rejected: {response:?}"
    );
    assert_api_matches(&Api::new(server.http()), &expected).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn http_json_capture_matches_input() {
    let server = Server::start(Options::default()).await;
    let text = std::fs::read(testdata("otlp/ebpf-cpu-offcpu.v1_10.json")).unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&text).unwrap();
    let expected = capture::from_json(&doc);
    assert!(expected.len() > 100);

    let api = Api::new(server.http()).with_tenant("json-tenant");
    let (status, content_type, body) = api.post_otlp("application/json", true, gzip(&text)).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(content_type, "application/json");
    let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert!(body.get("partialSuccess").is_none(), "nothing rejected: {body}");
    assert_api_matches(&api, &expected).await;

    // Another tenant sees nothing.
    let (status, types) = Api::new(server.http())
        .get_json(
            "/api/v1/profile-types",
            &[("from", "0".into()), ("to", i64::MAX.to_string())],
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        types["profile_types"].as_array().unwrap().len(),
        0,
        "tenant isolation: {types}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn protobuf_and_json_twins_give_the_same_observations() {
    let from_pb = capture::from_protobuf(&capture_request());
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(testdata("otlp/ebpf-cpu-offcpu.v1_10.json")).unwrap()).unwrap();
    let from_json = capture::from_json(&doc);
    assert_eq!(capture::folded(&from_pb), capture::folded(&from_json));
    assert_eq!(capture::total(&from_pb), capture::total(&from_json));
}
