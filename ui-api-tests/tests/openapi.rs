//! The OpenAPI document describes what the server actually answers: every documented GET
//! path is called with valid parameters (and in every documented format), and each JSON
//! body is validated against the schema the document gives for that path, status and
//! content type. Object schemas are closed for the check (`unevaluatedProperties: false`),
//! so a field renamed or added without the schema following fails here.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::collections::{BTreeMap, BTreeSet};

use opentelemetry_proto::tonic::profiles::v1development::Link;
use serde_json::{Value, json};
use ui_api_tests::client::Api;
use ui_api_tests::requests::{PROFILE_TYPE, dictionary, profile, request};
use ui_api_tests::server::{Options, Server};

const TENANT: &str = "openapi-check";
const SERVICE: &str = "openapi";
const T0: u64 = 1_700_000_000_000_000_000;
const TRACE: [u8; 16] = [0xab; 16];
const SPAN: [u8; 8] = [0xcd; 8];
const PROFILE_1: [u8; 16] = [0x11; 16];
const PROFILE_2: [u8; 16] = [0x22; 16];
/// Sample values of the two profiles sent: the first is linked to TRACE/SPAN.
const VALUE_1: i64 = 3;
const VALUE_2: i64 = 4;

/// Every route the server serves under `/api/v1` (the contract's list).
const ROUTES: &[&str] = &[
    "/api/v1/profile-types",
    "/api/v1/labels",
    "/api/v1/labels/{name}/values",
    "/api/v1/flamegraph",
    "/api/v1/profiles/{profile_id}",
    "/api/v1/traces/{trace_id}/flamegraph",
    "/api/v1/timeseries",
    "/api/v1/top",
    "/api/v1/diff",
    "/api/v1/events",
    "/api/v1/stats",
    "/api/v1/debuginfo",
    "/api/v1/debuginfo/{build_id}",
    "/api/v1/admin/deletes",
    "/api/v1/admin/deletes/{id}",
    "/api/v1/admin/tenants/{tenant}",
    "/api/v1/recording-rules",
    "/api/v1/recording-rules/{id}",
    "/api/v1/openapi.json",
];

/// The build id of the debug file `ingest` uploads.
static BUILD_ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
/// The id of the deletion request `ingest` makes (of nothing the test sent).
static DELETE_ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
/// The id of the recording rule `ingest` makes.
static RULE_ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Query parameters as sent, a name possibly repeated.
type Params = Vec<(String, String)>;

struct Answer {
    status: u16,
    content_type: String,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self, what: &str) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "{what}: body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    /// The media type without parameters (`text/plain; charset=utf-8` → `text/plain`).
    fn media_type(&self) -> &str {
        self.content_type.split(';').next().unwrap_or("").trim()
    }
}

async fn get(base: &str, path: &str, query: &[(String, String)]) -> Answer {
    let resp = ui_api_tests::http_client()
        .get(format!("{base}{path}"))
        .query(query)
        .header("X-Scope-OrgID", TENANT)
        .send()
        .await
        .expect("http request");
    let status = resp.status().as_u16();
    let content_type = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let body = resp.bytes().await.unwrap().to_vec();
    Answer {
        status,
        content_type,
        body,
    }
}

/// The schema of `$.paths[path].get.responses[status].content[media]`.
fn response_schema(doc: &Value, path: &str, status: u16, media: &str) -> Option<Value> {
    doc["paths"][path]["get"]["responses"][status.to_string()]["content"]
        .get(media)
        .map(|c| c.get("schema").cloned().unwrap_or(Value::Null))
}

/// Closes every component object schema, except those used as parts of an `allOf` (the
/// whole they are part of is closed instead: `unevaluatedProperties` sees through `allOf`).
fn closed_components(doc: &Value) -> Value {
    fn all_of_parts(v: &Value, out: &mut BTreeSet<String>) {
        match v {
            Value::Object(map) => {
                if let Some(Value::Array(parts)) = map.get("allOf") {
                    for part in parts {
                        if let Some(r) = part.get("$ref").and_then(Value::as_str) {
                            out.insert(r.rsplit('/').next().unwrap().to_string());
                        }
                    }
                }
                map.values().for_each(|v| all_of_parts(v, out));
            }
            Value::Array(items) => items.iter().for_each(|v| all_of_parts(v, out)),
            _ => {}
        }
    }
    let mut components = doc["components"].clone();
    let mut parts = BTreeSet::new();
    all_of_parts(&components, &mut parts);
    for (name, schema) in components["schemas"].as_object_mut().expect("component schemas") {
        let object = schema.get("properties").is_some() || schema.get("allOf").is_some();
        if object && !parts.contains(name) {
            schema["unevaluatedProperties"] = Value::Bool(false);
        }
    }
    components
}

struct Checker {
    doc: Value,
    components: Value,
    validated: BTreeMap<String, usize>,
}

impl Checker {
    fn new(doc: Value) -> Checker {
        let components = closed_components(&doc);
        Checker {
            doc,
            components,
            validated: BTreeMap::new(),
        }
    }

    fn errors(&self, schema: &Value, body: &Value) -> Vec<String> {
        let mut root = schema.clone();
        // `$ref`s point into `#/components/…`: give the schema the document's components.
        if let Value::Object(map) = &mut root {
            map.insert("components".into(), self.components.clone());
        } else {
            root = json!({"allOf": [root], "components": self.components});
        }
        let validator = jsonschema::draft202012::new(&root).expect("a valid JSON schema");
        validator
            .iter_errors(body)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect()
    }

    /// Checks an answer against the document: its status and content type are documented
    /// for the path, and a JSON body matches the documented schema.
    fn check(&mut self, path: &str, what: &str, answer: &Answer) {
        let media = answer.media_type();
        let schema = response_schema(&self.doc, path, answer.status, media).unwrap_or_else(|| {
            panic!(
                "{what}: status {} with {media:?} is not documented for {path}: {}",
                answer.status,
                String::from_utf8_lossy(&answer.body)
            )
        });
        match media {
            "application/json" => {
                let body = answer.json(what);
                let errors = self.errors(&schema, &body);
                assert!(
                    errors.is_empty(),
                    "{what}: body does not match the documented schema:\n{}\nbody: {body:#}",
                    errors.join("\n")
                );
                *self.validated.entry(path.to_string()).or_default() += 1;
            }
            "text/plain" => {
                assert!(
                    std::str::from_utf8(&answer.body).is_ok(),
                    "{what}: text is not UTF-8"
                );
            }
            "application/octet-stream" => {
                assert!(
                    answer.body.starts_with(&[0x1f, 0x8b]),
                    "{what}: pprof is not gzipped"
                );
            }
            other => panic!("{what}: unexpected media type {other}"),
        }
    }

    fn parameters(&self, path: &str) -> Vec<Value> {
        self.doc["paths"][path]["get"]["parameters"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// The values of a parameter's enum schema (following a `$ref`).
    fn enum_values(&self, param: &Value) -> Vec<String> {
        let mut schema = param["schema"].clone();
        if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
            let name = r.rsplit('/').next().unwrap();
            schema = self.doc["components"]["schemas"][name].clone();
        }
        schema["enum"]
            .as_array()
            .unwrap_or_else(|| panic!("{} has no enum", param["name"]))
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    }
}

/// A valid value for every parameter name the API documents; the test fails on a name it
/// does not know, so a new parameter has to be added here.
fn value_for(name: &str) -> Option<String> {
    let (from, to) = (
        (T0 - 1_000_000_000).to_string(),
        (T0 + 60_000_000_000).to_string(),
    );
    Some(match name {
        "profile_type" => PROFILE_TYPE.to_string(),
        "selector" | "baseline_selector" | "comparison_selector" => format!("{{service.name=\"{SERVICE}\"}}"),
        "from" | "baseline_from" | "comparison_from" => from,
        "to" | "baseline_to" | "comparison_to" => to,
        "trace_id" => hex::encode(TRACE),
        "span_id" => hex::encode(SPAN),
        "profile_id" => hex::encode(PROFILE_1),
        "build_id" => BUILD_ID.get().expect("ingest uploaded a debug file").clone(),
        "id" => DELETE_ID.get().expect("ingest made a deletion request").clone(),
        "tenant" => TENANT.to_string(),
        "name" => "thread.name".to_string(),
        "group_by" => "thread.name".to_string(),
        "max_nodes" => "100".to_string(),
        "step" => "1s".to_string(),
        "aggregation" => "sum".to_string(),
        "limit" => "10".to_string(),
        // Frame rules that keep the answers' shapes: every stack with a frame, nothing dropped.
        "focus" => ".*".to_string(),
        "drop" | "hide" => "function:no such function".to_string(),
        "preset" => "libc-kernel".to_string(),
        "aggregate_by" => "function".to_string(),
        // Set by the client on every request; the first page has no cursor.
        "X-Scope-OrgID" | "cursor" | "format" => return None,
        other => panic!("the test has no value for the documented parameter {other:?}"),
    })
}

fn fill_path(path: &str) -> String {
    let mut out = path.to_string();
    // The one path whose `{id}` is not a deletion request's.
    if let Some(rest) = out.strip_prefix("/api/v1/recording-rules/") {
        out = out.replace(rest, RULE_ID.get().expect("ingest made a recording rule"));
    }
    for name in ["name", "profile_id", "trace_id", "build_id", "id", "tenant"] {
        out = out.replace(&format!("{{{name}}}"), &value_for(name).unwrap());
    }
    assert!(!out.contains('{'), "unfilled path parameter in {path}");
    out
}

async fn ingest(api: &Api) {
    let mut dict = dictionary();
    dict.link_table.push(Link {
        trace_id: TRACE.to_vec(),
        span_id: SPAN.to_vec(),
    });
    let link = (dict.link_table.len() - 1) as i32;
    let mut linked = profile(T0, 2, VALUE_1);
    linked.profile_id = PROFILE_1.to_vec();
    linked.samples[0].link_index = link;
    let mut other = profile(T0 + 1_000_000_000, 1, VALUE_2);
    other.profile_id = PROFILE_2.to_vec();
    let req = request(SERVICE, vec![linked, other], dict);
    let (status, _, body) = api
        .post_otlp(
            "application/x-protobuf",
            false,
            prost::Message::encode_to_vec(&req),
        )
        .await;
    assert_eq!(status, 200, "ingest failed: {}", String::from_utf8_lossy(&body));

    // A debug file, so that the debuginfo listing and lookup have one to describe.
    let dir = tempfile::tempdir().unwrap();
    let (program, debug) = ui_api_tests::native_program::build(dir.path());
    let build_id = ui_api_tests::native_program::build_id(&program);
    let response = ui_api_tests::http_client()
        .put(format!("{}/api/v1/debuginfo/{build_id}", api.base))
        .header("X-Scope-OrgID", TENANT)
        .body(std::fs::read(&debug).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.status(),
        201,
        "upload failed: {}",
        response.text().await.unwrap()
    );
    BUILD_ID.set(build_id).unwrap();

    // A deletion request before anything the test sent, so that the listing and the
    // lookup have one to describe and every answer still holds all the data.
    let response = ui_api_tests::http_client()
        .post(format!("{}/api/v1/admin/deletes", api.base))
        .header("X-Scope-OrgID", TENANT)
        .json(&serde_json::json!({
            "selector": format!("{{service.name=\"{SERVICE}\"}}"),
            "from": (T0 - 10_000_000_000).to_string(),
            "to": (T0 - 5_000_000_000).to_string(),
        }))
        .send()
        .await
        .unwrap();
    let status = response.status();
    let made: Value = response.json().await.unwrap();
    assert_eq!(status, 201, "deletion request refused: {made}");
    DELETE_ID.set(made["id"].as_str().unwrap().to_string()).unwrap();

    let response = ui_api_tests::http_client()
        .post(format!("{}/api/v1/recording-rules", api.base))
        .header("X-Scope-OrgID", TENANT)
        .json(&serde_json::json!({
            "metric_name": "profiles_recorded_openapi",
            "matchers": ["{__profile_type__=\"process_cpu:cpu:nanoseconds:cpu:nanoseconds\"}"],
        }))
        .send()
        .await
        .unwrap();
    let status = response.status();
    let made: Value = response.json().await.unwrap();
    assert_eq!(status, 201, "recording rule refused: {made}");
    RULE_ID.set(made["id"].as_str().unwrap().to_string()).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn responses_match_the_openapi_document() {
    let server = Server::start(Options::default()).await;
    let base = server.http();
    let api = Api::new(base.clone()).with_tenant(TENANT);
    ingest(&api).await;

    let answer = get(&base, "/api/v1/openapi.json", &[]).await;
    assert_eq!(answer.status, 200);
    let doc = answer.json("openapi.json");
    assert!(
        doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.1")),
        "OpenAPI 3.1, got {}",
        doc["openapi"]
    );
    let documented: BTreeSet<&str> = doc["paths"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    for route in ROUTES {
        assert!(documented.contains(route), "{route} is served but not documented");
    }
    let mut checker = Checker::new(doc.clone());
    checker.check("/api/v1/openapi.json", "openapi.json", &answer);

    for path in &documented {
        let params = checker.parameters(path);
        let url = fill_path(path);
        let mut required = Vec::new();
        let mut all = Vec::new();
        for p in &params {
            let name = p["name"].as_str().unwrap();
            if p["in"] != "query" {
                continue;
            }
            let Some(value) = value_for(name) else { continue };
            let is_required = p["required"] == true;
            // The range parameters are optional but the data lies outside the default hour.
            if is_required || name.ends_with("from") || name.ends_with("to") {
                required.push((name.to_string(), value.clone()));
            }
            all.push((name.to_string(), value.clone()));
            // Lists are documented as repeated keys: send them that way too.
            if p["explode"] == true {
                all.push((name.to_string(), value));
            }
        }

        let answer = get(&base, &url, &required).await;
        assert_eq!(
            answer.status,
            200,
            "{path} with {required:?}: {}",
            String::from_utf8_lossy(&answer.body)
        );
        checker.check(path, &format!("{path} (required parameters)"), &answer);

        let answer = get(&base, &url, &all).await;
        assert_eq!(
            answer.status,
            200,
            "{path} with {all:?}: {}",
            String::from_utf8_lossy(&answer.body)
        );
        checker.check(path, &format!("{path} (all parameters)"), &answer);

        if let Some(format) = params.iter().find(|p| p["name"] == "format") {
            for value in checker.enum_values(format) {
                let mut query = all.clone();
                query.push(("format".into(), value.clone()));
                let answer = get(&base, &url, &query).await;
                assert_eq!(
                    answer.status,
                    200,
                    "{path} format={value}: {}",
                    String::from_utf8_lossy(&answer.body)
                );
                checker.check(path, &format!("{path} format={value}"), &answer);
            }
        }
    }

    // The bodies validated carry the data sent, not just empty shapes.
    let filtered = get(
        &base,
        "/api/v1/flamegraph",
        &[
            ("profile_type".into(), PROFILE_TYPE.into()),
            ("from".into(), value_for("from").unwrap()),
            ("to".into(), value_for("to").unwrap()),
            ("trace_id".into(), hex::encode(TRACE)),
        ],
    )
    .await;
    let graph = filtered.json("filtered flamegraph");
    assert_eq!(graph["total"], VALUE_1, "only the linked sample: {graph:#}");
    let everything = get(
        &base,
        "/api/v1/flamegraph",
        &[
            ("profile_type".into(), PROFILE_TYPE.into()),
            ("from".into(), value_for("from").unwrap()),
            ("to".into(), value_for("to").unwrap()),
        ],
    )
    .await;
    let graph = everything.json("flamegraph");
    assert_eq!(graph["total"], VALUE_1 + VALUE_2, "{graph:#}");

    // Paging: follow next_cursor with one event per page; every page matches the schema.
    let mut cursor: Option<String> = None;
    let mut events = 0;
    loop {
        let mut query = vec![
            ("profile_type".to_string(), PROFILE_TYPE.to_string()),
            ("from".into(), value_for("from").unwrap()),
            ("to".into(), value_for("to").unwrap()),
            ("limit".into(), "1".into()),
        ];
        if let Some(c) = &cursor {
            query.push(("cursor".into(), c.clone()));
        }
        let answer = get(&base, "/api/v1/events", &query).await;
        assert_eq!(answer.status, 200, "{}", String::from_utf8_lossy(&answer.body));
        checker.check("/api/v1/events", "events page", &answer);
        let page = answer.json("events page");
        events += page["events"].as_array().unwrap().len();
        match page.get("next_cursor").and_then(Value::as_str) {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
        assert!(events <= 2, "more pages than events sent");
    }
    assert_eq!(events, 2, "one event per sample sent");

    // Error answers match the documented error schema.
    let errors: Vec<(&str, String, Params, u16)> = vec![
        ("/api/v1/flamegraph", "/api/v1/flamegraph".into(), vec![], 400),
        (
            "/api/v1/flamegraph",
            "/api/v1/flamegraph".into(),
            vec![
                ("profile_type".into(), PROFILE_TYPE.into()),
                ("trace_id".into(), "not-hex".into()),
            ],
            400,
        ),
        (
            "/api/v1/flamegraph",
            "/api/v1/flamegraph".into(),
            vec![
                ("profile_type".into(), PROFILE_TYPE.into()),
                ("max_nodes".into(), "1000000000".into()),
            ],
            422,
        ),
        (
            "/api/v1/profiles/{profile_id}",
            format!("/api/v1/profiles/{}", hex::encode([0x99u8; 16])),
            vec![],
            404,
        ),
        (
            "/api/v1/traces/{trace_id}/flamegraph",
            "/api/v1/traces/xyz/flamegraph".into(),
            vec![("profile_type".into(), PROFILE_TYPE.into())],
            400,
        ),
    ];
    for (path, url, query, status) in errors {
        let answer = get(&base, &url, &query).await;
        assert_eq!(
            answer.status,
            status,
            "{url} {query:?}: {}",
            String::from_utf8_lossy(&answer.body)
        );
        checker.check(path, &format!("{url} {query:?}"), &answer);
        let body = answer.json(&url);
        assert!(body["error"].as_str().is_some_and(|e| !e.is_empty()), "{body}");
    }

    for path in &documented {
        assert!(
            checker.validated.contains_key(*path),
            "no JSON body of {path} was validated"
        );
    }

    // The check itself can fail: a renamed or an extra field does not match.
    let schema = response_schema(&doc, "/api/v1/flamegraph", 200, "application/json").unwrap();
    let mut renamed = graph.clone();
    let total = renamed.as_object_mut().unwrap().remove("total").unwrap();
    renamed["sum"] = total;
    assert!(
        !checker.errors(&schema, &renamed).is_empty(),
        "a renamed field passes"
    );
    let mut extra = graph.clone();
    extra["root"]["children"][0]["extra"] = json!(1);
    assert!(
        !checker.errors(&schema, &extra).is_empty(),
        "an undocumented field passes"
    );
    assert!(checker.errors(&schema, &graph).is_empty());
}
