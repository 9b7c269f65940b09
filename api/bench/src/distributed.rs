//! Queries across query workers: the same flamegraph on 1, 2 and 3 workers (engines of
//! this process serving on loopback ports, as separate query pods would) against the
//! in-process answer, the bytes the workers ship against the bytes they scan, and what a
//! query that stays local pays for having workers configured.
//!
//! Every worker here shares this machine's cores, so the latency rows show the overhead of
//! shipping plans and results, not a speedup.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use stackhouse_query::cluster::{ClusterConfig, WorkerSource};
use stackhouse_query::{Flamegraph, FlamegraphQuery, QueryEngine};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use super::Plan;
use super::env::Env;
use super::measure::median;
use super::report::{Report, Row, mib, ms};

const SECRET: &str = "bench-cluster-secret";

/// Runs the measurements over `env` with `local` as the in-process engine.
pub(crate) async fn measurements(
    plan: &Plan,
    env: &Env,
    local: &QueryEngine,
    query: &FlamegraphQuery,
    label: &str,
    report: &mut Report,
) -> anyhow::Result<()> {
    let expected = answer(local.flamegraph(query).await?);
    let mut stops = Vec::new();
    let mut addrs = Vec::new();
    for _ in 0..3 {
        let (addr, stop) = worker(env.engine(plan.query_budget)).await?;
        addrs.push(addr);
        stops.push(stop);
    }
    let mut shipped_row = None;
    for n in 1..=3 {
        let coordinator = coordinator(env, plan, &addrs[..n], 1).await?;
        let first = coordinator
            .flamegraph(query)
            .await
            .context("distributed flamegraph")?;
        let stats = first.stats.clone().unwrap_or_default();
        if answer(first) != expected {
            bail!("the flamegraph on {n} workers differs from the in-process one");
        }
        let (ours, base) = interleaved(plan.warm_runs, &coordinator, local, query).await?;
        report.rows.push(Row {
            measurement: format!("flamegraph on {n} query worker(s), {label}, same answer"),
            ours: ms(ours),
            baseline: ms(base),
            unit: "ms",
            baseline_name: "in-process".into(),
            target: "same answer; 2 cores: overhead".into(),
            pass: true,
        });
        if n == 3 {
            shipped_row = Some(stats);
        }
    }
    if let Some(stats) = shipped_row {
        // Scanned as the in-process query counts it: the workers read the same pages.
        let scanned = local
            .flamegraph(query)
            .await?
            .stats
            .unwrap_or_default()
            .bytes_scanned;
        let shipped = stats.bytes_shipped.max(1);
        report.rows.push(Row {
            measurement: format!("bytes shipped from 3 workers to the coordinator, {label}"),
            ours: mib(stats.bytes_shipped),
            baseline: mib(scanned),
            unit: "MiB",
            baseline_name: "bytes scanned".into(),
            target: "≥ 100× fewer".into(),
            pass: scanned / shipped >= 100,
        });
    }

    // A query below the task size stays in the coordinator: planning is all it adds.
    let idle = coordinator(env, plan, &addrs, u64::MAX / 2).await?;
    if answer(idle.flamegraph(query).await?) != expected {
        bail!("the local flamegraph of a coordinator differs from the in-process one");
    }
    let (ours, base) = interleaved(plan.warm_runs.max(5), &idle, local, query).await?;
    report.rows.push(Row {
        measurement: format!("flamegraph that stays local with 3 workers configured, {label}"),
        ours: ms(ours),
        baseline: ms(base),
        unit: "ms",
        baseline_name: "no workers configured".into(),
        target: "≤ 1.05×".into(),
        pass: ours.as_secs_f64() <= 1.05 * base.as_secs_f64(),
    });
    report.notes.push(format!(
        "Query workers: 3 engines of this process serving the worker endpoint on loopback ports over \
         the same files and catalog, `--query-distribute-bytes 1` so every scan is shipped; medians of \
         {} warm runs, interleaved with the in-process query. The workers share the machine's cores with \
         the coordinator, so these rows measure overhead, not speedup.",
        plan.warm_runs
    ));
    drop(stops);
    Ok(())
}

/// Median latencies of `query` on `ours` and on `base`, run in turn `runs` times each so
/// that the machine's drift falls on both.
async fn interleaved(
    runs: usize,
    ours: &QueryEngine,
    base: &QueryEngine,
    query: &FlamegraphQuery,
) -> anyhow::Result<(Duration, Duration)> {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let t = Instant::now();
        ours.flamegraph(query).await?;
        a.push(t.elapsed());
        let t = Instant::now();
        base.flamegraph(query).await?;
        b.push(t.elapsed());
    }
    Ok((median(a), median(b)))
}

/// The flamegraph without its scan statistics, which tell how it ran.
fn answer(mut flamegraph: Flamegraph) -> Flamegraph {
    flamegraph.stats = None;
    flamegraph
}

async fn worker(engine: QueryEngine) -> anyhow::Result<(String, oneshot::Sender<()>)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?.to_string();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(async move {
        let shutdown = async {
            let _ = stopped.await;
        };
        if let Err(e) = engine.serve_worker(listener, SECRET.into(), shutdown).await {
            eprintln!("bench: query worker failed: {e}");
        }
    });
    Ok((addr, stop))
}

async fn coordinator(
    env: &Env,
    plan: &Plan,
    addrs: &[String],
    distribute_bytes: u64,
) -> anyhow::Result<QueryEngine> {
    let cluster = ClusterConfig::start(WorkerSource::Fixed(addrs.to_vec()), distribute_bytes, SECRET)
        .await
        .map_err(anyhow::Error::msg)?;
    // A loaded machine may miss the first probe's one-second timeout; the next rounds catch up.
    let deadline = Instant::now() + Duration::from_secs(15);
    while cluster.live_workers().len() < addrs.len() {
        if Instant::now() > deadline {
            bail!("only {:?} of {addrs:?} answer", cluster.live_workers());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(env.engine_with(plan.query_budget, Some(cluster)))
}
