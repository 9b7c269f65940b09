//! Running one scan of the `samples` table: `SUM(value) GROUP BY <dims>` over a plan's
//! segments, decoded into rows, with what the scan read.

use std::sync::Arc;
use std::time::Duration;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use datafusion::arrow::datatypes::Int64Type;
use datafusion::dataframe::DataFrame;
use datafusion::functions_aggregate::expr_fn::sum;
use datafusion::logical_expr::{Expr, col, lit};
use datafusion::physical_plan::metrics::MetricValue;
use datafusion::physical_plan::{ExecutionPlan, displayable, execute_stream};
use datafusion_distributed::{
    DistributedExec, DistributedMetricsFormat, rewrite_distributed_plan_with_metrics,
};
use futures::TryStreamExt;
use stackhouse_storage::catalog::TableKind;
use stackhouse_storage::model::SymbolId;
use stackhouse_storage::rollup::Resolution;
use stackhouse_storage::schema::{self, samples};

use super::QueryEngine;
use super::plan::Plan;
use super::scan::SamplesTable;
use super::tenants;
use crate::error::QueryError;
use crate::types::ScanStats;

/// A column to group by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dim {
    Stack,
    Series,
    AttrSet,
    Trace,
    Span,
    Profile,
    Time,
    /// Only for ordering: rows are never grouped by value.
    Value,
    /// `(time - start) / step`.
    Bucket {
        start: i64,
        step: i64,
    },
}

const BUCKET: &str = "bucket";

impl Dim {
    fn expr(&self) -> Expr {
        match *self {
            Dim::Stack => col(samples::STACK_ID),
            Dim::Series => col(samples::SERIES_ID),
            Dim::AttrSet => col(samples::ATTR_SET_ID),
            Dim::Trace => col(samples::TRACE_ID),
            Dim::Span => col(samples::SPAN_ID),
            Dim::Profile => col(samples::PROFILE_ID),
            Dim::Time => col(samples::TIME),
            Dim::Value => col(samples::VALUE),
            // The plan's filter keeps time >= start, so the quotient is never negative.
            Dim::Bucket { start, step } => ((col(samples::TIME) - lit(start)) / lit(step)).alias(BUCKET),
        }
    }
}

/// One output row; the fields of dimensions not grouped by keep their defaults.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Row {
    pub stack_id: SymbolId,
    pub series_id: i64,
    pub attr_set_id: SymbolId,
    pub trace_id: Option<[u8; 16]>,
    pub span_id: Option<[u8; 8]>,
    pub profile_id: Option<[u8; 16]>,
    pub time: i64,
    pub bucket: i64,
    pub value: i64,
}

impl QueryEngine {
    /// `SELECT plan.dims, SUM(value) WHERE <the plan's filters> GROUP BY plan.dims`; by the
    /// stack alone it runs as `StackSumExec`s (see `stack_sums`).
    pub(crate) async fn aggregate(&self, plan: &Plan) -> Result<(Vec<Row>, ScanStats), QueryError> {
        let df = self.samples(plan)?.aggregate(
            plan.dims.iter().map(Dim::expr).collect(),
            vec![sum(plan.value.clone()).alias(samples::VALUE)],
        )?;
        let (batches, stats) = self.run(plan, df).await?;
        let mut rows = Vec::new();
        for batch in &batches {
            decode_rows(batch, &mut rows)?;
        }
        Ok((rows, stats))
    }

    /// The plan's rows themselves (no aggregation) ordered by `plan.dims`, at most `limit`.
    pub(crate) async fn select_sorted(
        &self,
        plan: &Plan,
        extra_filter: Option<Expr>,
        limit: usize,
    ) -> Result<(Vec<Row>, ScanStats), QueryError> {
        let mut df = self.samples(plan)?;
        if let Some(extra) = extra_filter {
            df = df.filter(extra)?;
        }
        let df = df
            .sort(plan.dims.iter().map(|d| d.expr().sort(true, false)).collect())?
            .limit(0, Some(limit))?;
        let (batches, stats) = self.run(plan, df).await?;
        let mut rows = Vec::new();
        for batch in &batches {
            decode_rows(batch, &mut rows)?;
        }
        Ok((rows, stats))
    }

    /// The rows of every scan of the plan; several scans are one union, of the columns
    /// rollups have when any reads rollups (they are all such a query uses).
    pub(super) fn samples(&self, plan: &Plan) -> Result<DataFrame, QueryError> {
        let mut frames = Vec::with_capacity(plan.scans.len());
        let series_told_apart = tenants::needs_series(plan);
        for scan in &plan.scans {
            let table = SamplesTable::new(&self.store, &scan.source.segments, scan.source.kind())?;
            let mut df = self.ctx.read_table(Arc::new(table))?;
            if let Some(filter) = &scan.filter {
                df = df.filter(filter.clone())?;
            }
            if scan.salt != 0 && series_told_apart {
                df = tenants::salted(df, scan.salt)?;
            }
            frames.push(df);
        }
        if frames.len() == 1 {
            return Ok(frames.remove(0));
        }
        // Samples have every column of a rollup, and a rollup every column of its totals:
        // the narrowest table's columns are what every scan has.
        let narrowest = plan
            .scans
            .iter()
            .map(|s| schema::schema_of(s.source.kind()))
            .min_by_key(|schema| schema.fields().len())
            .expect("a plan has a scan");
        let columns = narrowest
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect::<Vec<_>>();
        let mut frames = frames.into_iter().map(|df| df.select_columns(&columns));
        let first = frames.next().expect("a plan has a scan")?;
        Ok(frames.try_fold(first, |all, df| all.union(df?))?)
    }

    /// Runs `df`; when a query worker fails it (died, froze, cut off), the workers are
    /// probed at once and the query is planned and run once more over those that answer,
    /// or in this process when none do (datafusion-distributed does not retry tasks).
    /// Nothing of the first run's output is kept: every batch is collected before any is
    /// used, so the answer of the second run is whole.
    async fn run(&self, plan: &Plan, df: DataFrame) -> Result<(Vec<RecordBatch>, ScanStats), QueryError> {
        let Some(cluster) = &self.cluster else {
            return self.run_once(plan, df).await;
        };
        match self.run_once(plan, df.clone()).await {
            Err(QueryError::WorkerUnavailable(first)) => {
                tracing::warn!(error = %first, "a query worker failed a query; planning it again over the workers that answer");
                metrics::counter!("stackhouse_query_worker_retries_total").increment(1);
                cluster.reprobe().await;
                self.run_once(plan, df).await.map_err(|e| match e {
                    QueryError::WorkerUnavailable(second) => QueryError::WorkerUnavailable(format!(
                        "{second} (and before, on the first try: {first})"
                    )),
                    e => e,
                })
            }
            result => result,
        }
    }

    async fn run_once(
        &self,
        plan: &Plan,
        df: DataFrame,
    ) -> Result<(Vec<RecordBatch>, ScanStats), QueryError> {
        let task = df.task_ctx();
        let physical = df.create_physical_plan().await?;
        // Which stages the distributed planner made, and how many tasks each: where a
        // query did or did not spread over the workers.
        tracing::debug!(plan = %displayable(physical.as_ref()).indent(false), "physical plan");
        let batches: Vec<RecordBatch> = execute_stream(physical.clone(), Arc::new(task))?
            .try_collect()
            .await?;
        let physical = with_worker_metrics(physical).await;
        Ok((batches, scan_stats(plan, &physical)))
    }
}

/// How long a finished distributed query waits for its workers' scan metrics; they are
/// sent after the data, and only the reported statistics depend on them.
const WORKER_METRICS_WAIT: Duration = Duration::from_secs(1);

/// A finished distributed plan with the metrics its workers reported put back on the
/// nodes they ran; any other plan as it is.
async fn with_worker_metrics(physical: Arc<dyn ExecutionPlan>) -> Arc<dyn ExecutionPlan> {
    if !physical.is::<DistributedExec>() {
        return physical;
    }
    let rewrite =
        rewrite_distributed_plan_with_metrics(physical.clone(), DistributedMetricsFormat::Aggregated);
    match tokio::time::timeout(WORKER_METRICS_WAIT, rewrite).await {
        Ok(Ok(rewritten)) => rewritten,
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "worker metrics not available");
            physical
        }
        Err(_) => physical,
    }
}

/// What the executed `physical` plan of `plan` read and shipped, counted in the metrics as
/// well.
fn scan_stats(plan: &Plan, physical: &Arc<dyn ExecutionPlan>) -> ScanStats {
    let mut stats = ScanStats {
        segments: plan.segment_count() as u64,
        bytes_total: plan
            .scans
            .iter()
            .flat_map(|scan| {
                let kind = scan.source.kind();
                scan.source.segments.iter().filter_map(move |s| s.object(kind))
            })
            .map(|o| o.size_bytes)
            .sum(),
        ..ScanStats::default()
    };
    stats.answered = plan.answered.map(|r| (r.start, r.end));
    collect_scan_metrics(physical, &mut stats);
    metrics::counter!("stackhouse_query_bytes_scanned_total").increment(stats.bytes_scanned);
    for (tier, rows) in &stats.rows_by_tier {
        metrics::counter!("stackhouse_query_rows_scanned_total", "tier" => tier.clone()).increment(*rows);
    }
    metrics::counter!("stackhouse_query_bytes_shipped_total").increment(stats.bytes_shipped);
    tracing::debug!(?stats, "scan finished");
    stats
}

/// Sums the Parquet reader's metrics of every scan in the plan, and the batches that
/// crossed the network.
fn collect_scan_metrics(plan: &Arc<dyn ExecutionPlan>, stats: &mut ScanStats) {
    // By name: after `with_worker_metrics` a boundary is a wrapper that carries its name and
    // metrics but is not of its type.
    if plan.name().starts_with("Network")
        && let Some(metrics) = plan.metrics()
    {
        for metric in metrics.iter() {
            if let MetricValue::OutputBytes(bytes) = metric.value() {
                stats.bytes_shipped += bytes.value() as u64;
            }
        }
    }
    if let Some(metrics) = plan.metrics().filter(|_| plan.children().is_empty()) {
        let (mut by_stats, mut by_bloom) = ((0u64, 0u64), (0u64, 0u64));
        let (mut rows_pruned, mut rows_matched, mut output_rows) = (0u64, 0u64, 0u64);
        for metric in metrics.iter() {
            match metric.value() {
                MetricValue::PruningMetrics {
                    name,
                    pruning_metrics,
                } => {
                    let counts = (pruning_metrics.pruned() as u64, pruning_metrics.matched() as u64);
                    match name.as_ref() {
                        "row_groups_pruned_statistics" => {
                            by_stats = (by_stats.0 + counts.0, by_stats.1 + counts.1);
                        }
                        "row_groups_pruned_bloom_filter" => {
                            by_bloom = (by_bloom.0 + counts.0, by_bloom.1 + counts.1);
                        }
                        _ => {}
                    }
                }
                MetricValue::OutputRows(count) => output_rows += count.value() as u64,
                MetricValue::Count { name, count } => match name.as_ref() {
                    "bytes_scanned" => stats.bytes_scanned += count.value() as u64,
                    "pushdown_rows_pruned" => rows_pruned += count.value() as u64,
                    "pushdown_rows_matched" => rows_matched += count.value() as u64,
                    _ => {}
                },
                _ => {}
            }
        }
        // Statistics are checked first and bloom filters on what statistics kept; either
        // may be skipped when the predicate gives it nothing to do.
        stats.row_groups_total += (by_stats.0 + by_stats.1).max(by_bloom.0 + by_bloom.1);
        stats.row_groups_pruned += by_stats.0 + by_bloom.0;
        // Without a row filter nothing is pruned or matched: every row read is output.
        let rows = if rows_pruned + rows_matched > 0 {
            rows_pruned + rows_matched
        } else {
            output_rows
        };
        stats.rows_scanned += rows;
        *stats
            .rows_by_tier
            .entry(tier_of_scan(plan).to_string())
            .or_default() += rows;
    }
    for child in plan.children() {
        collect_scan_metrics(child, stats);
    }
}

/// The resolution a scan reads, told by its objects' names (a scan that ran on a worker
/// comes back as a wrapper of the same display, not of its type).
fn tier_of_scan(scan: &Arc<dyn ExecutionPlan>) -> &'static str {
    let shown = displayable(scan.as_ref()).one_line().to_string();
    TableKind::ALL
        .into_iter()
        .filter(|kind| kind.holds_values() && *kind != TableKind::Samples)
        .find(|kind| shown.contains(kind.as_str()))
        .and_then(Resolution::of_kind)
        .map_or("raw", Resolution::name)
}

fn decode_rows(batch: &RecordBatch, rows: &mut Vec<Row>) -> Result<(), QueryError> {
    let schema = batch.schema();
    let n = batch.num_rows();
    let start = rows.len();
    rows.resize(start + n, Row::default());
    let out = &mut rows[start..];
    for (field, column) in schema.fields().iter().zip(batch.columns()) {
        match field.name().as_str() {
            samples::STACK_ID => ids16(column, field.name(), |i, v| {
                out[i].stack_id = SymbolId(v.unwrap_or([0; 16]));
            })?,
            samples::ATTR_SET_ID => ids16(column, field.name(), |i, v| {
                out[i].attr_set_id = SymbolId(v.unwrap_or([0; 16]));
            })?,
            samples::TRACE_ID => ids16(column, field.name(), |i, v| out[i].trace_id = v)?,
            samples::PROFILE_ID => ids16(column, field.name(), |i, v| out[i].profile_id = v)?,
            samples::SPAN_ID => {
                let array = column
                    .as_fixed_size_binary_opt()
                    .ok_or_else(|| unexpected(field.name(), column))?;
                for (i, row) in out.iter_mut().enumerate() {
                    row.span_id = (!array.is_null(i))
                        .then(|| array.value(i).try_into())
                        .transpose()
                        .map_err(|_| unexpected(field.name(), column))?;
                }
            }
            samples::SERIES_ID => int64(column, field.name(), |i, v| out[i].series_id = v)?,
            samples::TIME => int64(column, field.name(), |i, v| out[i].time = v)?,
            samples::VALUE => int64(column, field.name(), |i, v| out[i].value = v)?,
            BUCKET => int64(column, field.name(), |i, v| out[i].bucket = v)?,
            other => return Err(QueryError::Internal(format!("unexpected result column {other}"))),
        }
    }
    Ok(())
}

fn unexpected(name: &str, column: &ArrayRef) -> QueryError {
    QueryError::Internal(format!(
        "unexpected type {} of result column {name}",
        column.data_type()
    ))
}

fn ids16(
    column: &ArrayRef,
    name: &str,
    mut set: impl FnMut(usize, Option<[u8; 16]>),
) -> Result<(), QueryError> {
    let array = column
        .as_fixed_size_binary_opt()
        .ok_or_else(|| unexpected(name, column))?;
    for i in 0..array.len() {
        if array.is_null(i) {
            set(i, None);
        } else {
            set(
                i,
                Some(array.value(i).try_into().map_err(|_| unexpected(name, column))?),
            );
        }
    }
    Ok(())
}

/// NULL (a SUM over no values) reads as 0.
fn int64(column: &ArrayRef, name: &str, mut set: impl FnMut(usize, i64)) -> Result<(), QueryError> {
    let array = column
        .as_primitive_opt::<Int64Type>()
        .ok_or_else(|| unexpected(name, column))?;
    for i in 0..array.len() {
        set(i, if array.is_null(i) { 0 } else { array.value(i) });
    }
    Ok(())
}
