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

    /// Runs `sql` in this database: one line per row, columns separated by `|`.
    pub fn query(&self, sql: &str) -> Vec<String> {
        let out = Command::new("psql")
            .arg(&self.url)
            .args(["-At", "-v", "ON_ERROR_STOP=1", "-c", sql])
            .output()
            .expect("psql is required for the Postgres tests (apt-get install postgresql-client)");
        assert!(
            out.status.success(),
            "{sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect()
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

/// A Postgres server of the test's own (initdb into a temporary folder, on a free port),
/// for tests that stop and restart it. As root it runs as the `postgres` user, as initdb
/// requires.
pub struct PostgresCluster {
    dir: tempfile::TempDir,
    pub port: u16,
    bin: std::path::PathBuf,
}

impl PostgresCluster {
    pub fn start() -> PostgresCluster {
        let bin = postgres_bindir();
        let dir = tempfile::Builder::new()
            .prefix("stackhouse-pg-")
            .tempdir()
            .expect("temp dir");
        if is_root() {
            let owner = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status()
                .expect("chown");
            assert!(owner.success(), "chown of the cluster folder to postgres failed");
        }
        let cluster = PostgresCluster {
            port: crate::server::free_port(),
            dir,
            bin,
        };
        cluster.run(
            "initdb",
            &[
                "-D",
                &cluster.data(),
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
            ],
        );
        cluster.start_again();
        cluster
    }

    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Fast shutdown: open connections are cut and their transactions rolled back.
    pub fn stop(&self) {
        self.run("pg_ctl", &["-D", &self.data(), "-m", "fast", "-w", "stop"]);
    }

    pub fn start_again(&self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("postgres.log");
        self.run(
            "pg_ctl",
            &[
                "-D",
                &self.data(),
                "-o",
                &options,
                "-l",
                &log.to_string_lossy(),
                "-w",
                "start",
            ],
        );
    }

    fn data(&self) -> String {
        self.dir.path().join("data").to_string_lossy().into_owned()
    }

    fn command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        if is_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(path);
            c
        } else {
            Command::new(path)
        }
    }

    fn run(&self, program: &str, args: &[&str]) {
        let out = self
            .command(program)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("running {program}: {e}"));
        assert!(
            out.status.success(),
            "{program} {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for PostgresCluster {
    fn drop(&mut self) {
        let _ = self
            .command("pg_ctl")
            .args(["-D", &self.data(), "-m", "immediate", "stop"])
            .output();
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// The server programs (initdb, pg_ctl) of the newest installed Postgres.
fn postgres_bindir() -> std::path::PathBuf {
    let mut found: Vec<(u32, std::path::PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_string_lossy().parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    found.sort();
    found
        .pop()
        .map(|(_, bin)| bin)
        .expect("the Postgres server programs (initdb, pg_ctl) are required under /usr/lib/postgresql/<version>/bin: apt-get install postgresql")
}
