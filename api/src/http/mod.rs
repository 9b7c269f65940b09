//! The HTTP server: OTLP/HTTP, Pyroscope ingest, the query API and health endpoints on one
//! listener.

pub mod debuginfo;
pub mod deletes;
mod ingest;
mod mcp;
pub mod openapi;
mod ops;
mod otlp;
mod push;
pub mod tenants;
mod ui;

use axum::Router;
use axum::routing::{get, post};

use crate::auth;
use crate::config::Roles;
use crate::read;
use crate::route::Route;
use crate::state::AppState;

/// Every route of the query role: the reads (REST, Connect, Pyroscope's render), debug
/// files and the OpenAPI document.
pub(crate) fn query_routes() -> Vec<Route> {
    let mut routes = read::routes();
    routes.extend(debuginfo::routes());
    routes.extend(deletes::routes());
    routes.extend(tenants::routes());
    routes.extend(openapi::routes());
    routes.extend(mcp::routes());
    routes
}

/// Every route under `/api/v1`; a test checks each is in the OpenAPI document.
pub fn api_routes() -> Vec<Route> {
    query_routes()
        .into_iter()
        .filter(|route| route.path.starts_with("/api/v1/"))
        .collect()
}

/// Every route of a process running all roles.
pub fn router(state: AppState) -> Router {
    router_for(state, &Roles::ALL)
}

/// Every ingest route, all POST. Outside /api/v1: their paths are fixed by OTLP and
/// Pyroscope.
pub fn ingest_routes() -> Vec<Route> {
    let handlers = [
        post(otlp::export),
        post(otlp::export_experimental),
        post(ingest::ingest),
        post(push::push),
    ];
    INGEST_PATHS
        .into_iter()
        .zip(handlers)
        .map(|(path, handlers)| Route::new(path, handlers))
        .collect()
}

/// The paths of [`ingest_routes`], in its order.
pub(crate) const INGEST_PATHS: [&str; 4] = [
    "/v1development/profiles",
    "/v1experimental/profiles",
    "/ingest",
    "/push.v1.PusherService/Push",
];

/// The routes of `roles`; health, readiness and metrics are always served. Everything but
/// those and the web UI's files passes [`auth::require`].
pub fn router_for(state: AppState, roles: &Roles) -> Router {
    let mut router = Router::new();
    if roles.ingest {
        for route in ingest_routes() {
            router = router.route(&route.path, route.handlers);
        }
    }
    if roles.query {
        for route in query_routes() {
            router = router.route(&route.path, route.handlers);
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
        for route in ui::routes() {
            router = router.route(&route.path, route.handlers);
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

    use super::*;

    #[test]
    fn every_api_route_is_documented_and_nothing_else() {
        let doc = openapi::document();
        let documented: BTreeSet<&str> = doc.paths.paths.keys().map(String::as_str).collect();
        let routes = api_routes();
        let served: BTreeSet<&str> = routes.iter().map(|route| route.path.as_str()).collect();
        assert_eq!(served, documented);
        assert!(routes.iter().all(Route::is_documented));
        for (path, item) in &doc.paths.paths {
            assert!(
                item.get.is_some(),
                "{path} is served with GET but documented otherwise"
            );
            let writes = item.put.is_some() || item.delete.is_some() || item.post.is_some();
            let written = [
                "/api/v1/debuginfo/{build_id}",
                "/api/v1/admin/deletes",
                "/api/v1/admin/deletes/{id}",
                "/api/v1/admin/tenants/{tenant}",
                "/api/v1/recording-rules",
                "/api/v1/recording-rules/{id}",
            ];
            assert_eq!(writes, written.contains(&path.as_str()), "{path}");
        }
    }
}
