//! Faults under sustained ingest from senders that retry until acknowledged: the object
//! store unreachable, the catalog's Postgres restarted, the object store's disk full, and
//! the server killed with SIGKILL ten times. In each, every refusal a sender hears is a
//! retryable one, and afterwards the stored samples equal the acknowledged ones exactly:
//! nothing acknowledged lost, nothing half-committed visible, no retry stored twice.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use rand::Rng;
use ui_api_tests::client::Api;
use ui_api_tests::load::{Load, Sent, stored_value};
use ui_api_tests::proxy::Proxy;
use ui_api_tests::server::{Options, Server};
use ui_api_tests::services::{PostgresCluster, S3Server};

const SENDERS: usize = 8;

fn flags(flags: &[&str]) -> Vec<String> {
    flags.iter().map(|s| s.to_string()).collect()
}

/// What every fault test checks once the load has stopped.
async fn assert_exactly_stored(server: &Server, load_service: &str, sent: &Sent, fault: &str) {
    println!("{fault}: {sent:?}");
    assert!(
        sent.refused.is_empty(),
        "{fault}: exports refused for good: {:?}",
        sent.refused
    );
    assert_eq!(sent.abandoned, 0, "{fault}: exports never acknowledged");
    assert!(
        sent.acknowledged_requests >= 50,
        "{fault}: the load did not hold: {sent:?}"
    );
    let stored = stored_value(&Api::new(server.http()), load_service).await;
    assert_eq!(
        stored, sent.acknowledged_value,
        "{fault}: stored sample values differ from the acknowledged ones"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn sigkill_ten_times_under_load_loses_nothing_acknowledged() {
    let mut server = Server::start(Options {
        extra_args: flags(&["--flush-interval", "50ms"]),
        ..Options::default()
    })
    .await;
    let load = Load::start(&server.http(), "sigkill", SENDERS);
    for _ in 0..10 {
        let wait = rand::rng().random_range(300..900);
        tokio::time::sleep(Duration::from_millis(wait)).await;
        // SIGKILL, then the same data dir and ports again.
        server.restart().await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let sent = load.stop().await;
    assert!(sent.retried_with(&[0]) > 0, "no sender noticed a kill: {sent:?}");
    assert_exactly_stored(&server, "sigkill", &sent, "sigkill x10").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn object_store_outage_gets_retryable_errors_and_loses_nothing() {
    let s3 = S3Server::start().await;
    let proxy = Proxy::start(s3.endpoint.trim_start_matches("http://")).await;
    let env = s3
        .env()
        .into_iter()
        .map(|(k, v)| match k.as_str() {
            "AWS_ENDPOINT_URL" => (k, proxy.endpoint()),
            _ => (k, v),
        })
        .collect();
    let server = Server::start(Options {
        storage: Some(format!("s3://{}/outage", s3.bucket)),
        extra_args: flags(&["--flush-interval", "100ms", "--flush-timeout", "2s"]),
        env,
        ..Options::default()
    })
    .await;
    let load = Load::start(&server.http(), "s3-outage", SENDERS);
    tokio::time::sleep(Duration::from_secs(2)).await;
    proxy.down();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let ready = server
        .client()
        .get(format!("{}/readyz", server.http()))
        .send()
        .await
        .unwrap();
    assert_eq!(
        ready.status(),
        503,
        "not ready while the object store is unreachable"
    );
    tokio::time::sleep(Duration::from_secs(4)).await;
    proxy.up();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let sent = load.stop().await;
    assert!(
        sent.retried_with(&[503]) > 0,
        "waiting exports were told to retry: {sent:?}"
    );
    assert_exactly_stored(&server, "s3-outage", &sent, "object store outage").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_restart_gets_retryable_errors_and_loses_nothing() {
    let postgres = PostgresCluster::start();
    let server = Server::start(Options {
        catalog: Some(postgres.url()),
        extra_args: flags(&["--flush-interval", "100ms", "--flush-timeout", "2s"]),
        ..Options::default()
    })
    .await;
    let load = Load::start(&server.http(), "pg-restart", SENDERS);
    for _ in 0..2 {
        tokio::time::sleep(Duration::from_secs(2)).await;
        postgres.stop();
        tokio::time::sleep(Duration::from_secs(3)).await;
        postgres.start_again();
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let sent = load.stop().await;
    assert!(
        sent.retried_with(&[503]) > 0,
        "waiting exports were told to retry: {sent:?}"
    );
    assert_exactly_stored(&server, "pg-restart", &sent, "postgres restart").await;
}

/// A tmpfs mounted for the life of the value.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(at).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .output()
            .expect("mount");
        assert!(
            out.status.success(),
            "the full-disk test mounts a small tmpfs and needs root (CI runs as root): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Tmpfs(at.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Fills the file system of `dir` with a ballast file until it refuses another byte.
fn fill(dir: &Path) -> PathBuf {
    use std::io::Write;
    let ballast = dir.join("ballast");
    let mut file = std::fs::File::create(&ballast).unwrap();
    let chunk = vec![0u8; 64 << 10];
    while file.write_all(&chunk).is_ok() {}
    while file.write_all(&[0]).is_ok() {}
    let _ = file.sync_all();
    ballast
}

#[tokio::test(flavor = "multi_thread")]
async fn full_disk_gets_retryable_errors_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let objects = dir.path().join("objects");
    let tmpfs = Tmpfs::mount(&objects, "16m");
    let server = Server::start(Options {
        storage: Some(format!("file://{}", objects.display())),
        extra_args: flags(&["--flush-interval", "100ms", "--flush-timeout", "5s"]),
        ..Options::default()
    })
    .await;
    let load = Load::start(&server.http(), "full-disk", SENDERS);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let ballast = fill(&tmpfs.0);
    tokio::time::sleep(Duration::from_secs(4)).await;
    std::fs::remove_file(&ballast).unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let sent = load.stop().await;
    assert!(
        sent.retried_with(&[503]) > 0,
        "exports were told to retry while the disk was full: {sent:?}"
    );
    assert_exactly_stored(&server, "full-disk", &sent, "full disk").await;
    drop(server);
}
