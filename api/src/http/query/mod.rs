//! The query API: flamegraphs, single profiles, traces, time series, top functions, diffs,
//! events, and the catalog listings (profile types, labels, stats), all run by the engine.

pub mod diff;
pub mod events;
pub mod flamegraph;
pub mod labels;
pub mod params;
pub mod profiles;
#[cfg(test)]
mod tests;
pub mod timeseries;
pub mod top;
pub mod traces;

use axum::Json;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use stackhouse_query::render::flamebearer::{FlamebearerProfile, flamebearer};
use stackhouse_query::{Diff, Flamegraph, FlamegraphQuery, PprofQuery, ProfileDetail};

use super::AppState;
use crate::error::ApiError;
use params::Format;

/// `Content-Type` of the folded format.
pub const FOLDED_CONTENT_TYPE: &str = "text/plain; charset=utf-8";
/// `Content-Type` of the pprof format.
pub const PPROF_CONTENT_TYPE: &str = "application/octet-stream";

/// The JSON body of a flamegraph: the tree (`format=json`) or Pyroscope's flamebearer
/// (`format=flamebearer`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum FlamegraphBody {
    Flamegraph(Flamegraph),
    Flamebearer(FlamebearerProfile),
}

/// The JSON body of a single profile: metadata and flamegraph (`format=json`) or the
/// flamegraph alone as flamebearer (`format=flamebearer`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum ProfileBody {
    Profile(Box<ProfileDetail>),
    Flamebearer(FlamebearerProfile),
}

/// The JSON body of a diff: the merged tree (`format=json`) or Pyroscope's diff
/// flamebearer (`format=flamebearer`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum DiffBody {
    Diff(Diff),
    Flamebearer(FlamebearerProfile),
}

fn json<T: Serialize>(body: T) -> Response {
    Json(body).into_response()
}

fn folded(text: String) -> Response {
    ([(header::CONTENT_TYPE, FOLDED_CONTENT_TYPE)], text).into_response()
}

/// The engine's profile, encoded and gzipped here, once; it goes out as a file, not with a
/// `Content-Encoding`, so clients store exactly what `go tool pprof` reads.
async fn pprof(state: &AppState, query: &PprofQuery) -> Result<Response, ApiError> {
    let bytes = stackhouse_query::render::pprof::gzip(&state.engine.pprof(query).await?);
    Ok((
        [
            (header::CONTENT_TYPE, PPROF_CONTENT_TYPE),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"profile.pb.gz\"",
            ),
        ],
        bytes,
    )
        .into_response())
}

/// A flamegraph query answered in any format; pprof exports the samples untruncated.
async fn flamegraph_response(
    state: &AppState,
    format: Format,
    query: &FlamegraphQuery,
) -> Result<Response, ApiError> {
    Ok(match format {
        Format::Pprof => return pprof(state, &PprofQuery::Scope(query.scope.clone())).await,
        Format::Json => json(FlamegraphBody::Flamegraph(state.engine.flamegraph(query).await?)),
        Format::Folded => folded(stackhouse_query::folded(&state.engine.flamegraph(query).await?)),
        Format::Flamebearer => json(FlamegraphBody::Flamebearer(flamebearer(
            &state.engine.flamegraph(query).await?,
        ))),
    })
}
