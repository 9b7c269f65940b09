//! README's first command: `stackhouse serve` with no configuration at all.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ui_api_tests::client::Api;
use ui_api_tests::requests::{PROFILE_TYPE, dictionary, profile, request};
use ui_api_tests::server::binary;

#[tokio::test(flavor = "multi_thread")]
async fn serve_runs_with_embedded_defaults() {
    let cwd = tempfile::tempdir().unwrap();
    let mut child = Command::new(binary())
        .arg("serve")
        .current_dir(cwd.path())
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let api = Api::new("http://127.0.0.1:4040");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(r) = reqwest::get("http://127.0.0.1:4040/readyz").await
            && r.status().is_success()
        {
            break;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "stackhouse serve exited; are ports 4040/4317 free?"
        );
        assert!(Instant::now() < deadline, "not ready within 60 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A minute ago: the default retention (30 days) refuses older profiles at ingest.
    let t0 = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        - 60_000_000_000;
    let req = request(
        "quickstart",
        vec![profile(t0, 2, 3), profile(t0 + 1, 1, 4)],
        dictionary(),
    );
    let (status, _, _) = api
        .post_otlp(
            "application/x-protobuf",
            false,
            prost::Message::encode_to_vec(&req),
        )
        .await;
    assert_eq!(status, 200);
    let folded = api.folded(PROFILE_TYPE, "{}", t0 as i64, t0 as i64 + 10).await;
    assert_eq!(
        folded.into_iter().collect::<Vec<_>>(),
        vec![("main;foo".to_string(), 4), ("main;foo;bar".to_string(), 3)]
    );
    assert!(
        cwd.path().join("data/catalog.db").exists(),
        "SQLite catalog under ./data"
    );
    assert!(cwd.path().join("data/objects").is_dir(), "objects under ./data");
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    assert!(child.wait().unwrap().success(), "clean exit on SIGTERM");
}
