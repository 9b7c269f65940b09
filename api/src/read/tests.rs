//! The query routes answered without data: parameter errors, their statuses and bodies,
//! and the limits the API checks itself. (Answers with data are black-box tested in
//! `ui-api-tests`.)

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;
use stackhouse_ingest::pipeline::Pipeline;
use stackhouse_query::{QueryConfig, QueryEngine, QueryLimits};
use stackhouse_storage::catalog::open_catalog;
use stackhouse_storage::store::Store;
use stackhouse_storage::symbols::SymbolCache;
use stackhouse_storage::writer::{Writer, WriterConfig};
use tower::ServiceExt;

use crate::http::router;
use crate::state::AppState;

struct Fixture {
    router: axum::Router,
    _dir: tempfile::TempDir,
}

async fn fixture(limits: QueryLimits) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&format!("file://{}", dir.path().display())).unwrap();
    let catalog = open_catalog("sqlite::memory:").await.unwrap();
    let symbols = Arc::new(SymbolCache::new(store.clone(), catalog.clone()));
    let writer = Arc::new(Writer::start(
        store.clone(),
        catalog.clone(),
        symbols.clone(),
        WriterConfig::default(),
    ));
    let engine = Arc::new(QueryEngine::new(
        store.clone(),
        catalog.clone(),
        symbols,
        QueryConfig {
            limits,
            ..QueryConfig::default()
        },
    ));
    let state = AppState {
        pipeline: Arc::new(Pipeline::new(writer, stackhouse_storage::clock::system())),
        engine,
        catalog: catalog.clone(),
        store,
        max_message_bytes: 1 << 20,
        auth: Arc::new(crate::auth::Auth::off(catalog.clone())),
        clock: stackhouse_storage::clock::system(),
        deletion_grace: std::time::Duration::from_secs(300),
        rules: Arc::new(crate::recording::RecordingRules::new(
            catalog.clone(),
            crate::config::ServeArgs::from_flags(Vec::<String>::new())
                .unwrap()
                .recording_rules
                .config(),
        )),
    };
    Fixture {
        router: router(state),
        _dir: dir,
    }
}

async fn get(f: &Fixture, uri: &str) -> (StatusCode, Value) {
    let resp = f
        .router
        .clone()
        .oneshot(Request::get(uri).body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| panic!("{uri}: not JSON: {}", String::from_utf8_lossy(&bytes)));
    (status, body)
}

/// Asserts an error answer: the status, `{"error": …}` and nothing else, containing
/// every one of `needles`.
async fn assert_error(f: &Fixture, uri: &str, status: StatusCode, needles: &[&str]) {
    let (got, body) = get(f, uri).await;
    assert_eq!(got, status, "{uri}: {body}");
    let object = body.as_object().unwrap();
    assert_eq!(object.len(), 1, "{uri}: {body}");
    let message = object["error"].as_str().unwrap();
    for needle in needles {
        assert!(message.contains(needle), "{uri}: {message:?} lacks {needle:?}");
    }
}

const PT: &str = "profile_type=samples:count:cpu:nanoseconds";

#[tokio::test]
async fn malformed_parameters_are_400_naming_the_parameter() {
    let f = fixture(QueryLimits::default()).await;
    let bad_trace = "0102";
    for path in ["flamegraph", "timeseries", "top", "events"] {
        assert_error(
            &f,
            &format!("/api/v1/{path}"),
            StatusCode::BAD_REQUEST,
            &["missing parameter profile_type"],
        )
        .await;
        assert_error(
            &f,
            &format!(
                "/api/v1/{path}?{PT}&trace_id={}&trace_id={bad_trace}",
                "ab".repeat(16)
            ),
            StatusCode::BAD_REQUEST,
            &["trace_id", bad_trace, "32 hex"],
        )
        .await;
        assert_error(
            &f,
            &format!("/api/v1/{path}?{PT}&span_id=xyz"),
            StatusCode::BAD_REQUEST,
            &["span_id", "xyz", "16 hex"],
        )
        .await;
        assert_error(
            &f,
            &format!("/api/v1/{path}?{PT}&profile_id=00,11"),
            StatusCode::BAD_REQUEST,
            &["profile_id", "\"00\""],
        )
        .await;
        assert_error(
            &f,
            &format!("/api/v1/{path}?{PT}&from=10&to=10"),
            StatusCode::BAD_REQUEST,
            &["from", "before"],
        )
        .await;
        assert_error(
            &f,
            &format!("/api/v1/{path}?{PT}&selector=%7Bservice.name%3D"),
            StatusCode::BAD_REQUEST,
            &["invalid selector"],
        )
        .await;
        // Well formed, but nothing of that type is stored.
        assert_error(
            &f,
            &format!("/api/v1/{path}?{PT}"),
            StatusCode::BAD_REQUEST,
            &["unknown profile_type", "stored types: none"],
        )
        .await;
        assert_error(
            &f,
            &format!("/api/v1/{path}?profile_type=cpu"),
            StatusCode::BAD_REQUEST,
            &["invalid profile_type \"cpu\""],
        )
        .await;
    }
    assert_error(
        &f,
        &format!("/api/v1/flamegraph?{PT}&format=svg"),
        StatusCode::BAD_REQUEST,
        &["format", "svg"],
    )
    .await;
    assert_error(
        &f,
        &format!("/api/v1/flamegraph?{PT}&group_by=a,,b"),
        StatusCode::BAD_REQUEST,
        &["group_by"],
    )
    .await;
    assert_error(
        &f,
        &format!("/api/v1/flamegraph?{PT}&max_nodes=0"),
        StatusCode::BAD_REQUEST,
        &["max_nodes", "positive"],
    )
    .await;
    assert_error(
        &f,
        &format!("/api/v1/flamegraph?{PT}&selector={{}}&selector={{}}"),
        StatusCode::BAD_REQUEST,
        &["selector given more than once"],
    )
    .await;
    assert_error(
        &f,
        &format!("/api/v1/timeseries?{PT}&step=-5"),
        StatusCode::BAD_REQUEST,
        &["step", "-5"],
    )
    .await;
    assert_error(
        &f,
        &format!("/api/v1/timeseries?{PT}&aggregation=max"),
        StatusCode::BAD_REQUEST,
        &["aggregation", "max"],
    )
    .await;
    assert_error(
        &f,
        &format!("/api/v1/top?{PT}&limit=none"),
        StatusCode::BAD_REQUEST,
        &["limit", "none"],
    )
    .await;
    assert_error(
        &f,
        "/api/v1/profiles/zz",
        StatusCode::BAD_REQUEST,
        &["profile_id", "zz", "32 hex"],
    )
    .await;
    assert_error(
        &f,
        &format!("/api/v1/profiles/{}?profile_type=x", "00".repeat(16)),
        StatusCode::BAD_REQUEST,
        &["profile_type", "\"x\""],
    )
    .await;
    assert_error(
        &f,
        &format!("/api/v1/traces/{}/flamegraph?{PT}", "00".repeat(15)),
        StatusCode::BAD_REQUEST,
        &["trace_id", "32 hex"],
    )
    .await;
    assert_error(
        &f,
        &format!("/api/v1/diff?{PT}&comparison_from=now&comparison_to=now-1h"),
        StatusCode::BAD_REQUEST,
        &["comparison", "before"],
    )
    .await;
    assert_error(
        &f,
        &format!("/api/v1/diff?{PT}&baseline_selector=nonsense"),
        StatusCode::BAD_REQUEST,
        &["baseline_selector"],
    )
    .await;
    assert_error(
        &f,
        "/api/v1/diff",
        StatusCode::BAD_REQUEST,
        &["missing parameter profile_type"],
    )
    .await;
    assert_error(
        &f,
        "/api/v1/labels?from=yesterday",
        StatusCode::BAD_REQUEST,
        &["yesterday"],
    )
    .await;
}

#[tokio::test]
async fn limits_are_422_naming_limit_and_flag() {
    let f = fixture(QueryLimits {
        max_nodes: 50,
        max_events: 20,
        ..QueryLimits::default()
    })
    .await;
    for uri in [
        format!("/api/v1/flamegraph?{PT}&max_nodes=51"),
        format!("/api/v1/diff?{PT}&max_nodes=51"),
        format!("/api/v1/profiles/{}?max_nodes=51", "00".repeat(16)),
        format!("/api/v1/traces/{}/flamegraph?{PT}&max_nodes=51", "00".repeat(16)),
    ] {
        assert_error(
            &f,
            &uri,
            StatusCode::UNPROCESSABLE_ENTITY,
            &["max_nodes 51", "(limit max_nodes)", "--query-max-nodes"],
        )
        .await;
    }
    assert_error(
        &f,
        &format!("/api/v1/events?{PT}&limit=21"),
        StatusCode::UNPROCESSABLE_ENTITY,
        &["(limit max_events)", "--query-max-events"],
    )
    .await;
}

#[tokio::test]
async fn catalog_listings_and_the_document_answer_without_data() {
    let f = fixture(QueryLimits::default()).await;
    let (status, body) = get(&f, "/api/v1/profile-types?from=now-1h").await;
    assert_eq!(
        (status, body),
        (StatusCode::OK, serde_json::json!({"profile_types": []}))
    );
    let (status, body) = get(&f, "/api/v1/labels").await;
    assert_eq!((status, body), (StatusCode::OK, serde_json::json!({"names": []})));
    let (status, body) = get(&f, "/api/v1/labels/thread.name/values").await;
    assert_eq!(
        (status, body),
        (
            StatusCode::OK,
            serde_json::json!({"name": "thread.name", "values": []})
        )
    );
    let (status, body) = get(&f, "/api/v1/stats").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        (body["segments"].as_u64(), body["series"].as_u64()),
        (Some(0), Some(0))
    );
    let (status, doc) = get(&f, "/api/v1/openapi.json").await;
    assert_eq!(status, StatusCode::OK);
    assert!(doc["paths"]["/api/v1/flamegraph"]["get"].is_object());
    let resp = f
        .router
        .clone()
        .oneshot(
            Request::get("/api/v1/stats")
                .header("X-Scope-OrgID", "a/b")
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
}

/// A listing runs on the engine as a data query does: past the query timeout it answers
/// the flamegraph's 422, naming the same limit and flag.
#[tokio::test]
async fn listings_answer_the_query_timeout_as_data_queries_do() {
    let f = fixture(QueryLimits {
        timeout: std::time::Duration::ZERO,
        ..QueryLimits::default()
    })
    .await;
    // The data queries' own timeout answer is held to the same text in
    // query/tests/engine.rs (listings_are_held_to_the_query_limits); this store holds no
    // profile type, so a flamegraph here stops earlier, at its profile_type check.
    for uri in [
        "/api/v1/profile-types",
        "/api/v1/labels",
        "/api/v1/labels/thread.name/values",
        "/api/v1/stats",
    ] {
        assert_error(
            &f,
            uri,
            StatusCode::UNPROCESSABLE_ENTITY,
            &["(limit timeout)", "--query-timeout"],
        )
        .await;
    }
}
