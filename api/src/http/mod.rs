//! The HTTP server: OTLP/HTTP, the query API and health endpoints on one listener.

mod ops;
mod otlp;
mod query;

use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};
use stackhouse_query::engine::QueryEngine;
use stackhouse_storage::catalog::Catalog;
use stackhouse_storage::store::Store;

use crate::export::Exporter;

#[derive(Clone)]
pub struct AppState {
    pub exporter: Arc<Exporter>,
    pub engine: Arc<QueryEngine>,
    pub catalog: Arc<dyn Catalog>,
    pub store: Store,
    pub max_message_bytes: usize,
}

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/v1development/profiles", post(otlp::export))
        .route("/api/v1/profile-types", get(query::profile_types))
        .route("/api/v1/labels", get(query::label_names))
        .route("/api/v1/labels/{name}/values", get(query::label_values))
        .route("/api/v1/flamegraph", get(query::flamegraph))
        .route("/api/v1/stats", get(query::stats))
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .with_state(state)
}
