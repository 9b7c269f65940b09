//! Starts the real binary on free ports and waits until it is ready.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::workspace_dir;

/// Builds `stackhouse` once per test process, so `cargo test` alone runs everything.
pub fn binary() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(bin) = std::env::var_os("STACKHOUSE_BIN") {
            return PathBuf::from(bin);
        }
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        // The same targets as `cargo test --workspace`, so the features match its build and
        // this is a no-op there; building the binary alone would rebuild DataFusion with
        // a different feature set.
        let status = Command::new(cargo)
            .args(["build", "--quiet", "--workspace", "--tests"])
            .current_dir(workspace_dir())
            .status()
            .expect("running cargo build for the stackhouse binary");
        assert!(status.success(), "building the stackhouse binary failed");
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace_dir().join("target"));
        target.join("debug/stackhouse")
    })
    .clone()
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("binding a free port")
        .local_addr()
        .unwrap()
        .port()
}

#[derive(Clone, Debug, Default)]
pub struct Options {
    pub catalog: Option<String>,
    pub storage: Option<String>,
    pub extra_args: Vec<String>,
    pub env: Vec<(String, String)>,
    /// The CA that signed the server's certificate, when it serves TLS (the test passes
    /// `--tls-cert-file` and `--tls-key-file`): URLs become `https://localhost:…`.
    pub tls_ca: Option<PathBuf>,
}

pub struct Server {
    child: Option<Child>,
    pub http_port: u16,
    pub grpc_port: u16,
    pub data_dir: PathBuf,
    options: Options,
    /// Its stdin pipe stays open as long as this process runs (see
    /// [`Server::start_for_process`]).
    watchdog: Option<Child>,
    _tmp: Option<tempfile::TempDir>,
}

impl Server {
    pub async fn start(options: Options) -> Server {
        let tmp = tempfile::tempdir().expect("temp dir");
        let data_dir = tmp.path().join("data");
        let mut server = Server {
            child: None,
            http_port: 0,
            grpc_port: 0,
            data_dir,
            options,
            watchdog: None,
            _tmp: Some(tmp),
        };
        server.spawn().await;
        server
    }

    /// A server shared by every test of one test binary, kept in a static. Statics are never
    /// dropped, so a watchdog process kills the server once the pipe this process holds to
    /// it closes, which happens however the test process ends.
    pub async fn start_for_process(options: Options) -> Server {
        let mut server = Server::start(options).await;
        let pid = server.child.as_ref().expect("started").id();
        let watchdog = Command::new("sh")
            .arg("-c")
            .arg(format!("read _; kill -9 {pid} 2>/dev/null"))
            .stdin(Stdio::piped())
            .spawn()
            .expect("starting the watchdog of a shared server");
        server.watchdog = Some(watchdog);
        server
    }

    pub fn http(&self) -> String {
        match self.options.tls_ca {
            Some(_) => format!("https://localhost:{}", self.http_port),
            None => format!("http://127.0.0.1:{}", self.http_port),
        }
    }

    pub fn grpc(&self) -> String {
        match self.options.tls_ca {
            Some(_) => format!("https://localhost:{}", self.grpc_port),
            None => format!("http://127.0.0.1:{}", self.grpc_port),
        }
    }

    /// An HTTP client that trusts this server (its CA when it serves TLS).
    pub fn client(&self) -> reqwest::Client {
        match &self.options.tls_ca {
            Some(ca) => crate::https_client(ca),
            None => crate::http_client(),
        }
    }

    /// The sum of the `/metrics` samples of `name` whose label sets contain each of
    /// `labels` (`key="value"` strings); 0 when there are none.
    pub async fn metric(&self, name: &str, labels: &[&str]) -> f64 {
        let text = self
            .client()
            .get(format!("{}/metrics", self.http()))
            .send()
            .await
            .expect("GET /metrics")
            .text()
            .await
            .expect("a /metrics body");
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .filter(|l| l.split(['{', ' ']).next() == Some(name))
            .filter(|l| labels.iter().all(|x| l.contains(x)))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }

    /// Starts the binary on the ports it had (a restart: senders keep their address), else
    /// on fresh ones. A port found free can be taken by another test's connection before
    /// the server binds it, so an exit during start-up is retried on new ports (the
    /// server's own message is on stderr).
    async fn spawn(&mut self) {
        const ATTEMPTS: usize = 3;
        for attempt in 1..=ATTEMPTS {
            if attempt > 1 || self.http_port == 0 {
                self.http_port = free_port();
                self.grpc_port = free_port();
            }
            match self.spawn_once().await {
                Ok(()) => return,
                Err(status) if attempt < ATTEMPTS => {
                    eprintln!("stackhouse exited during start-up with {status}; retrying on new ports");
                }
                Err(status) => panic!("stackhouse exited during start-up with {status}, {ATTEMPTS} times"),
            }
        }
    }

    async fn spawn_once(&mut self) -> Result<(), std::process::ExitStatus> {
        let mut cmd = Command::new(binary());
        cmd.arg("serve")
            .arg("--data-dir")
            .arg(&self.data_dir)
            .arg("--http-addr")
            .arg(format!("127.0.0.1:{}", self.http_port))
            .arg("--grpc-addr")
            .arg(format!("127.0.0.1:{}", self.grpc_port))
            .args(&self.options.extra_args)
            .envs(self.options.env.iter().map(|(k, v)| (k, v)))
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::null());
        // The workloads and captures are from years ago: without this the default 30-day
        // retention would delete them under the test's feet.
        if !self.options.extra_args.iter().any(|a| a == "--retention") {
            cmd.arg("--retention").arg("0");
        }
        if !self.options.extra_args.iter().any(|a| a == "--flush-interval") {
            cmd.arg("--flush-interval").arg("200ms");
        }
        if let Some(c) = &self.options.catalog {
            cmd.arg("--catalog").arg(c);
        }
        if let Some(s) = &self.options.storage {
            cmd.arg("--storage").arg(s);
        }
        let child = cmd.spawn().expect("starting stackhouse");
        self.child = Some(child);
        let client = self.client();
        let ready = wait_ready(&client, &self.http(), self.child.as_mut().unwrap()).await;
        if ready.is_err() {
            self.child = None;
        }
        ready
    }

    /// The running process's id, for signals other than kill.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(std::process::Child::id)
    }

    /// SIGKILL: no flush, no goodbye.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM and wait for a clean exit; returns whether it exited with success.
    pub fn terminate(&mut self) -> bool {
        let Some(mut child) = self.child.take() else {
            return true;
        };
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = child.try_wait().expect("waiting for stackhouse") {
                return status.success();
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Starts the binary again on the same data dir (and catalog/storage).
    /// The flags the next start passes after the fixed ones: a restart with other settings.
    pub fn set_extra_args(&mut self, args: Vec<String>) {
        self.options.extra_args = args;
    }

    pub async fn restart(&mut self) {
        self.kill();
        self.spawn().await;
    }

    pub fn data_path(&self) -> &Path {
        &self.data_dir
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Waits until `/readyz` answers; `Err` with the exit status if the process ended first.
async fn wait_ready(
    client: &reqwest::Client,
    http: &str,
    child: &mut Child,
) -> Result<(), std::process::ExitStatus> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().expect("polling stackhouse") {
            return Err(status);
        }
        if let Ok(r) = client.get(format!("{http}/readyz")).send().await
            && r.status().is_success()
        {
            return Ok(());
        }
        assert!(
            Instant::now() < deadline,
            "stackhouse did not become ready within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
