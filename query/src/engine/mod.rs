//! Running a flamegraph query: catalog pruning, a DataFusion aggregation over the chosen
//! segments, symbolization, truncation.

use std::collections::HashSet;
use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::Int64Type;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::functions_aggregate::expr_fn::sum;
use datafusion::logical_expr::{Expr, col};
use datafusion::prelude::{SessionConfig, SessionContext};
use futures::TryStreamExt;
use stackhouse_storage::catalog::{Catalog, SegmentMeta};
use stackhouse_storage::model::{ProfileType, SymbolId, TimeRange};
use stackhouse_storage::schema::samples;
use stackhouse_storage::store::Store;
use stackhouse_storage::symbols::SymbolCache;

use crate::error::QueryError;
use crate::scan::{SamplesTable, selection_filter};
use crate::selection::{match_series, segments_to_scan, series_groups};
use crate::selector::Selector;
use crate::symbolize::Symbolizer;
use crate::tree::{DEFAULT_MAX_NODES, Flamegraph};

#[derive(Clone, Debug)]
pub struct QueryConfig {
    /// How many partitions DataFusion scans and aggregates in parallel.
    pub target_partitions: usize,
    /// Rows per Arrow batch.
    pub batch_size: usize,
    /// Memory all running queries may use together; a query that needs more fails with
    /// [`QueryError::ResourcesExhausted`]. `None` means unbounded.
    pub memory_limit_bytes: Option<usize>,
}

impl Default for QueryConfig {
    fn default() -> Self {
        QueryConfig {
            target_partitions: std::thread::available_parallelism().map_or(1, |n| n.get()),
            batch_size: 8192,
            memory_limit_bytes: None,
        }
    }
}

#[derive(Clone, Debug)]
pub struct FlamegraphQuery {
    pub tenant: String,
    pub profile_type: ProfileType,
    pub selector: Selector,
    pub range: TimeRange,
    /// Node budget of the tree; 0 means [`DEFAULT_MAX_NODES`].
    pub max_nodes: usize,
}

pub struct QueryEngine {
    store: Store,
    catalog: Arc<dyn Catalog>,
    symbols: Arc<SymbolCache>,
    /// Shared by all queries: one memory pool, one Parquet footer cache.
    ctx: SessionContext,
}

impl QueryEngine {
    pub fn new(
        store: Store,
        catalog: Arc<dyn Catalog>,
        symbols: Arc<SymbolCache>,
        config: QueryConfig,
    ) -> Self {
        let mut session = SessionConfig::new()
            .with_target_partitions(config.target_partitions.max(1))
            .with_batch_size(config.batch_size.max(1));
        let parquet = &mut session.options_mut().execution.parquet;
        parquet.pushdown_filters = true;
        parquet.reorder_filters = true;
        let mut runtime = RuntimeEnvBuilder::new();
        if let Some(limit) = config.memory_limit_bytes {
            runtime = runtime.with_memory_limit(limit, 1.0);
        }
        // The default disk manager creates its directories lazily and the default caches
        // cannot be misconfigured, so building the runtime does not fail.
        let runtime = runtime.build_arc().expect("default datafusion runtime");
        runtime.register_object_store(store.base_url(), store.object_store());
        let ctx = SessionContext::new_with_config_rt(session, runtime);
        QueryEngine {
            store,
            catalog,
            symbols,
            ctx,
        }
    }

    /// The call tree of the selected samples, values summed per call path. Selecting
    /// nothing is not an error: the result has total 0.
    #[tracing::instrument(skip_all, fields(tenant = %q.tenant, profile_type = %q.profile_type.id(), selector = %q.selector))]
    pub async fn flamegraph(&self, q: &FlamegraphQuery) -> Result<Flamegraph, QueryError> {
        if q.tenant.is_empty() {
            return Err(QueryError::InvalidArgument("tenant must not be empty".into()));
        }
        if q.range.start >= q.range.end {
            return Err(QueryError::InvalidArgument(format!(
                "time range start {} must be before its end {}",
                q.range.start, q.range.end
            )));
        }
        let max_nodes = if q.max_nodes == 0 {
            DEFAULT_MAX_NODES
        } else {
            q.max_nodes
        };

        let series = self.catalog.series(&q.tenant, q.range).await?;
        let matched = match_series(&series, &q.profile_type, &q.selector);
        if matched.is_empty() {
            return Ok(empty(q, 0, max_nodes));
        }
        // Listed before the symbols are read, so that the symbol cache already holds every
        // attribute set these segments can reference.
        let segments = self.catalog.segments(&q.tenant, q.range).await?;
        let groups = {
            let symbols = self.symbols.read(&q.tenant).await?;
            series_groups(&matched, &q.selector, &symbols.attr_sets)
        };
        let selected: HashSet<i64> = groups.iter().flat_map(|g| g.series_ids.iter().copied()).collect();
        let period = series
            .iter()
            .filter(|s| selected.contains(&s.id))
            .map(|s| s.period)
            .max()
            .unwrap_or(0);
        let segments = segments_to_scan(segments, &selected, q.range);
        tracing::debug!(
            series = selected.len(),
            groups = groups.len(),
            segments = segments.len(),
            "query planned"
        );
        let Some(filter) = selection_filter(q.range, &groups) else {
            return Ok(empty(q, period, max_nodes));
        };
        if segments.is_empty() {
            return Ok(empty(q, period, max_nodes));
        }

        let values = self.stack_values(&segments, filter).await?;
        // Read again after the scan: segments committed since the first read are loaded
        // now, so every stack the scan returned has its symbols.
        let symbols = self.symbols.read(&q.tenant).await?;
        let tenant = q.tenant.clone();
        let root = tokio::task::spawn_blocking(move || {
            let mut symbolizer = Symbolizer::new(&symbols);
            for (stack_id, value) in values {
                symbolizer.add(stack_id, value);
            }
            let (root, missing) = symbolizer.finish();
            if !missing.is_empty() {
                tracing::warn!(%tenant, ?missing, "symbols missing, frames named <unknown>");
            }
            root
        })
        .await
        .map_err(|e| QueryError::Internal(format!("symbolization task failed: {e}")))?;

        let mut flamegraph = Flamegraph::new(q.profile_type.clone(), period, root);
        flamegraph.truncate(max_nodes);
        Ok(flamegraph)
    }

    /// `SELECT stack_id, SUM(value) ... WHERE filter GROUP BY stack_id` over the segments.
    async fn stack_values(
        &self,
        segments: &[SegmentMeta],
        filter: Expr,
    ) -> Result<Vec<(SymbolId, i64)>, QueryError> {
        let table = SamplesTable::new(&self.store, segments)?;
        let mut stream = self
            .ctx
            .read_table(Arc::new(table))?
            .filter(filter)?
            .aggregate(
                vec![col(samples::STACK_ID)],
                vec![sum(col(samples::VALUE)).alias(samples::VALUE)],
            )?
            .execute_stream()
            .await?;
        let mut values = Vec::new();
        while let Some(batch) = stream.try_next().await? {
            let (Some(stacks), Some(sums)) = (
                batch.column(0).as_fixed_size_binary_opt(),
                batch.column(1).as_primitive_opt::<Int64Type>(),
            ) else {
                return Err(QueryError::Internal(format!(
                    "unexpected aggregate schema {}",
                    batch.schema()
                )));
            };
            for i in 0..batch.num_rows() {
                let stack_id = SymbolId::from_slice(stacks.value(i))
                    .ok_or_else(|| QueryError::Internal("stack id is not 16 bytes".into()))?;
                // SUM is NULL only for a group without values, which contributes nothing.
                let value = if sums.is_null(i) { 0 } else { sums.value(i) };
                values.push((stack_id, value));
            }
        }
        Ok(values)
    }
}

fn empty(q: &FlamegraphQuery, period: i64, max_nodes: usize) -> Flamegraph {
    let mut flamegraph = Flamegraph::empty(q.profile_type.clone(), period);
    flamegraph.max_nodes = Some(max_nodes);
    flamegraph
}
