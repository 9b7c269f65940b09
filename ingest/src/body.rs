//! Request bodies: `Content-Encoding` handling with a size limit that holds after
//! decompression, so a small gzip bomb cannot make us allocate gigabytes.

use std::borrow::Cow;
use std::io::Read;

use flate2::read::MultiGzDecoder;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BodyError {
    #[error("request body exceeds the limit of {limit} bytes (after decompression)")]
    TooLarge { limit: usize },
    #[error("malformed request body: {0}")]
    Malformed(String),
    #[error("unsupported content encoding {0:?} (supported: gzip, identity)")]
    UnsupportedEncoding(String),
}

/// Returns the body as the decoder should see it: borrowed when it was not compressed,
/// otherwise inflated into a buffer that never grows past `limit + 1` bytes.
pub fn decompress<'a>(
    body: &'a [u8],
    content_encoding: Option<&str>,
    limit: usize,
) -> Result<Cow<'a, [u8]>, BodyError> {
    let encoding = content_encoding.map(str::trim).unwrap_or("");
    if encoding.is_empty() || encoding.eq_ignore_ascii_case("identity") {
        if body.len() > limit {
            return Err(BodyError::TooLarge { limit });
        }
        return Ok(Cow::Borrowed(body));
    }
    if encoding.eq_ignore_ascii_case("gzip") || encoding.eq_ignore_ascii_case("x-gzip") {
        // Multi-member: RFC 1952 allows concatenated gzip members and some clients send them.
        return inflate_limited(MultiGzDecoder::new(body), body.len(), limit).map(Cow::Owned);
    }
    Err(BodyError::UnsupportedEncoding(encoding.to_string()))
}

/// Reads at most `limit + 1` bytes (one more than allowed, to tell "exactly at the limit"
/// from "over it") and grows the buffer exactly, never by doubling past that bound.
fn inflate_limited(decoder: impl Read, compressed_len: usize, limit: usize) -> Result<Vec<u8>, BodyError> {
    const CHUNK: usize = 64 * 1024;
    let bound = limit.saturating_add(1);
    let mut reader = decoder.take(bound as u64);
    // Typical profile payloads compress 4-10x; start there and grow as needed.
    let mut out = Vec::with_capacity(compressed_len.saturating_mul(4).max(CHUNK).min(bound));
    let mut chunk = vec![0u8; CHUNK.min(bound)];
    loop {
        let n = match reader.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(BodyError::Malformed(format!("invalid gzip data: {e}"))),
        };
        if out.len() + n > out.capacity() {
            let target = out.capacity().saturating_mul(2).max(out.len() + n).min(bound);
            out.reserve_exact(target - out.len());
        }
        out.extend_from_slice(&chunk[..n]);
    }
    if out.len() > limit {
        return Err(BodyError::TooLarge { limit });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_is_borrowed_and_limited() {
        assert!(matches!(decompress(b"abc", None, 3), Ok(Cow::Borrowed(b"abc"))));
        assert!(matches!(
            decompress(b"abc", Some("identity"), 3),
            Ok(Cow::Borrowed(_))
        ));
        assert_eq!(
            decompress(b"abcd", None, 3),
            Err(BodyError::TooLarge { limit: 3 })
        );
        assert_eq!(
            decompress(b"abc", Some("br"), 3),
            Err(BodyError::UnsupportedEncoding("br".into()))
        );
    }
}
