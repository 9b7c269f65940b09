//! The ingest memory budget seen by senders: with the budget held by data not yet stored,
//! OTLP/HTTP and Pyroscope `/ingest` answer 429 with `Retry-After`, gRPC answers
//! RESOURCE_EXHAUSTED carrying RetryInfo; a request larger than the whole budget is
//! refused for good (413, RESOURCE_EXHAUSTED without RetryInfo).

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use prost::Message;
use stackhouse_api::auth::Auth;
use stackhouse_api::grpc;
use stackhouse_api::http::router;
use stackhouse_api::state::AppState;
use stackhouse_ingest::convert::{RequestBuilder, Source};
use stackhouse_ingest::folded;
use stackhouse_ingest::pipeline::Pipeline;
use stackhouse_proto::otlp_collector::ExportProfilesServiceRequest;
use stackhouse_proto::otlp_collector::profiles_service_client::ProfilesServiceClient;
use stackhouse_query::{QueryConfig, QueryEngine};
use stackhouse_storage::catalog::{Catalog, TableKind, open_catalog};
use stackhouse_storage::model::{Batch, ProfileType, SampleRow, Series, SymbolId};
use stackhouse_storage::store::Store;
use stackhouse_storage::symbols::SymbolCache;
use stackhouse_storage::writer::{Writer, WriterConfig};
use tonic_types::StatusExt;
use tower::ServiceExt;

/// Long enough that every refusal below happens while the filler waits for its flush;
/// also the retry delay the refusals must announce.
const FLUSH: Duration = Duration::from_secs(4);
const FILLER_SAMPLES: usize = 10_000;

struct Server {
    _dir: tempfile::TempDir,
    writer: Arc<Writer>,
    catalog: Arc<dyn Catalog>,
    router: axum::Router,
    pipeline: Arc<Pipeline>,
}

async fn server(budget: usize) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&format!("file://{}", dir.path().join("objects").display())).unwrap();
    let catalog = open_catalog(&format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("catalog.db").display()
    ))
    .await
    .unwrap();
    let symbols = Arc::new(SymbolCache::new(store.clone(), catalog.clone()));
    let writer = Arc::new(Writer::start(
        store.clone(),
        catalog.clone(),
        symbols.clone(),
        WriterConfig {
            flush_interval: FLUSH,
            max_buffered_bytes: budget,
            ..WriterConfig::default()
        },
    ));
    let engine = Arc::new(QueryEngine::new(
        store.clone(),
        catalog.clone(),
        symbols,
        QueryConfig::default(),
    ));
    let pipeline = Arc::new(Pipeline::new(writer.clone(), stackhouse_storage::clock::system()));
    let state = AppState {
        pipeline: pipeline.clone(),
        engine,
        catalog: catalog.clone(),
        store,
        max_message_bytes: 1 << 20,
        auth: Arc::new(Auth::off(catalog.clone())),
        clock: stackhouse_storage::clock::system(),
        deletion_grace: std::time::Duration::from_secs(300),
        rules: Arc::new(stackhouse_api::recording::RecordingRules::new(
            catalog.clone(),
            stackhouse_api::config::ServeArgs::from_flags(Vec::<String>::new())
                .unwrap()
                .recording_rules
                .config(),
        )),
    };
    Server {
        _dir: dir,
        writer,
        catalog,
        router: router(state),
        pipeline,
    }
}

fn now_nanos() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as i64
}

/// A batch that holds the budget while it waits for its flush.
fn filler() -> Batch {
    let mut b = Batch::new("filler");
    let series = b.add_series(Series::new(
        ProfileType::parse("samples:count:cpu:nanoseconds").unwrap(),
        BTreeMap::from([("service.name".to_string(), "filler".to_string())]),
        10_000_000,
    ));
    let t0 = now_nanos();
    for i in 0..FILLER_SAMPLES {
        b.samples.push(SampleRow {
            time_nanos: t0 + i as i64,
            series_id: series,
            stack_id: SymbolId::ZERO,
            value: 1,
            attr_set_id: SymbolId::ZERO,
            trace_id: None,
            span_id: None,
            profile_id: None,
        });
    }
    b
}

/// An OTLP request of one small folded profile.
fn otlp_request() -> ExportProfilesServiceRequest {
    let mut builder = RequestBuilder::new();
    let source = Source {
        resource: vec![("service.name".to_string(), "api".to_string())],
        time_nanos: Some(now_nanos()),
        ..Source::default()
    };
    folded::convert(b"main;work 10\nmain;idle 5\n", &source, &mut builder).unwrap();
    builder.finish()
}

/// Sends `request` through the router: the status, the `Retry-After` header, the body.
async fn send(s: &Server, request: Request<Body>) -> (StatusCode, Option<String>, Vec<u8>) {
    let response = s.router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let retry_after = response
        .headers()
        .get(header::RETRY_AFTER)
        .map(|v| v.to_str().unwrap().to_string());
    let body = response.into_body().collect().await.unwrap().to_bytes().to_vec();
    (status, retry_after, body)
}

fn otlp_http() -> Request<Body> {
    Request::post("/v1development/profiles")
        .header(header::CONTENT_TYPE, "application/x-protobuf")
        .body(Body::from(otlp_request().encode_to_vec()))
        .unwrap()
}

fn pyroscope_ingest() -> Request<Body> {
    let from = now_nanos() / 1_000_000_000;
    Request::post(format!(
        "/ingest?name=app.cpu%7Benv%3Dtest%7D&from={from}&until={}",
        from + 10
    ))
    .body(Body::from("main;work 10\nmain;idle 5\n"))
    .unwrap()
}

/// A gRPC client of the v1development service on a local port.
async fn grpc_client(s: &Server) -> ProfilesServiceClient<tonic::transport::Channel> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let auth = Arc::new(Auth::off(s.catalog.clone()));
    let service = grpc::service::<grpc::Development>(s.pipeline.clone(), auth, 1 << 20);
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    ProfilesServiceClient::connect(format!("http://{addr}"))
        .await
        .unwrap()
}

async fn stored_samples(catalog: &dyn Catalog, tenant: &str) -> u64 {
    let stats = catalog.stats(tenant).await.unwrap();
    stats
        .tables
        .get(TableKind::Samples.as_str())
        .map_or(0, |t| t.rows)
}

#[tokio::test]
async fn a_full_budget_answers_429_and_resource_exhausted_with_a_retry_delay() {
    let filler_bytes = filler().estimated_bytes();
    // Exactly the filler: anything more waits for its flush, and the small requests
    // below are far from being larger than the whole budget.
    let s = server(filler_bytes).await;
    let writer = s.writer.clone();
    let held = tokio::spawn(async move { writer.write(filler()).await });
    while s.writer.buffered_bytes() < filler_bytes {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let wait = FLUSH.as_secs().to_string();

    let (status, retry_after, body) = send(&s, otlp_http()).await;
    assert_eq!(
        status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        String::from_utf8_lossy(&body)
    );
    assert_eq!(retry_after.as_deref(), Some(wait.as_str()));
    // OTLP/HTTP errors are a google.rpc.Status in the request's encoding.
    #[derive(Clone, PartialEq, prost::Message)]
    struct RpcStatus {
        #[prost(int32, tag = "1")]
        code: i32,
        #[prost(string, tag = "2")]
        message: String,
    }
    let rpc = RpcStatus::decode(body.as_slice()).unwrap();
    assert_eq!(rpc.code, tonic::Code::ResourceExhausted as i32);
    assert!(
        rpc.message
            .contains(&format!("ingest memory budget of {filler_bytes} bytes")),
        "{}",
        rpc.message
    );

    let (status, retry_after, body) = send(&s, pyroscope_ingest()).await;
    let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(retry_after.as_deref(), Some(wait.as_str()));
    assert!(
        body["error"].as_str().unwrap().contains("ingest memory budget"),
        "{body}"
    );

    let mut client = grpc_client(&s).await;
    let status = client.export(otlp_request()).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains("ingest memory budget"), "{status:?}");
    let retry = status
        .get_details_retry_info()
        .expect("RESOURCE_EXHAUSTED carries RetryInfo, so OTLP senders retry");
    assert_eq!(retry.retry_delay, Some(FLUSH));

    // Nothing refused was stored; the filler was, and then the budget has room again.
    held.await.unwrap().unwrap();
    assert_eq!(s.writer.buffered_bytes(), 0);
    assert_eq!(stored_samples(s.catalog.as_ref(), "anonymous").await, 0);
    assert_eq!(
        stored_samples(s.catalog.as_ref(), "filler").await,
        FILLER_SAMPLES as u64
    );
    let (status, _, body) = send(&s, otlp_http()).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    client.export(otlp_request()).await.unwrap();
    // Two requests of two samples each.
    assert_eq!(stored_samples(s.catalog.as_ref(), "anonymous").await, 4);
    s.writer.shutdown().await;
}

#[tokio::test]
async fn a_request_larger_than_the_whole_budget_is_refused_without_a_retry() {
    let s = server(64).await;

    let (status, retry_after, body) = send(&s, otlp_http()).await;
    assert_eq!(
        status,
        StatusCode::PAYLOAD_TOO_LARGE,
        "{}",
        String::from_utf8_lossy(&body)
    );
    assert_eq!(retry_after, None);

    let (status, retry_after, body) = send(&s, pyroscope_ingest()).await;
    let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert_eq!(retry_after, None);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("whole budget of 64 bytes"),
        "{body}"
    );

    let status = grpc_client(&s).await.export(otlp_request()).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    assert!(
        status.get_details_retry_info().is_none(),
        "without RetryInfo OTLP senders do not retry: {status:?}"
    );
    s.writer.shutdown().await;
}
