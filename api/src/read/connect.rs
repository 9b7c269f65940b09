//! Connect's unary protocol for the read families: `POST /<package>.<Service>/<Method>`,
//! the message in the request's codec, errors as Connect's `{code, message}` JSON, and
//! `Connect-Timeout-Ms` honoured. Grafana's "Grafana Pyroscope" datasource and the
//! Profiles Drilldown app call `querier.v1.QuerierService` and `settings.v1.SettingsService`
//! this way; any other method answers `unimplemented` (HTTP 501).

use std::future::Future;
use std::time::Duration;

use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, post};
use prost::{Message, Name};
use stackhouse_query::pyroscope::Caller;

use crate::error::{ApiError, ErrorKind};
use crate::route::Route;
use crate::state::AppState;
use crate::tenant;
use crate::wire::connect as codec;

/// Whether the client reads label names outside `[A-Za-z0-9_]`.
fn utf8_allowed(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split([',', ';']))
        .any(|p| p.trim().eq_ignore_ascii_case("allow-utf8-labelnames=true"))
}

/// One unary method: decode, run, answer in the request's codec; errors as Connect's
/// `{code, message}` JSON.
async fn unary<Req, Resp, F, Fut>(state: AppState, request: Request, method: F) -> Response
where
    Req: Message + Default + Name,
    Resp: Message + Name,
    F: FnOnce(AppState, Caller, Req) -> Fut,
    Fut: Future<Output = Result<Resp, ApiError>>,
{
    let (parts, body) = request.into_parts();
    let outcome = async {
        let (codec, message, _) =
            codec::read_request::<Req>(&parts.headers, body, state.max_message_bytes).await?;
        let call = Caller {
            tenant: tenant::read_from_headers(&parts.headers)?,
            utf8_names: utf8_allowed(&parts.headers),
        };
        let answer = match timeout(&parts.headers)? {
            Some(limit) => {
                let exceeded = || {
                    ApiError::new(
                        ErrorKind::DeadlineExceeded,
                        format!(
                            "the query did not finish within Connect-Timeout-Ms ({} ms)",
                            limit.as_millis()
                        ),
                    )
                };
                // A zero deadline has passed already; tokio's timeout polls the method once
                // first, and an answer from warm caches would beat it.
                if limit.is_zero() {
                    return Err(exceeded());
                }
                tokio::time::timeout(limit, method(state, call, message))
                    .await
                    .map_err(|_| exceeded())??
            }
            None => method(state, call, message).await?,
        };
        Ok::<_, ApiError>(codec::respond(codec, &parts.headers, &answer))
    };
    outcome.await.unwrap_or_else(ApiError::into_connect)
}

/// The client's deadline: Connect's `Connect-Timeout-Ms`, at most 10 digits. Dropping
/// the method's future when it passes cancels the query's scan too.
fn timeout(headers: &HeaderMap) -> Result<Option<Duration>, ApiError> {
    let Some(value) = headers.get("connect-timeout-ms") else {
        return Ok(None);
    };
    let text = value.to_str().unwrap_or_default();
    if text.is_empty() || text.len() > 10 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ApiError::invalid(format!(
            "invalid Connect-Timeout-Ms {value:?}: expected 1 to 10 digits"
        )));
    }
    Ok(text.parse().ok().map(Duration::from_millis))
}

pub(super) fn rpc<Req, Resp, F, Fut>(method: F) -> MethodRouter<AppState>
where
    Req: Message + Default + Name + Send + 'static,
    Resp: Message + Name + 'static,
    F: FnOnce(AppState, Caller, Req) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<Resp, ApiError>> + Send + 'static,
{
    post(move |State(state): State<AppState>, request: Request| unary(state, request, method))
}

/// The route of a `querier.v1.QuerierService` method: one request of the Pyroscope dialect
/// on the engine.
macro_rules! querier {
    ($name:literal, $method:path) => {
        $crate::route::Route::new(
            concat!("/querier.v1.QuerierService/", $name),
            $crate::read::connect::rpc(
                |state: $crate::state::AppState, call: stackhouse_query::pyroscope::Caller, r| async move {
                    Ok($method(&state.engine, &call, r).await?)
                },
            ),
        )
    };
}
pub(super) use querier;

/// Every other `<package>.<Service>/<Method>`: Connect's answer for a method not served,
/// which Grafana's clients take as "feature off".
pub(super) fn unimplemented_route() -> Route {
    Route::new("/{service}/{method}", post(unimplemented))
}

async fn unimplemented(Path((service, method)): Path<(String, String)>) -> Response {
    if !service.contains('.') {
        return ApiError::not_found(format!("no route for POST /{service}/{method}")).into_response();
    }
    ApiError::new(
        ErrorKind::Unimplemented,
        format!("{service}/{method} is not implemented"),
    )
    .into_connect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_label_names_are_asked_for_in_accept() {
        let mut h = HeaderMap::new();
        assert!(!utf8_allowed(&h));
        h.insert(header::ACCEPT, "*/*; allow-utf8-labelnames=true".parse().unwrap());
        assert!(utf8_allowed(&h));
    }
}
