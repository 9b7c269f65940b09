//! The OpenAPI document of the HTTP API, generated from the routes served (each documented
//! route carries its handlers' annotations, parameter and result types), served at
//! `GET /api/v1/openapi.json`.

use std::sync::OnceLock;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::{ContentBuilder, HeaderBuilder, Ref, ResponseBuilder};
use utoipa::{Modify, OpenApi};

use super::debuginfo;
use crate::error::{ErrorBody, ErrorKind};
use crate::read::{self, params};
use crate::route::{self, Route, documented};

/// How every query endpoint can fail.
const QUERY_ERRORS: [ErrorKind; 4] = [
    ErrorKind::InvalidArgument,
    ErrorKind::LimitExceeded,
    ErrorKind::Unavailable,
    ErrorKind::Internal,
];

/// The failures of `path` beyond [`QUERY_ERRORS`].
fn own_errors(path: &str) -> &'static [ErrorKind] {
    match path {
        "/api/v1/profiles/{profile_id}" | "/api/v1/debuginfo/{build_id}" => &[ErrorKind::NotFound],
        "/api/v1/admin/deletes" => &[ErrorKind::PermissionDenied],
        "/api/v1/admin/deletes/{id}" => &[ErrorKind::PermissionDenied, ErrorKind::NotFound],
        "/api/v1/admin/tenants/{tenant}" => &[ErrorKind::PermissionDenied],
        _ => &[],
    }
}

/// Documents each endpoint's error answers from the one table in `crate::error`, so the
/// document states what the server sends.
struct ErrorResponses;

impl Modify for ErrorResponses {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        for (path, item) in &mut doc.paths.paths {
            let Some(operation) = item.get.as_mut() else {
                continue;
            };
            if path == "/api/v1/openapi.json" {
                continue;
            }
            for kind in QUERY_ERRORS.iter().chain(own_errors(path)) {
                let body = ContentBuilder::new()
                    .schema(Some(Ref::from_schema_name("ErrorBody")))
                    .build();
                let mut response = ResponseBuilder::new()
                    .description(kind.description())
                    .content("application/json", body);
                if kind.retry_after().is_some() {
                    let seconds = HeaderBuilder::new()
                        .schema(ObjectBuilder::new().schema_type(Type::Integer))
                        .description(Some("Seconds to wait before retrying"))
                        .build();
                    response = response.header("Retry-After", seconds);
                }
                operation
                    .responses
                    .responses
                    .insert(kind.http_status().as_str().to_string(), response.build().into());
            }
        }
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Stackhouse",
        description = "Profile storage and query API. Every query endpoint reads the tenant from \
            `X-Scope-OrgID` (default `anonymous`; a read may name several, `a|b`). Errors are `{\"error\": \"…\"}`: 400 for a \
            malformed request, 404 for an unknown profile id, 422 when a limit is exceeded (the \
            message names the limit and the flag that raises it), 503 with `Retry-After` when \
            the server cannot answer now (query memory budget, storage), 500 for our faults."
    ),
    components(schemas(ErrorBody, params::Format)),
    tags(
        (name = "query", description = "Flamegraphs, profiles, time series, top functions, diffs, events"),
        (name = "catalog", description = "What is stored: profile types, labels, totals"),
        (name = "debuginfo", description = "Debug files (ELF, by GNU build id) that name native frames"),
        (name = "admin", description = "Deletion requests: admin tokens only"),
        (name = "recording rules", description = "Metrics from profiles: rules whose per-minute totals are pushed to Prometheus"),
        (name = "meta", description = "This document"),
    )
)]
struct ApiDoc;

pub(super) fn routes() -> Vec<Route> {
    vec![documented!(openapi_json)]
}

/// The whole document: what every documented route says, each endpoint's error answers
/// added.
pub fn document() -> utoipa::openapi::OpenApi {
    let mut doc = ApiDoc::openapi();
    let served = read::routes()
        .into_iter()
        .chain(debuginfo::routes())
        .chain(super::deletes::routes())
        .chain(super::tenants::routes())
        .chain(routes());
    let (paths, components) = route::document(served.collect());
    doc.paths.merge(paths);
    doc.components
        .get_or_insert_with(Default::default)
        .schemas
        .extend(components.schemas);
    ErrorResponses.modify(&mut doc);
    doc
}

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
        document().to_json().unwrap_or_else(|_| "{}".to_string())
    });
    ([(header::CONTENT_TYPE, "application/json")], doc.clone()).into_response()
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    #[test]
    fn document_is_openapi_3_1_with_error_bodies() {
        let doc: Value = serde_json::from_str(&document().to_json().unwrap()).unwrap();
        assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
        let error_ref = "#/components/schemas/ErrorBody";
        assert!(doc["components"]["schemas"]["ErrorBody"]["required"] == serde_json::json!(["error"]));
        for (path, item) in doc["paths"].as_object().unwrap() {
            let responses = item["get"]["responses"].as_object().unwrap();
            assert!(responses.contains_key("200"), "{path}");
            if path == "/api/v1/openapi.json" {
                continue;
            }
            let mut statuses = vec!["400", "422", "500", "503"];
            if path.starts_with("/api/v1/admin/") {
                statuses.push("403");
            }
            if path == "/api/v1/profiles/{profile_id}"
                || path == "/api/v1/debuginfo/{build_id}"
                || path == "/api/v1/admin/deletes/{id}"
            {
                statuses.push("404");
            }
            let documented: Vec<&str> = responses
                .keys()
                .map(String::as_str)
                .filter(|s| *s != "200")
                .collect();
            assert_eq!(documented.len(), statuses.len(), "{path}: {documented:?}");
            assert!(responses["503"]["headers"]["Retry-After"].is_object(), "{path}");
            for status in statuses {
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
