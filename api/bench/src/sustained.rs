//! Sustained ingest (`--only sustained`): the fleet's exports sent as they fall due, for
//! minutes of wall time, through the receivers' pipeline, while the compactor's maintenance
//! (compaction with its rollups, retention, cleanup) runs beside them as a server runs it.
//! The store's clock runs `speed` times faster than the wall, so that within the run hours
//! close and are compacted into blocks with rollups, and raw samples age out.
//!
//! Reported: CPU per sample of ingest and maintenance together (the generator's own CPU
//! left out) against prost's decode of the same exports, acknowledgement latency, resident
//! memory over the run, and the level-0 backlog; and the store's total at the end against
//! what was acknowledged.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::StreamExt;
use prost::Message;
use stackhouse_ingest::pipeline::Pipeline;
use stackhouse_proto::otlp_collector::ExportProfilesServiceRequest;
use stackhouse_storage::clock::{Clock, SharedClock};
use stackhouse_storage::compaction::CompactionConfig;
use stackhouse_storage::maintenance::{self, MaintenanceConfig};
use stackhouse_storage::model::TimeRange;
use stackhouse_storage::per_tenant::PerTenant;
use stackhouse_storage::retention::RetentionConfig;
use stackhouse_storage::writer::WriterConfig;
use tokio::sync::watch;

use super::env::{Env, TENANT, flamegraph_query};
use super::fleet::{self, export, ingest};
use super::ingest::latency_rows;
use super::measure::{cpu_time, rss};
use super::report::{Report, Row, mib};
use super::workload::Workload;
use super::{HOUR_NANOS, Plan};

/// A clock that starts at `start` and runs `speed` times as fast as the wall.
#[derive(Debug)]
struct FastClock {
    wall: Instant,
    start: i64,
    speed: u32,
}

impl Clock for FastClock {
    fn now_nanos(&self) -> i64 {
        let elapsed = i64::try_from(self.wall.elapsed().as_nanos()).unwrap_or(i64::MAX);
        self.start
            .saturating_add(elapsed.saturating_mul(i64::from(self.speed)))
    }
}

/// One look at the store while the load runs.
#[derive(Clone, Copy, Debug)]
struct Probe {
    at: Duration,
    rss: u64,
    level0: usize,
}

pub(crate) async fn measurements(
    plan: &Plan,
    tiny: bool,
    capture: &ExportProfilesServiceRequest,
    report: &mut Report,
) -> anyhow::Result<()> {
    let (run, speed) = (plan.sustained_run, plan.sustained_speed);
    let label = if run >= Duration::from_secs(60) {
        format!(
            "sustained ingest, {:.0} min at {speed}× time",
            run.as_secs_f64() / 60.0
        )
    } else {
        format!("sustained ingest, {} s at {speed}× time", run.as_secs())
    };
    // The data starts at the top of an hour, as much past as the run covers, so that the
    // clock ends near the wall's now.
    let data_span = run.as_nanos() as i64 * i64::from(speed);
    let now = stackhouse_storage::clock::system_now_nanos();
    let start = (now - data_span).div_euclid(HOUR_NANOS) * HOUR_NANOS;
    let clock: SharedClock = Arc::new(FastClock {
        wall: Instant::now(),
        start,
        speed,
    });
    let config = fleet::fleet(
        tiny,
        start,
        (data_span / 1_000_000_000) as u64,
        plan.seed ^ 0x5057,
    );
    let workload = Arc::new(Workload::new(config, capture));
    let env = Env::open().await?;
    let writer = Arc::new(env.writer_with(WriterConfig {
        clock: clock.clone(),
        ..WriterConfig::default()
    }));
    let pipeline = Arc::new(Pipeline::new(writer.clone(), clock.clone()));
    let maintenance_config = maintenance_config(speed);
    let (stop, stopped) = watch::channel(false);
    let maintenance = tokio::spawn(maintenance::run(
        env.store.clone(),
        env.catalog.clone(),
        env.catalog.clone(),
        maintenance_config.clone(),
        clock.clone(),
        stopped,
    ));

    let procs = workload.processes();
    let export_nanos = workload.config().export_nanos;
    let generate_nanos = Arc::new(AtomicU64::new(0));
    let cpu_before = cpu_time();
    let started = Instant::now();
    let mut probes = Vec::new();
    let mut latencies = Vec::new();
    let mut acknowledged = 0usize;
    let mut next_probe = Duration::ZERO;
    let mut late = Duration::ZERO;
    let mut windows = tokio::task::JoinSet::new();
    for window in 0..workload.windows() {
        // A window's exports are sent when it closes, as collectors flush their batches,
        // whether or not earlier ones are acknowledged yet.
        let due = start + (window as i64 + 1) * export_nanos;
        let wait = due - clock.now_nanos();
        if wait > 0 {
            tokio::time::sleep(Duration::from_nanos((wait / i64::from(speed)) as u64)).await;
        } else {
            late = late.max(Duration::from_nanos((-wait / i64::from(speed)) as u64));
        }
        let (workload, pipeline, generate_nanos) =
            (workload.clone(), pipeline.clone(), generate_nanos.clone());
        windows.spawn(async move {
            let pipeline = &pipeline;
            futures::stream::iter(window * procs..(window + 1) * procs)
                .map(|i| export(workload.clone(), i, generate_nanos.clone()))
                .buffered(4)
                .map(|export| async move {
                    let export = export?;
                    let samples = export.samples;
                    let t0 = Instant::now();
                    ingest(pipeline, export).await?;
                    Ok::<_, anyhow::Error>((samples, t0.elapsed()))
                })
                .buffer_unordered(64)
                .collect::<Vec<_>>()
                .await
        });
        if started.elapsed() >= next_probe {
            probes.push(probe(&env, started.elapsed()).await?);
            next_probe += run / 20;
        }
    }
    while let Some(sent) = windows.join_next().await {
        for result in sent.context("sending task")? {
            let (samples, latency) = result?;
            acknowledged += samples;
            latencies.push(latency);
        }
    }
    let cpu = cpu_time().saturating_sub(cpu_before);
    let wall = started.elapsed();
    probes.push(probe(&env, wall).await?);
    writer.shutdown().await;
    let _ = stop.send(true);
    maintenance.await.context("maintenance task")?;
    let generated = Duration::from_nanos(generate_nanos.load(Ordering::Relaxed));
    let ingest_cpu = cpu.saturating_sub(generated);

    // Nothing acknowledged is lost: the whole run's flamegraph, from whatever tiers
    // retention left, sums to what the generator counted into acknowledged exports.
    let engine = env.engine(plan.query_budget);
    let whole = TimeRange {
        start,
        end: start + data_span + HOUR_NANOS,
    };
    let flamegraph = engine
        .flamegraph(&flamegraph_query(whole))
        .await
        .context("the sustained store's flamegraph")?;
    if flamegraph.total != acknowledged as i64 {
        bail!(
            "after the sustained run the store holds {} samples; {acknowledged} were acknowledged",
            flamegraph.total
        );
    }
    let segments = env.catalog.segments(TENANT, TimeRange::ALL).await?;
    let (raw_gone, blocks) = (
        segments
            .iter()
            .filter(|s| !s.has(stackhouse_storage::rollup::Resolution::Raw))
            .count(),
        segments.iter().filter(|s| s.level >= 2).count(),
    );
    // Hour blocks are written once an hour has closed; raw samples go once a block is
    // past raw retention: a run long enough for them must show both.
    let hours = data_span / HOUR_NANOS;
    if (hours >= 2 && blocks == 0) || (hours > RAW_HOURS as i64 + 1 && raw_gone == 0) {
        bail!(
            "the sustained run left {blocks} hour blocks, {raw_gone} of them past raw retention: \
             compaction and retention did not run over it"
        );
    }

    let decode = prost_decode(&workload, 2000.min(workload.request_count()));
    let per_sample = |d: Duration, n: usize| d.as_nanos() as f64 / n.max(1) as f64;
    report.rows.push(Row {
        measurement: format!(
            "{label}: CPU per sample, ingest with compaction, rollups and retention running"
        ),
        ours: per_sample(ingest_cpu, acknowledged),
        baseline: decode,
        unit: "ns",
        baseline_name: "prost decode of the same exports".into(),
        target: "(capacity)".into(),
        pass: true,
    });
    latencies.sort();
    report.rows.extend(latency_rows(
        &latencies,
        WriterConfig::default().flush_interval,
        |q| format!("{label}: acknowledgement latency {q}"),
    ));
    // Memory is flat when the last quarter's peak is no higher than the second quarter's
    // (the first holds the start-up: caches filling, the first compactions).
    let quarter = |q: u32| {
        probes
            .iter()
            .filter(|p| p.at >= wall * q / 4 && p.at <= wall * (q + 1) / 4)
            .map(|p| p.rss)
            .max()
            .unwrap_or(0)
    };
    let (second, last) = (quarter(1), quarter(3));
    report.rows.push(Row {
        measurement: format!("{label}: resident memory, peak of the last quarter of the run"),
        ours: mib(last),
        baseline: mib(second),
        unit: "MiB",
        baseline_name: "peak of the second quarter".into(),
        target: "≤ 1.2×".into(),
        pass: (last as f64) <= 1.2 * second as f64,
    });
    // A level-0 segment alone in its minute window waits for its hour block; at one flush
    // per window or less, an hour's flushes can wait at once. More than that (plus the
    // merge threshold) would be compaction falling behind.
    let policy = &maintenance_config.compaction.policy;
    let flush_data = WriterConfig::default().flush_interval * speed;
    let per_hour = policy.top_window.as_secs_f64() / flush_data.max(policy.l1_window).as_secs_f64();
    let bound = per_hour.ceil() as usize + policy.max_segments;
    let backlog = probes.iter().map(|p| p.level0).max().unwrap_or(0);
    report.rows.push(Row {
        measurement: format!("{label}: level-0 segments waiting, most seen"),
        ours: backlog as f64,
        baseline: bound as f64,
        unit: "segments",
        baseline_name: "an hour's flushes + the merge threshold".into(),
        target: "≤ 1×".into(),
        pass: backlog <= bound,
    });
    // Every hour that closed and settled early enough for a few compaction passes has its
    // hour block (or, past raw retention, the rollups a block left).
    let end_clock = clock.now_nanos();
    let margin = policy.settle.as_nanos() as i64
        + 10 * (maintenance_config.compaction.interval * speed).as_nanos() as i64;
    let closed: Vec<i64> = (0..)
        .map(|h| start + h * HOUR_NANOS)
        .take_while(|&h| h + HOUR_NANOS + margin <= end_clock && h < start + data_span)
        .collect();
    let unblocked = closed
        .iter()
        .filter(|&&h| {
            !segments
                .iter()
                .any(|s| s.level >= 2 && s.min_time < h + HOUR_NANOS && s.max_time >= h)
        })
        .count();
    report.rows.push(Row {
        measurement: format!("{label}: closed hours without their hour block at the end"),
        ours: unblocked as f64,
        baseline: closed.len() as f64,
        unit: "hours",
        baseline_name: "hours closed".into(),
        target: "none".into(),
        pass: unblocked == 0,
    });
    report.notes.push(format!(
        "{label}: {} exports of {} pods ({} samples, {:.0} a second of wall time) in {:.0} s; CPU {:.1} s of which \
         the generator {:.1} s, so {:.0} samples per second per core of ingest with maintenance; sends ran at most \
         {:.1} s behind; at the end {} segments ({blocks} hour blocks, {raw_gone} past raw retention); resident \
         memory {} MiB at the first probe, {} MiB at the last; level-0 segments per probe: {}.",
        latencies.len(),
        procs,
        acknowledged,
        acknowledged as f64 / wall.as_secs_f64(),
        wall.as_secs_f64(),
        cpu.as_secs_f64(),
        generated.as_secs_f64(),
        acknowledged as f64 / ingest_cpu.as_secs_f64().max(1e-9),
        late.as_secs_f64(),
        segments.len(),
        probes.first().map_or(0.0, |p| mib(p.rss)).round(),
        probes.last().map_or(0.0, |p| mib(p.rss)).round(),
        probes.iter().map(|p| p.level0.to_string()).collect::<Vec<_>>().join(" "),
    ));
    Ok(())
}

/// The server's maintenance over the fast clock. Its policy's ages and windows are read on
/// that clock and stay as they are: an hour block is still written an hour and a minute
/// after its hour began, of data time. How often each task looks for work is wall time,
/// so those intervals are divided by the speed (to at least 200 ms): per hour of data,
/// compaction, retention and cleanup run as often as a server's would. The compactor's
/// lease expires on the fast clock, so its term is stretched by the speed. Raw samples
/// age out after 3 hours of data and minute rollups after 6.
fn maintenance_config(speed: u32) -> MaintenanceConfig {
    let defaults = MaintenanceConfig::default();
    let scaled = |d: Duration| (d / speed).max(Duration::from_millis(200));
    let hours = |h: u64| PerTenant::uniform(Duration::from_secs(h * 3600));
    MaintenanceConfig {
        compaction: CompactionConfig {
            interval: scaled(defaults.compaction.interval),
            lease_ttl: defaults.compaction.lease_ttl * speed,
            ..CompactionConfig::default()
        },
        retention: RetentionConfig {
            raw: hours(RAW_HOURS),
            minute: hours(6),
            hour: RetentionConfig::default().hour,
        },
        retention_interval: scaled(defaults.retention_interval),
        cleanup_interval: scaled(defaults.cleanup_interval),
        ..defaults
    }
}

/// Raw retention of the run, in hours of data.
const RAW_HOURS: u64 = 3;

async fn probe(env: &Env, at: Duration) -> anyhow::Result<Probe> {
    let segments = env
        .catalog
        .segments(TENANT, TimeRange::ALL)
        .await
        .context("listing segments")?;
    Ok(Probe {
        at,
        rss: rss(),
        level0: segments.iter().filter(|s| s.level == 0).count(),
    })
}

/// prost's decode of the first `n` exports, in nanoseconds per sample: the best of three
/// passes.
fn prost_decode(workload: &Workload, n: usize) -> f64 {
    let bodies: Vec<(Vec<u8>, usize)> = (0..n)
        .map(|i| {
            let g = workload.request(i % workload.processes(), i / workload.processes());
            (g.request.encode_to_vec(), g.samples)
        })
        .collect();
    let samples: usize = bodies.iter().map(|(_, n)| n).sum();
    (0..3)
        .map(|_| {
            let t0 = cpu_time();
            for (body, _) in &bodies {
                let decoded =
                    ExportProfilesServiceRequest::decode(body.as_slice()).expect("our own encoding");
                std::hint::black_box(decoded);
            }
            cpu_time().saturating_sub(t0).as_nanos() as f64 / samples.max(1) as f64
        })
        .fold(f64::INFINITY, f64::min)
}
