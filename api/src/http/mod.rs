//! The HTTP server: OTLP/HTTP, Pyroscope ingest, the query API and health endpoints on one
//! listener.

pub(crate) mod body;
pub mod debuginfo;
mod ingest;
pub mod openapi;
mod ops;
mod otlp;
mod push;
pub mod query;
mod ui;

use std::sync::Arc;

use axum::Router;
use axum::routing::{MethodRouter, get, post, put};
use stackhouse_ingest::pipeline::Pipeline;
use stackhouse_query::QueryEngine;
use stackhouse_storage::catalog::Catalog;
use stackhouse_storage::clock::SharedClock;
use stackhouse_storage::store::Store;

use crate::auth::{self, Auth};
use crate::config::Roles;

#[derive(Clone)]
pub struct AppState {
    pub pipeline: Arc<Pipeline>,
    pub engine: Arc<QueryEngine>,
    pub catalog: Arc<dyn Catalog>,
    pub store: Store,
    pub max_message_bytes: usize,
    pub auth: Arc<Auth>,
    pub clock: SharedClock,
}

/// Every route under `/api/v1`; a test checks each is in the OpenAPI document.
pub fn api_routes() -> Vec<(&'static str, MethodRouter<AppState>)> {
    use query::{diff, events, flamegraph, labels, profiles, timeseries, top, traces};
    vec![
        ("/api/v1/profile-types", get(labels::profile_types)),
        ("/api/v1/labels", get(labels::label_names)),
        ("/api/v1/labels/{name}/values", get(labels::label_values)),
        ("/api/v1/flamegraph", get(flamegraph::flamegraph)),
        ("/api/v1/profiles/{profile_id}", get(profiles::profile)),
        (
            "/api/v1/traces/{trace_id}/flamegraph",
            get(traces::trace_flamegraph),
        ),
        ("/api/v1/timeseries", get(timeseries::timeseries)),
        ("/api/v1/top", get(top::top)),
        ("/api/v1/diff", get(diff::diff)),
        ("/api/v1/events", get(events::events)),
        ("/api/v1/stats", get(labels::stats)),
        ("/api/v1/debuginfo", get(debuginfo::list)),
        (
            "/api/v1/debuginfo/{build_id}",
            put(debuginfo::put).get(debuginfo::get).delete(debuginfo::delete),
        ),
        ("/api/v1/openapi.json", get(openapi::openapi_json)),
    ]
}

/// Every route of a process running all roles.
pub fn router(state: AppState) -> Router {
    router_for(state, &Roles::ALL)
}

/// Every ingest route, all POST. Outside /api/v1: their paths are fixed by OTLP and
/// Pyroscope.
pub fn ingest_routes() -> Vec<(&'static str, MethodRouter<AppState>)> {
    vec![
        ("/v1development/profiles", post(otlp::export)),
        ("/v1experimental/profiles", post(otlp::export_experimental)),
        ("/ingest", post(ingest::ingest)),
        ("/push.v1.PusherService/Push", post(push::push)),
    ]
}

/// The routes of `roles`; health, readiness and metrics are always served. Everything but
/// those and the web UI's files passes [`auth::require`].
pub fn router_for(state: AppState, roles: &Roles) -> Router {
    let mut router = Router::new();
    if roles.ingest {
        for (path, route) in ingest_routes() {
            router = router.route(path, route);
        }
    }
    if roles.query {
        for (path, route) in api_routes().into_iter().chain(crate::connect::routes()) {
            router = router.route(path, route);
        }
    }
    if roles.ingest || roles.query {
        // A route layer needs routes to wrap (the compactor alone has none).
        router = router.route_layer(axum::middleware::from_fn_with_state(
            state.auth.clone(),
            auth::require,
        ));
    }
    if roles.query {
        for (path, route) in ui::routes() {
            router = router.route(path, route);
        }
    }
    router
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .route("/metrics", get(crate::monitoring::render))
        .route_layer(axum::middleware::from_fn(crate::monitoring::track))
        .with_state(state)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use utoipa::OpenApi;

    use super::*;

    #[test]
    fn every_api_route_is_documented_and_nothing_else() {
        let doc = openapi::ApiDoc::openapi();
        let documented: BTreeSet<&str> = doc.paths.paths.keys().map(String::as_str).collect();
        let served: BTreeSet<&str> = api_routes().into_iter().map(|(path, _)| path).collect();
        assert_eq!(served, documented);
        for (path, item) in &doc.paths.paths {
            assert!(
                item.get.is_some(),
                "{path} is served with GET but documented otherwise"
            );
            let writes = item.put.is_some() || item.delete.is_some();
            assert_eq!(writes, path == "/api/v1/debuginfo/{build_id}", "{path}");
        }
    }
}
