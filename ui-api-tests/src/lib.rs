//! Harness for black-box tests: the real `stackhouse` binary, real Postgres, a real
//! S3-compatible server, and expected values computed from the inputs alone.

pub mod capture;
pub mod checks;
pub mod client;
pub mod experimental;
pub mod format_checks;
pub mod formats;
pub mod http_query;
pub mod ingest_client;
pub mod jfr_expected;
pub mod jfr_reader;
pub mod pprof_reader;
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
