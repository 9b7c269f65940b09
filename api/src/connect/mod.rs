//! Grafana's Pyroscope API on the HTTP port, so that Grafana's "Grafana Pyroscope"
//! datasource and the Profiles Drilldown app work against Stackhouse unchanged:
//! `querier.v1.QuerierService` and `settings.v1.SettingsService` over Connect (unary,
//! `POST /<package>.<Service>/<Method>`), and the legacy `GET /pyroscope/render` and
//! `/pyroscope/render-diff`. Every read runs on the same query engine as
//! `/api/v1`; any other Connect method answers `unimplemented` (HTTP 501).

pub mod codec;
mod exemplars;
mod heatmap;
mod labels;
mod pprof;
mod profile_type;
mod querier;
mod render;
mod settings;

use std::future::Future;
use std::time::Duration;

use axum::extract::{Path, Request, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use prost::{Message, Name};

use crate::error::{ApiError, ErrorKind};
use crate::http::AppState;
use crate::tenant;

/// What a method knows of its caller besides the message.
pub struct Call {
    pub tenant: String,
    /// Whether label names may be served as stored (`allow-utf8-labelnames=true`).
    pub utf8_names: bool,
}

/// One unary method: decode, run, answer in the request's codec; errors as Connect's
/// `{code, message}` JSON.
async fn unary<Req, Resp, F, Fut>(state: AppState, request: Request, method: F) -> Response
where
    Req: Message + Default + Name,
    Resp: Message + Name,
    F: FnOnce(AppState, Call, Req) -> Fut,
    Fut: Future<Output = Result<Resp, ApiError>>,
{
    let (parts, body) = request.into_parts();
    let outcome = async {
        let (codec, message, _) =
            codec::read_request::<Req>(&parts.headers, body, state.max_message_bytes).await?;
        let call = Call {
            tenant: tenant::from_headers(&parts.headers)?,
            utf8_names: labels::utf8_allowed(&parts.headers),
        };
        let answer = match timeout(&parts.headers)? {
            Some(limit) => tokio::time::timeout(limit, method(state, call, message))
                .await
                .map_err(|_| {
                    ApiError::new(
                        ErrorKind::DeadlineExceeded,
                        format!(
                            "the query did not finish within Connect-Timeout-Ms ({} ms)",
                            limit.as_millis()
                        ),
                    )
                })??,
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

fn rpc<Req, Resp, F, Fut>(method: F) -> MethodRouter<AppState>
where
    Req: Message + Default + Name + Send + 'static,
    Resp: Message + Name + 'static,
    F: FnOnce(AppState, Call, Req) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<Resp, ApiError>> + Send + 'static,
{
    post(move |State(state): State<AppState>, request: Request| unary(state, request, method))
}

/// The path of a `querier.v1.QuerierService` method.
macro_rules! querier {
    ($method:literal) => {
        concat!("/querier.v1.QuerierService/", $method)
    };
}

/// The routes, for the router of the query role.
pub fn routes() -> Vec<(&'static str, MethodRouter<AppState>)> {
    vec![
        (querier!("ProfileTypes"), rpc(querier::profile_types)),
        (querier!("LabelNames"), rpc(querier::label_names)),
        (querier!("LabelValues"), rpc(querier::label_values)),
        (querier!("Series"), rpc(querier::series)),
        (
            querier!("SelectMergeStacktraces"),
            rpc(querier::select_merge_stacktraces),
        ),
        (
            querier!("SelectMergeSpanProfile"),
            rpc(querier::select_merge_span_profile),
        ),
        (querier!("SelectMergeProfile"), rpc(querier::select_merge_profile)),
        (querier!("SelectSeries"), rpc(querier::select_series)),
        (querier!("SelectHeatmap"), rpc(heatmap::select_heatmap)),
        (querier!("Diff"), rpc(querier::diff)),
        (querier!("GetProfileStats"), rpc(querier::get_profile_stats)),
        (querier!("AnalyzeQuery"), rpc(querier::analyze_query)),
        ("/settings.v1.SettingsService/Get", rpc(settings::get)),
        ("/settings.v1.SettingsService/Set", rpc(settings::set)),
        ("/settings.v1.SettingsService/Delete", rpc(settings::delete)),
        ("/pyroscope/render", get(render::render)),
        ("/pyroscope/render-diff", get(render::render_diff)),
        // Every other `<package>.<Service>/<Method>`: Connect's answer for a method not
        // served, which Grafana's clients take as "feature off".
        ("/{service}/{method}", post(unimplemented)),
    ]
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
