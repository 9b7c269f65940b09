//! The OpenAPI document of the HTTP API, generated from the handlers' parameter and
//! result types, served at `GET /api/v1/openapi.json`.

use std::sync::OnceLock;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use utoipa::OpenApi;

use super::query::{diff, events, flamegraph, labels, params, profiles, timeseries, top, traces};
use crate::error::ErrorBody;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Stackhouse",
        description = "Profile storage and query API. Every query endpoint reads the tenant from \
            `X-Scope-OrgID` (default `anonymous`). Errors are `{\"error\": \"…\"}`: 400 for a \
            malformed request, 404 for an unknown profile id, 422 when a limit is exceeded (the \
            message names the limit and the flag that raises it)."
    ),
    paths(
        flamegraph::flamegraph,
        profiles::profile,
        traces::trace_flamegraph,
        timeseries::timeseries,
        top::top,
        diff::diff,
        events::events,
        labels::profile_types,
        labels::label_names,
        labels::label_values,
        labels::stats,
        openapi_json,
    ),
    components(schemas(ErrorBody, params::Format)),
    tags(
        (name = "query", description = "Flamegraphs, profiles, time series, top functions, diffs, events"),
        (name = "catalog", description = "What is stored: profile types, labels, totals"),
        (name = "meta", description = "This document"),
    )
)]
pub struct ApiDoc;

/// This document, as OpenAPI 3.1 JSON.
#[utoipa::path(
    get,
    path = "/api/v1/openapi.json",
    tag = "meta",
    responses((status = 200, description = "The OpenAPI document", body = Object, content_type = "application/json"))
)]
pub async fn openapi_json() -> Response {
    static DOC: OnceLock<String> = OnceLock::new();
    let doc = DOC.get_or_init(|| {
        // Serializing a document built from our own types does not fail; an empty object
        // would still be valid JSON if it somehow did.
        ApiDoc::openapi().to_json().unwrap_or_else(|_| "{}".to_string())
    });
    ([(header::CONTENT_TYPE, "application/json")], doc.clone()).into_response()
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    #[test]
    fn document_is_openapi_3_1_with_error_bodies() {
        let doc: Value = serde_json::from_str(&ApiDoc::openapi().to_json().unwrap()).unwrap();
        assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
        let error_ref = "#/components/schemas/ErrorBody";
        assert!(doc["components"]["schemas"]["ErrorBody"]["required"] == serde_json::json!(["error"]));
        for (path, item) in doc["paths"].as_object().unwrap() {
            let responses = item["get"]["responses"].as_object().unwrap();
            assert!(responses.contains_key("200"), "{path}");
            if path == "/api/v1/openapi.json" {
                continue;
            }
            for status in ["400", "500"] {
                assert_eq!(
                    responses[status]["content"]["application/json"]["schema"]["$ref"], error_ref,
                    "{path} {status}"
                );
            }
            let tenant = item["get"]["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == "X-Scope-OrgID" && p["in"] == "header");
            assert!(tenant, "{path} does not document the tenant header");
        }
        let formats = &doc["components"]["schemas"]["Format"]["enum"];
        assert_eq!(
            formats,
            &serde_json::json!(["json", "folded", "flamebearer", "pprof"])
        );
    }
}
