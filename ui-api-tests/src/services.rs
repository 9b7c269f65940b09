//! Real backing services: a fresh Postgres database per test, a local S3 server (moto).
//! A missing service fails the test with a message that says what to start.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn postgres_admin_url() -> String {
    std::env::var("STACKHOUSE_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

/// A database that exists for the life of the value.
pub struct PostgresDb {
    pub url: String,
    name: String,
}

impl PostgresDb {
    pub fn create() -> PostgresDb {
        let name = format!("stackhouse_ui_{}_{}", std::process::id(), unique());
        psql(&format!("CREATE DATABASE {name}"));
        let admin = postgres_admin_url();
        let base = admin.rsplit_once('/').map(|(b, _)| b).unwrap_or(&admin);
        PostgresDb {
            url: format!("{base}/{name}"),
            name,
        }
    }
}

impl Drop for PostgresDb {
    fn drop(&mut self) {
        let _ = Command::new("psql")
            .arg(postgres_admin_url())
            .args([
                "-q",
                "-c",
                &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

fn psql(sql: &str) {
    let out = Command::new("psql")
        .arg(postgres_admin_url())
        .args(["-q", "-v", "ON_ERROR_STOP=1", "-c", sql])
        .output()
        .expect("psql is required for the Postgres tests (apt-get install postgresql-client)");
    assert!(
        out.status.success(),
        "Postgres is required at {} (CI starts it; locally: pg_ctlcluster <version> main start): {}",
        postgres_admin_url(),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64;
    nanos * 1000 + N.fetch_add(1, Ordering::Relaxed)
}

/// A moto S3 server on a free localhost port, with one bucket.
pub struct S3Server {
    child: Child,
    pub endpoint: String,
    pub bucket: String,
}

impl S3Server {
    pub async fn start() -> S3Server {
        let port = crate::server::free_port();
        let child = Command::new("python3")
            .args(["-m", "moto.server", "-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 is required for the S3 tests");
        let endpoint = format!("http://127.0.0.1:{port}");
        let mut server = S3Server {
            child,
            endpoint,
            bucket: "stackhouse-test".into(),
        };
        let client = crate::http_client();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = server.child.try_wait().unwrap() {
                panic!(
                    "the S3 test server exited ({status}); install it with: python3 -m pip install 'moto[server]'"
                );
            }
            if let Ok(r) = client
                .put(format!("{}/{}", server.endpoint, server.bucket))
                .send()
                .await
                && r.status().is_success()
            {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "moto S3 server did not start within 30 s"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        server
    }

    /// Environment for a stackhouse process talking to this server.
    pub fn env(&self) -> Vec<(String, String)> {
        [
            ("AWS_ACCESS_KEY_ID", "test"),
            ("AWS_SECRET_ACCESS_KEY", "test"),
            ("AWS_REGION", "us-east-1"),
            ("AWS_ENDPOINT_URL", self.endpoint.as_str()),
            ("AWS_ALLOW_HTTP", "true"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    /// Lists object keys under a prefix (moto answers unsigned requests).
    pub async fn list(&self, prefix: &str) -> Vec<String> {
        let body = reqwest::get(format!(
            "{}/{}?list-type=2&prefix={prefix}",
            self.endpoint, self.bucket
        ))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
        body.split("<Key>")
            .skip(1)
            .filter_map(|s| s.split("</Key>").next())
            .map(String::from)
            .collect()
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
