//! Every HTTP route of a whole server (embedded storage and catalog, holding a little
//! data): the query API's parameters, Connect querier and push requests in JSON and
//! protobuf, Pyroscope `/ingest` and render parameters, OTLP/HTTP. No input may make it
//! answer 500.
//!
//! Input: byte 0 picks the route, byte 1 the request's headers (among them the tenant: the
//! default, another, or both at once); the rest is the query string, a NUL, and the body.

use std::sync::OnceLock;

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use stackhouse_api::config::ServeArgs;
use tower::ServiceExt;

struct App {
    runtime: tokio::runtime::Runtime,
    router: Router,
    routes: Vec<(Method, String)>,
    _dir: tempfile::TempDir,
}

fn app() -> &'static App {
    static APP: OnceLock<App> = OnceLock::new();
    APP.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let args = ServeArgs::from_flags([
            "--data-dir".as_ref(),
            dir.path().as_os_str(),
            "--flush-interval=5ms".as_ref(),
            "--max-message-bytes=1048576".as_ref(),
            "--retention=0".as_ref(),
        ])
        .expect("flags");
        let services = runtime
            .block_on(stackhouse_api::server::services(&args))
            .expect("services");
        let router = stackhouse_api::http::router(services.state);
        let mut routes: Vec<(Method, String)> = stackhouse_api::http::api_routes()
            .into_iter()
            .map(|route| (Method::GET, route.path))
            .collect();
        for route in stackhouse_api::read::routes() {
            let path = route.path;
            if path.starts_with("/api/v1/") {
                continue;
            }
            let method = if path.starts_with("/pyroscope/") {
                Method::GET
            } else {
                Method::POST
            };
            routes.push((method, path));
        }
        for route in stackhouse_api::http::ingest_routes() {
            routes.push((Method::POST, route.path));
        }
        // The one JSON body of the query API: a deletion request.
        routes.push((Method::POST, "/api/v1/admin/deletes".to_string()));
        // Something to find: two series of folded stacks.
        for env in ["a", "b"] {
            let uri = format!("/ingest?name=fuzz.cpu%7Benv%3D{env}%7D&from=1700000000&until=1700000010");
            let seed = Request::post(uri)
                .body(Body::from("main;work;leaf 10\nmain;idle 3\n"))
                .expect("seed request");
            let response = runtime.block_on(router.clone().oneshot(seed)).expect("seed");
            assert!(
                response.status().is_success(),
                "seeding failed: {}",
                response.status()
            );
        }
        App {
            runtime,
            router,
            routes,
            _dir: dir,
        }
    })
}

/// Keeps the URI valid while leaving `&`, `=`, `%` and `+` to the fuzzer.
fn query_string(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        if b.is_ascii_alphanumeric() || b"&=%+-_.~:,!*()/;".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

pub fn request(data: &[u8]) {
    let [route, flags, rest @ ..] = data else {
        return;
    };
    let app = app();
    let (method, path) = &app.routes[usize::from(*route) % app.routes.len()];
    let (query, body) = match rest.iter().position(|&b| b == 0) {
        Some(nul) => (&rest[..nul], &rest[nul + 1..]),
        None => (rest, &[][..]),
    };
    // Path parameters take the query's first bytes too.
    let segment = query_string(&query[..query.len().min(40)]).replace('/', "%2F");
    let path = path
        .replace("{id}", &segment)
        .replace("{service}", "querier.v1.QuerierService")
        .replace("{method}", "Nope");
    let uri = format!("{path}?{}", query_string(query));
    let content_type = match flags & 3 {
        0 => "application/json",
        1 => "application/proto",
        2 => "application/x-protobuf",
        _ => "text/plain",
    };
    let mut builder = Request::builder()
        .method(method.clone())
        .uri(&uri)
        .header("content-type", content_type);
    if flags & 4 != 0 {
        builder = builder.header("content-encoding", "gzip");
    }
    // A tenant without data, or a read across it and the tenant holding the data.
    match flags & 40 {
        8 => builder = builder.header("x-scope-orgid", "other"),
        32 | 40 => builder = builder.header("x-scope-orgid", "anonymous|other"),
        _ => {}
    }
    if flags & 16 != 0 {
        builder = builder.header("otlp-profiles-development-version", "1.8.0");
    }
    let Ok(request) = builder.body(Body::from(body.to_vec())) else {
        return;
    };
    let response = app
        .runtime
        .block_on(app.router.clone().oneshot(request))
        .expect("the router answers");
    assert_ne!(
        response.status(),
        StatusCode::INTERNAL_SERVER_ERROR,
        "{method} {uri} answered 500"
    );
}
