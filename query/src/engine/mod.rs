//! The machinery every endpoint shares: the engine and its limits, the scope of a query,
//! catalog pruning (`plan`), the DataFusion scan and aggregation (`scan`, `selection`,
//! `aggregate`, and `stack_sums`, the plan nodes of the ungrouped sum), grouping, and building call trees (`stack_tree`). The endpoints
//! themselves are in `crate::endpoints`.

pub(crate) mod aggregate;
pub(crate) mod deleted;
mod gather;
pub(crate) mod grouping;
mod known_types;
pub(crate) mod plan;
pub(crate) mod scan;
pub(crate) mod scope;
pub(crate) mod selection;
pub(crate) mod stack_sums;
pub(crate) mod stack_tree;
pub(crate) mod tenants;
pub(crate) mod tiers;

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use datafusion::execution::SessionStateBuilder;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use stackhouse_storage::catalog::Catalog;
use stackhouse_storage::clock::{self, SharedClock};
use stackhouse_storage::model::TimeRange;
use stackhouse_storage::store::Store;
use stackhouse_storage::symbols::SymbolCache;

use self::gather::GatherPartialAggregates;
use self::stack_sums::StackSumRule;
use crate::call_paths::CallPathCache;
use crate::cluster::{self, ClusterConfig};
use crate::debuginfo::{DebugInfo, DebugInfoConfig};
use crate::error::QueryError;
use crate::limits::QueryLimits;
use known_types::KnownTypes;

/// The default of [`QueryConfig::memory_limit_bytes`]: 2 GiB.
pub const DEFAULT_MEMORY_BUDGET: usize = 2 << 30;

#[derive(Clone, Debug)]
pub struct QueryConfig {
    /// How many partitions DataFusion scans and aggregates in parallel.
    pub target_partitions: usize,
    /// Rows per Arrow batch.
    pub batch_size: usize,
    /// Memory all running queries may use together; a query that needs more fails with
    /// [`QueryError::ResourcesExhausted`] naming it. `None` means unbounded.
    pub memory_limit_bytes: Option<usize>,
    pub limits: QueryLimits,
    /// Entries (call path nodes, resolved stacks and locations) a tenant's cached call
    /// paths may hold before they are dropped and built again; about 40 bytes each.
    pub path_cache_entries: usize,
    /// Debug files for native frames: limits, cache and debuginfod servers.
    pub debuginfo: DebugInfoConfig,
    /// Query workers to hand large scans to; `None` runs every query in-process.
    pub cluster: Option<ClusterConfig>,
    /// Whether queries read the rollup tiers where they answer exactly; `false` reads raw
    /// samples only (what the tiers are compared against).
    pub rollups: bool,
    /// "now" of every query (default ranges, relative times like `now-1h`) and of debug
    /// file uploads: the process's one clock, so a test can run time forward.
    pub clock: SharedClock,
    /// How long a deletion request may be cancelled after it is made.
    pub deletion_cancel_period: std::time::Duration,
}

/// The default of [`QueryConfig::deletion_cancel_period`].
pub const DEFAULT_DELETION_CANCEL_PERIOD: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// The default of [`QueryConfig::path_cache_entries`]: about 160 MiB per tenant at most.
pub const DEFAULT_PATH_CACHE_ENTRIES: usize = 4 << 20;

impl Default for QueryConfig {
    fn default() -> Self {
        QueryConfig {
            target_partitions: std::thread::available_parallelism().map_or(1, |n| n.get()),
            batch_size: 8192,
            memory_limit_bytes: Some(DEFAULT_MEMORY_BUDGET),
            limits: QueryLimits::default(),
            path_cache_entries: DEFAULT_PATH_CACHE_ENTRIES,
            debuginfo: DebugInfoConfig::default(),
            cluster: None,
            rollups: true,
            clock: clock::system(),
            deletion_cancel_period: DEFAULT_DELETION_CANCEL_PERIOD,
        }
    }
}

pub struct QueryEngine {
    pub(crate) store: Store,
    pub(crate) catalog: Arc<dyn Catalog>,
    pub(crate) symbols: Arc<SymbolCache>,
    pub(crate) call_paths: CallPathCache,
    pub(crate) debuginfo: Arc<DebugInfo>,
    pub(crate) limits: QueryLimits,
    pub(crate) rollups: bool,
    pub(crate) known_types: KnownTypes,
    /// The query workers, asked again when one fails a query (see `aggregate`).
    pub(crate) cluster: Option<ClusterConfig>,
    memory_limit_bytes: Option<usize>,
    /// "now" of every query: default ranges and relative times (`now-1h`).
    clock: SharedClock,
    pub(crate) deletion_cancel_period: std::time::Duration,
    /// Shared by all queries: one memory pool, one Parquet footer cache.
    pub(crate) ctx: SessionContext,
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
        // A scan of fewer files than partitions (a block's rollup tier is one file) is read
        // by one thread either way. Dealing its batches round robin to every partition
        // only spreads its stacks over one partial sum per core, each a map of every stack
        // that the final sum then merges again: the whole-range flamegraph of one block
        // took 10-15 % longer that way.
        session.options_mut().optimizer.enable_round_robin_repartition = false;
        let mut runtime = RuntimeEnvBuilder::new();
        if let Some(limit) = config.memory_limit_bytes {
            runtime = runtime.with_memory_limit(limit, 1.0);
        }
        // The default disk manager creates its directories lazily and the default caches
        // cannot be misconfigured, so building the runtime does not fail.
        let runtime = runtime.build_arc().expect("default datafusion runtime");
        runtime.register_object_store(store.base_url(), store.object_store());
        let target_partitions = session.target_partitions();
        let mut state = SessionStateBuilder::new()
            .with_config(session)
            .with_runtime_env(runtime)
            .with_default_features()
            .with_physical_optimizer_rule(Arc::new(StackSumRule));
        if let Some(cluster) = &config.cluster {
            state = state.with_physical_optimizer_rule(Arc::new(GatherPartialAggregates));
            // Fails only when the distributed config extension is missing, which
            // `distribute` itself installs first.
            state =
                cluster::distribute(state, cluster, target_partitions).expect("distributed planner config");
        }
        let ctx = SessionContext::new_with_state(state.build());
        let debuginfo = Arc::new(DebugInfo::new(
            store.clone(),
            catalog.clone(),
            config.debuginfo,
            config.clock.clone(),
        ));
        QueryEngine {
            store,
            catalog,
            symbols,
            call_paths: CallPathCache::new(config.path_cache_entries),
            debuginfo,
            limits: config.limits,
            rollups: config.rollups,
            known_types: KnownTypes::default(),
            cluster: config.cluster,
            memory_limit_bytes: config.memory_limit_bytes,
            clock: config.clock,
            deletion_cancel_period: config.deletion_cancel_period,
            ctx,
        }
    }

    /// Nanoseconds since the Unix epoch by the injected clock.
    pub fn now_nanos(&self) -> i64 {
        self.clock.now_nanos()
    }

    pub fn limits(&self) -> &QueryLimits {
        &self.limits
    }

    /// Parquet footers held in this process's metadata cache, its own queries' and those
    /// it ran as a query worker alike.
    pub fn cached_footers(&self) -> usize {
        self.ctx
            .runtime_env()
            .cache_manager
            .get_file_metadata_cache()
            .len()
    }

    /// The tenants' debug files: what the debuginfo API uploads, lists and deletes.
    pub fn debuginfo(&self) -> &DebugInfo {
        &self.debuginfo
    }

    /// Runs a query under the configured timeout; dropping the future cancels its scans.
    /// A memory error is told the budget here, where it is known. Every endpoint, data
    /// query or listing, runs through here, so each is timed and counted the same way
    /// under its `endpoint` name.
    ///
    /// An endpoint that runs others (a Pyroscope method listing series and label names, a
    /// request resolving its profile type) is one request: the inner ones run inside the
    /// outer one's timeout and are neither timed nor counted again.
    pub(crate) async fn bounded<T>(
        &self,
        endpoint: &'static str,
        query: impl Future<Output = Result<T, QueryError>>,
    ) -> Result<T, QueryError> {
        if IN_ENDPOINT.try_with(|_| ()).is_ok() {
            return query.await;
        }
        IN_ENDPOINT
            .scope((), self.bounded_outermost(endpoint, query))
            .await
    }

    async fn bounded_outermost<T>(
        &self,
        endpoint: &'static str,
        query: impl Future<Output = Result<T, QueryError>>,
    ) -> Result<T, QueryError> {
        let started = Instant::now();
        let result = if self.limits.timeout.is_zero() {
            // Nothing finishes in no time; without this a zero timeout would race the
            // timer's millisecond tick against a catalog read that answers sooner.
            Err(QueryError::Timeout(self.limits.timeout))
        } else {
            tokio::time::timeout(self.limits.timeout, query)
                .await
                .unwrap_or(Err(QueryError::Timeout(self.limits.timeout)))
        };
        let result = result.map_err(|e| match e {
            QueryError::ResourcesExhausted { budget: None, detail } if is_memory_pool(&detail) => {
                QueryError::ResourcesExhausted {
                    budget: self.memory_limit_bytes,
                    detail,
                }
            }
            e => e,
        });
        let outcome = match &result {
            Ok(_) => "ok",
            Err(QueryError::Timeout(_)) => "timeout",
            Err(e) if e.is_limit() => "limit",
            Err(e) if e.is_client_error() => "invalid",
            Err(_) => "error",
        };
        metrics::histogram!("stackhouse_query_duration_seconds", "endpoint" => endpoint, "outcome" => outcome)
            .record(started.elapsed().as_secs_f64());
        result
    }

    /// A catalog listing of `tenant`'s data in `range` (label names or values, series,
    /// profile types), held to `max_range` and run as `endpoint`, as a data query is.
    pub(crate) async fn listing<T>(
        &self,
        endpoint: &'static str,
        tenant: &str,
        range: TimeRange,
        read: impl Future<Output = Result<T, QueryError>>,
    ) -> Result<T, QueryError> {
        self.bounded(endpoint, async {
            self.check_range(tenant, range).await?;
            read.await
        })
        .await
    }
}

tokio::task_local! {
    /// Set while an endpoint runs, so endpoints it calls are part of it (see `bounded`).
    static IN_ENDPOINT: ();
}

/// Whether a DataFusion "resources exhausted" message is the memory pool's refusal
/// (rather than, say, the spill files' disk limit); DataFusion tells them apart only in
/// the text, whose pool message ends "remain available for the total memory pool".
fn is_memory_pool(detail: &str) -> bool {
    detail.contains("memory pool")
}
