//! Measurements of the read path: flamegraph latency against bare DataFusion over the same
//! files, the cost of a 30-day store for a 1-hour query, and query memory.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use datafusion::arrow::array::AsArray;
use datafusion::arrow::datatypes::Int64Type;
use datafusion::functions_aggregate::expr_fn::sum;
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext, col};
use futures::{StreamExt, TryStreamExt};
use stackhouse_ingest::otlp::normalize::normalize;
use stackhouse_proto::otlp_collector::ExportProfilesServiceRequest;
use stackhouse_storage::model::{Batch, TimeRange};

use super::env::{Env, TENANT, flamegraph_query, middle_quarter};
use super::measure::{cpu_time, median, peak_rss, reset_peak, rss};
use super::report::{Report, Row, mib, ms};
use super::workload::Workload;
use super::{HOUR_NANOS, Plan};
use super::{api, duckdb};
use stackhouse_storage::clock::system_now_nanos as now_nanos;

const BARE_SQL: &str = "SELECT stack_id, SUM(value) FROM samples GROUP BY stack_id";

/// The baseline of the flamegraph figures: [`BARE_SQL`] over the samples files of a time
/// range, in a fresh DataFusion context.
pub(crate) struct BareScan {
    ctx: SessionContext,
    /// How many samples files it reads.
    pub files: usize,
}

impl BareScan {
    pub(crate) async fn over(env: &Env, range: TimeRange) -> anyhow::Result<BareScan> {
        let files = env.sample_files(range).await?;
        let partitions = std::thread::available_parallelism().map_or(1, |n| n.get());
        let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(partitions));
        let table = ctx
            .read_parquet(files.clone(), ParquetReadOptions::default())
            .await
            .context("registering the samples files")?;
        ctx.register_table("samples", table.into_view())?;
        Ok(BareScan {
            ctx,
            files: files.len(),
        })
    }

    /// Runs the aggregation; returns the summed values.
    pub(crate) async fn total(&self) -> anyhow::Result<i64> {
        // The DataFrame form of BARE_SQL (the SQL frontend is not compiled in). No time
        // filter: the files are the segments of the range, whose totals the caller checks.
        let batches = self
            .ctx
            .table("samples")
            .await?
            .aggregate(vec![col("stack_id")], vec![sum(col("value"))])?
            .collect()
            .await?;
        Ok(batches
            .iter()
            .flat_map(|b| b.column(1).as_primitive::<Int64Type>().iter().flatten())
            .sum())
    }
}

/// The flamegraph over the HTTP API (JSON, default `max_nodes`, the whole answer read)
/// against DuckDB's `GROUP BY stack_id` over the same samples files; left out, with the
/// reason printed and noted, only when DuckDB cannot be installed.
async fn duckdb_measurement(
    plan: &Plan,
    env: &Env,
    range: TimeRange,
    samples: usize,
    report: &mut Report,
) -> anyhow::Result<()> {
    if let Err(reason) = duckdb::setup() {
        eprintln!("bench: the DuckDB rows are left out: {reason}");
        report.notes.push(format!("DuckDB rows left out: {reason}."));
        return Ok(());
    }
    let files = env.sample_files(range).await?;
    // DuckDB counts what the middle quarter holds.
    let part = middle_quarter(range);
    let duck = duckdb::measure(&files, plan.warm_runs, (part.start, part.end)).context("DuckDB baseline")?;
    if duck.total != samples as i64 {
        bail!(
            "DuckDB sums {} over the samples files, {samples} samples were generated",
            duck.total
        );
    }
    let served = api::Served::start(env).await?;
    let client = reqwest::Client::new();
    let measured = async {
        let total = api::http_flamegraph_total(&client, &served.base, range).await?;
        if total != samples as i64 {
            bail!("the HTTP flamegraph counts {total} samples, {samples} were generated");
        }
        let part_total = api::http_flamegraph_total(&client, &served.base, part).await?;
        if part_total != duck.part_total {
            bail!(
                "the HTTP flamegraph of part of the range counts {part_total} samples, DuckDB {}",
                duck.part_total
            );
        }
        let (mut whole, mut parts) = (Vec::new(), Vec::new());
        for _ in 0..plan.warm_runs {
            let t = Instant::now();
            api::http_flamegraph_total(&client, &served.base, range).await?;
            whole.push(t.elapsed());
            let t = Instant::now();
            api::http_flamegraph_total(&client, &served.base, part).await?;
            parts.push(t.elapsed());
        }
        anyhow::Ok((median(whole), median(parts)))
    }
    .await;
    served.stop().await;
    let (http, http_part) = measured.context("HTTP flamegraph")?;
    report.rows.push(Row {
        measurement: format!(
            "flamegraph over the HTTP API (JSON, default max_nodes), {:.2} M samples",
            samples as f64 / 1e6
        ),
        ours: ms(http),
        baseline: ms(duck.group_by),
        unit: "ms",
        baseline_name: format!("DuckDB {} GROUP BY stack_id", duck.version),
        target: "≤ 1.0×".into(),
        pass: http <= duck.group_by,
    });
    report.rows.push(Row {
        measurement: format!(
            "flamegraph over the HTTP API, a range holding {:.1} % of the {:.2} M samples",
            100.0 * duck.part_total as f64 / samples as f64,
            samples as f64 / 1e6
        ),
        ours: ms(http_part),
        baseline: ms(http),
        unit: "ms",
        baseline_name: "the whole range".into(),
        target: "≤ 0.35×".into(),
        pass: http_part.as_secs_f64() <= 0.35 * http.as_secs_f64(),
    });
    report.notes.push(format!(
        "DuckDB {} (Python package, 2 threads) over the same {} samples files: `GROUP BY stack_id` \
         ({} stacks, one row handed back) {:.1} ms, `SELECT sum(value)` {:.1} ms; medians of {} \
         warm runs timed inside Python.",
        duck.version,
        files.len(),
        duck.groups,
        ms(duck.group_by),
        ms(duck.sum),
        plan.warm_runs,
    ));
    Ok(())
}

/// Our flamegraph over `range` against the bare aggregation over the same files; with
/// `memory_row`, also the process peak memory during our queries against the budget.
pub(crate) async fn flamegraph_measurement(
    plan: &Plan,
    env: &Env,
    range: TimeRange,
    samples: usize,
    memory_row: bool,
    report: &mut Report,
) -> anyhow::Result<()> {
    let engine = env.engine(plan.query_budget);
    let query = flamegraph_query(range);
    let bare = BareScan::over(env, range).await?;
    let files = bare.files;
    // Warm: the engine loads the tenant's symbols, both read the footers once.
    let ours_total = engine.flamegraph(&query).await.context("flamegraph")?.total;
    let bare_total = bare.total().await.context("bare aggregation")?;
    if ours_total != samples as i64 || bare_total != samples as i64 {
        bail!("totals disagree: {samples} samples generated, flamegraph {ours_total}, bare sum {bare_total}");
    }
    reset_peak();
    let rss_before = rss();
    let (mut ours, mut base) = (Vec::new(), Vec::new());
    for _ in 0..plan.warm_runs {
        let t = Instant::now();
        engine.flamegraph(&query).await?;
        ours.push(t.elapsed());
        let t = Instant::now();
        bare.total().await?;
        base.push(t.elapsed());
    }
    let peak = peak_rss();
    let (ours, base) = (median(ours), median(base));
    report.rows.push(Row {
        measurement: format!("flamegraph latency, {:.2} M samples", samples as f64 / 1e6),
        ours: ms(ours),
        baseline: ms(base),
        unit: "ms",
        baseline_name: "bare DataFusion".into(),
        target: "≤ 1.5×".into(),
        pass: ours.as_secs_f64() <= 1.5 * base.as_secs_f64(),
    });
    report.notes.push(format!(
        "Flamegraph over {:.2} M samples in {} samples files: median of {} warm runs each; the bare \
         baseline is `{BARE_SQL}` in a fresh SessionContext over the same files.",
        samples as f64 / 1e6,
        files,
        plan.warm_runs,
    ));
    duckdb_measurement(plan, env, range, samples, report).await?;
    native_overhead(plan, &engine, &query, ours, samples, report).await?;
    if memory_row {
        // Over the middle quarter, which reads raw samples: the whole range reads the block's
        // 1h tier, a scan no larger than the sums workers ship, which is not what these rows
        // are about.
        let label = format!("the middle quarter of {:.2} M samples", samples as f64 / 1e6);
        let part = flamegraph_query(middle_quarter(range));
        super::distributed::measurements(plan, env, &engine, &part, &label, report)
            .await
            .context("query worker measurements")?;
        let added = peak.saturating_sub(rss_before);
        report.rows.push(Row {
            measurement: format!(
                "peak memory the {:.2} M-sample query adds (VmHWM − RSS before it)",
                samples as f64 / 1e6
            ),
            ours: mib(added),
            baseline: mib(plan.query_budget as u64),
            unit: "MiB",
            baseline_name: "query budget".into(),
            target: "within it".into(),
            pass: added <= plan.query_budget as u64,
        });
        report.notes.push(format!(
            "Query memory: RSS {:.0} MiB before the runs (the bench's own workload and the symbol \
             cache), peak {:.0} MiB during them.",
            mib(rss_before),
            mib(peak),
        ));
    }
    Ok(())
}

/// The same flamegraph once the tenant has an uploaded debug file (the C library this
/// process loaded) that no frame of the workload needs: symbolization of native frames
/// must cost queries that touch none nothing measurable.
async fn native_overhead(
    plan: &Plan,
    engine: &stackhouse_query::QueryEngine,
    query: &stackhouse_query::FlamegraphQuery,
    without: Duration,
    samples: usize,
    report: &mut Report,
) -> anyhow::Result<()> {
    let exe = std::fs::read(std::env::current_exe()?).context("reading the bench executable")?;
    let Some(build_id) = stackhouse_query::native::DebugFile::parse(&exe)?.build_id_hex() else {
        report
            .notes
            .push("No debug-file row: this executable has no GNU build id to upload.".into());
        return Ok(());
    };
    let debuginfo = engine.debuginfo();
    debuginfo
        .upload(TENANT, &build_id, "stackhouse-bench", exe.into())
        .await?;
    let mut with = Vec::new();
    for _ in 0..plan.warm_runs {
        let t = Instant::now();
        engine.flamegraph(query).await?;
        with.push(t.elapsed());
    }
    debuginfo.delete(TENANT, &build_id).await?;
    let with = median(with);
    report.rows.push(Row {
        measurement: format!(
            "flamegraph, {:.2} M samples, tenant with a debug file no frame needs",
            samples as f64 / 1e6
        ),
        ours: ms(with),
        baseline: ms(without),
        unit: "ms",
        baseline_name: "no debug file".into(),
        target: "≤ 1.1×".into(),
        pass: with.as_secs_f64() <= 1.1 * without.as_secs_f64(),
    });
    Ok(())
}

/// A store of one workload, compacted.
pub(crate) struct BuiltStore {
    pub env: Env,
    /// Samples the generator wrote.
    pub samples: usize,
    /// The time the workload covers.
    pub range: TimeRange,
}

/// Writes `workload` through normalize and the writer and compacts it; a note named
/// `name` tells how long that took and what it stored.
pub(crate) async fn build_store(
    workload: Workload,
    name: &str,
    report: &mut Report,
) -> anyhow::Result<BuiltStore> {
    let env = Env::open().await?;
    eprintln!(
        "bench: building the {name}, {} requests",
        workload.request_count()
    );
    let built = Instant::now();
    let workload = Arc::new(workload);
    let samples = write_workload(&env, workload.clone(), Duration::from_millis(200)).await?;
    let compacted = Instant::now();
    env.compact().await?;
    let (bytes, objects, segments) = env.stored().await?;
    report.notes.push(format!(
        "{name}: {samples} samples generated, normalized and written in {:.1} s, compacted in {:.1} s \
         to {segments} segments / {objects} objects / {:.1} MiB ({:.2} B/sample).",
        compacted.duration_since(built).as_secs_f64(),
        compacted.elapsed().as_secs_f64(),
        mib(bytes),
        bytes as f64 / samples as f64,
    ));
    let (start, end) = workload.range_nanos();
    let range = TimeRange { start, end };
    Ok(BuiltStore { env, samples, range })
}

/// Writes `workload` as ingest writes it (normalize, then the writer, flushing every
/// `flush_interval`), without compacting; the samples written.
pub(crate) async fn write_workload(
    env: &Env,
    workload: Arc<Workload>,
    flush_interval: Duration,
) -> anyhow::Result<usize> {
    let writer = env.writer(flush_interval);
    let (n, procs) = (workload.request_count(), workload.processes());
    let received = now_nanos();
    let writer = &writer;
    let samples = futures::stream::iter(0..n)
        .map(|i| {
            let w = workload.clone();
            tokio::task::spawn_blocking(move || {
                let g = w.request(i % procs, i / procs);
                normalize(TENANT, &g.request, received).map(|n| (n.batch, g.samples))
            })
        })
        .buffered(4)
        .map(|done| async move {
            let (batch, count) = done.context("generating task")?.context("normalizing")?;
            writer.write(batch).await.context("writing")?;
            Ok::<_, anyhow::Error>(count)
        })
        .buffer_unordered(64)
        .try_fold(0usize, |acc, c| async move { Ok(acc + c) })
        .await?;
    writer.shutdown().await;
    Ok(samples)
}

/// One generated hour as two half-hour batches, so that each stored hour is two writer
/// segments that compaction merges into one hour block.
fn hour_halves(workload: &Workload) -> anyhow::Result<(Batch, Batch, usize)> {
    let received = now_nanos();
    let half = workload.windows() / 2;
    let (mut first, mut second) = (Batch::new(TENANT), Batch::new(TENANT));
    let mut samples = 0;
    for (i, g) in workload.requests().enumerate() {
        samples += g.samples;
        let n = normalize(TENANT, &g.request, received).context("normalizing the hour")?;
        let window = i / workload.processes();
        if window < half {
            first.merge(n.batch);
        } else {
            second.merge(n.batch);
        }
    }
    Ok((first, second, samples))
}

fn shifted(batch: &Batch, by: i64) -> Batch {
    let mut b = batch.clone();
    for s in &mut b.samples {
        s.time_nanos += by;
    }
    for p in &mut b.profiles {
        p.start_nanos += by;
        p.end_nanos += by;
    }
    b
}

/// Writes `hours` (indices from the first hour) of the generated hour and compacts; returns
/// the store and the process CPU time compaction took.
async fn hour_store(
    halves: &(Batch, Batch, usize),
    hours: impl Iterator<Item = i64>,
) -> anyhow::Result<(Env, Duration)> {
    let env = Env::open().await?;
    let writer = env.writer(Duration::from_millis(5));
    for h in hours {
        // One after the other: writes of one flush would merge into one segment.
        writer.write(shifted(&halves.0, h * HOUR_NANOS)).await?;
        writer.write(shifted(&halves.1, h * HOUR_NANOS)).await?;
    }
    writer.shutdown().await;
    let started = cpu_time();
    env.compact().await?;
    let compaction = cpu_time().saturating_sub(started);
    Ok((env, compaction))
}

/// Measurement 4: the same 1-hour flamegraph in a store of `days` days and in a store of only
/// that hour.
pub(crate) async fn retention_measurement(
    plan: &Plan,
    capture: &ExportProfilesServiceRequest,
    report: &mut Report,
) -> anyhow::Result<()> {
    let workload = Workload::new(plan.hour_fleet.clone(), capture);
    let halves = hour_halves(&workload)?;
    let samples = halves.2;
    let hours = plan.days as i64 * 24;
    let queried = hours / 2;
    let built = Instant::now();
    let (all, compaction) = hour_store(&halves, 0..hours).await?;
    let build = built.elapsed();
    let (one, _) = hour_store(&halves, queried..queried + 1).await?;
    let start = plan.hour_fleet.start_nanos + queried * HOUR_NANOS;
    let query = flamegraph_query(TimeRange {
        start,
        end: start + HOUR_NANOS,
    });
    let (big, small) = (all.engine(plan.query_budget), one.engine(plan.query_budget));
    for engine in [&big, &small] {
        let total = engine.flamegraph(&query).await?.total;
        if total != samples as i64 {
            bail!("the hour's flamegraph counts {total} samples, the hour has {samples}");
        }
    }
    let (mut ours, mut base) = (Vec::new(), Vec::new());
    for _ in 0..plan.warm_runs {
        let t = Instant::now();
        big.flamegraph(&query).await?;
        ours.push(t.elapsed());
        let t = Instant::now();
        small.flamegraph(&query).await?;
        base.push(t.elapsed());
    }
    let (ours, base) = (median(ours), median(base));
    report.rows.push(Row {
        measurement: format!("1-hour flamegraph in a store holding {} days", plan.days),
        ours: ms(ours),
        baseline: ms(base),
        unit: "ms",
        baseline_name: "store of that hour only".into(),
        target: "≤ 1.2×".into(),
        pass: ours.as_secs_f64() <= 1.2 * base.as_secs_f64(),
    });
    // The last (up to) seven days of the store, through the server's APIs.
    let days = (hours / 24).min(7);
    let first = plan.hour_fleet.start_nanos + (hours - days * 24) * HOUR_NANOS;
    let week = TimeRange {
        start: first,
        end: first + days * 24 * HOUR_NANOS,
    };
    api::api_measurements(plan, &all, week, samples * days as usize * 24, report)
        .await
        .context("7-day API measurements")?;
    let store = super::rollups::Store {
        env: &all,
        workload: &workload,
        first: plan.hour_fleet.start_nanos,
        hours,
        hour_samples: samples,
        compaction,
    };
    super::rollups::measurements(plan, &store, report)
        .await
        .context("rollup tier measurements")?;
    let (bytes, objects, segments) = all.stored().await?;
    report.notes.push(format!(
        "{}-day store: one generated hour ({samples} samples) written for every hour through the writer \
         (two segments per hour) and compacted to hour blocks, built in {:.1} s: {segments} segments, \
         {objects} objects, {:.1} MiB. Median of {} warm runs each.",
        plan.days,
        build.as_secs_f64(),
        mib(bytes),
        plan.warm_runs,
    ));
    Ok(())
}
