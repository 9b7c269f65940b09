//! How the query API's answers are encoded: JSON and its bodies, a tree in a renderer's
//! format, gzipped pprof files, and the headers that tell which resolutions an answer read.

use axum::Json;
use axum::http::{HeaderMap, HeaderName, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use stackhouse_proto::pprof::Profile;
use stackhouse_query::render::flamebearer::FlamebearerProfile;
use stackhouse_query::render::{OutputFormat, TreeRenderer};
use stackhouse_query::{Diff, Flamegraph, ProfileDetail, ScanStats};

use crate::error::ApiError;

/// `Content-Type` of JSON, as axum's `Json` sets it.
pub(super) const JSON_CONTENT_TYPE: &str = "application/json";
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
    Diff(Box<Diff>),
    Flamebearer(FlamebearerProfile),
}

pub(super) fn json<T: Serialize>(body: T) -> Response {
    Json(body).into_response()
}

/// A cut tree in `format`'s renderer; the engine answers with a cut tree only for those.
pub(super) fn rendered(
    format: &OutputFormat,
    render: impl FnOnce(&dyn TreeRenderer) -> Vec<u8>,
) -> Result<Response, ApiError> {
    let OutputFormat::Rendered(renderer) = format else {
        return Err(ApiError::internal(format!(
            "the engine answered a cut tree for format {}",
            format.name()
        )));
    };
    Ok((
        [(header::CONTENT_TYPE, renderer.content_type())],
        render(*renderer),
    )
        .into_response())
}

/// The engine's profile, encoded and gzipped here, once; it goes out as a file, not with a
/// `Content-Encoding`, so clients store exactly what `go tool pprof` reads.
pub(super) fn pprof(profile: &Profile) -> Response {
    let bytes = stackhouse_query::render::pprof::gzip(profile);
    (
        [
            (header::CONTENT_TYPE, PPROF_CONTENT_TYPE),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"profile.pb.gz\"",
            ),
        ],
        bytes,
    )
        .into_response()
}

/// What the body's stats tell of the resolutions read, as headers, for every format (the
/// folded and flamebearer bodies carry no stats): `Stackhouse-Tiers: 1h=720, raw=15` (rows
/// read per resolution), and `Stackhouse-Answered-Range: <start>,<end>` (unix nanoseconds)
/// when retention left only rollups at a range edge and the answer covers more.
pub(crate) fn scan_headers(stats: Option<&ScanStats>) -> HeaderMap {
    let mut headers = HeaderMap::new();
    let Some(stats) = stats else {
        return headers;
    };
    let tiers = stats
        .rows_by_tier
        .iter()
        .map(|(tier, rows)| format!("{tier}={rows}"))
        .collect::<Vec<_>>()
        .join(", ");
    if let Ok(value) = HeaderValue::from_str(&tiers)
        && !tiers.is_empty()
    {
        headers.insert(TIERS_HEADER, value);
    }
    if let Some((start, end)) = stats.answered
        && let Ok(value) = HeaderValue::from_str(&format!("{start},{end}"))
    {
        headers.insert(ANSWERED_RANGE_HEADER, value);
    }
    headers
}

/// Rows read per resolution; see [`scan_headers`].
pub const TIERS_HEADER: HeaderName = HeaderName::from_static("stackhouse-tiers");
/// The range an answer covers when wider than asked; see [`scan_headers`].
pub const ANSWERED_RANGE_HEADER: HeaderName = HeaderName::from_static("stackhouse-answered-range");

#[cfg(test)]
mod header_tests {
    use super::*;

    #[test]
    fn scan_headers_name_the_tiers_read_and_a_widened_range() {
        assert!(scan_headers(None).is_empty());
        let mut stats = ScanStats::default();
        assert!(
            scan_headers(Some(&stats)).is_empty(),
            "nothing read, nothing said"
        );
        stats.rows_by_tier = [("1h".to_string(), 720), ("raw".to_string(), 15)].into();
        let headers = scan_headers(Some(&stats));
        assert_eq!(headers[TIERS_HEADER], "1h=720, raw=15");
        assert!(!headers.contains_key(ANSWERED_RANGE_HEADER));
        stats.answered = Some((60, 7200));
        assert_eq!(scan_headers(Some(&stats))[ANSWERED_RANGE_HEADER], "60,7200");
    }
}
