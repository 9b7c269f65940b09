//! The fleet workload (`--only fleet`): hosts × pods of many services, every core sampled
//! at 20 Hz on its own cadence, pods replaced daily (so series churn), a share of stacks
//! ending in a frame of their host (so distinct stacks grow with the fleet), and one
//! export per pod per minute, as a collector batches. The store is written through the
//! production path (the receivers' decode and normalize, the writer, compaction with its rollups after every day of
//! data, a retention pass) and, with `--fleet-store DIR`, kept there: a later run with the
//! same size reads it again instead of building it.
//!
//! Sizes 10× apart differ in the days they cover; the fleet is the same. Over the store:
//! the whole range's flamegraph and time series from the tiers against raw samples only
//! and against one hour, label listings, stored bytes per tier, and the build's rate.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::ValueEnum;
use futures::{StreamExt, TryStreamExt};
use prost::Message;
use serde::{Deserialize, Serialize};
use stackhouse_ingest::formats::{self, Body, Params};
use stackhouse_ingest::otlp::layout::Layout;
use stackhouse_ingest::pipeline::{Payload, Pipeline};
use stackhouse_proto::otlp_collector::ExportProfilesServiceRequest;
use stackhouse_query::{Aggregation, QueryEngine, Scope, TimeseriesQuery};
use stackhouse_storage::model::TimeRange;
use stackhouse_storage::retention::{self, RetentionConfig};

use super::env::{Env, TENANT, cpu_type, flamegraph_query};
use super::measure::{cpu_time, median, thread_cpu_time};
use super::report::{Report, Row, mib, ms};
use super::rollups::{answer, speedup_row, tiers_read, timed};
use super::workload::{FleetConfig, Workload};
use super::{HOUR_NANOS, Plan};

/// How much of the fleet's history a store holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
pub enum FleetSize {
    /// One hour of a small fleet: the smoke test's size, seconds in a debug build.
    Tiny,
    /// 7 hours: about 1 M samples.
    S,
    /// 3 days: about 10 M samples.
    M,
    /// 30 days: about 100 M samples, about half an hour to build on two cores.
    L,
}

impl FleetSize {
    fn hours(self) -> i64 {
        match self {
            FleetSize::Tiny => 1,
            FleetSize::S => 7,
            FleetSize::M => 72,
            FleetSize::L => 720,
        }
    }

    /// The fleet over `hours` closed hours ending at `end`.
    fn config(self, seed: u64, end: i64) -> FleetConfig {
        let hours = self.hours();
        fleet(
            self == FleetSize::Tiny,
            end - hours * HOUR_NANOS,
            (hours * 3600) as u64,
            seed,
        )
    }
}

/// The fleet from `start` for `seconds`; `tiny`: a few pods, for smoke tests.
pub(crate) fn fleet(tiny: bool, start: i64, seconds: u64, seed: u64) -> FleetConfig {
    // 50 hosts × 4 pods × 2 cores at 20 Hz, busy 0.5 % of the time on average: 40
    // samples a second, which is what lets a month of 200 pods build in half an hour
    // here. A busier fleet has more samples per series and stack, which only helps
    // the rollups and the per-stack costs measured here.
    let (hosts, pods, busy, services) = if tiny { (4, 2, 0.02, 4) } else { (50, 4, 0.005, 40) };
    FleetConfig {
        services,
        stacks_per_service: 500,
        busy,
        export_nanos: 60_000_000_000,
        cadence: true,
        pod_lifetime_nanos: Some(24 * HOUR_NANOS),
        host_variants: 0.05,
        ..FleetConfig::new(hosts, pods, 2, 20, seconds, start, seed ^ 0xF1EE7)
    }
}

/// Exports in flight at once while a store is built: each waits for the writer's next
/// flush (200 ms), so the build's pace is this many per flush until the CPU is busy.
const IN_FLIGHT: usize = 1024;

/// One export of the fleet as a receiver hands it to the pipeline.
pub(crate) struct Export {
    payload: Payload,
    pub samples: usize,
    pub window_start: i64,
}

/// Export `index` of `workload` (window-major), generated and encoded on a blocking thread,
/// its CPU time added to `generate_nanos`: the generator's, not ingest's.
pub(crate) async fn export(
    workload: Arc<Workload>,
    index: usize,
    generate_nanos: Arc<AtomicU64>,
) -> anyhow::Result<Export> {
    tokio::task::spawn_blocking(move || {
        let before = thread_cpu_time();
        let procs = workload.processes();
        let g = workload.request(index % procs, index / procs);
        let body = bytes::Bytes::from(g.request.encode_to_vec());
        let took = thread_cpu_time().saturating_sub(before).as_nanos() as u64;
        generate_nanos.fetch_add(took, Ordering::Relaxed);
        Export {
            payload: Payload {
                format: &formats::otlp::PROTOBUF,
                sent_bytes: body.len(),
                body: Body::Raw(body),
                // Declared, as a version-aware collector does: an undeclared fleet export
                // can read validly as two layouts, which the receiver refuses to guess.
                params: Params {
                    layout: Some(Layout::V1_10),
                    ..Params::default()
                },
            },
            samples: g.samples,
            window_start: g.window_start,
        }
    })
    .await
    .context("generating task")
}

/// Ingests `export` as the receivers do (decode, normalize against the tenant's stored
/// symbols, write); returns once it is acknowledged, having checked every sample stored.
pub(crate) async fn ingest(pipeline: &Pipeline, export: Export) -> anyhow::Result<()> {
    let exported = pipeline
        .ingest(TENANT.to_string(), export.payload)
        .await
        .context("ingesting")?;
    if exported.stored_samples != export.samples {
        bail!(
            "stored {} samples of an export holding {}",
            exported.stored_samples,
            export.samples
        );
    }
    Ok(())
}

/// What a kept store holds, written beside it once it is built.
#[derive(Serialize, Deserialize)]
struct Manifest {
    size: FleetSize,
    seed: u64,
    start: i64,
    end: i64,
    samples: usize,
    /// Samples per hour, by the hour's start.
    hours: BTreeMap<i64, usize>,
    requests: usize,
    build_seconds: f64,
    build_cpu_seconds: f64,
    compaction_cpu_seconds: f64,
    /// The generator's share of `build_cpu_seconds` (absent from stores built before it
    /// was measured).
    #[serde(default)]
    generate_cpu_seconds: f64,
    series: u64,
}

const MANIFEST: &str = "fleet.json";

/// The fleet store of `size`: read from `dir` when a store of that size and seed is there,
/// else built (in `dir` if given, else in a temporary directory).
async fn store(
    size: FleetSize,
    seed: u64,
    dir: Option<&PathBuf>,
    capture: &ExportProfilesServiceRequest,
) -> anyhow::Result<(Env, Manifest, bool)> {
    if let Some(dir) = dir
        && let Ok(text) = std::fs::read_to_string(dir.join(MANIFEST))
    {
        let manifest: Manifest = serde_json::from_str(&text).context("reading the fleet manifest")?;
        if manifest.size != size || manifest.seed != seed {
            bail!(
                "{} holds the fleet of size {:?}, seed {}; asked for {size:?}, seed {seed}: use another --fleet-store",
                dir.display(),
                manifest.size,
                manifest.seed
            );
        }
        eprintln!("bench: reading the kept fleet store in {}", dir.display());
        return Ok((Env::open_kept(dir).await?, manifest, false));
    }
    let env = match dir {
        Some(dir) => {
            if dir.join("catalog.db").exists() {
                bail!(
                    "{} holds a store without a finished fleet manifest (an interrupted build?): remove it",
                    dir.display()
                );
            }
            Env::open_kept(dir).await?
        }
        None => Env::open().await?,
    };
    let now = stackhouse_storage::clock::system_now_nanos();
    // Closed hours only, the newest an hour back, as compaction would have them.
    let end = now.div_euclid(HOUR_NANOS) * HOUR_NANOS - HOUR_NANOS;
    let workload = Arc::new(Workload::new(size.config(seed, end), capture));
    let manifest = build(&env, size, seed, workload).await?;
    std::fs::write(env.path().join(MANIFEST), serde_json::to_vec_pretty(&manifest)?)
        .context("writing the fleet manifest")?;
    Ok((env, manifest, true))
}

/// Writes every request of `workload` in time order through normalize and the writer,
/// compacting after each day of data as the compactor would, then a retention pass.
async fn build(env: &Env, size: FleetSize, seed: u64, workload: Arc<Workload>) -> anyhow::Result<Manifest> {
    let (start, end) = workload.range_nanos();
    let procs = workload.processes();
    let windows = workload.windows();
    let windows_per_day = (24 * HOUR_NANOS / workload.config().export_nanos) as usize;
    eprintln!(
        "bench: building the {size:?} fleet store: {} requests over {} h",
        procs * windows,
        (end - start) / HOUR_NANOS
    );
    let started = Instant::now();
    let cpu_started = cpu_time();
    let mut compaction_cpu = Duration::ZERO;
    // The generator's own CPU (building and encoding requests), which is not ingest's.
    let generate_nanos = Arc::new(AtomicU64::new(0));
    let mut hours: BTreeMap<i64, usize> = BTreeMap::new();
    let writer = Arc::new(env.writer(Duration::from_millis(200)));
    // The receivers' path: the encoded export decoded, normalized against the symbols the
    // tenant has stored, and written; acknowledged once durable.
    let pipeline = Arc::new(Pipeline::new(writer.clone(), stackhouse_storage::clock::system()));
    for first in (0..windows).step_by(windows_per_day.max(1)) {
        let last = (first + windows_per_day).min(windows);
        let counts: Vec<(i64, usize)> = futures::stream::iter(first * procs..last * procs)
            .map(|i| export(workload.clone(), i, generate_nanos.clone()))
            .buffered(4)
            .map(|export| {
                // On the runtime's workers, as a receiver's requests run: polled from the
                // thread that drives the build, a thousand of them kept it busy waking
                // blocking threads.
                let pipeline = pipeline.clone();
                tokio::spawn(async move {
                    let export = export?;
                    let at = (export.window_start, export.samples);
                    ingest(&pipeline, export).await?;
                    Ok::<_, anyhow::Error>(at)
                })
            })
            .buffer_unordered(IN_FLIGHT)
            .map(|done| done.context("ingest task")?)
            .try_collect()
            .await?;
        for (at, count) in counts {
            *hours.entry(at.div_euclid(HOUR_NANOS) * HOUR_NANOS).or_default() += count;
        }
        let before = cpu_time();
        env.compact().await?;
        compaction_cpu += cpu_time().saturating_sub(before);
        eprintln!(
            "bench: fleet day {} of {} written and compacted, {:.0} s",
            first / windows_per_day.max(1) + 1,
            windows.div_ceil(windows_per_day.max(1)),
            started.elapsed().as_secs_f64()
        );
    }
    writer.shutdown().await;
    // Raw samples kept for the whole store, so that raw-only queries can be compared;
    // the pass runs as the server's does.
    let keep = Duration::from_secs(31 * 24 * 3600);
    let retention = RetentionConfig::uniform(keep);
    retention::run_once(&env.compactor(), &retention)
        .await
        .context("retention")?;
    let series = env.catalog.stats(TENANT).await.context("catalog stats")?.series;
    Ok(Manifest {
        size,
        seed,
        start,
        end,
        samples: hours.values().sum(),
        hours,
        requests: procs * windows,
        build_seconds: started.elapsed().as_secs_f64(),
        build_cpu_seconds: cpu_time().saturating_sub(cpu_started).as_secs_f64(),
        compaction_cpu_seconds: compaction_cpu.as_secs_f64(),
        generate_cpu_seconds: generate_nanos.load(Ordering::Relaxed) as f64 / 1e9,
        series,
    })
}

/// The fleet phase at `size`.
pub(crate) async fn measurements(
    plan: &Plan,
    size: FleetSize,
    dir: Option<&PathBuf>,
    seed: u64,
    capture: &ExportProfilesServiceRequest,
    report: &mut Report,
) -> anyhow::Result<()> {
    let (env, manifest, built) = store(size, seed, dir, capture).await?;
    let hours = (manifest.end - manifest.start) / HOUR_NANOS;
    let label = format!(
        "fleet {size:?} ({hours} h, {:.2} M samples)",
        manifest.samples as f64 / 1e6
    );
    let whole = TimeRange {
        start: manifest.start,
        end: manifest.end,
    };
    let last_hour = TimeRange {
        start: manifest.end - HOUR_NANOS,
        end: manifest.end,
    };
    let count = |range: TimeRange| -> i64 {
        manifest
            .hours
            .range(range.start..range.end)
            .map(|(_, n)| *n as i64)
            .sum()
    };
    let tiers = env.engine(plan.query_budget);
    let raw = env.engine_with_rollups(plan.query_budget, false);

    // Flamegraphs: the whole range against raw samples only and against its last hour.
    let (whole_q, hour_q) = (flamegraph_query(whole), flamegraph_query(last_hour));
    let from_tiers = tiers.flamegraph(&whole_q).await.context("fleet flamegraph")?;
    let from_raw = raw.flamegraph(&whole_q).await.context("fleet flamegraph, raw")?;
    let hour = tiers
        .flamegraph(&hour_q)
        .await
        .context("fleet 1-hour flamegraph")?;
    for (name, got, want) in [
        ("whole range", from_tiers.total, count(whole)),
        ("whole range, raw", from_raw.total, count(whole)),
        ("last hour", hour.total, count(last_hour)),
    ] {
        if got != want {
            bail!("the fleet flamegraph of the {name} counts {got} samples, the generator wrote {want}");
        }
    }
    if answer(&from_tiers)? != answer(&from_raw)? {
        bail!("the fleet flamegraph from the tiers differs from the one over raw samples");
    }
    let (ours, base) = timed(
        plan,
        async || tiers.flamegraph(&whole_q).await.map_err(anyhow::Error::from),
        async || raw.flamegraph(&whole_q).await.map_err(anyhow::Error::from),
    )
    .await?;
    report.rows.push(speedup_row(
        format!("{label}: whole-range flamegraph from the rollup tiers"),
        ours,
        base,
    ));
    let one = median_of(plan, async || {
        tiers.flamegraph(&hour_q).await.map_err(anyhow::Error::from)
    })
    .await?;
    report
        .rows
        .push(against_last_hour(&label, "flamegraph", ours, one));
    report.notes.push(format!(
        "{label}, flamegraph: rows read with the tiers {}; raw only {}; the last hour {}.",
        tiers_read(&from_tiers.stats.clone().unwrap_or_default().rows_by_tier),
        tiers_read(&from_raw.stats.clone().unwrap_or_default().rows_by_tier),
        tiers_read(&hour.stats.clone().unwrap_or_default().rows_by_tier),
    ));

    // Time series, step 1 h.
    let series = |range| TimeseriesQuery {
        scope: Scope::new(TENANT, cpu_type(), range),
        step_nanos: HOUR_NANOS,
        group_by: Vec::new(),
        aggregation: Aggregation::Sum,
    };
    let (whole_s, hour_s) = (series(whole), series(last_hour));
    let total = |t: &stackhouse_query::Timeseries| t.series.iter().map(|g| g.total).sum::<i64>();
    let ours_s = tiers.timeseries(&whole_s).await.context("fleet series")?;
    let raw_s = raw.timeseries(&whole_s).await.context("fleet series, raw")?;
    if total(&ours_s) != count(whole) || answer(&ours_s)? != answer(&raw_s)? {
        bail!(
            "the fleet series sum to {} from the tiers, {} raw; the generator wrote {}",
            total(&ours_s),
            total(&raw_s),
            count(whole)
        );
    }
    let (ours, base) = timed(
        plan,
        async || tiers.timeseries(&whole_s).await.map_err(anyhow::Error::from),
        async || raw.timeseries(&whole_s).await.map_err(anyhow::Error::from),
    )
    .await?;
    report.rows.push(speedup_row(
        format!("{label}: whole-range series (step 1h) from the rollup tiers"),
        ours,
        base,
    ));
    let one = median_of(plan, async || {
        tiers.timeseries(&hour_s).await.map_err(anyhow::Error::from)
    })
    .await?;
    report
        .rows
        .push(against_last_hour(&label, "series (step 1h)", ours, one));

    listing_rows(plan, &tiers, whole, &label, report).await?;
    bytes_rows(&env, &manifest, &label, report).await?;

    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let fleet = size.config(seed, manifest.end);
    report.rows.push(Row {
        measurement: format!(
            "{label}: build CPU per sample (generate, encode, ingest, compact with rollups)"
        ),
        ours: manifest.build_cpu_seconds * 1e9 / manifest.samples.max(1) as f64,
        baseline: manifest.build_seconds * 1e9 * cores as f64 / manifest.samples.max(1) as f64,
        unit: "ns",
        baseline_name: format!("wall time × {cores} cores"),
        target: "(capacity)".into(),
        pass: true,
    });
    // Ingest alone: the build less the generator and the compaction passes (a store built
    // before the generator was measured counts it as ingest).
    let ingest_cpu =
        manifest.build_cpu_seconds - manifest.generate_cpu_seconds - manifest.compaction_cpu_seconds;
    let per_request = manifest.samples as f64 / manifest.requests.max(1) as f64;
    report.rows.push(Row {
        measurement: format!(
            "{label}: ingest CPU per export of {per_request:.1} samples (decode, normalize, write, commit)"
        ),
        ours: ingest_cpu * 1e9 / manifest.requests.max(1) as f64,
        baseline: manifest.compaction_cpu_seconds * 1e9 / manifest.requests.max(1) as f64,
        unit: "ns",
        baseline_name: "compaction with rollups, per export".into(),
        target: "(capacity)".into(),
        pass: true,
    });
    report.notes.push(format!(
        "{label}: {} pods on {} hosts, {} services, cores busy {:.1} % at 20 Hz on their own cadence, one export \
         per pod per minute, pods replaced daily; {} requests, {} series. {} in {:.0} s ({:.0} samples/s, \
         {:.0} s of CPU of which compaction with rollups {:.0} s){}.",
        fleet.hosts * fleet.processes_per_host,
        fleet.hosts,
        fleet.services,
        fleet.busy * 100.0,
        manifest.requests,
        manifest.series,
        if built { "Built" } else { "Read from the kept store; it was built" },
        manifest.build_seconds,
        manifest.samples as f64 / manifest.build_seconds.max(1e-9),
        manifest.build_cpu_seconds,
        manifest.compaction_cpu_seconds,
        dir.map(|d| format!(", kept in {}", d.display())).unwrap_or_default(),
    ));
    Ok(())
}

/// The whole range's `what` against its last hour's: what a longer range may cost.
fn against_last_hour(label: &str, what: &str, ours: Duration, one: Duration) -> Row {
    Row {
        measurement: format!("{label}: whole-range {what} against its last hour"),
        ours: ms(ours),
        baseline: ms(one),
        unit: "ms",
        baseline_name: format!("1-hour {}", what.split(' ').next().unwrap_or(what)),
        target: "≤ 2×".into(),
        pass: ours.as_secs_f64() <= 2.0 * one.as_secs_f64(),
    }
}

/// The median of `plan.warm_runs` runs of `f`.
async fn median_of<F, A>(plan: &Plan, mut f: F) -> anyhow::Result<Duration>
where
    F: AsyncFnMut() -> anyhow::Result<A>,
{
    let mut times = Vec::new();
    for _ in 0..plan.warm_runs {
        let t = Instant::now();
        f().await?;
        times.push(t.elapsed());
    }
    Ok(median(times))
}

/// Label names and the values of `service.name` over the whole store, as Grafana lists them.
async fn listing_rows(
    plan: &Plan,
    engine: &QueryEngine,
    range: TimeRange,
    label: &str,
    report: &mut Report,
) -> anyhow::Result<()> {
    let names = engine.label_names(TENANT, range).await?;
    if !names.iter().any(|n| n == "service.name") {
        bail!("the fleet's label names lack service.name: {names:?}");
    }
    let services = engine.label_values(TENANT, "service.name", range).await?;
    let (names_t, values_t) = timed(
        plan,
        async || {
            engine
                .label_names(TENANT, range)
                .await
                .map_err(anyhow::Error::from)
        },
        async || {
            engine
                .label_values(TENANT, "service.name", range)
                .await
                .map_err(anyhow::Error::from)
        },
    )
    .await?;
    for (what, times, target) in [
        ("label names", names_t, 50.0),
        (
            &*format!("label values of service.name ({} services)", services.len()),
            values_t,
            100.0,
        ),
    ] {
        let ours = times;
        report.rows.push(Row {
            measurement: format!("{label}: {what} over the whole range"),
            ours: ms(ours),
            baseline: target,
            unit: "ms",
            baseline_name: "target".into(),
            target: format!("≤ {target} ms"),
            pass: ms(ours) <= target,
        });
    }
    Ok(())
}

/// Stored bytes per sample in each tier, and how many raw rows each rollup row stands for.
async fn bytes_rows(env: &Env, manifest: &Manifest, label: &str, report: &mut Report) -> anyhow::Result<()> {
    let stats = env.catalog.stats(TENANT).await.context("catalog stats")?;
    let samples = manifest.samples.max(1) as f64;
    let table = |kind: &str| stats.tables.get(kind).cloned().unwrap_or_default();
    let total: u64 = stats.tables.values().map(|t| t.bytes).sum();
    let raw = table("samples");
    report.rows.push(Row {
        measurement: format!("{label}: stored bytes per sample, every table"),
        ours: total as f64 / samples,
        baseline: 3.0,
        unit: "B",
        baseline_name: "target".into(),
        target: "≤ 3 B".into(),
        pass: total as f64 / samples <= 3.0,
    });
    for kind in ["rollup_1m", "rollup_1h"] {
        let t = table(kind);
        report.rows.push(Row {
            measurement: format!("{label}: stored bytes per sample, {kind}"),
            ours: t.bytes as f64 / samples,
            baseline: raw.bytes as f64 / samples,
            unit: "B",
            baseline_name: "raw samples".into(),
            target: "< raw".into(),
            pass: t.bytes < raw.bytes,
        });
    }
    let rows = |kind: &str| table(kind).rows;
    report.notes.push(format!(
        "{label}, stored: {:.1} MiB in {} segments; raw {} rows ({:.2} B/sample), 1m tier {} rows ({:.1} raw rows \
         each), 1h tier {} rows ({:.1} raw rows each), its totals over stacks {} rows; tables (MiB): {}.",
        mib(total),
        stats.segments,
        raw.rows,
        raw.bytes as f64 / samples,
        rows("rollup_1m"),
        raw.rows as f64 / rows("rollup_1m").max(1) as f64,
        rows("rollup_1h"),
        raw.rows as f64 / rows("rollup_1h").max(1) as f64,
        rows("totals_1h"),
        stats
            .tables
            .iter()
            .map(|(k, t)| format!("{k} {:.2}", mib(t.bytes)))
            .collect::<Vec<_>>()
            .join(", "),
    ));
    Ok(())
}
