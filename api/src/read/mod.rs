//! Every read, one module per family, each holding its REST handlers (`/api/v1`) and its
//! Connect methods (Grafana's `querier.v1`) side by side. A handler reads its request
//! (query string or Connect message), makes one engine request (the endpoint's own, in
//! `stackhouse_query::endpoints::<name>`) and encodes the answer. A REST handler is routed
//! with `documented!`, which puts it in the OpenAPI document; a Connect method with
//! `querier!`.

mod call;
pub(crate) mod connect;
pub(crate) mod diff;
mod encode;
pub(crate) mod events;
pub(crate) mod filters;
pub(crate) mod flamegraph;
pub(crate) mod labels;
pub mod params;
pub(crate) mod profiles;
pub(crate) mod recording_rules;
mod render;
mod settings;
#[cfg(test)]
mod tests;
pub(crate) mod timeseries;
pub(crate) mod top;

pub use encode::{
    ANSWERED_RANGE_HEADER, DiffBody, FlamegraphBody, PPROF_CONTENT_TYPE, ProfileBody, TIERS_HEADER,
};

use crate::route::Route;

/// Every read route: the query API's, Connect's methods, Pyroscope's legacy render, and
/// Connect's answer for the methods not served.
pub fn routes() -> Vec<Route> {
    let mut routes = Vec::new();
    for family in [
        flamegraph::routes,
        profiles::routes,
        timeseries::routes,
        top::routes,
        diff::routes,
        events::routes,
        filters::routes,
        labels::routes,
        settings::routes,
        recording_rules::routes,
        render::routes,
    ] {
        routes.extend(family());
    }
    routes.push(connect::unimplemented_route());
    routes
}
