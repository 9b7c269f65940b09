//! Pyroscope's `POST /ingest?name=app.cpu{k=v}&from&until&format&...`: folded (default),
//! pprof (raw, gzipped, or multipart `profile` + `previous_profile` + `sample_type_config`),
//! JFR (multipart `jfr` + `labels`, or raw) and speedscope bodies. Success is
//! `{"profiles":N,"samples":M}`; a refusal is `{"error":"..."}` naming the problem.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use stackhouse_ingest::formats::{Body, Params};
use stackhouse_ingest::pipeline::{Exported, Payload};
use stackhouse_ingest::pyroscope::parse_query;

use crate::error::{ApiError, ErrorKind};
use crate::monitoring::{self, Protocol};
use crate::state::AppState;
use crate::tenant;
use crate::wire::body::{content_type_essence, inflate_bytes, read_limited};

pub(super) async fn ingest(State(state): State<AppState>, request: Request) -> Response {
    let result = try_ingest(&state, request).await;
    monitoring::ingest_request(Protocol::PyroscopeIngest, result.as_ref());
    match result {
        // OTLP profiles and samples as converted (a sample with several timestamps is one
        // sample); when something was refused, the stored profiles and sample rows.
        Ok(exported) if exported.rejected_profiles == 0 => axum::Json(serde_json::json!({
            "profiles": exported.converted.profiles,
            "samples": exported.converted.samples,
        }))
        .into_response(),
        Ok(exported) => {
            let total = exported.stored_profiles + exported.repeated_profiles + exported.rejected_profiles;
            let message = format!(
                "stored {} of {total} profiles; {}",
                exported.stored_profiles,
                exported.errors.join("; ")
            );
            tracing::debug!(%message, "pyroscope ingest partly refused");
            (
                ErrorKind::InvalidArgument.http_status(),
                axum::Json(serde_json::json!({
                    "error": message,
                    "profiles": exported.stored_profiles,
                    "samples": exported.stored_samples,
                })),
            )
                .into_response()
        }
        Err(e) => e.into_response(),
    }
}

async fn try_ingest(state: &AppState, request: Request) -> Result<Exported, ApiError> {
    let (parts, body) = request.into_parts();
    let limit = state.max_message_bytes;
    // Read the body before any refusal (see read_limited).
    let raw = read_limited(body, limit).await?;
    let query: Vec<(String, String)> =
        url::form_urlencoded::parse(parts.uri.query().unwrap_or("").as_bytes())
            .into_owned()
            .collect();
    let query =
        parse_query(query.iter().map(|(k, v)| (k.as_str(), v.as_str()))).map_err(ApiError::invalid)?;
    let tenant = tenant::from_headers(&parts.headers)?;
    let body = inflate_bytes(&raw, &parts.headers, None, limit)?;
    let payload = Payload {
        format: query.format,
        body: read_body(&parts.headers, body).await?,
        params: Params {
            source: query.source,
            limit,
            ..Params::default()
        },
        sent_bytes: raw.len(),
    };
    let exported = state.pipeline.ingest(tenant, payload).await?;
    monitoring::ingest_volume(Protocol::PyroscopeIngest, raw.len(), &exported);
    Ok(exported)
}

/// The request body: one raw payload, or the named parts of a multipart/form-data upload.
async fn read_body(headers: &HeaderMap, body: Bytes) -> Result<Body, ApiError> {
    if content_type_essence(headers) != "multipart/form-data" {
        return Ok(Body::Raw(body));
    }
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let boundary = multer::parse_boundary(content_type)
        .map_err(|e| ApiError::invalid(format!("invalid multipart/form-data content type: {e}")))?;
    let stream = futures::stream::once(async move { Ok::<Bytes, std::io::Error>(body) });
    let mut multipart = multer::Multipart::new(stream, boundary);
    let mut parts = Vec::new();
    let malformed = |e: multer::Error| ApiError::invalid(format!("invalid multipart/form-data body: {e}"));
    while let Some(field) = multipart.next_field().await.map_err(malformed)? {
        let name = field.name().unwrap_or("").to_string();
        let data = field.bytes().await.map_err(malformed)?;
        parts.push((name, data));
    }
    Ok(Body::Parts(parts))
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;

    use super::*;

    fn multipart(boundary: &str, parts: &[(&str, &[u8])]) -> Vec<u8> {
        let mut body = Vec::new();
        for (name, data) in parts {
            body.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
            body.extend_from_slice(
                format!(
                    "Content-Disposition: form-data; name=\"{name}\"; filename=\"{name}.bin\"\r\n\
                     Content-Type: application/octet-stream\r\n\r\n"
                )
                .as_bytes(),
            );
            body.extend_from_slice(data);
            body.extend_from_slice(b"\r\n");
        }
        body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
        body
    }

    fn headers(content_type: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_TYPE, content_type.parse().unwrap());
        h
    }

    #[tokio::test]
    async fn multipart_parts_are_found_by_name() {
        let profile: &[u8] = b"\x1f\x8b\x08\x00binary\r\n--not-the-boundary\x00\xff";
        let body = multipart(
            "XyZ123",
            &[
                ("profile", profile),
                ("prev_profile", b"prev"),
                ("sample_type_config", b"{\"cpu\":{}}"),
            ],
        );
        let upload = read_body(
            &headers("multipart/form-data; boundary=XyZ123"),
            Bytes::from(body),
        )
        .await
        .expect("valid multipart");
        assert!(matches!(upload, Body::Parts(_)));
        assert_eq!(upload.main("pprof", &["profile"]).unwrap(), profile);
        assert_eq!(
            upload.part(&["previous_profile", "prev_profile"]).unwrap(),
            &b"prev"[..]
        );
        assert_eq!(
            upload.part(&["sample_type_config"]).unwrap(),
            &b"{\"cpu\":{}}"[..]
        );
        let err = upload.main("jfr", &["jfr"]).unwrap_err().to_string();
        assert!(
            err.contains("no \"jfr\" part") && err.contains("profile"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn raw_bodies_and_bad_multipart() {
        let upload = read_body(&headers("application/octet-stream"), Bytes::from_static(b"a;b 1"))
            .await
            .unwrap();
        assert_eq!(upload.main("folded", &["profile"]).unwrap(), b"a;b 1");

        let Err(no_boundary) = read_body(&headers("multipart/form-data"), Bytes::new()).await else {
            panic!("multipart without a boundary accepted")
        };
        assert!(
            no_boundary.message.contains("multipart"),
            "{}",
            no_boundary.message
        );

        let Err(truncated) = read_body(
            &headers("multipart/form-data; boundary=b"),
            Bytes::from_static(b"--b\r\nContent-Disposition: form-data; name=\"jfr\"\r\n\r\nabc"),
        )
        .await
        else {
            panic!("truncated multipart accepted")
        };
        assert_eq!(truncated.status(), StatusCode::BAD_REQUEST);
        assert!(
            truncated.message.contains("invalid multipart"),
            "{}",
            truncated.message
        );
    }
}
