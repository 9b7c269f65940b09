//! `/mcp`: the Model Context Protocol over its Streamable HTTP transport, for assistants
//! reading profiles. JSON-RPC requests are POSTed and answered with `application/json`
//! (every tool answers at once, so no SSE stream is opened); notifications get 202. GET
//! answers 405: the server starts no stream of its own. Mounted among the query routes,
//! so authentication and the tenant header apply as on every read.
//!
//! Revisions: the initialize handshake of 2025-11-25, 2025-06-18 and 2025-03-26 (a session
//! id is issued on `initialize`; requests carrying one are accepted, nothing is kept per
//! session), and the stateless 2026-07-28 (`server/discover`, the version on each request).

mod protocol;
mod render;
mod tools;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

use self::protocol::{Incoming, RpcError, Step};
use crate::route::Route;
use crate::state::AppState;
use crate::tenant;

pub(crate) const SESSION_HEADER: &str = "mcp-session-id";
pub(crate) const VERSION_HEADER: &str = "mcp-protocol-version";

pub(crate) fn routes() -> Vec<Route> {
    vec![Route::new("/mcp", post(handle).get(no_stream).delete(no_stream))]
}

/// GET (a server-initiated stream) and DELETE (ending a session: none are kept).
async fn no_stream() -> Response {
    (
        StatusCode::METHOD_NOT_ALLOWED,
        [(header::ALLOW, HeaderValue::from_static("POST"))],
    )
        .into_response()
}

async fn handle(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    if let Some(id) = headers.get(SESSION_HEADER)
        && !protocol::valid_session_id(id.as_bytes())
    {
        let e = RpcError::new(
            protocol::INVALID_REQUEST,
            "invalid Mcp-Session-Id: use visible ASCII",
        );
        return rpc_error(StatusCode::BAD_REQUEST, e, Value::Null);
    }
    let header_version = match headers.get(VERSION_HEADER).map(HeaderValue::to_str) {
        None => None,
        Some(Ok(v)) if protocol::is_supported(v) => Some(v.to_string()),
        Some(Ok(v)) => {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                RpcError::unsupported_version(v),
                Value::Null,
            );
        }
        Some(Err(_)) => {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                RpcError::unsupported_version("(not ASCII)"),
                Value::Null,
            );
        }
    };
    let (id, method, params) = match protocol::parse(&body) {
        Ok(Incoming::Accepted) => return StatusCode::ACCEPTED.into_response(),
        Ok(Incoming::Request { id, method, params }) => (id, method, params),
        Err(e) => return rpc_error(StatusCode::BAD_REQUEST, e, Value::Null),
    };
    let step = protocol::request_version(header_version.as_deref(), params.as_ref())
        .and_then(|version| protocol::route(&method, params.as_ref(), &version).map(|s| (s, version)));
    let (step, version) = match step {
        Ok(step) => step,
        Err(e) => return rpc_error(StatusCode::OK, e, id),
    };
    match step {
        Step::Answer { result, session } => {
            let mut response = json_response(json!({ "jsonrpc": "2.0", "id": id, "result": result }));
            if session {
                let value = HeaderValue::from_str(&protocol::new_session_id()).expect("hex is header-safe");
                response.headers_mut().insert(SESSION_HEADER, value);
            }
            response
        }
        Step::CallTool { name, arguments } => {
            let outcome = match tenant::read_from_headers(&headers) {
                Ok(tenant) => tools::call(&state, tenant, &name, &arguments).await,
                Err(e) => Err(tools::ToolError(e.message)),
            };
            let mut result = match outcome {
                Ok(answer) => json!({
                    "content": [{ "type": "text", "text": answer.text }],
                    "structuredContent": answer.structured,
                    "isError": false,
                }),
                Err(tools::ToolError(message)) => json!({
                    "content": [{ "type": "text", "text": render::capped(message) }],
                    "isError": true,
                }),
            };
            if version == protocol::MODERN_VERSION {
                result["resultType"] = json!("complete");
            }
            json_response(json!({ "jsonrpc": "2.0", "id": id, "result": result }))
        }
    }
}

fn json_response(body: Value) -> Response {
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        body.to_string(),
    )
        .into_response()
}

fn rpc_error(status: StatusCode, e: RpcError, id: Value) -> Response {
    let mut response = json_response(e.response(id));
    *response.status_mut() = status;
    response
}
