//! Request bodies shared by every ingest endpoint: a bounded read and bounded inflation.

use std::borrow::Cow;

use axum::http::{HeaderMap, header};
use stackhouse_ingest::body::decompress;

use crate::error::ApiError;

/// Reads at most `limit` bytes. Past the limit the rest is read and dropped (up to a bound)
/// before answering 413: a server that answers while the client is still sending resets the
/// connection, and the client sees a broken pipe instead of the error.
pub async fn read_limited(body: axum::body::Body, limit: usize) -> Result<bytes::Bytes, ApiError> {
    use http_body_util::BodyExt;
    let drain_bound = limit.saturating_mul(4).max(16 << 20);
    let mut body = body;
    let mut buf = bytes::BytesMut::new();
    let mut seen = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ApiError::invalid(format!("failed to read request body: {e}")))?;
        let Ok(data) = frame.into_data() else { continue };
        seen = seen.saturating_add(data.len());
        if seen > drain_bound {
            break;
        }
        if seen <= limit {
            buf.extend_from_slice(&data);
        }
    }
    if seen > limit {
        Err(ApiError::too_large(format!(
            "request body exceeds the limit of {limit} bytes"
        )))
    } else {
        Ok(buf.freeze())
    }
}

/// The body as sent, inflated per `Content-Encoding` (and, for Connect, the
/// `Connect-Content-Encoding` name when given) without passing `limit`.
pub fn inflate<'a>(
    raw: &'a [u8],
    headers: &HeaderMap,
    extra_header: Option<&str>,
    limit: usize,
) -> Result<Cow<'a, [u8]>, ApiError> {
    let named = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let encoding = extra_header
        .and_then(named)
        .or_else(|| named(header::CONTENT_ENCODING.as_str()));
    Ok(decompress(raw, encoding, limit)?)
}

/// The media type without parameters, lowercase; "" when absent.
pub fn content_type_essence(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase())
        .unwrap_or_default()
}
