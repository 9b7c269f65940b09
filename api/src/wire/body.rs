//! Bodies shared by every endpoint: a bounded read and bounded inflation of requests, gzip
//! of answers.

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

/// [`inflate`] into shared bytes: `raw` itself when it was not compressed.
pub fn inflate_bytes(
    raw: &bytes::Bytes,
    headers: &HeaderMap,
    extra_header: Option<&str>,
    limit: usize,
) -> Result<bytes::Bytes, ApiError> {
    Ok(match inflate(raw, headers, extra_header, limit)? {
        Cow::Borrowed(_) => raw.clone(),
        Cow::Owned(inflated) => inflated.into(),
    })
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

/// Whether the request's `Accept-Encoding` takes gzip (and does not refuse it with `q=0`).
pub fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|coding| {
            let mut parts = coding.split(';');
            let name = parts.next().unwrap_or("").trim();
            let refused = parts.any(|p| {
                matches!(
                    p.trim().replace(' ', "").as_str(),
                    "q=0" | "q=0.0" | "q=0.00" | "q=0.000"
                )
            });
            name.eq_ignore_ascii_case("gzip") && !refused
        })
}

/// `data` gzipped in memory.
pub fn gzip(data: &[u8], level: flate2::Compression) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), level);
    std::io::Write::write_all(&mut encoder, data).expect("writing to memory");
    encoder.finish().expect("writing to memory")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gzip_only_when_accepted() {
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::ACCEPT_ENCODING, value.parse().unwrap());
            accepts_gzip(&headers)
        };
        assert!(!accepts_gzip(&HeaderMap::new()));
        assert!(with("gzip,br"));
        assert!(with("br;q=1.0, GZIP;q=0.5"));
        assert!(!with("br, gzip;q=0"));
        assert!(!with("gzip; q = 0.0"));
        assert!(!with("br, deflate"));
    }
}
