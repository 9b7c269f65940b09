//! JSON-RPC 2.0 as MCP carries it: reading one message, the protocol revisions served,
//! and what each method asks for. Nothing here reads data; `tools/call` is handed back to
//! the caller as a [`Step::CallTool`].

use serde_json::{Map, Value, json};

use super::tools;

/// Revisions of the initialize handshake, newest first: the newest is offered when the
/// client asks for one not served.
pub(crate) const HANDSHAKE_VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];
/// The stateless revision: no handshake, every request names its version (`server/discover`
/// first).
pub(crate) const MODERN_VERSION: &str = "2026-07-28";
/// What a request without `MCP-Protocol-Version` is taken to speak, as the specification
/// says.
pub(crate) const DEFAULT_VERSION: &str = "2025-03-26";
/// `_meta` key naming a request's revision (2026-07-28).
const VERSION_META_KEY: &str = "io.modelcontextprotocol/protocolVersion";

pub(crate) const PARSE_ERROR: i64 = -32700;
pub(crate) const INVALID_REQUEST: i64 = -32600;
pub(crate) const METHOD_NOT_FOUND: i64 = -32601;
pub(crate) const INVALID_PARAMS: i64 = -32602;
pub(crate) const UNSUPPORTED_VERSION: i64 = -32022;

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    pub(crate) fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    pub(crate) fn unsupported_version(requested: &str) -> RpcError {
        RpcError {
            code: UNSUPPORTED_VERSION,
            message: format!(
                "unsupported protocol version {requested:?}: supported are {}",
                supported_versions().join(", ")
            ),
            data: Some(json!({ "supported": supported_versions(), "requested": requested })),
        }
    }

    /// The error response to request `id` (`null` when it could not be read).
    pub(crate) fn response(&self, id: Value) -> Value {
        let mut error = json!({ "code": self.code, "message": self.message });
        if let Some(data) = &self.data {
            error["data"] = data.clone();
        }
        json!({ "jsonrpc": "2.0", "id": id, "error": error })
    }
}

/// Every revision served, newest first.
pub(crate) fn supported_versions() -> Vec<&'static str> {
    std::iter::once(MODERN_VERSION)
        .chain(HANDSHAKE_VERSIONS)
        .collect()
}

pub(crate) fn is_supported(version: &str) -> bool {
    version == MODERN_VERSION || HANDSHAKE_VERSIONS.contains(&version)
}

/// One message a client posted.
#[derive(Debug, PartialEq)]
pub(crate) enum Incoming {
    Request {
        id: Value,
        method: String,
        params: Option<Value>,
    },
    /// A notification, or the client's answer to a server request (none are sent): both
    /// are acknowledged with 202 and nothing else.
    Accepted,
}

/// Reads one JSON-RPC message; batches are not part of MCP since 2025-06-18.
pub(crate) fn parse(body: &[u8]) -> Result<Incoming, RpcError> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| RpcError::new(PARSE_ERROR, format!("parse error: {e}")))?;
    let Value::Object(message) = value else {
        return Err(RpcError::new(
            INVALID_REQUEST,
            "invalid request: expected one JSON-RPC message object (batches are not supported)",
        ));
    };
    if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(RpcError::new(
            INVALID_REQUEST,
            "invalid request: jsonrpc must be \"2.0\"",
        ));
    }
    let Some(method) = message.get("method") else {
        if message.contains_key("id") && (message.contains_key("result") || message.contains_key("error")) {
            return Ok(Incoming::Accepted);
        }
        return Err(RpcError::new(INVALID_REQUEST, "invalid request: no method"));
    };
    let Some(method) = method.as_str() else {
        return Err(RpcError::new(
            INVALID_REQUEST,
            "invalid request: method must be a string",
        ));
    };
    let Some(id) = message.get("id") else {
        return Ok(Incoming::Accepted);
    };
    if !(id.is_string() || id.is_i64() || id.is_u64()) {
        return Err(RpcError::new(
            INVALID_REQUEST,
            "invalid request: id must be a string or an integer",
        ));
    }
    let params = message.get("params").cloned();
    if params.as_ref().is_some_and(|p| !p.is_object()) {
        return Err(RpcError::new(
            INVALID_PARAMS,
            "invalid params: params must be an object",
        ));
    }
    Ok(Incoming::Request {
        id: id.clone(),
        method: method.to_string(),
        params,
    })
}

/// Which revision a request speaks: its `_meta` version (2026-07-28), else the
/// `MCP-Protocol-Version` header, else [`DEFAULT_VERSION`].
pub(crate) fn request_version(header: Option<&str>, params: Option<&Value>) -> Result<String, RpcError> {
    let meta = params
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get(VERSION_META_KEY))
        .and_then(Value::as_str);
    let version = meta.or(header).unwrap_or(DEFAULT_VERSION);
    if is_supported(version) {
        Ok(version.to_string())
    } else {
        Err(RpcError::unsupported_version(version))
    }
}

/// What a request asks for.
#[derive(Debug, PartialEq)]
pub(crate) enum Step {
    /// Answer this result as is; `session` when a session starts.
    Answer { result: Value, session: bool },
    CallTool {
        name: String,
        arguments: Map<String, Value>,
    },
}

/// The step of `method` for a request speaking `version`.
pub(crate) fn route(method: &str, params: Option<&Value>, version: &str) -> Result<Step, RpcError> {
    let modern = version == MODERN_VERSION;
    let answer = |mut result: Value, cacheable: bool| {
        if modern {
            result["resultType"] = json!("complete");
            if cacheable {
                result["ttlMs"] = json!(0);
                result["cacheScope"] = json!("private");
            }
        }
        Ok(Step::Answer {
            result,
            session: false,
        })
    };
    match method {
        "initialize" => {
            let params = params.ok_or_else(|| missing("params"))?;
            let asked = params
                .get("protocolVersion")
                .and_then(Value::as_str)
                .ok_or_else(|| missing("params.protocolVersion"))?;
            let chosen = if HANDSHAKE_VERSIONS.contains(&asked) {
                asked
            } else {
                HANDSHAKE_VERSIONS[0]
            };
            Ok(Step::Answer {
                result: json!({
                    "protocolVersion": chosen,
                    "capabilities": capabilities(),
                    "serverInfo": server_info(),
                    "instructions": INSTRUCTIONS,
                }),
                session: true,
            })
        }
        "server/discover" => answer(
            json!({
                "supportedVersions": supported_versions(),
                "capabilities": capabilities(),
                "instructions": INSTRUCTIONS,
                "_meta": { "io.modelcontextprotocol/serverInfo": server_info() },
            }),
            true,
        ),
        // Removed in 2026-07-28.
        "ping" if !modern => answer(json!({}), false),
        "tools/list" => answer(json!({ "tools": tools::definitions() }), true),
        "tools/call" => {
            let params = params.ok_or_else(|| missing("params"))?;
            let name = params
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| missing("params.name"))?;
            if !tools::NAMES.contains(&name) {
                return Err(RpcError::new(
                    INVALID_PARAMS,
                    format!("unknown tool {name:?}: tools are {}", tools::NAMES.join(", ")),
                ));
            }
            let arguments = match params.get("arguments") {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(arguments)) => arguments.clone(),
                Some(_) => {
                    return Err(RpcError::new(
                        INVALID_PARAMS,
                        "invalid params: arguments must be an object",
                    ));
                }
            };
            Ok(Step::CallTool {
                name: name.to_string(),
                arguments,
            })
        }
        _ => Err(RpcError::new(
            METHOD_NOT_FOUND,
            format!("method not found: {method}"),
        )),
    }
}

fn missing(what: &str) -> RpcError {
    RpcError::new(INVALID_PARAMS, format!("invalid params: {what} is required"))
}

fn capabilities() -> Value {
    json!({ "tools": { "listChanged": false } })
}

fn server_info() -> Value {
    json!({ "name": "stackhouse", "version": env!("CARGO_PKG_VERSION") })
}

const INSTRUCTIONS: &str = "Stackhouse stores continuous profiles. Start with profile_types and \
label_names/label_values, then read flamegraph, top_functions, diff, timeseries_summary or \
trace_flamegraph. Ranges take unix nanoseconds, RFC 3339, now or now-<duration> (now-1h).";

/// A new session id: 128 random bits in hex (visible ASCII, as the specification asks).
pub(crate) fn new_session_id() -> String {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        // Still unique within the process; a session id grants nothing here.
        return uuid::Uuid::now_v7().simple().to_string();
    }
    hex::encode(bytes)
}

/// Whether a client's `Mcp-Session-Id` is well formed: 1 to 128 visible ASCII characters.
pub(crate) fn valid_session_id(id: &[u8]) -> bool {
    !id.is_empty() && id.len() <= 128 && id.iter().all(|b| (0x21..=0x7e).contains(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route_of(body: &str, version: &str) -> Result<Step, RpcError> {
        match parse(body.as_bytes())? {
            Incoming::Request { method, params, .. } => route(&method, params.as_ref(), version),
            Incoming::Accepted => panic!("{body} is a request"),
        }
    }

    #[test]
    fn bad_json_is_a_parse_error() {
        for body in ["{", "not json", "", "{\"jsonrpc\": \"2.0\", \"id\": 1,"] {
            assert_eq!(parse(body.as_bytes()).unwrap_err().code, PARSE_ERROR, "{body}");
        }
        let response = parse(b"{").unwrap_err().response(Value::Null);
        assert_eq!(response["error"]["code"], -32700);
        assert_eq!(response["id"], Value::Null);
    }

    #[test]
    fn malformed_messages_are_invalid_requests() {
        for body in [
            "[]",
            "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]",
            "{\"id\":1,\"method\":\"ping\"}",
            "{\"jsonrpc\":\"2.0\",\"id\":1}",
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":3}",
            "{\"jsonrpc\":\"2.0\",\"id\":[1],\"method\":\"ping\"}",
        ] {
            assert_eq!(
                parse(body.as_bytes()).unwrap_err().code,
                INVALID_REQUEST,
                "{body}"
            );
        }
    }

    #[test]
    fn notifications_and_responses_are_accepted() {
        let note = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}";
        assert_eq!(parse(note.as_bytes()).unwrap(), Incoming::Accepted);
        let answer = "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}";
        assert_eq!(parse(answer.as_bytes()).unwrap(), Incoming::Accepted);
    }

    #[test]
    fn unknown_methods_are_not_found() {
        let e = route_of(
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"resources/list\"}",
            DEFAULT_VERSION,
        )
        .unwrap_err();
        assert_eq!(e.code, METHOD_NOT_FOUND);
        assert!(e.message.contains("resources/list"), "{}", e.message);
        // ping is gone in the stateless revision.
        let ping = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}";
        assert_eq!(route_of(ping, MODERN_VERSION).unwrap_err().code, METHOD_NOT_FOUND);
        assert!(matches!(route_of(ping, "2025-06-18"), Ok(Step::Answer { .. })));
    }

    #[test]
    fn missing_or_wrong_params_are_invalid_params() {
        for body in [
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\"}",
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{}}",
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"nope\"}}",
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"top_functions\",\"arguments\":[]}}",
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}",
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}",
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":3}",
        ] {
            assert_eq!(
                route_of(body, DEFAULT_VERSION).unwrap_err().code,
                INVALID_PARAMS,
                "{body}"
            );
        }
    }

    #[test]
    fn versions_are_negotiated() {
        let init = |v: &str| {
            let body = format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{{\"protocolVersion\":\"{v}\",\"capabilities\":{{}}}}}}"
            );
            match route_of(&body, DEFAULT_VERSION).unwrap() {
                Step::Answer { result, session } => {
                    assert!(session);
                    assert_eq!(result["capabilities"]["tools"]["listChanged"], false);
                    result["protocolVersion"].as_str().unwrap().to_string()
                }
                step => panic!("{step:?}"),
            }
        };
        assert_eq!(init("2025-03-26"), "2025-03-26");
        assert_eq!(init("2025-06-18"), "2025-06-18");
        assert_eq!(init("2025-11-25"), "2025-11-25");
        assert_eq!(init("2099-01-01"), "2025-11-25");

        assert_eq!(request_version(None, None).unwrap(), DEFAULT_VERSION);
        assert_eq!(request_version(Some("2025-06-18"), None).unwrap(), "2025-06-18");
        let meta = json!({ "_meta": { VERSION_META_KEY: MODERN_VERSION } });
        assert_eq!(
            request_version(Some("2025-06-18"), Some(&meta)).unwrap(),
            MODERN_VERSION
        );
        let e = request_version(Some("1999-01-01"), None).unwrap_err();
        assert_eq!(e.code, UNSUPPORTED_VERSION);
        assert_eq!(e.data.unwrap()["supported"][0], MODERN_VERSION);
    }

    #[test]
    fn session_ids() {
        let id = new_session_id();
        assert_eq!(id.len(), 32);
        assert!(valid_session_id(id.as_bytes()));
        assert_ne!(id, new_session_id());
        assert!(!valid_session_id(b""));
        assert!(!valid_session_id(b"a b"));
        assert!(!valid_session_id("é".as_bytes()));
    }
}
