//! A real Prometheus (Debian's package) with its remote-write receiver on, as the recording
//! rule tests push to it, read back over its HTTP API.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::server::free_port;

/// Fails the test, saying how to install it, unless `tool` (`prometheus` or `promtool`)
/// runs.
pub fn require(tool: &str) {
    let found = Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "{tool} is not installed: these tests need Debian's prometheus package \
         (DEBIAN_FRONTEND=noninteractive apt-get install -y -q prometheus)"
    );
}

pub struct Prometheus {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
}

impl Prometheus {
    /// With the remote-write receiver on and out-of-order points accepted, as the
    /// recording rule tests push backfilled points.
    pub fn start() -> Prometheus {
        // Backfilled points are older than what Prometheus already holds of other series.
        Prometheus::with_config::<&str>("storage:\n  tsdb:\n    out_of_order_time_window: 7d\n", &[])
    }

    /// Scraping `targets` (`host:port`) every second, evaluating `rule_files` (copied
    /// beside its configuration) every second.
    pub fn scraping(targets: &[String], rule_files: &[&Path]) -> Prometheus {
        let list: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
        let names: Vec<String> = (0..rule_files.len())
            .map(|i| format!("  - rules-{i}.yaml\n"))
            .collect();
        let config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n{}\
             scrape_configs:\n  - job_name: stackhouse\n    static_configs:\n      - targets: [{}]\n",
            if names.is_empty() {
                "  []\n".to_string()
            } else {
                names.concat()
            },
            list.join(", ")
        );
        let files: Vec<(String, &Path)> = rule_files
            .iter()
            .enumerate()
            .map(|(i, f)| (format!("rules-{i}.yaml"), *f))
            .collect();
        Prometheus::with_config(&config, &files)
    }

    /// `config` as its prometheus.yml, `files` copied beside it under their names.
    pub fn with_config<N: AsRef<str>>(config: &str, files: &[(N, &Path)]) -> Prometheus {
        require("prometheus");
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
        for (name, file) in files {
            std::fs::copy(file, dir.path().join(name.as_ref())).unwrap();
        }
        let mut p = Prometheus {
            child: None,
            port: free_port(),
            dir,
        };
        p.spawn();
        p
    }

    /// A GET of its HTTP API, as JSON.
    pub async fn get(&self, path: &str, query: &[(&str, &str)]) -> Value {
        crate::http_client()
            .get(format!("http://127.0.0.1:{}{path}", self.port))
            .query(query)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    pub fn spawn(&mut self) {
        let child = Command::new("prometheus")
            .arg(format!(
                "--config.file={}",
                self.dir.path().join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                self.dir.path().join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{}", self.port))
            .arg("--web.enable-remote-write-receiver")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting prometheus");
        self.child = Some(child);
    }

    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill").arg(child.id().to_string()).status();
            let _ = child.wait();
        }
    }

    pub fn write_url(&self) -> String {
        format!("http://127.0.0.1:{}/api/v1/write", self.port)
    }

    pub async fn ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let url = format!("http://127.0.0.1:{}/-/ready", self.port);
        while Instant::now() < deadline {
            if let Ok(r) = crate::http_client().get(&url).send().await
                && r.status().is_success()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!("prometheus did not become ready on port {}", self.port);
    }

    /// Every raw point of every series `selector` names over the last `window`, by the
    /// series' labels (without `__name__`): `{ms: value}`.
    pub async fn points(
        &self,
        selector: &str,
        window: &str,
    ) -> BTreeMap<BTreeMap<String, String>, BTreeMap<i64, f64>> {
        let url = format!("http://127.0.0.1:{}/api/v1/query", self.port);
        let body: Value = crate::http_client()
            .get(url)
            .query(&[("query", format!("{selector}[{window}]"))])
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(body["status"], "success", "{body}");
        let mut out = BTreeMap::new();
        for series in body["data"]["result"].as_array().unwrap() {
            let labels: BTreeMap<String, String> = series["metric"]
                .as_object()
                .unwrap()
                .iter()
                .filter(|(k, _)| k.as_str() != "__name__")
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                .collect();
            let points = series["values"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| {
                    let ms = (p[0].as_f64().unwrap() * 1000.0).round() as i64;
                    (ms, p[1].as_str().unwrap().parse::<f64>().unwrap())
                })
                .collect();
            out.insert(labels, points);
        }
        out
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
