//! Pyroscope's `POST /ingest?name=app.cpu{k=v}&from&until&format&...`: folded (default),
//! pprof (raw, gzipped, or multipart `profile` + `previous_profile` + `sample_type_config`),
//! JFR (multipart `jfr` + `labels`, or raw) and speedscope bodies. Success is
//! `{"profiles":N,"samples":M}`; a refusal is `{"error":"..."}` naming the problem.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use stackhouse_ingest::convert::{Conversion, ConvertError, Converted, RequestBuilder, Source};
use stackhouse_ingest::pprof::PprofOptions;
use stackhouse_ingest::pyroscope::{Format, parse_query};
use stackhouse_ingest::{folded, jfr, pprof, speedscope};

use super::AppState;
use super::body::{content_type_essence, inflate, read_limited};
use crate::error::{ApiError, ErrorKind};
use crate::export::Exported;
use crate::monitoring::{self, Protocol};
use crate::tenant;

pub async fn ingest(State(state): State<AppState>, request: Request) -> Response {
    let result = try_ingest(&state, request).await;
    monitoring::ingest_request(Protocol::PyroscopeIngest, result.as_ref().map(|(e, _)| e));
    match result {
        // OTLP profiles and samples as converted (a sample with several timestamps is one
        // sample); when something was refused, the stored profiles and sample rows.
        Ok((exported, converted)) if exported.rejected_profiles == 0 => axum::Json(serde_json::json!({
            "profiles": converted.profiles,
            "samples": converted.samples,
        }))
        .into_response(),
        Ok((exported, _)) => {
            let total = exported.stored_profiles + exported.rejected_profiles;
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

async fn try_ingest(state: &AppState, request: Request) -> Result<(Exported, Converted), ApiError> {
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
    let body = Bytes::from(inflate(&raw, &parts.headers, None, limit)?.into_owned());
    let upload = Upload::read(&parts.headers, body).await?;
    let format = query.format;
    let source = query.source;
    let (conversion, converted) =
        tokio::task::spawn_blocking(move || convert(format, &upload, &source, limit))
            .await?
            .map_err(|e| match e {
                ConvertError::TooLarge { .. } => ApiError::too_large(e),
                ConvertError::Invalid { .. } => ApiError::invalid(e),
            })?;
    let exported = state
        .exporter
        .export(tenant, conversion, Protocol::PyroscopeIngest, raw.len())
        .await?;
    Ok((exported, converted))
}

/// The request body: one raw payload, or the named parts of a multipart/form-data upload.
#[derive(Debug, Default)]
struct Upload {
    raw: Option<Bytes>,
    parts: Vec<(String, Bytes)>,
}

impl Upload {
    async fn read(headers: &HeaderMap, body: Bytes) -> Result<Upload, ApiError> {
        if content_type_essence(headers) != "multipart/form-data" {
            return Ok(Upload {
                raw: Some(body),
                parts: Vec::new(),
            });
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
        let malformed =
            |e: multer::Error| ApiError::invalid(format!("invalid multipart/form-data body: {e}"));
        while let Some(field) = multipart.next_field().await.map_err(malformed)? {
            let name = field.name().unwrap_or("").to_string();
            let data = field.bytes().await.map_err(malformed)?;
            parts.push((name, data));
        }
        Ok(Upload { raw: None, parts })
    }

    fn part(&self, names: &[&str]) -> Option<&Bytes> {
        self.parts
            .iter()
            .find(|(n, _)| names.contains(&n.as_str()))
            .map(|(_, data)| data)
    }

    /// The raw body, or the multipart part that carries the profile.
    fn main(&self, format: Format, names: &[&str]) -> Result<&[u8], ConvertError> {
        if let Some(raw) = &self.raw {
            return Ok(raw);
        }
        self.part(names).map(|b| &b[..]).ok_or_else(|| {
            let sent: Vec<&str> = self.parts.iter().map(|(n, _)| n.as_str()).collect();
            ConvertError::invalid(
                format.name(),
                format!("multipart upload has no {:?} part (parts: {sent:?})", names[0]),
            )
        })
    }
}

fn convert(
    format: Format,
    upload: &Upload,
    source: &Source,
    limit: usize,
) -> Result<(Conversion, Converted), ConvertError> {
    let mut builder = RequestBuilder::new();
    let converted = match format {
        Format::Folded => folded::convert(upload.main(format, &["profile"])?, source, &mut builder)?,
        Format::Speedscope => speedscope::convert(upload.main(format, &["profile"])?, source, &mut builder)?,
        Format::Pprof => {
            let options = PprofOptions {
                previous: upload.part(&["previous_profile", "prev_profile"]).map(|b| &b[..]),
                sample_type_config: upload.part(&["sample_type_config"]).map(|b| &b[..]),
            };
            pprof::convert(
                upload.main(format, &["profile"])?,
                &options,
                source,
                limit,
                &mut builder,
            )?
        }
        Format::Jfr => {
            let labels = upload.part(&["labels"]).map(|b| &b[..]);
            jfr::convert(
                upload.main(format, &["jfr"])?,
                labels,
                source,
                limit,
                &mut builder,
            )?
        }
    };
    let conversion = Conversion {
        request: builder.finish(),
        ..Conversion::default()
    };
    Ok((conversion, converted))
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
        let upload = Upload::read(
            &headers("multipart/form-data; boundary=XyZ123"),
            Bytes::from(body),
        )
        .await
        .expect("valid multipart");
        assert!(upload.raw.is_none());
        assert_eq!(upload.main(Format::Pprof, &["profile"]).unwrap(), profile);
        assert_eq!(
            upload.part(&["previous_profile", "prev_profile"]).unwrap(),
            &b"prev"[..]
        );
        assert_eq!(
            upload.part(&["sample_type_config"]).unwrap(),
            &b"{\"cpu\":{}}"[..]
        );
        let err = upload.main(Format::Jfr, &["jfr"]).unwrap_err().to_string();
        assert!(
            err.contains("no \"jfr\" part") && err.contains("profile"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn raw_bodies_and_bad_multipart() {
        let upload = Upload::read(&headers("application/octet-stream"), Bytes::from_static(b"a;b 1"))
            .await
            .unwrap();
        assert_eq!(upload.main(Format::Folded, &["profile"]).unwrap(), b"a;b 1");

        let Err(no_boundary) = Upload::read(&headers("multipart/form-data"), Bytes::new()).await else {
            panic!("multipart without a boundary accepted")
        };
        assert!(
            no_boundary.message.contains("multipart"),
            "{}",
            no_boundary.message
        );

        let Err(truncated) = Upload::read(
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
