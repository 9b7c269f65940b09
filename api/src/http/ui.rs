//! The built-in web UI: the files of `api/ui/`, compiled into the binary so that it works
//! from a bare `stackhouse serve`, served at `/` (the page) and `/ui/{file}` (its scripts
//! and styles). The page only calls the public query API (and, for exemplars, the
//! Connect querier API Grafana uses); no build step, no third-party code.

use std::hash::{Hash, Hasher};
use std::sync::OnceLock;

use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::route::Route;
use crate::wire::body::{accepts_gzip, gzip};

/// `(name, content type, body)` of every file served.
const FILES: &[(&str, &str, &[u8])] = &[
    (
        "index.html",
        "text/html; charset=utf-8",
        include_bytes!("../../ui/index.html"),
    ),
    (
        "style.css",
        "text/css; charset=utf-8",
        include_bytes!("../../ui/style.css"),
    ),
    ("app.js", JS, include_bytes!("../../ui/app.js")),
    ("api.js", JS, include_bytes!("../../ui/api.js")),
    ("autocomplete.js", JS, include_bytes!("../../ui/autocomplete.js")),
    ("bottomup.js", JS, include_bytes!("../../ui/bottomup.js")),
    ("callgraph.js", JS, include_bytes!("../../ui/callgraph.js")),
    ("compare.js", JS, include_bytes!("../../ui/compare.js")),
    ("filters.js", JS, include_bytes!("../../ui/filters.js")),
    ("flamegraph.js", JS, include_bytes!("../../ui/flamegraph.js")),
    ("framemenu.js", JS, include_bytes!("../../ui/framemenu.js")),
    ("format.js", JS, include_bytes!("../../ui/format.js")),
    ("sandwich.js", JS, include_bytes!("../../ui/sandwich.js")),
    ("table.js", JS, include_bytes!("../../ui/table.js")),
    ("time.js", JS, include_bytes!("../../ui/time.js")),
    ("timeline.js", JS, include_bytes!("../../ui/timeline.js")),
    ("timeseries.js", JS, include_bytes!("../../ui/timeseries.js")),
];
const JS: &str = "text/javascript; charset=utf-8";

/// Scripts, styles and API calls from this origin only; no inline script or style.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

struct Asset {
    content_type: &'static str,
    body: &'static [u8],
    gzipped: Vec<u8>,
    etag: String,
}

fn assets() -> &'static [(&'static str, Asset)] {
    static ASSETS: OnceLock<Vec<(&'static str, Asset)>> = OnceLock::new();
    ASSETS.get_or_init(|| {
        FILES
            .iter()
            .map(|&(name, content_type, body)| {
                let gzipped = gzip(body, flate2::Compression::best());
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                body.hash(&mut hasher);
                let etag = format!("\"{:016x}\"", hasher.finish());
                let asset = Asset {
                    content_type,
                    body,
                    gzipped,
                    etag,
                };
                (name, asset)
            })
            .collect()
    })
}

/// The UI's routes, served with the query API.
pub(super) fn routes() -> Vec<Route> {
    vec![Route::new("/", get(index)), Route::new("/ui/{file}", get(file))]
}

async fn index(headers: HeaderMap) -> Response {
    serve("index.html", &headers)
}

async fn file(Path(name): Path<String>, headers: HeaderMap) -> Response {
    serve(&name, &headers)
}

fn serve(name: &str, headers: &HeaderMap) -> Response {
    let Some((_, asset)) = assets().iter().find(|(n, _)| *n == name) else {
        return (StatusCode::NOT_FOUND, "no such file of the web ui").into_response();
    };
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|tags| tags.split(',').any(|t| t.trim() == asset.etag));
    let gzip = accepts_gzip(headers);
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else if gzip {
        asset.gzipped.clone().into_response()
    } else {
        asset.body.into_response()
    };
    let out = response.headers_mut();
    out.insert(header::CONTENT_TYPE, HeaderValue::from_static(asset.content_type));
    if gzip && !fresh {
        out.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    out.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    // The files change with the binary: revalidate every time, cheaply, by ETag.
    out.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    out.insert(
        header::ETAG,
        HeaderValue::from_str(&asset.etag).expect("hex is a valid header"),
    );
    out.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    out.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_module_the_page_imports_is_served() {
        let served: Vec<&str> = FILES.iter().map(|(name, _, _)| *name).collect();
        for (name, _, body) in FILES {
            let text = std::str::from_utf8(body).expect("utf-8");
            for import in text.split("from \"./").skip(1) {
                let module = import.split('"').next().unwrap();
                assert!(
                    served.contains(&module),
                    "{name} imports {module}, which is not served"
                );
            }
            for reference in text.split("\"/ui/").skip(1) {
                let file = reference.split('"').next().unwrap();
                assert!(
                    served.contains(&file),
                    "{name} refers to /ui/{file}, which is not served"
                );
            }
        }
        let on_disk: Vec<String> = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/ui"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        for file in &on_disk {
            assert!(served.contains(&file.as_str()), "api/ui/{file} is not served");
        }
    }
}
