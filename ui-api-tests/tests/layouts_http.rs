//! One profile encoded in the OTLP v1development layouts of opentelemetry-proto v1.8, v1.9
//! and v1.10, sent over OTLP/HTTP (protobuf and JSON) and gRPC, with and without the
//! `OTLP-Profiles-Development-Version` header: each is stored with the same flamegraph,
//! attributes, link and timestamps, or refused with a message naming the layout. None is
//! stored wrong. v1.8 and v1.9 messages are declared here from those releases' protos.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::collections::BTreeMap;

use http::uri::PathAndQuery;
use opentelemetry_proto::tonic::collector::profiles::v1development as v10c;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::profiles::v1development as v10;
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message;
use serde_json::{Value, json};
use ui_api_tests::client::Api;
use ui_api_tests::http_query::{Http, params, with};
use ui_api_tests::ingest_client::{Answer, Ingest};
use ui_api_tests::server::{Options, Server};

/// The layouts of opentelemetry-proto v1.8.0 and v1.9.0: the dictionary is the same as in
/// v1.10; `Sample` has `values=2, attribute_indices=3, link_index=4`, and v1.8's `Profile`
/// has `comment_strindices=7`, moving `profile_id`..`attribute_indices` to 8..12.
mod old {
    use super::*;

    /// The request, resource and scope wrappers around one release's `Profile`.
    macro_rules! wrappers {
        ($request:ident, $resource:ident, $scope:ident, $profile:ident) => {
            #[derive(Clone, PartialEq, prost::Message)]
            pub(crate) struct $request {
                #[prost(message, repeated, tag = "1")]
                pub resource_profiles: Vec<$resource>,
                #[prost(message, optional, tag = "2")]
                pub dictionary: Option<v10::ProfilesDictionary>,
            }

            #[derive(Clone, PartialEq, prost::Message)]
            pub(crate) struct $resource {
                #[prost(message, optional, tag = "1")]
                pub resource: Option<Resource>,
                #[prost(message, repeated, tag = "2")]
                pub scope_profiles: Vec<$scope>,
            }

            #[derive(Clone, PartialEq, prost::Message)]
            pub(crate) struct $scope {
                #[prost(message, optional, tag = "1")]
                pub scope: Option<InstrumentationScope>,
                #[prost(message, repeated, tag = "2")]
                pub profiles: Vec<$profile>,
            }
        };
    }
    wrappers!(RequestV18, ResourceProfilesV18, ScopeProfilesV18, ProfileV18);
    wrappers!(RequestV19, ResourceProfilesV19, ScopeProfilesV19, ProfileV19);

    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Sample {
        #[prost(int32, tag = "1")]
        pub stack_index: i32,
        #[prost(int64, repeated, tag = "2")]
        pub values: Vec<i64>,
        #[prost(int32, repeated, tag = "3")]
        pub attribute_indices: Vec<i32>,
        #[prost(int32, tag = "4")]
        pub link_index: i32,
        #[prost(fixed64, repeated, tag = "5")]
        pub timestamps_unix_nano: Vec<u64>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct ProfileV18 {
        #[prost(message, optional, tag = "1")]
        pub sample_type: Option<v10::ValueType>,
        #[prost(message, repeated, tag = "2")]
        pub sample: Vec<Sample>,
        #[prost(fixed64, tag = "3")]
        pub time_unix_nano: u64,
        #[prost(uint64, tag = "4")]
        pub duration_nano: u64,
        #[prost(message, optional, tag = "5")]
        pub period_type: Option<v10::ValueType>,
        #[prost(int64, tag = "6")]
        pub period: i64,
        #[prost(int32, repeated, tag = "7")]
        pub comment_strindices: Vec<i32>,
        #[prost(bytes = "vec", tag = "8")]
        pub profile_id: Vec<u8>,
        #[prost(uint32, tag = "9")]
        pub dropped_attributes_count: u32,
        #[prost(string, tag = "10")]
        pub original_payload_format: String,
        #[prost(bytes = "vec", tag = "11")]
        pub original_payload: Vec<u8>,
        #[prost(int32, repeated, tag = "12")]
        pub attribute_indices: Vec<i32>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct ProfileV19 {
        #[prost(message, optional, tag = "1")]
        pub sample_type: Option<v10::ValueType>,
        #[prost(message, repeated, tag = "2")]
        pub samples: Vec<Sample>,
        #[prost(fixed64, tag = "3")]
        pub time_unix_nano: u64,
        #[prost(uint64, tag = "4")]
        pub duration_nano: u64,
        #[prost(message, optional, tag = "5")]
        pub period_type: Option<v10::ValueType>,
        #[prost(int64, tag = "6")]
        pub period: i64,
        #[prost(bytes = "vec", tag = "7")]
        pub profile_id: Vec<u8>,
        #[prost(uint32, tag = "8")]
        pub dropped_attributes_count: u32,
        #[prost(string, tag = "9")]
        pub original_payload_format: String,
        #[prost(bytes = "vec", tag = "10")]
        pub original_payload: Vec<u8>,
        #[prost(int32, repeated, tag = "11")]
        pub attribute_indices: Vec<i32>,
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    V18,
    V19,
    V110,
}

impl Layout {
    const ALL: [Layout; 3] = [Layout::V18, Layout::V19, Layout::V110];

    fn version(self) -> &'static str {
        match self {
            Layout::V18 => "1.8.0",
            Layout::V19 => "1.9.0",
            Layout::V110 => "1.10.0",
        }
    }

    fn short(self) -> &'static str {
        match self {
            Layout::V18 => "1.8",
            Layout::V19 => "1.9",
            Layout::V110 => "1.10",
        }
    }
}

const TYPE: &str = "samples:count:cpu:nanoseconds";
const T: u64 = 1_700_000_100_000_000_000;
const DURATION: u64 = 10_000_000_000;
const TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const SPAN: &str = "b7ad6b7169203331";
const PROFILE_ID: &str = "5f4dcc3b5aa765d61d8327deb882cf99";
const STRINGS: [&str; 15] = [
    "",
    "samples",
    "count",
    "cpu",
    "nanoseconds",
    "foo",
    "bar",
    "baz",
    "thread.name",
    "main",
    "worker",
    "region",
    "eu",
    "build",
    "canary",
];

fn str_attr(key: i32, value: &str) -> v10::KeyValueAndUnit {
    v10::KeyValueAndUnit {
        key_strindex: key,
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.into())),
        }),
        unit_strindex: 0,
    }
}

fn dictionary() -> v10::ProfilesDictionary {
    let location = |f: i32| v10::Location {
        lines: vec![v10::Line {
            function_index: f,
            ..Default::default()
        }],
        ..Default::default()
    };
    let function = |name: i32| v10::Function {
        name_strindex: name,
        ..Default::default()
    };
    v10::ProfilesDictionary {
        mapping_table: vec![Default::default()],
        location_table: vec![Default::default(), location(1), location(2), location(3)],
        function_table: vec![Default::default(), function(5), function(6), function(7)],
        link_table: vec![
            Default::default(),
            v10::Link {
                trace_id: hex::decode(TRACE).unwrap(),
                span_id: hex::decode(SPAN).unwrap(),
            },
        ],
        string_table: STRINGS.map(String::from).to_vec(),
        attribute_table: vec![
            Default::default(),
            str_attr(8, "main"),
            str_attr(8, "worker"),
            str_attr(11, "eu"),
            str_attr(13, "canary"),
        ],
        stack_table: vec![
            Default::default(),
            v10::Stack {
                location_indices: vec![3, 2, 1],
            },
            v10::Stack {
                location_indices: vec![2, 1],
            },
            v10::Stack {
                location_indices: vec![1],
            },
        ],
    }
}

/// `(stack, values, attributes, link, timestamps)` of the three samples.
type SampleParts = (i32, Vec<i64>, Vec<i32>, i32, Vec<u64>);

fn samples() -> Vec<SampleParts> {
    vec![
        (1, vec![7], vec![1], 1, vec![T + 1_000]),
        (2, vec![3], vec![2, 3], 0, vec![T + 2_000]),
        (3, vec![5], vec![], 0, vec![]),
    ]
}

fn resource(service: &str) -> Option<Resource> {
    Some(Resource {
        attributes: vec![KeyValue {
            key: "service.name".into(),
            value: Some(AnyValue {
                value: Some(any_value::Value::StringValue(service.into())),
            }),
            ..Default::default()
        }],
        ..Default::default()
    })
}

fn scope() -> Option<InstrumentationScope> {
    Some(InstrumentationScope {
        name: "layouts".into(),
        ..Default::default()
    })
}

fn value_type(t: i32, u: i32) -> Option<v10::ValueType> {
    Some(v10::ValueType {
        type_strindex: t,
        unit_strindex: u,
    })
}

fn v110_request(service: &str) -> v10c::ExportProfilesServiceRequest {
    let samples = samples()
        .into_iter()
        .map(|(stack, values, attrs, link, ts)| v10::Sample {
            stack_index: stack,
            attribute_indices: attrs,
            link_index: link,
            values,
            timestamps_unix_nano: ts,
        })
        .collect();
    v10c::ExportProfilesServiceRequest {
        resource_profiles: vec![v10::ResourceProfiles {
            resource: resource(service),
            scope_profiles: vec![v10::ScopeProfiles {
                scope: scope(),
                profiles: vec![v10::Profile {
                    sample_type: value_type(1, 2),
                    samples,
                    time_unix_nano: T,
                    duration_nano: DURATION,
                    period_type: value_type(3, 4),
                    period: 10_000_000,
                    profile_id: hex::decode(PROFILE_ID).unwrap(),
                    attribute_indices: vec![4],
                    ..Default::default()
                }],
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
        dictionary: Some(dictionary()),
    }
}

fn old_samples() -> Vec<old::Sample> {
    samples()
        .into_iter()
        .map(|(stack, values, attrs, link, ts)| old::Sample {
            stack_index: stack,
            values,
            attribute_indices: attrs,
            link_index: link,
            timestamps_unix_nano: ts,
        })
        .collect()
}

macro_rules! old_request {
    ($request:ident, $resource:ident, $scope:ident, $service:expr, $profile:expr) => {
        old::$request {
            resource_profiles: vec![old::$resource {
                resource: resource($service),
                scope_profiles: vec![old::$scope {
                    scope: scope(),
                    profiles: vec![$profile],
                }],
            }],
            dictionary: Some(dictionary()),
        }
    };
}

fn protobuf(layout: Layout, service: &str) -> Vec<u8> {
    match layout {
        Layout::V110 => v110_request(service).encode_to_vec(),
        Layout::V19 => old_request!(
            RequestV19,
            ResourceProfilesV19,
            ScopeProfilesV19,
            service,
            old::ProfileV19 {
                sample_type: value_type(1, 2),
                samples: old_samples(),
                time_unix_nano: T,
                duration_nano: DURATION,
                period_type: value_type(3, 4),
                period: 10_000_000,
                profile_id: hex::decode(PROFILE_ID).unwrap(),
                attribute_indices: vec![4],
                ..Default::default()
            }
        )
        .encode_to_vec(),
        Layout::V18 => old_request!(
            RequestV18,
            ResourceProfilesV18,
            ScopeProfilesV18,
            service,
            old::ProfileV18 {
                sample_type: value_type(1, 2),
                sample: old_samples(),
                time_unix_nano: T,
                duration_nano: DURATION,
                period_type: value_type(3, 4),
                period: 10_000_000,
                profile_id: hex::decode(PROFILE_ID).unwrap(),
                attribute_indices: vec![4],
                ..Default::default()
            }
        )
        .encode_to_vec(),
    }
}

/// OTLP/JSON as each release's protojson writes it: v1.8 names `Profile.sample` and
/// `Location.line`, later releases `samples` and `lines`; the other names did not change.
fn json(layout: Layout, service: &str) -> Value {
    let (samples_key, lines_key) = match layout {
        Layout::V18 => ("sample", "line"),
        _ => ("samples", "lines"),
    };
    let samples: Vec<Value> = samples()
        .into_iter()
        .map(|(stack, values, attrs, link, ts)| {
            json!({
                "stackIndex": stack,
                "values": values.iter().map(|v| v.to_string()).collect::<Vec<_>>(),
                "attributeIndices": attrs,
                "linkIndex": link,
                "timestampsUnixNano": ts.iter().map(|t| t.to_string()).collect::<Vec<_>>(),
            })
        })
        .collect();
    let loc = |f: i32| json!({ lines_key: [{"functionIndex": f}] });
    let attr = |k: i32, v: &str| json!({"keyStrindex": k, "value": {"stringValue": v}});
    json!({
        "resourceProfiles": [{
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
            "scopeProfiles": [{
                "scope": {"name": "layouts"},
                "profiles": [{
                    "sampleType": {"typeStrindex": 1, "unitStrindex": 2},
                    samples_key: samples,
                    "timeUnixNano": T.to_string(),
                    "durationNano": DURATION.to_string(),
                    "periodType": {"typeStrindex": 3, "unitStrindex": 4},
                    "period": "10000000",
                    "profileId": PROFILE_ID,
                    "attributeIndices": [4],
                }]
            }]
        }],
        "dictionary": {
            "mappingTable": [{}],
            "locationTable": [{}, loc(1), loc(2), loc(3)],
            "functionTable": [{}, {"nameStrindex": 5}, {"nameStrindex": 6}, {"nameStrindex": 7}],
            "linkTable": [{}, {"traceId": TRACE, "spanId": SPAN}],
            "stringTable": STRINGS,
            "attributeTable": [{}, attr(8, "main"), attr(8, "worker"), attr(11, "eu"), attr(13, "canary")],
            "stackTable": [{}, {"locationIndices": [3, 2, 1]}, {"locationIndices": [2, 1]}, {"locationIndices": [1]}],
        }
    })
}

/// `google.rpc.Status`, the body of an OTLP/HTTP protobuf refusal.
#[derive(Clone, PartialEq, prost::Message)]
struct Status {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
}

/// gRPC status or HTTP answer, reduced to what the test judges.
#[derive(Debug)]
enum Outcome {
    Stored,
    Refused(String),
}

async fn send_http(server: &Server, content_type: &str, version: Option<&str>, body: Vec<u8>) -> Outcome {
    let answer: Answer = Ingest::new(server.http()).otlp(content_type, version, body).await;
    match answer.status {
        200 => {
            let partial = if content_type == "application/json" {
                answer.json()["partialSuccess"]["errorMessage"]
                    .as_str()
                    .map(str::to_string)
            } else {
                v10c::ExportProfilesServiceResponse::decode(&answer.body[..])
                    .unwrap()
                    .partial_success
                    .filter(|p| p.rejected_profiles > 0)
                    .map(|p| p.error_message)
            };
            match partial {
                Some(message) if !message.is_empty() => Outcome::Refused(message),
                _ => Outcome::Stored,
            }
        }
        400 if content_type == "application/json" => Outcome::Refused(answer.text()),
        400 => Outcome::Refused(
            Status::decode(&answer.body[..])
                .unwrap_or_else(|e| panic!("400 body is not a google.rpc.Status ({e}): {}", answer.text()))
                .message,
        ),
        other => panic!("OTLP/HTTP answered {other}: {}", answer.text()),
    }
}

async fn send_grpc(server: &Server, version: Option<&str>, body: Vec<u8>) -> Outcome {
    /// Sends already-encoded bytes: each layout is encoded by its own message types.
    #[derive(Clone, Default)]
    struct Raw(Vec<u8>);
    impl prost::Message for Raw {
        fn encode_raw(&self, buf: &mut impl bytes::BufMut) {
            buf.put_slice(&self.0);
        }
        fn merge_field(
            &mut self,
            _: u32,
            _: prost::encoding::WireType,
            _: &mut impl bytes::Buf,
            _: prost::encoding::DecodeContext,
        ) -> Result<(), prost::DecodeError> {
            unreachable!("requests are only encoded")
        }
        fn encoded_len(&self) -> usize {
            self.0.len()
        }
        fn clear(&mut self) {
            self.0.clear();
        }
    }
    impl std::fmt::Debug for Raw {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "Raw({} bytes)", self.0.len())
        }
    }

    let channel = tonic::transport::Endpoint::from_shared(server.grpc())
        .unwrap()
        .connect()
        .await
        .expect("gRPC connect");
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.expect("gRPC ready");
    let mut request = tonic::Request::new(Raw(body));
    if let Some(v) = version {
        request
            .metadata_mut()
            .insert("otlp-profiles-development-version", v.parse().unwrap());
    }
    let codec = tonic_prost::ProstCodec::<Raw, v10c::ExportProfilesServiceResponse>::default();
    let path = PathAndQuery::from_static(
        "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export",
    );
    match grpc.unary(request, path, codec).await {
        Ok(r) => match r.into_inner().partial_success {
            Some(p) if p.rejected_profiles > 0 => Outcome::Refused(p.error_message),
            _ => Outcome::Stored,
        },
        Err(status) => {
            assert_eq!(
                status.code(),
                tonic::Code::InvalidArgument,
                "a layout refusal is INVALID_ARGUMENT: {status:?}"
            );
            Outcome::Refused(status.message().to_string())
        }
    }
}

fn names_layout(message: &str, layout: Layout) -> bool {
    let m = message.to_lowercase();
    m.contains("layout") || m.contains(layout.short())
}

fn folded(pairs: &[(&str, i64)]) -> BTreeMap<String, i64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

/// Everything the profile says, read back for one service; `None` when nothing is stored.
async fn assert_stored_right(server: &Server, service: &str) {
    assert_stored_right_at(server.http(), service.to_string()).await;
}

async fn assert_stored_right_at(base: String, service: String) {
    let service = service.as_str();
    let api = Api::new(base.clone());
    let http = Http::new(base);
    let (from, to) = (T as i64, (T + DURATION) as i64);
    let only = |extra: &str| format!("{{service.name={service:?}{extra}}}");
    assert_eq!(
        api.folded(TYPE, &only(""), from, to).await,
        folded(&[("foo;bar;baz", 7), ("foo;bar", 3), ("foo", 5)]),
        "{service}: flamegraph"
    );
    assert_eq!(
        api.folded(TYPE, &only(r#", thread.name="main""#), from, to).await,
        folded(&[("foo;bar;baz", 7)]),
        "{service}: sample attribute thread.name"
    );
    assert_eq!(
        api.folded(TYPE, &only(r#", region="eu""#), from, to).await,
        folded(&[("foo;bar", 3)]),
        "{service}: second sample attribute"
    );
    assert_eq!(
        api.folded(TYPE, &only(r#", build="canary""#), from, to).await,
        folded(&[("foo;bar;baz", 7), ("foo;bar", 3), ("foo", 5)]),
        "{service}: profile attribute"
    );
    // The timestamps: [T+1000, T+2000) holds the first sample alone.
    assert_eq!(
        api.folded(TYPE, &only(""), from + 1_000, from + 2_000).await,
        folded(&[("foo;bar;baz", 7)]),
        "{service}: first sample's timestamp"
    );
    let trace = http
        .text(
            &format!("/api/v1/traces/{TRACE}/flamegraph"),
            &with(
                params(TYPE, from, to),
                &[("selector", &only("")), ("format", "folded")],
            ),
        )
        .await;
    assert_eq!(trace.trim(), "foo;bar;baz 7", "{service}: trace link");
    let page = http
        .json(
            "/api/v1/events",
            &with(params(TYPE, from, to), &[("selector", &only(""))]),
        )
        .await;
    let mut events: Vec<(i64, i64, Option<String>, Option<String>)> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["timestamp"].as_i64().unwrap(),
                e["value"].as_i64().unwrap(),
                e["span_id"].as_str().map(String::from),
                e["profile_id"].as_str().map(String::from),
            )
        })
        .collect();
    events.sort();
    assert_eq!(
        events,
        vec![
            (T as i64, 5, None, Some(PROFILE_ID.to_string())),
            (
                T as i64 + 1_000,
                7,
                Some(SPAN.to_string()),
                Some(PROFILE_ID.to_string())
            ),
            (T as i64 + 2_000, 3, None, Some(PROFILE_ID.to_string())),
        ],
        "{service}: events (time, value, span, profile id)"
    );
}

async fn assert_nothing_stored(server: &Server, service: &str) {
    let query = [
        ("profile_type", TYPE.to_string()),
        ("selector", format!("{{service.name={service:?}}}")),
        ("from", T.to_string()),
        ("to", (T + DURATION).to_string()),
    ];
    let (status, body) = Api::new(server.http())
        .get_json("/api/v1/flamegraph", &query)
        .await;
    // No such type at all, or the type (from other requests) without this service's values.
    let nothing = match status {
        200 => body["total"] == 0,
        400 => body["error"]
            .as_str()
            .is_some_and(|e| e.contains("unknown profile_type")),
        _ => false,
    };
    assert!(
        nothing,
        "{service}: nothing stored for a refused request: {status} {body}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn every_layout_is_stored_right_or_refused_naming_the_layout() {
    let server = Server::start(Options::default()).await;
    let mut stored = Vec::new();
    let mut report = Vec::new();
    for layout in Layout::ALL {
        for declared in [false, true] {
            let version = declared.then(|| layout.version());
            let tag = format!(
                "{}-{}",
                layout.short(),
                if declared { "declared" } else { "bare" }
            );
            let sends = [
                (format!("pb-{tag}"), "pb"),
                (format!("json-{tag}"), "json"),
                (format!("grpc-{tag}"), "grpc"),
            ];
            for (service, transport) in sends {
                let outcome = send(&server, transport, version, layout, &service).await;
                report.push(format!("{service}: {outcome:?}"));
                match outcome {
                    Outcome::Stored => stored.push(service),
                    Outcome::Refused(message) => {
                        assert!(
                            !declared,
                            "{service}: a request in its declared layout is stored, got refused: {message}"
                        );
                        assert!(
                            names_layout(&message, layout),
                            "{service}: the refusal names the layout: {message}"
                        );
                        assert_nothing_stored(&server, &service).await;
                    }
                }
            }
        }
    }
    eprintln!("layout outcomes:\n{}", report.join("\n"));
    for service in &stored {
        assert_stored_right(&server, service).await;
    }
    // Undeclared v1.10 is the current layout: always stored.
    for s in ["pb-1.10-bare", "json-1.10-bare", "grpc-1.10-bare"] {
        assert!(stored.iter().any(|x| x == s), "{s} stored: {report:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_v1_10_body_declared_as_v1_9_is_refused_naming_the_layout() {
    let server = Server::start(Options::default()).await;
    let body = protobuf(Layout::V110, "mislabeled-http");
    match send_http(&server, "application/x-protobuf", Some("1.9.0"), body).await {
        Outcome::Refused(message) => assert!(
            names_layout(&message, Layout::V19),
            "the refusal names the layout: {message}"
        ),
        Outcome::Stored => panic!("a v1.10 body declared as v1.9 must not be stored"),
    }
    assert_nothing_stored(&server, "mislabeled-http").await;

    let body = protobuf(Layout::V110, "mislabeled-grpc");
    match send_grpc(&server, Some("1.9.0"), body).await {
        Outcome::Refused(message) => assert!(
            names_layout(&message, Layout::V19),
            "the refusal names the layout: {message}"
        ),
        Outcome::Stored => panic!("a v1.10 body declared as v1.9 must not be stored"),
    }
    assert_nothing_stored(&server, "mislabeled-grpc").await;

    // An unknown version is refused by name too.
    let answer = Ingest::new(server.http())
        .otlp(
            "application/x-protobuf",
            Some("0.1.0"),
            protobuf(Layout::V110, "unknown-version"),
        )
        .await;
    assert_eq!(answer.status, 400, "{}", answer.text());
    assert!(answer.text().contains("0.1.0"), "{}", answer.text());
}

/// Sends the test profile for `service`, encoded in `layout`, over `transport` (`pb`,
/// `json` or `grpc`), declaring `version` when given.
async fn send(
    server: &Server,
    transport: &str,
    version: Option<&str>,
    layout: Layout,
    service: &str,
) -> Outcome {
    match transport {
        "pb" => {
            send_http(
                server,
                "application/x-protobuf",
                version,
                protobuf(layout, service),
            )
            .await
        }
        "json" => {
            let body = json(layout, service).to_string().into_bytes();
            send_http(server, "application/json", version, body).await
        }
        _ => send_grpc(server, version, protobuf(layout, service)).await,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wrongly_declared_layout_is_never_stored_wrong() {
    let server = Server::start(Options::default()).await;
    let mut stored = Vec::new();
    let mut report = Vec::new();
    for actual in Layout::ALL {
        for declared in Layout::ALL.into_iter().filter(|d| *d != actual) {
            let tag = format!("{}-as-{}", actual.short(), declared.short());
            let version = Some(declared.version());
            for transport in ["pb", "json", "grpc"] {
                let service = format!("{transport}-{tag}");
                let outcome = send(&server, transport, version, actual, &service).await;
                report.push(format!("{service}: {outcome:?}"));
                match outcome {
                    Outcome::Stored => stored.push(service),
                    Outcome::Refused(message) => {
                        assert!(
                            names_layout(&message, declared) || names_layout(&message, actual),
                            "{service}: the refusal names the layout: {message}"
                        );
                        assert_nothing_stored(&server, &service).await;
                    }
                }
            }
        }
    }
    eprintln!("mislabeled layout outcomes:\n{}", report.join("\n"));
    // Whatever was accepted must hold exactly the profile that was sent; every wrong one
    // is listed, not just the first.
    let mut wrong = Vec::new();
    for service in stored {
        let check = tokio::spawn(assert_stored_right_at(server.http(), service.clone()));
        if check.await.is_err() {
            wrong.push(service);
        }
    }
    assert!(wrong.is_empty(), "accepted with wrong values: {wrong:?}");
}
