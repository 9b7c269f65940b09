//! Query pods under CPU quotas: the `stackhouse` binary as real processes over one store
//! and catalog, each in a cgroup of its own with a pod's CPU limit, so that N workers have
//! N times the CPU of one whatever the machine's core count. Coordinator N hands its scans
//! to workers 1..=N (`--query-distribute-bytes 1`: one task per worker); with one worker
//! the planner keeps the single task in the coordinator, so N = 1 is one pod's CPU. The
//! flamegraph, the time series and the top functions over the store's whole raw range
//! (`--query-rollups false`) are asked of each coordinator in turn, and their answers
//! (statistics aside) must be the same bytes at every N.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use stackhouse_storage::model::TimeRange;

use super::Plan;
use super::api::Total;
use super::cgroup::CpuGroup;
use super::env::{Env, TENANT, cpu_type};
use super::measure::median;
use super::report::{Report, Row, ms};

const SECRET: &str = "bench-pods-secret";
/// The most workers a coordinator is measured with.
const MAX_WORKERS: usize = 4;

/// One `stackhouse serve --role query` process in its own CPU cgroup.
struct Pod {
    child: Child,
    /// Declared after `child`, so the group is removed once the process is gone.
    _group: CpuGroup,
    http: String,
    worker_addr: String,
}

impl Pod {
    async fn start(env: &Env, name: &str, quota: (f64, Duration), workers: &[String]) -> anyhow::Result<Pod> {
        let group = CpuGroup::create(name, quota.0, quota.1).context("a CPU quota for the query pods")?;
        let (http_port, grpc_port, worker_port) = (free_port()?, free_port()?, free_port()?);
        let worker_addr = format!("127.0.0.1:{worker_port}");
        let mut cmd = Command::new(binary()?);
        cmd.arg("serve")
            .args(env.serve_flags())
            .args(["--role", "query", "--query-rollups", "false"])
            .args(["--http-addr", &format!("127.0.0.1:{http_port}")])
            .args(["--grpc-addr", &format!("127.0.0.1:{grpc_port}")])
            .args(["--query-worker-addr", &worker_addr])
            .args(["--query-cluster-secret", SECRET])
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        if !workers.is_empty() {
            cmd.args(["--query-workers", &workers.join(",")])
                .args(["--query-distribute-bytes", "1"]);
        }
        let mut child = cmd.spawn().context("starting stackhouse")?;
        if let Err(e) = group.add(child.id()) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
        let pod = Pod {
            child,
            _group: group,
            http: format!("http://127.0.0.1:{http_port}"),
            worker_addr,
        };
        pod.wait_ready().await?;
        Ok(pod)
    }

    async fn wait_ready(&self) -> anyhow::Result<()> {
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(120);
        while Instant::now() < deadline {
            if let Ok(r) = client.get(format!("{}/readyz", self.http)).send().await
                && r.status().is_success()
            {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!("the query pod at {} was not ready within 120 s", self.http)
    }

    /// User + system CPU time the process has used (from `/proc/<pid>/stat`).
    fn cpu(&self) -> anyhow::Result<Duration> {
        let path = format!("/proc/{}/stat", self.child.id());
        let stat = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
        // The fields after the command name, which is in parentheses and may hold spaces.
        let rest = stat.rsplit_once(')').map(|(_, r)| r).context("a stat line")?;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks: u64 = fields[11].parse::<u64>()? + fields[12].parse::<u64>()?;
        // SAFETY: sysconf only reads a configuration value.
        #[allow(unsafe_code)]
        let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
        Ok(Duration::from_nanos(ticks * 1_000_000_000 / per_second))
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `stackhouse` binary built beside this one: `STACKHOUSE_BIN`, else the target
/// directory this executable runs from (`target/release/` for the bench binary,
/// `target/debug/deps/` for its tests).
fn binary() -> anyhow::Result<PathBuf> {
    if let Some(bin) = std::env::var_os("STACKHOUSE_BIN") {
        return Ok(bin.into());
    }
    let exe = std::env::current_exe().context("locating this executable")?;
    let candidates: Vec<PathBuf> = exe
        .ancestors()
        .skip(1)
        .take(2)
        .map(|dir| dir.join("stackhouse"))
        .collect();
    candidates.iter().find(|p| p.is_file()).cloned().with_context(|| {
        format!(
            "the query pods run the stackhouse binary, which is not at {candidates:?}: build it with \
             `cargo build --release --bin stackhouse` (or set STACKHOUSE_BIN)"
        )
    })
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The three reads measured, as REST paths over `range`.
fn reads(range: TimeRange) -> Vec<(&'static str, String)> {
    let scope = format!(
        "profile_type={}&from={}&to={}",
        cpu_type().id(),
        range.start,
        range.end
    );
    // About 300 points, whole seconds.
    let step = ((range.end - range.start) / 300 / 1_000_000_000).max(1);
    vec![
        ("flamegraph", format!("/api/v1/flamegraph?{scope}")),
        ("time series", format!("/api/v1/timeseries?{scope}&step={step}s")),
        ("top functions", format!("/api/v1/top?{scope}&limit=100")),
    ]
}

/// The answer of `path` without its statistics (which say where it ran), as bytes.
async fn answer(client: &reqwest::Client, pod: &Pod, path: &str) -> anyhow::Result<Vec<u8>> {
    let response = client
        .get(format!("{}{path}", pod.http))
        .header("X-Scope-OrgID", TENANT)
        .send()
        .await?;
    let status = response.status();
    let body = response.bytes().await?;
    if !status.is_success() {
        bail!("{path}: {status}: {}", String::from_utf8_lossy(&body));
    }
    // `stats` is every answer's last field, and `,"stats":` cannot occur inside a JSON
    // string (its quotes would be escaped). Cut as text: a deep tree is more levels than
    // serde_json parses into a `Value`.
    let mut body = body.to_vec();
    if let Some(at) = body.windows(9).rposition(|w| w == br#","stats":"#) {
        body.truncate(at);
        body.push(b'}');
    }
    Ok(body)
}

/// Runs the quota phase over `env`, which holds `samples` samples over `range`.
pub(crate) async fn measurements(
    plan: &Plan,
    env: &Env,
    range: TimeRange,
    samples: usize,
    report: &mut Report,
) -> anyhow::Result<()> {
    let cores = plan.pod_cores;
    let quota = (cores, plan.pod_cpu_period);
    let mut workers = Vec::new();
    for i in 1..=MAX_WORKERS {
        workers.push(Pod::start(env, &format!("worker-{i}"), quota, &[]).await?);
    }
    let addrs: Vec<String> = workers.iter().map(|w| w.worker_addr.clone()).collect();
    let mut coordinators = Vec::new();
    for n in 1..=MAX_WORKERS {
        coordinators.push(Pod::start(env, &format!("coordinator-{n}"), quota, &addrs[..n]).await?);
    }
    // Every coordinator probes its workers each second; wait until each lists them all.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let client = reqwest::Client::new();
    let reads = reads(range);

    // Same answer everywhere, and the flamegraph counts every generated sample.
    for (name, path) in &reads {
        let expected = answer(&client, &coordinators[0], path).await?;
        if *name == "flamegraph" {
            // Into a struct without the tree: serde_json skips it without recursing.
            let total = serde_json::from_slice::<Total>(&expected)?.total;
            if total != samples as i64 {
                bail!("the flamegraph counts {total} samples, {samples} were generated");
            }
        }
        for (i, coordinator) in coordinators.iter().enumerate().skip(1) {
            if answer(&client, coordinator, path).await? != expected {
                bail!("the {name} on {} workers differs from the one on 1", i + 1);
            }
        }
    }

    // Interleaved: each round asks every coordinator every read once.
    let mut times = vec![vec![Vec::new(); MAX_WORKERS]; reads.len()];
    for _ in 0..plan.warm_runs {
        for (n, coordinator) in coordinators.iter().enumerate() {
            for (r, (_, path)) in reads.iter().enumerate() {
                let t = Instant::now();
                answer(&client, coordinator, path).await?;
                times[r][n].push(t.elapsed());
            }
        }
    }
    let label = format!("{:.2} M raw samples", samples as f64 / 1e6);
    for (r, (name, _)) in reads.iter().enumerate() {
        let one = median(times[r][0].clone());
        for n in 2..=MAX_WORKERS {
            let ours = median(times[r][n - 1].clone());
            let speedup = one.as_secs_f64() / ours.as_secs_f64();
            let (target, pass) = match n {
                2 => ("≥ 1.7× faster".to_string(), speedup >= 1.7),
                4 => ("≥ 3.2× faster".to_string(), speedup >= 3.2),
                _ => ("(between)".to_string(), true),
            };
            report.rows.push(Row {
                measurement: format!("{name} on {n} query pods of {cores} core each, {label}, same answer"),
                ours: ms(ours),
                baseline: ms(one),
                unit: "ms",
                baseline_name: "1 pod".into(),
                target,
                pass,
            });
        }
    }

    // Where the CPU goes with every worker: the coordinator's part is what does not
    // shrink with more workers.
    let runs = plan.warm_runs.max(3);
    let last = &coordinators[MAX_WORKERS - 1];
    for (name, path) in &reads {
        let before: Vec<Duration> = workers.iter().map(Pod::cpu).collect::<Result<_, _>>()?;
        let coordinator_before = last.cpu()?;
        let started = Instant::now();
        for _ in 0..runs {
            answer(&client, last, path).await?;
        }
        let wall = started.elapsed() / runs as u32;
        let coordinator = last.cpu()?.saturating_sub(coordinator_before) / runs as u32;
        let worker_cpu: Duration = workers
            .iter()
            .zip(&before)
            .map(|(w, b)| w.cpu().map(|now| now.saturating_sub(*b)))
            .sum::<Result<Duration, _>>()?
            / runs as u32;
        let share = coordinator.as_secs_f64() / (coordinator + worker_cpu).as_secs_f64().max(1e-9);
        report.rows.push(Row {
            measurement: format!(
                "{name}: the coordinator's CPU per query with {MAX_WORKERS} workers, {label}"
            ),
            ours: ms(coordinator),
            baseline: ms(coordinator + worker_cpu),
            unit: "ms",
            baseline_name: "CPU of every pod".into(),
            target: "(the part workers cannot take)".into(),
            pass: true,
        });
        report.notes.push(format!(
            "Query pods, {name} with {MAX_WORKERS} workers: {:.1} ms wall per query, the coordinator {:.1} ms of CPU \
             ({:.0} % of all the pods' CPU; at {cores} core that is {:.1} ms of its wall time), the workers {:.1} ms \
             together; {runs} queries.",
            ms(wall),
            ms(coordinator),
            share * 100.0,
            ms(coordinator) / cores,
            ms(worker_cpu),
        ));
    }
    report.notes.push(format!(
        "Query pods: the stackhouse binary as {MAX_WORKERS} workers and {MAX_WORKERS} coordinators (the N-th \
         handing its scans to workers 1..N, one task each; with one worker the planner keeps the task in the \
         coordinator, so N = 1 is one pod alone), each process in its own CPU cgroup of {cores} core \
         (CFS quota over a {} ms period), `--role query --query-rollups false` over the store's files and \
         SQLite catalog; the whole range of {samples} samples read raw. Answers (statistics aside) checked \
         byte-equal at every N before timing; medians of {} interleaved rounds.",
        plan.pod_cpu_period.as_millis(),
        plan.warm_runs
    ));
    drop(coordinators);
    drop(workers);
    Ok(())
}
