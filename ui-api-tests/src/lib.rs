//! Harness for black-box tests: the real `stackhouse` binary, real Postgres, a real
//! S3-compatible server, and expected values computed from the inputs alone.

// Unit tests share the package's dev-dependencies with its integration tests.
#![cfg_attr(test, allow(unused_crate_dependencies))]

pub mod browser;
pub mod capture;
pub mod checks;
pub mod client;
pub mod connect_client;
pub mod experimental;
pub mod format_checks;
pub mod formats;
pub mod grafana;
pub mod http_query;
pub mod ingest_client;
pub mod jfr_expected;
pub mod jfr_raw;
pub mod jfr_reader;
pub mod load;
pub mod native_program;
pub mod node_tool;
pub mod pprof_messages;
pub mod pprof_reader;
pub mod prometheus;
pub mod proxy;
pub mod reads;
pub mod requests;
pub mod server;
pub mod services;
pub mod speedscope_reader;
pub mod trees;
pub mod workload;

/// The HTTP client of every test: a request the server never answers fails its test after
/// two minutes instead of holding CI until its own time limit.
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(120))
        .build()
        .expect("building the HTTP client")
}

/// [`http_client`] trusting only the CA in the PEM file `ca`.
pub fn https_client(ca: &std::path::Path) -> reqwest::Client {
    let pem = std::fs::read(ca).unwrap_or_else(|e| panic!("reading {}: {e}", ca.display()));
    reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(120))
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(&pem).expect("a PEM certificate"))
        .build()
        .expect("building the HTTPS client")
}

/// State shared by every test of one test binary (a server and what was sent to it), built
/// by the first test that asks. It is built on a thread and runtime of its own: each
/// `#[tokio::test]` runs its own runtime, and nothing shared may depend on one of them.
/// A build that panics fails the test that asked, and the next test tries again.
pub fn shared<T, F>(
    cell: &'static std::sync::OnceLock<T>,
    build: impl FnOnce() -> F + Send + 'static,
) -> &'static T
where
    T: Send + Sync + 'static,
    F: std::future::Future<Output = T>,
{
    cell.get_or_init(|| {
        std::thread::spawn(move || {
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .expect("runtime for shared test state")
                .block_on(build())
        })
        .join()
        .unwrap_or_else(|_| panic!("building the shared test state failed (its panic is above)"))
    })
}

/// Repository root (the workspace), for test data and the binary.
pub fn workspace_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace")
        .to_path_buf()
}

/// `$STACKHOUSE_TESTDATA`, else `../shared/testdata` next to the repository, else the
/// workplace's `/work/shared/testdata` (CI runs from a clone elsewhere).
pub fn testdata(rel: &str) -> std::path::PathBuf {
    let base = std::env::var_os("STACKHOUSE_TESTDATA")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            let next_to_repo = workspace_dir().join("../shared/testdata");
            if next_to_repo.exists() {
                next_to_repo
            } else {
                "/work/shared/testdata".into()
            }
        });
    let path = base.join(rel);
    assert!(
        path.exists(),
        "test data {} is missing; set STACKHOUSE_TESTDATA",
        path.display()
    );
    path
}
