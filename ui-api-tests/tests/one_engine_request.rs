//! Every read is one engine request: its parameters resolved (range defaults, profile type,
//! limits) and its query run inside one timeout, timed and counted once. Counted through
//! the engine's own metric, `stackhouse_query_duration_seconds_count`, summed over its
//! labels, before and after each request to the real binary.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use opentelemetry_proto::tonic::collector::profiles::v1development::profiles_service_client::ProfilesServiceClient;
use prost::Message;
use serde_json::{Value, json};
use ui_api_tests::capture;
use ui_api_tests::server::{Options, Server};
use ui_api_tests::testdata;

const COUNT: &str = "stackhouse_query_duration_seconds_count";

/// The engine requests counted so far, over every endpoint and outcome.
async fn engine_requests(server: &Server) -> f64 {
    let text = ui_api_tests::http_client()
        .get(format!("{}/metrics", server.http()))
        .send()
        .await
        .expect("GET /metrics")
        .text()
        .await
        .unwrap();
    text.lines()
        .filter(|l| l.starts_with(COUNT))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

enum Read {
    Get(String),
    Connect(&'static str, Value),
}

#[tokio::test(flavor = "multi_thread")]
async fn every_read_is_one_engine_request() {
    let server = Server::start(Options::default()).await;
    let bytes = std::fs::read(testdata("otlp/ebpf-cpu-offcpu.v1_10.pb")).unwrap();
    let request = ExportProfilesServiceRequest::decode(&bytes[..]).unwrap();
    let observations = capture::from_protobuf(&request);
    let from = observations.iter().map(|o| o.time).min().unwrap();
    let to = observations.iter().map(|o| o.time).max().unwrap() + 1;
    let trace = observations.iter().find_map(|o| o.trace_id.clone());
    ProfilesServiceClient::connect(server.grpc())
        .await
        .unwrap()
        .export(request)
        .await
        .expect("export accepted");

    let cpu = "samples:count:cpu:nanoseconds";
    let scope = format!("profile_type={cpu}&from={from}&to={to}");
    let range = format!("from={from}&to={to}");
    let trace = trace.unwrap_or_else(|| "00".repeat(16));
    let (start, end) = (from / 1_000_000, to / 1_000_000 + 1);
    let pyroscope_id = "process_cpu:cpu:nanoseconds:cpu:nanoseconds";
    let select = json!({"profile_typeID": pyroscope_id, "label_selector": "{}", "start": start, "end": end});
    let mut reads = vec![
        Read::Get(format!("/api/v1/profile-types?{range}")),
        Read::Get(format!("/api/v1/labels?{range}")),
        Read::Get(format!("/api/v1/labels/service.name/values?{range}")),
        Read::Get("/api/v1/stats".to_string()),
        Read::Get(format!("/api/v1/top?{scope}")),
        Read::Get(format!("/api/v1/timeseries?{scope}")),
        Read::Get(format!("/api/v1/events?{scope}&limit=5")),
        Read::Get(format!("/api/v1/traces/{trace}/flamegraph?{scope}")),
        Read::Get(format!(
            "/api/v1/diff?profile_type={cpu}&baseline_from={from}&baseline_to={to}&comparison_from={from}&comparison_to={to}"
        )),
        Read::Get(format!(
            "/pyroscope/render?query={pyroscope_id}%7B%7D&from={start}&until={end}&groupBy=service_name"
        )),
        Read::Get(format!(
            "/pyroscope/render?query={pyroscope_id}%7B%7D&from={start}&until={end}&format=dot"
        )),
        Read::Get(format!(
            "/pyroscope/render-diff?leftQuery={pyroscope_id}%7B%7D&leftFrom={start}&leftUntil={end}&rightQuery={pyroscope_id}%7B%7D&rightFrom={start}&rightUntil={end}"
        )),
        Read::Connect("ProfileTypes", json!({"start": start, "end": end})),
        Read::Connect(
            "LabelNames",
            json!({"start": start, "end": end, "matchers": ["{service_name=~\".+\"}"]}),
        ),
        Read::Connect(
            "LabelValues",
            json!({"name": "service_name", "start": start, "end": end, "matchers": ["{}"]}),
        ),
        Read::Connect("Series", json!({"start": start, "end": end, "matchers": ["{}"]})),
        Read::Connect("SelectMergeSpanProfile", select.clone()),
        Read::Connect("SelectMergeProfile", select.clone()),
        Read::Connect(
            "SelectSeries",
            json!({"profile_typeID": pyroscope_id, "label_selector": "{host_name=~\".*\"}",
                   "start": start, "end": end, "step": 10, "group_by": ["host_name"], "exemplar_type": 2}),
        ),
        Read::Connect(
            "SelectHeatmap",
            json!({"profile_typeID": pyroscope_id, "label_selector": "{}",
                                               "start": start, "end": end, "step": 10}),
        ),
        Read::Connect("Diff", json!({"left": select.clone(), "right": select.clone()})),
        Read::Connect("GetProfileStats", json!({})),
    ];
    for format in ["json", "folded", "flamebearer", "pprof"] {
        reads.push(Read::Get(format!("/api/v1/flamegraph?{scope}&format={format}")));
    }
    for format in [0, 1, 2, 3] {
        let mut message = select.clone();
        message["format"] = json!(format);
        // A selector naming a stored label, which the dialect resolves against the stored
        // names before the query.
        message["label_selector"] = json!("{host_name=~\".*\"}");
        reads.push(Read::Connect("SelectMergeStacktraces", message));
    }

    let client = ui_api_tests::http_client();
    for read in reads {
        let before = engine_requests(&server).await;
        let (what, response) = match &read {
            Read::Get(path) => (
                path.clone(),
                client
                    .get(format!("{}{path}", server.http()))
                    .send()
                    .await
                    .unwrap(),
            ),
            Read::Connect(method, message) => (
                method.to_string(),
                client
                    .post(format!("{}/querier.v1.QuerierService/{method}", server.http()))
                    .header("content-type", "application/json")
                    .body(message.to_string())
                    .send()
                    .await
                    .unwrap(),
            ),
        };
        let status = response.status();
        let body = response.bytes().await.unwrap();
        assert!(
            status.is_success(),
            "{what}: {status} {}",
            String::from_utf8_lossy(&body)
        );
        let after = engine_requests(&server).await;
        assert_eq!(after - before, 1.0, "{what}: engine requests counted");
    }
}
