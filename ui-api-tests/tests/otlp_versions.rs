//! The OTLP profiles version header (`OTLP-Profiles-Development-Version`, opentelemetry-proto
//! PR 857) and the v1.7 layout, from independent clients: the opentelemetry-proto crate's
//! messages and ProfilesService client for the current layout, and for v1.7 the published
//! Python classes of that release (PyPI opentelemetry-proto 1.35.0) sent with grpcio and
//! over OTLP/HTTP. Header `1` is stored as sent; any other version, a repeated header, a
//! list, leading zeros, signs or anything malformed is refused before the body is read and
//! stores nothing. A v1.7 profile with two sample types is stored as one profile per type,
//! and each type's folded totals equal the sums of the input.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use opentelemetry_proto::tonic::collector::profiles::v1development as otlp;
use opentelemetry_proto::tonic::collector::profiles::v1development::profiles_service_client::ProfilesServiceClient;
use opentelemetry_proto::tonic::profiles::v1development as v10;
use prost::Message;
use serde_json::{Value, json};
use ui_api_tests::client::Api;
use ui_api_tests::http_query::{Http, params, with};
use ui_api_tests::ingest_client::Ingest;
use ui_api_tests::requests::request;
use ui_api_tests::server::{Options, Server};

const HEADER: &str = "OTLP-Profiles-Development-Version";
const T: i64 = 1_700_000_100_000_000_000;
const DURATION: i64 = 10_000_000_000;
const CPU: &str = "cpu:nanoseconds:cpu:nanoseconds";
const COUNT: &str = "samples:count:cpu:nanoseconds";

/// The samples of the current-layout request: (stack leaf first, value).
const CURRENT: [(&[&str], i64); 3] = [
    (&["leaf", "mid", "main"], 7),
    (&["mid", "main"], 3),
    (&["leaf", "mid", "main"], 5),
];

/// A v1.10 request (the opentelemetry-proto crate's messages) of one cpu profile of
/// `CURRENT` for `service`.
fn current_request(service: &str) -> otlp::ExportProfilesServiceRequest {
    let mut strings = vec![String::new()];
    let mut string = |s: &str| -> i32 {
        let i = strings.iter().position(|x| x == s).unwrap_or_else(|| {
            strings.push(s.to_string());
            strings.len() - 1
        });
        i32::try_from(i).unwrap()
    };
    let (cpu, ns) = (string("cpu"), string("nanoseconds"));
    let frames = ["leaf", "mid", "main"];
    let names: Vec<i32> = frames.iter().map(|f| string(f)).collect();
    let mut dictionary = v10::ProfilesDictionary {
        mapping_table: vec![Default::default()],
        location_table: vec![Default::default()],
        function_table: vec![Default::default()],
        link_table: vec![Default::default()],
        attribute_table: vec![Default::default()],
        stack_table: vec![Default::default()],
        ..Default::default()
    };
    for (i, name) in names.iter().enumerate() {
        dictionary.function_table.push(v10::Function {
            name_strindex: *name,
            ..Default::default()
        });
        dictionary.location_table.push(v10::Location {
            lines: vec![v10::Line {
                function_index: i32::try_from(i + 1).unwrap(),
                ..Default::default()
            }],
            ..Default::default()
        });
    }
    let mut samples = Vec::new();
    for (stack, value) in CURRENT {
        let locations: Vec<i32> = stack
            .iter()
            .map(|f| i32::try_from(frames.iter().position(|x| x == f).unwrap() + 1).unwrap())
            .collect();
        dictionary.stack_table.push(v10::Stack {
            location_indices: locations,
        });
        samples.push(v10::Sample {
            stack_index: i32::try_from(dictionary.stack_table.len() - 1).unwrap(),
            values: vec![value],
            ..Default::default()
        });
    }
    dictionary.string_table = strings;
    let profile = v10::Profile {
        sample_type: Some(v10::ValueType {
            type_strindex: cpu,
            unit_strindex: ns,
        }),
        period_type: Some(v10::ValueType {
            type_strindex: cpu,
            unit_strindex: ns,
        }),
        period: 10_000_000,
        samples,
        time_unix_nano: T as u64,
        duration_nano: DURATION as u64,
        ..Default::default()
    };
    request(service, vec![profile], dictionary)
}

/// The export refused no profile.
fn assert_all_stored(service: &str, response: &otlp::ExportProfilesServiceResponse) {
    assert!(
        response
            .partial_success
            .as_ref()
            .is_none_or(|p| p.rejected_profiles == 0),
        "{service}: {response:?}"
    );
}

/// `root;…;leaf → sum` of `samples` (stacks leaf first), computed from the input.
fn expected<'a>(samples: impl IntoIterator<Item = (&'a [&'a str], i64)>) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for (stack, value) in samples {
        let key = stack.iter().rev().copied().collect::<Vec<_>>().join(";");
        *out.entry(key).or_insert(0) += value;
    }
    out
}

async fn stored(server: &Server, profile_type: &str, service: &str) -> BTreeMap<String, i64> {
    Api::new(server.http())
        .folded(
            profile_type,
            &format!("{{service.name={service:?}}}"),
            T - 1,
            T + DURATION,
        )
        .await
}

/// Whether the server has anything of `service` (any of the types this file sends).
async fn nothing_stored(server: &Server, service: &str) -> bool {
    let query = |t: &str| {
        [
            ("profile_type", t.to_string()),
            ("selector", format!("{{service.name={service:?}}}")),
            ("from", (T - 1).to_string()),
            ("to", (T + DURATION).to_string()),
        ]
    };
    for t in [CPU, COUNT] {
        let (status, body) = Api::new(server.http())
            .get_json("/api/v1/flamegraph", &query(t))
            .await;
        let empty = match status {
            200 => body["total"] == 0,
            400 => body["error"]
                .as_str()
                .is_some_and(|e| e.contains("unknown profile_type")),
            _ => false,
        };
        if !empty {
            return false;
        }
    }
    true
}

/// Header values (each list is the values of one request's header) that must be refused,
/// with a word the refusal must contain.
const REFUSED: [(&[&str], &str); 8] = [
    (&["2"], "version 1 only"),
    (&["10"], "version 1 only"),
    (&["1,1"], "not a list"),
    (&["1", "1"], "more than once"),
    (&["01"], "leading zeros"),
    (&["+1"], "not a version"),
    (&["x"], "not a version"),
    (&["1.6"], "not a version"),
];

#[tokio::test(flavor = "multi_thread")]
async fn header_1_is_stored_and_every_other_value_refused_over_http() {
    let server = Server::start(Options::default()).await;
    let ingest = Ingest::new(server.http());
    for (service, headers) in [("http-1", vec![(HEADER, "1")]), ("http-none", vec![])] {
        let mut headers = headers;
        headers.push(("Content-Type", "application/x-protobuf"));
        let answer = ingest
            .post(
                "/v1development/profiles",
                &[],
                &headers,
                current_request(service).encode_to_vec(),
            )
            .await;
        assert_eq!(answer.status, 200, "{service}: {}", answer.text());
        let response = otlp::ExportProfilesServiceResponse::decode(&answer.body[..]).unwrap();
        assert_all_stored(service, &response);
        assert_eq!(
            stored(&server, CPU, service).await,
            expected(CURRENT),
            "{service}"
        );
    }
    for (n, (values, why)) in REFUSED.iter().enumerate() {
        let service = format!("http-refused-{n}");
        let mut headers: Vec<(&str, &str)> = values.iter().map(|v| (HEADER, *v)).collect();
        headers.push(("Content-Type", "application/x-protobuf"));
        let answer = ingest
            .post(
                "/v1development/profiles",
                &[],
                &headers,
                current_request(&service).encode_to_vec(),
            )
            .await;
        let text = answer.text();
        assert_eq!(answer.status, 400, "{values:?}: {text}");
        assert!(
            text.contains(HEADER) && text.contains(why),
            "{values:?}: the refusal names the header and why: {text}"
        );
        assert!(nothing_stored(&server, &service).await, "{values:?} stored data");
    }
    // OTLP/JSON reads the same header.
    let answer = ingest
        .otlp(
            "application/json",
            Some("2"),
            b"{\"resourceProfiles\": []}".to_vec(),
        )
        .await;
    assert_eq!(answer.status, 400, "{}", answer.text());
    assert!(answer.text().contains(HEADER), "{}", answer.text());
}

#[tokio::test(flavor = "multi_thread")]
async fn header_1_is_stored_and_every_other_value_refused_over_grpc() {
    let server = Server::start(Options::default()).await;
    let mut client = ProfilesServiceClient::connect(server.grpc())
        .await
        .expect("gRPC connect");
    let key = HEADER.to_lowercase();
    let key = tonic::metadata::MetadataKey::from_bytes(key.as_bytes()).unwrap();
    for (service, values) in [("grpc-1", vec!["1"]), ("grpc-none", vec![])] {
        let mut request = tonic::Request::new(current_request(service));
        for v in values {
            request.metadata_mut().append(key.clone(), v.parse().unwrap());
        }
        let response = client
            .export(request)
            .await
            .expect("header 1 is accepted")
            .into_inner();
        assert_all_stored(service, &response);
        assert_eq!(
            stored(&server, CPU, service).await,
            expected(CURRENT),
            "{service}"
        );
    }
    for (n, (values, why)) in REFUSED.iter().enumerate() {
        let service = format!("grpc-refused-{n}");
        let mut request = tonic::Request::new(current_request(&service));
        for v in *values {
            request.metadata_mut().append(key.clone(), v.parse().unwrap());
        }
        let status = client.export(request).await.expect_err("refused");
        assert_eq!(
            status.code(),
            tonic::Code::InvalidArgument,
            "{values:?}: {status:?}"
        );
        assert!(
            status.message().contains(key.as_str()) && status.message().contains(why),
            "{values:?}: the refusal names the metadata and why: {}",
            status.message()
        );
        assert!(nothing_stored(&server, &service).await, "{values:?} stored data");
    }
}

// ---- v1.7 --------------------------------------------------------------------------------

/// Where `.ci/run` installs opentelemetry-proto 1.35.0 (the v1.7.0 protos) for the script.
fn v1_7_python_path() -> PathBuf {
    std::env::var_os("STACKHOUSE_OTLP_V1_7_PYTHONPATH").map_or_else(
        || PathBuf::from(std::env::var("HOME").expect("HOME")).join(".cache/stackhouse-ci/python-otlp-1.7"),
        PathBuf::from,
    )
}

/// Two sample types per profile, several frames shared, a sample attribute, a link, a
/// profile attribute with a unit.
fn v1_7_spec(service: &str) -> Value {
    json!({
        "service": service,
        "units": {"thread.cpu": "nanoseconds"},
        "profiles": [{
            "sample_types": [["cpu", "nanoseconds"], ["samples", "count"]],
            "time_nanos": T,
            "duration_nanos": DURATION,
            "profile_id": "5f4dcc3b5aa765d61d8327deb882cf99",
            "attributes": {"thread.name": "main"},
            "samples": [
                {"stack": ["leaf", "mid", "main"], "values": [10_000_000, 1],
                 "attributes": {"region": "eu"},
                 "link": ["0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"],
                 "timestamps": [T + 1_000]},
                {"stack": ["mid", "main"], "values": [30_000_000, 3]},
                {"stack": ["other", "main"], "values": [20_000_000, 2], "attributes": {"region": "us"}},
                {"stack": ["leaf", "mid", "main"], "values": [40_000_000, 4], "timestamps": [T + 2_000]},
            ],
        }, {
            "sample_types": [["cpu", "nanoseconds"], ["samples", "count"]],
            "time_nanos": T + 5_000_000_000,
            "duration_nanos": 5_000_000_000i64,
            "profile_id": "00112233445566778899aabbccddeeff",
            "samples": [
                {"stack": ["main"], "values": [50_000_000, 5]},
            ],
        }],
    })
}

/// Per sample type (index), `root;…;leaf → sum` over every profile of `spec`.
fn v1_7_expected(spec: &Value, type_index: usize) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for profile in spec["profiles"].as_array().unwrap() {
        for sample in profile["samples"].as_array().unwrap() {
            let stack: Vec<&str> = sample["stack"]
                .as_array()
                .unwrap()
                .iter()
                .rev()
                .map(|f| f.as_str().unwrap())
                .collect();
            *out.entry(stack.join(";")).or_insert(0) += sample["values"][type_index].as_i64().unwrap();
        }
    }
    out
}

/// Runs the v1.7 encoder on `spec`: the encoded request, and the outcome of sending it
/// over gRPC to `grpc` when given.
fn encode_v1_7(spec: &Value, grpc: Option<(&str, &[&str])>) -> (Vec<u8>, Option<Value>) {
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("spec.json"), dir.path().join("request.pb"));
    std::fs::write(&input, spec.to_string()).unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python/otlp_v1_7.py");
    let mut command = Command::new("python3");
    command
        .env("PYTHONPATH", v1_7_python_path())
        .arg(script)
        .arg(&input)
        .arg(&output);
    if let Some((target, metadata)) = grpc {
        command.arg(target).args(metadata);
    }
    let run = command.output().expect("python3 runs");
    assert!(
        run.status.success(),
        "the v1.7 encoder failed; it needs PyPI opentelemetry-proto==1.35.0 in {} (`python3 -m pip \
         install --no-deps --target {0} opentelemetry-proto==1.35.0`, as .ci/run does) and protobuf: {}",
        v1_7_python_path().display(),
        String::from_utf8_lossy(&run.stderr)
    );
    let outcome = grpc.map(|_| serde_json::from_slice(&run.stdout).expect("the script prints JSON"));
    (std::fs::read(output).unwrap(), outcome)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_v1_7_request_with_two_sample_types_is_stored_exactly() {
    let server = Server::start(Options::default()).await;
    let ingest = Ingest::new(server.http());
    let target = server.grpc().trim_start_matches("http://").to_string();
    for (service, transport, version) in [
        ("v17-http-bare", "http", None),
        ("v17-http-declared", "http", Some("1.7")),
        ("v17-grpc-bare", "grpc", None),
        ("v17-grpc-declared", "grpc", Some("1.7.0")),
    ] {
        let spec = v1_7_spec(service);
        match transport {
            "http" => {
                let (body, _) = encode_v1_7(&spec, None);
                let answer = ingest.otlp("application/x-protobuf", version, body).await;
                assert_eq!(answer.status, 200, "{service}: {}", answer.text());
                let response = otlp::ExportProfilesServiceResponse::decode(&answer.body[..]).unwrap();
                assert!(
                    response
                        .partial_success
                        .as_ref()
                        .is_none_or(|p| p.rejected_profiles == 0),
                    "{service}: {response:?}"
                );
            }
            _ => {
                let metadata = version.map(|v| format!("otlp-profiles-development-version={v}"));
                let metadata: Vec<&str> = metadata.iter().map(String::as_str).collect();
                let (_, outcome) = encode_v1_7(&spec, Some((&target, &metadata)));
                let outcome = outcome.unwrap();
                assert_eq!(outcome["ok"], true, "{service}: {outcome}");
                assert_eq!(outcome["rejected_profiles"], 0, "{service}: {outcome}");
            }
        }
        assert_eq!(
            stored(&server, CPU, service).await,
            v1_7_expected(&spec, 0),
            "{service}: cpu"
        );
        assert_eq!(
            stored(&server, COUNT, service).await,
            v1_7_expected(&spec, 1),
            "{service}: count"
        );
    }

    // Keys given by name in v1.7's attribute table are listed and selected by their names.
    let api = Api::new(server.http());
    let http = Http::new(server.http());
    let service = "v17-http-bare";
    let only = |extra: &str| format!("{{service.name={service:?}{extra}}}");
    let (status, body) = api
        .get_json(
            "/api/v1/labels/region/values",
            &[
                ("selector", only("")),
                ("from", (T - 1).to_string()),
                ("to", (T + DURATION).to_string()),
            ],
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let text = body.to_string();
    assert!(text.contains("\"eu\"") && text.contains("\"us\""), "{body}");
    assert_eq!(
        api.folded(CPU, &only(r#", region="us""#), T - 1, T + DURATION)
            .await,
        BTreeMap::from([("main;other".to_string(), 20_000_000)])
    );
    // A profile attribute holds for every sample of its profile, in each sample type.
    assert_eq!(
        api.folded(COUNT, &only(r#", thread.name="main""#), T - 1, T + DURATION)
            .await,
        BTreeMap::from([
            ("main;mid;leaf".to_string(), 5),
            ("main;mid".to_string(), 3),
            ("main;other".to_string(), 2),
        ])
    );
    // The link of the first sample finds it by trace id.
    let trace = http
        .text(
            "/api/v1/traces/0af7651916cd43dd8448eb211c80319c/flamegraph",
            &with(
                params(CPU, T - 1, T + DURATION),
                &[("selector", &only("")), ("format", "folded")],
            ),
        )
        .await;
    assert_eq!(trace.trim(), "main;mid;leaf 10000000");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_v1_7_body_declared_as_a_later_layout_or_a_later_body_declared_v1_7_is_refused() {
    let server = Server::start(Options::default()).await;
    let ingest = Ingest::new(server.http());
    let (v1_7, _) = encode_v1_7(&v1_7_spec("v17-as-1"), None);
    for version in ["1", "1.10", "1.9", "1.8"] {
        let answer = ingest
            .otlp("application/x-protobuf", Some(version), v1_7.clone())
            .await;
        assert_eq!(answer.status, 400, "{version}: {}", answer.text());
        assert!(
            answer.text().contains("only v1.7 has"),
            "{version}: {}",
            answer.text()
        );
    }
    assert!(nothing_stored(&server, "v17-as-1").await);
    let answer = ingest
        .otlp(
            "application/x-protobuf",
            Some("1.7"),
            current_request("current-as-1.7").encode_to_vec(),
        )
        .await;
    assert_eq!(answer.status, 400, "{}", answer.text());
    assert!(
        answer.text().contains("declares opentelemetry-proto v1.7"),
        "{}",
        answer.text()
    );
    assert!(nothing_stored(&server, "current-as-1.7").await);
}
