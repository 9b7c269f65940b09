//! Liveness and readiness.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::state::AppState;

pub(super) async fn healthz() -> Json<Value> {
    Json(json!({ "status": "ok" }))
}

/// Ready when both the object store and the catalog answer.
pub(super) async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Value>) {
    let store = state.store.ping().await.err().map(|e| e.to_string());
    let catalog = state.catalog.ping().await.err().map(|e| e.to_string());
    let ready = store.is_none() && catalog.is_none();
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = json!({
        "status": if ready { "ready" } else { "not ready" },
        "store": store.unwrap_or_else(|| "ok".into()),
        "catalog": catalog.unwrap_or_else(|| "ok".into()),
    });
    (status, Json(body))
}
