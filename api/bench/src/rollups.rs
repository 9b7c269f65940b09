//! The rollup tiers (issue 33) in the 30-day store: long-range queries from the tiers against
//! the same queries over raw samples, stored bytes per tier, and the compaction CPU the tiers
//! add per ingested sample.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use datafusion::arrow::compute::concat_batches;
use serde::Serialize;
use stackhouse_query::{Aggregation, QueryEngine, Scope, TimeseriesQuery};
use stackhouse_storage::catalog::TableKind;
use stackhouse_storage::model::TimeRange;
use stackhouse_storage::rollup::{Resolution, write_rollups};
use stackhouse_storage::segment::read_samples;

use super::env::{Env, TENANT, cpu_type, flamegraph_query};
use super::measure::{cpu_time, median};
use super::report::{Report, Row, ms};
use super::workload::Workload;
use super::{HOUR_NANOS, Plan, ingest};

/// The 30-day store [`super::query::retention_measurement`] built: `hours` hour blocks from
/// `first`, each holding the generated hour of `hour_samples` samples.
pub(crate) struct Store<'a> {
    pub env: &'a Env,
    pub workload: &'a Workload,
    pub first: i64,
    pub hours: i64,
    pub hour_samples: usize,
    /// Process CPU time of the compaction that built the hour blocks (and their rollups).
    pub compaction: Duration,
}

/// A result as JSON without its scan statistics: what must not depend on the tier read.
pub(crate) fn answer<T: Serialize>(result: &T) -> anyhow::Result<String> {
    let mut value = serde_json::to_value(result)?;
    if let Some(object) = value.as_object_mut() {
        object.remove("stats");
    }
    Ok(serde_json::to_string(&value)?)
}

fn per_sample_ns(d: Duration, samples: usize) -> f64 {
    d.as_secs_f64() * 1e9 / samples.max(1) as f64
}

/// Every row of issue 33's benchmark, in the order the issue names them.
pub(crate) async fn measurements(plan: &Plan, store: &Store<'_>, report: &mut Report) -> anyhow::Result<()> {
    let tiers = store.env.engine(plan.query_budget);
    let raw = store.env.engine_with_rollups(plan.query_budget, false);
    flamegraph_row(plan, store, &tiers, &raw, report)
        .await
        .context("flamegraph from the tiers")?;
    series_row(plan, store, &tiers, &raw, report)
        .await
        .context("series from the tiers")?;
    bytes_rows(plan, store, report).await.context("bytes per tier")?;
    cpu_row(store, report)
        .await
        .context("compaction CPU of the tiers")
}

/// Medians of `plan.warm_runs` interleaved runs of `ours` and `base`.
pub(crate) async fn timed<F, G, A, B>(
    plan: &Plan,
    mut ours: F,
    mut base: G,
) -> anyhow::Result<(Duration, Duration)>
where
    F: AsyncFnMut() -> anyhow::Result<A>,
    G: AsyncFnMut() -> anyhow::Result<B>,
{
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..plan.warm_runs {
        let t = Instant::now();
        ours().await?;
        a.push(t.elapsed());
        let t = Instant::now();
        base().await?;
        b.push(t.elapsed());
    }
    Ok((median(a), median(b)))
}

pub(crate) fn speedup_row(measurement: String, ours: Duration, base: Duration) -> Row {
    Row {
        measurement,
        ours: ms(ours),
        baseline: ms(base),
        unit: "ms",
        baseline_name: "raw samples only".into(),
        target: "≥ 10× faster".into(),
        pass: base.as_secs_f64() >= 10.0 * ours.as_secs_f64(),
    }
}

/// Which tiers a scan read, as `tier rows` pairs.
pub(crate) fn tiers_read(rows_by_tier: &std::collections::BTreeMap<String, u64>) -> String {
    let read: Vec<String> = rows_by_tier.iter().map(|(t, n)| format!("{t} {n}")).collect();
    read.join(", ")
}

async fn flamegraph_row(
    plan: &Plan,
    store: &Store<'_>,
    tiers: &QueryEngine,
    raw: &QueryEngine,
    report: &mut Report,
) -> anyhow::Result<()> {
    let range = TimeRange {
        start: store.first,
        end: store.first + store.hours * HOUR_NANOS,
    };
    let query = flamegraph_query(range);
    let samples = store.hour_samples as i64 * store.hours;
    // Warm (symbols, footers), and the answers checked before anything is timed.
    let ours = tiers
        .flamegraph(&query)
        .await
        .context("flamegraph from the tiers")?;
    let base = raw
        .flamegraph(&query)
        .await
        .context("flamegraph over raw samples")?;
    if ours.total != samples || base.total != samples {
        bail!(
            "totals disagree: the store holds {samples} samples, the tiers' flamegraph counts {}, the raw one {}",
            ours.total,
            base.total
        );
    }
    if answer(&ours)? != answer(&base)? {
        bail!("the flamegraph from the tiers differs from the one over raw samples");
    }
    let (ours_stats, base_stats) = (ours.stats.unwrap_or_default(), base.stats.unwrap_or_default());
    // The hour tier, or the day tier where whole days of samples lie in the range.
    if !["1h", "1d"]
        .iter()
        .any(|t| ours_stats.rows_by_tier.contains_key(*t))
    {
        bail!(
            "the flamegraph read neither the 1h nor the 1d tier: {:?}",
            ours_stats.rows_by_tier
        );
    }
    let (ours, base) = timed(
        plan,
        async || tiers.flamegraph(&query).await.map_err(anyhow::Error::from),
        async || raw.flamegraph(&query).await.map_err(anyhow::Error::from),
    )
    .await?;
    let days = store.hours / 24;
    report.rows.push(speedup_row(
        format!("{days}-day flamegraph from the rollup tiers"),
        ours,
        base,
    ));
    report.notes.push(format!(
        "{days}-day flamegraph over the store's whole range ({:.2} M samples, {} hour blocks), \
         median of {} interleaved warm runs each; the baseline is the same query on an engine with \
         `QueryConfig {{ rollups: false }}`. Both answers were checked equal (JSON without stats) \
         and to count every stored sample. Rows read per tier: with the tiers {}; raw only {}.",
        samples as f64 / 1e6,
        store.hours,
        plan.warm_runs,
        tiers_read(&ours_stats.rows_by_tier),
        tiers_read(&base_stats.rows_by_tier),
    ));
    Ok(())
}

async fn series_row(
    plan: &Plan,
    store: &Store<'_>,
    tiers: &QueryEngine,
    raw: &QueryEngine,
    report: &mut Report,
) -> anyhow::Result<()> {
    let hours = store.hours.min(7 * 24);
    let start = store.first + (store.hours - hours) * HOUR_NANOS;
    let query = TimeseriesQuery {
        scope: Scope::new(
            TENANT,
            cpu_type(),
            TimeRange {
                start,
                end: start + hours * HOUR_NANOS,
            },
        ),
        step_nanos: HOUR_NANOS,
        group_by: Vec::new(),
        aggregation: Aggregation::Sum,
    };
    let samples = store.hour_samples as i64 * hours;
    let ours = tiers.timeseries(&query).await.context("series from the tiers")?;
    let base = raw.timeseries(&query).await.context("series over raw samples")?;
    let total = |t: &stackhouse_query::Timeseries| t.series.iter().map(|g| g.total).sum::<i64>();
    let points = |t: &stackhouse_query::Timeseries| t.series.iter().map(|g| g.points.len()).sum::<usize>();
    if total(&ours) != samples || total(&base) != samples {
        bail!(
            "totals disagree: the {hours} hours hold {samples} samples, the tiers' series sum to {}, the raw ones to {}",
            total(&ours),
            total(&base)
        );
    }
    if answer(&ours)? != answer(&base)? {
        bail!("the series from the tiers differ from those over raw samples");
    }
    let (ours_stats, base_stats) = (
        ours.stats.clone().unwrap_or_default(),
        base.stats.clone().unwrap_or_default(),
    );
    if !ours_stats.rows_by_tier.contains_key("1h") {
        bail!(
            "the series did not read the 1h tier: {:?}",
            ours_stats.rows_by_tier
        );
    }
    let (ours_time, base_time) = timed(
        plan,
        async || tiers.timeseries(&query).await.map_err(anyhow::Error::from),
        async || raw.timeseries(&query).await.map_err(anyhow::Error::from),
    )
    .await?;
    let days = hours / 24;
    report.rows.push(speedup_row(
        format!("{days}-day series (step 1h) from the rollup tiers"),
        ours_time,
        base_time,
    ));
    report.notes.push(format!(
        "{days}-day series: the last {hours} hours of the store, step 1 h, sum, no grouping ({} points, \
         {:.2} M samples), same method and checks as the flamegraph. Rows read per tier: with the tiers {}; raw only {}.",
        points(&ours),
        samples as f64 / 1e6,
        tiers_read(&ours_stats.rows_by_tier),
        tiers_read(&base_stats.rows_by_tier),
    ));
    Ok(())
}

/// Bytes each tier keeps for one day of data, per sample of that day.
async fn bytes_rows(plan: &Plan, store: &Store<'_>, report: &mut Report) -> anyhow::Result<()> {
    let stats = store.env.catalog.stats(TENANT).await.context("catalog stats")?;
    let stored = store.hour_samples as u64 * store.hours as u64;
    let tables = |kind: TableKind| stats.tables.get(kind.as_str()).cloned().unwrap_or_default();
    let raw_rows = tables(TableKind::Samples).rows;
    if raw_rows != stored {
        bail!("the catalog lists {raw_rows} samples, the store was written {stored}");
    }
    // Every day of the store holds the same generated hours, so the bytes of one day are a
    // tier's bytes over the days it covers, and that day's samples 24 generated hours.
    let days = store.hours as f64 / 24.0;
    let day_samples = store.hour_samples as f64 * 24.0;
    let per_sample_day = |bytes: u64| bytes as f64 / days / day_samples;
    let all: u64 = stats.tables.values().map(|t| t.bytes).sum();
    let raw = per_sample_day(tables(TableKind::Samples).bytes);
    report.rows.push(Row {
        measurement: "stored bytes per sample-day: raw".into(),
        ours: raw,
        baseline: per_sample_day(all),
        unit: "B",
        baseline_name: "whole store (symbols and tiers included)".into(),
        target: "(reference for the tiers)".into(),
        pass: true,
    });
    let mut rows = Vec::new();
    for (resolution, label) in [(Resolution::Minute, "1m"), (Resolution::Hour, "1h")] {
        let t = tables(resolution.kind());
        let ours = per_sample_day(t.bytes);
        report.rows.push(Row {
            measurement: format!("stored bytes per sample-day: {label} tier"),
            ours,
            baseline: raw,
            unit: "B",
            baseline_name: "raw tier".into(),
            target: "< raw".into(),
            pass: ours < raw,
        });
        rows.push(format!("{label} {} rows in {} objects", t.rows, t.objects));
    }
    report.notes.push(format!(
        "Stored bytes per sample-day: the bytes a tier keeps for one day of data (catalog stats of \
         its table kind over the {} days the store holds, every day the same generated hours) \
         divided by that day's {:.0} samples — what keeping one day of this fleet costs per sample \
         in each tier. Raw {} rows; {}. Scale: one {}-Hz core per hour.",
        plan.days,
        day_samples,
        raw_rows,
        rows.join(", "),
        plan.hour_fleet.hz,
    ));
    Ok(())
}

/// The CPU of computing and writing the rollups of every hour block of the store, as
/// compaction does beside each block's samples, per sample they cover; against ingest CPU
/// per sample measured in this run.
async fn cpu_row(store: &Store<'_>, report: &mut Report) -> anyhow::Result<()> {
    let segments = store.env.catalog.segments(TENANT, TimeRange::ALL).await?;
    // Written into a store of their own, not listed anywhere: the store measured stays as
    // compaction left it.
    let scratch = Env::open().await?;
    let (mut spent, mut samples, mut blocks) = (Duration::ZERO, 0usize, 0usize);
    for segment in &segments {
        let Some(object) = segment.object(TableKind::Samples) else {
            continue;
        };
        // Reading is not counted: compaction computes the rollups from the samples it has
        // just sorted in memory.
        let batches = read_samples(&store.env.store, object).await?;
        let Some(first) = batches.first() else {
            continue;
        };
        let table = concat_batches(&first.schema(), &batches)?;
        drop(batches);
        let id = format!("rollup-bench-{blocks}");
        let started = cpu_time();
        write_rollups(&scratch.store, TENANT, &id, &table, &Resolution::ROLLUPS).await?;
        spent += cpu_time().saturating_sub(started);
        samples += table.num_rows();
        blocks += 1;
    }
    let expected = store.hour_samples * store.hours as usize;
    if samples != expected {
        bail!("the hour blocks hold {samples} samples, the store was written {expected}");
    }
    let (ingest_ns, source) = match report
        .rows
        .iter()
        .find(|r| r.measurement.starts_with("ingest CPU per sample"))
    {
        Some(row) => (row.ours, "the ingest phase's row of this run".to_string()),
        None => {
            let encoded = store.workload.encoded();
            let env = Env::open().await?;
            // Declared v1.10 (the generator's layout), as a sender's header would: a small
            // generated hour can read validly in two layouts, which detection refuses.
            let run = ingest::ingest_windows(
                &env,
                &encoded,
                store.workload.processes(),
                true,
                Some(stackhouse_ingest::otlp::layout::Layout::V1_10),
                None,
            )
            .await?;
            let cpu = run.decode_cpu + run.normalize_cpu + run.write_cpu;
            (
                per_sample_ns(cpu, run.rows),
                format!(
                    "the generated hour ({} samples) ingested through the ingest phase's path \
                     (decode with layout v1.10 declared → normalize → writer) in this run",
                    run.rows
                ),
            )
        }
    };
    let ours = per_sample_ns(spent, samples);
    report.rows.push(Row {
        measurement: "compaction CPU the rollups add per ingested sample".into(),
        ours,
        baseline: ingest_ns,
        unit: "ns",
        baseline_name: "ingest CPU per sample".into(),
        target: "≤ 10% of ingest CPU".into(),
        pass: ours <= 0.1 * ingest_ns,
    });
    report.notes.push(format!(
        "Rollup CPU: process CPU time (getrusage) of `rollup::write_rollups` (both tiers summed and \
         written as Parquet, as compaction does beside each hour block) over the store's {blocks} \
         hour blocks read back into memory, {:.2} s for {:.2} M samples; the whole compaction that \
         built the blocks from the writer's segments took {:.2} s ({:.0} ns per sample). Ingest CPU \
         per sample from {source}.",
        spent.as_secs_f64(),
        samples as f64 / 1e6,
        store.compaction.as_secs_f64(),
        per_sample_ns(store.compaction, samples),
    ));
    Ok(())
}
