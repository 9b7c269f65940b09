//! The HTTP server: OTLP/HTTP, Pyroscope ingest, the query API and health endpoints on one
//! listener.

pub mod debuginfo;
mod ingest;
pub mod openapi;
mod ops;
mod otlp;
mod push;
mod ui;

use axum::Router;
use axum::routing::{MethodRouter, get, post, put};

use crate::auth;
use crate::config::Roles;
use crate::read;
use crate::state::AppState;

/// Every route of the query role: the reads (REST, Connect, Pyroscope's render), debug
/// files and the OpenAPI document.
fn query_routes() -> Vec<(&'static str, MethodRouter<AppState>)> {
    let mut routes = read::routes();
    routes.extend([
        ("/api/v1/debuginfo", get(debuginfo::list)),
        (
            "/api/v1/debuginfo/{build_id}",
            put(debuginfo::put).get(debuginfo::get).delete(debuginfo::delete),
        ),
        ("/api/v1/openapi.json", get(openapi::openapi_json)),
    ]);
    routes
}

/// Every route under `/api/v1`; a test checks each is in the OpenAPI document.
pub fn api_routes() -> Vec<(&'static str, MethodRouter<AppState>)> {
    query_routes()
        .into_iter()
        .filter(|(path, _)| path.starts_with("/api/v1/"))
        .collect()
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
        for (path, route) in query_routes() {
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
