//! The seed format (OTLP profiles v1experimental, OTEP 239): the OTEP's own example sent
//! through `POST /v1experimental/profiles` (protobuf and JSON) and the gRPC
//! `v1experimental.ProfilesService/Export`, then read back with its attribute, trace link and
//! timestamp; a request with one bad container keeps the good one.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::collections::BTreeMap;

use http::uri::PathAndQuery;
use prost::Message;
use ui_api_tests::client::Api;
use ui_api_tests::experimental::{
    END, ExportProfilesServiceRequest, ExportProfilesServiceResponse, PATH, PROFILE_TYPE, SPAN_ID, START,
    TIMESTAMP, TRACE_ID, container, otep_json, otep_profile, otep_profile_deprecated_fields, request,
};
use ui_api_tests::http_query::{Http, params, with};
use ui_api_tests::ingest_client::Ingest;
use ui_api_tests::server::{Options, Server};

const FROM: i64 = START as i64 - 1;
const TO: i64 = END as i64 + 1;

async fn post(server: &Server, content_type: &str, body: Vec<u8>) -> ui_api_tests::ingest_client::Answer {
    Ingest::new(server.http())
        .post(
            "/v1experimental/profiles",
            &[],
            &[("Content-Type", content_type)],
            body,
        )
        .await
}

async fn export_grpc(
    server: &Server,
    req: ExportProfilesServiceRequest,
) -> Result<ExportProfilesServiceResponse, tonic::Status> {
    let channel = tonic::transport::Endpoint::from_shared(server.grpc())
        .unwrap()
        .connect()
        .await
        .expect("gRPC connect");
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.expect("gRPC ready");
    let codec =
        tonic_prost::ProstCodec::<ExportProfilesServiceRequest, ExportProfilesServiceResponse>::default();
    grpc.unary(tonic::Request::new(req), PathAndQuery::from_static(PATH), codec)
        .await
        .map(tonic::Response::into_inner)
}

fn example_folded() -> BTreeMap<String, i64> {
    [("foo;bar;baz".to_string(), 100), ("foo;bar".to_string(), 200)].into()
}

/// Everything the OTEP example says, read back for one service.
async fn assert_example(server: &Server, service: &str) {
    let api = Api::new(server.http());
    let http = Http::new(server.http());
    let only = format!("{{service.name={service:?}}}");
    assert_eq!(
        api.folded(PROFILE_TYPE, &only, FROM, TO).await,
        example_folded(),
        "{service}: flamegraph"
    );
    let region = format!("{{service.name={service:?}, region=\"us\"}}");
    assert_eq!(
        api.folded(PROFILE_TYPE, &region, FROM, TO).await,
        example_folded(),
        "{service}: {region} matches both samples"
    );
    let not_region = format!("{{service.name={service:?}, region!=\"us\"}}");
    assert!(
        api.folded(PROFILE_TYPE, &not_region, FROM, TO).await.is_empty(),
        "{service}: {not_region} matches nothing"
    );

    let trace = http
        .text(
            &format!("/api/v1/traces/{TRACE_ID}/flamegraph"),
            &with(
                params(PROFILE_TYPE, FROM, TO),
                &[("selector", &only), ("format", "folded")],
            ),
        )
        .await;
    assert_eq!(
        trace.lines().filter(|l| !l.is_empty()).collect::<Vec<_>>(),
        vec!["foo;bar;baz 100"],
        "{service}: the trace's flamegraph is the linked sample"
    );

    let page = http
        .json(
            "/api/v1/events",
            &with(params(PROFILE_TYPE, FROM, TO), &[("selector", &only)]),
        )
        .await;
    let events = page["events"].as_array().unwrap();
    assert_eq!(events.len(), 2, "{service}: two events: {page}");
    let stack = |e: &serde_json::Value| -> Vec<String> {
        page["stacks"][e["stack_id"].as_str().unwrap()]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap().to_string())
            .collect()
    };
    let linked = events.iter().find(|e| e["value"] == 100).expect("the 100 event");
    assert_eq!(
        linked["timestamp"].as_i64(),
        Some(TIMESTAMP as i64),
        "{service}: {linked}"
    );
    assert_eq!(linked["trace_id"].as_str(), Some(TRACE_ID), "{service}: {linked}");
    assert_eq!(linked["span_id"].as_str(), Some(SPAN_ID), "{service}: {linked}");
    assert_eq!(
        linked["attributes"]["region"].as_str(),
        Some("us"),
        "{service}: {linked}"
    );
    assert_eq!(stack(linked), ["foo", "bar", "baz"]);
    let other = events.iter().find(|e| e["value"] == 200).expect("the 200 event");
    assert!(
        other["trace_id"].is_null() && other["span_id"].is_null(),
        "{service}: the 200 sample has no link: {other}"
    );
    let t = other["timestamp"].as_i64().unwrap();
    assert!(
        (START as i64..=END as i64).contains(&t),
        "{service}: the untimed sample is at the container's time, got {t}"
    );
    assert_eq!(stack(other), ["foo", "bar"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn otep_example_round_trips_through_every_v1experimental_endpoint() {
    let server = Server::start(Options::default()).await;

    let pb = request("seed-http-pb", vec![container(otep_profile())]).encode_to_vec();
    let answer = post(&server, "application/x-protobuf", pb).await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    let response = ExportProfilesServiceResponse::decode(&answer.body[..]).expect("protobuf response");
    assert!(
        response.partial_success.is_none_or(|p| p.rejected_profiles == 0),
        "nothing rejected"
    );

    let json = otep_json("seed-http-json").to_string().into_bytes();
    let answer = post(&server, "application/json", json).await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert!(answer.content_type.starts_with("application/json"), "{answer:?}");
    assert!(
        answer
            .json()
            .get("partialSuccess")
            .is_none_or(|p| p.get("rejectedProfiles").is_none()),
        "nothing rejected: {}",
        answer.text()
    );

    // opentelemetry-proto v1.3's published name of field 13, as its protojson writes it;
    // gzipped as collectors send it.
    let mut v13 = otep_json("seed-http-json-v13");
    let sample = &mut v13["resourceProfiles"][0]["scopeProfiles"][0]["profiles"][0]["profile"]["sample"][0];
    let timestamps = sample.as_object_mut().unwrap().remove("timestamps").unwrap();
    sample["timestampsUnixNano"] = timestamps;
    let answer = Ingest::new(server.http())
        .post(
            "/v1experimental/profiles",
            &[],
            &[("Content-Type", "application/json"), ("Content-Encoding", "gzip")],
            ui_api_tests::client::gzip(v13.to_string().as_bytes()),
        )
        .await;
    assert_eq!(answer.status, 200, "{}", answer.text());

    let response = export_grpc(&server, request("seed-grpc", vec![container(otep_profile())]))
        .await
        .expect("gRPC export accepted");
    assert!(response.partial_success.is_none_or(|p| p.rejected_profiles == 0));

    let deprecated = request(
        "seed-deprecated",
        vec![container(otep_profile_deprecated_fields())],
    );
    let answer = post(&server, "application/x-protobuf", deprecated.encode_to_vec()).await;
    assert_eq!(answer.status, 200, "{}", answer.text());

    let services = [
        "seed-http-pb",
        "seed-http-json",
        "seed-http-json-v13",
        "seed-grpc",
        "seed-deprecated",
    ];
    for service in services {
        assert_example(&server, service).await;
    }
    // The selector on the sample attribute alone spans every service.
    let api = Api::new(server.http());
    let all = api.folded(PROFILE_TYPE, r#"{region="us"}"#, FROM, TO).await;
    assert_eq!(
        all,
        example_folded().into_iter().map(|(k, v)| (k, 5 * v)).collect(),
        "{{region=\"us\"}} over the five senders"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn one_bad_container_is_rejected_and_the_good_one_kept() {
    let server = Server::start(Options::default()).await;
    let mut bad = otep_profile();
    // A slice past the end of location_indices.
    bad.sample[0].locations_start_index = 2;
    bad.sample[0].locations_length = 5;
    let req = request(
        "seed-partial-http",
        vec![container(bad.clone()), container(otep_profile())],
    );
    let answer = post(&server, "application/x-protobuf", req.encode_to_vec()).await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    let partial = ExportProfilesServiceResponse::decode(&answer.body[..])
        .unwrap()
        .partial_success
        .expect("partial success");
    assert_eq!(partial.rejected_profiles, 1, "{partial:?}");
    assert!(
        partial.error_message.contains("location"),
        "the message names the problem: {partial:?}"
    );
    assert_example(&server, "seed-partial-http").await;

    let req = request(
        "seed-partial-grpc",
        vec![container(otep_profile()), container(bad)],
    );
    let partial = export_grpc(&server, req)
        .await
        .expect("gRPC export answered")
        .partial_success
        .expect("partial success");
    assert_eq!(partial.rejected_profiles, 1, "{partial:?}");
    assert_example(&server, "seed-partial-grpc").await;
}
