//! Grafana's side of the Connect API, played by an independent client: connect-es (the
//! library Grafana's apps are built on) run with node, driven by a descriptor set that
//! npm's `buf` builds from our protos (`ui-api-tests/connect-client/`). Binary calls are
//! what Grafana's datasource backend sends, JSON calls what the Drilldown app sends; raw
//! calls copy the app's hand-written requests byte for byte.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use serde_json::{Value, json};

use crate::node_tool::{self, run};
use crate::workspace_dir;

/// The client's directory and the descriptor set it loads.
fn installed() -> &'static (PathBuf, PathBuf) {
    static DIR: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = node_tool::install(
            "connect-client",
            &["package.json", "client.mjs"],
            "node_modules/@connectrpc/connect-node/package.json",
        );
        let image = dir.join("stackhouse.binpb");
        run(
            Command::new(dir.join("node_modules/.bin/buf"))
                .arg("build")
                .arg(workspace_dir().join("proto/protos"))
                .arg("-o")
                .arg(&image),
            "buf build proto/protos",
        );
        (dir, image)
    })
}

/// A unary call made by connect-es; `binary` picks `application/proto` over JSON.
pub fn rpc(method: &str, binary: bool, request: Value) -> Value {
    json!({ "rpc": method, "binary": binary, "request": request })
}

/// [`rpc`] with extra headers (tenant, `Accept`).
pub fn rpc_with_headers(method: &str, binary: bool, request: Value, headers: Value) -> Value {
    json!({ "rpc": method, "binary": binary, "request": request, "headers": headers })
}

/// A raw POST of `body` to `path`, as the Drilldown app's hand-written calls.
pub fn fetch(path: &str, headers: Value, body: &str) -> Value {
    json!({ "fetch": path, "headers": headers, "body": body })
}

/// A raw POST of binary `body`.
pub fn fetch_bytes(path: &str, headers: Value, body: &[u8]) -> Value {
    use base64::Engine;
    let encoded = base64::engine::general_purpose::STANDARD.encode(body);
    json!({ "fetch": path, "headers": headers, "bodyBase64": encoded })
}

/// Runs the calls in order against `base_url`, one node process; one answer per call:
/// `{"response": <protojson>}`, `{"error": {"code", "message"}}`, or for raw calls
/// `{"status", "contentType", "body", "bodyBase64"}`.
pub fn call_all(base_url: &str, calls: &[Value]) -> Vec<Value> {
    let (dir, image) = installed();
    let input = json!({ "baseUrl": base_url, "calls": calls });
    let answers = node_tool::run_json(
        "the Connect client",
        &dir.join("client.mjs"),
        &[image.as_os_str()],
        &input,
    );
    let answers: Vec<Value> = serde_json::from_value(answers).expect("the client prints a list");
    assert_eq!(answers.len(), calls.len(), "one answer per call");
    answers
}

/// The protojson `int64` (a decimal string, or absent for 0) as a number.
pub fn int(v: &Value) -> i64 {
    match v {
        Value::Null => 0,
        Value::String(s) => s.parse().unwrap_or_else(|_| panic!("not an int64: {v}")),
        Value::Number(n) => n.as_i64().unwrap_or_else(|| panic!("not an int64: {v}")),
        other => panic!("not an int64: {other}"),
    }
}
