//! Running queries: catalog pruning, DataFusion aggregations over the chosen segments,
//! symbolization, and the shapes of each endpoint's result.

mod aggregate;
mod events;
mod export;
mod flamegraph;
mod plan;
mod profile;
mod timeseries;

use std::future::Future;
use std::sync::Arc;

use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use stackhouse_storage::catalog::Catalog;
use stackhouse_storage::model::ProfileType;
use stackhouse_storage::store::Store;
use stackhouse_storage::symbols::SymbolCache;

use crate::diff::Diff;
use crate::error::QueryError;
use crate::events::EventsPage;
use crate::limits::QueryLimits;
use crate::profile::ProfileMeta;
use crate::scope::{GroupKey, Scope};
use crate::timeseries::{Aggregation, Timeseries};
use crate::top::Top;
use crate::tree::Flamegraph;

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
}

impl Default for QueryConfig {
    fn default() -> Self {
        QueryConfig {
            target_partitions: std::thread::available_parallelism().map_or(1, |n| n.get()),
            batch_size: 8192,
            memory_limit_bytes: Some(DEFAULT_MEMORY_BUDGET),
            limits: QueryLimits::default(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct FlamegraphQuery {
    pub scope: Scope,
    /// Puts one level of `key=value` nodes under the root.
    pub group_by: Vec<GroupKey>,
    /// Node budget of the tree; 0 means [`crate::DEFAULT_MAX_NODES`].
    pub max_nodes: usize,
}

#[derive(Clone, Debug)]
pub struct TimeseriesQuery {
    pub scope: Scope,
    pub step_nanos: i64,
    pub group_by: Vec<GroupKey>,
    pub aggregation: Aggregation,
}

#[derive(Clone, Debug)]
pub struct TopQuery {
    pub scope: Scope,
    /// Most functions returned.
    pub limit: usize,
}

#[derive(Clone, Debug)]
pub struct DiffQuery {
    pub baseline: Scope,
    pub comparison: Scope,
    /// Node budget; 0 means [`crate::DEFAULT_MAX_NODES`].
    pub max_nodes: usize,
}

#[derive(Clone, Debug)]
pub struct EventsQuery {
    pub scope: Scope,
    /// Page size.
    pub limit: usize,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// What a pprof export holds.
// Built once per request and never stored, so the size difference costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum PprofQuery {
    /// The selected samples, each with its labels (series labels and sample attributes).
    Scope(Scope),
    /// Both sides of a diff, as two sample types `baseline` and `comparison`.
    Diff { baseline: Scope, comparison: Scope },
}

pub struct QueryEngine {
    store: Store,
    catalog: Arc<dyn Catalog>,
    symbols: Arc<SymbolCache>,
    limits: QueryLimits,
    memory_limit_bytes: Option<usize>,
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
            limits: config.limits,
            memory_limit_bytes: config.memory_limit_bytes,
            ctx,
        }
    }

    pub fn limits(&self) -> &QueryLimits {
        &self.limits
    }

    /// The call tree of the selected samples, values summed per call path. Selecting
    /// nothing is not an error: the result has total 0.
    pub async fn flamegraph(&self, q: &FlamegraphQuery) -> Result<Flamegraph, QueryError> {
        self.bounded(self.run_flamegraph(q)).await
    }

    /// Values bucketed by `step`, one series per group.
    pub async fn timeseries(&self, q: &TimeseriesQuery) -> Result<Timeseries, QueryError> {
        self.bounded(self.run_timeseries(q)).await
    }

    /// Functions by self value.
    pub async fn top(&self, q: &TopQuery) -> Result<Top, QueryError> {
        self.bounded(self.run_top(q)).await
    }

    /// One tree carrying both sides' values.
    pub async fn diff(&self, q: &DiffQuery) -> Result<Diff, QueryError> {
        self.bounded(self.run_diff(q)).await
    }

    /// One page of individual samples in time order.
    pub async fn events(&self, q: &EventsQuery) -> Result<EventsPage, QueryError> {
        self.bounded(self.run_events(q)).await
    }

    /// A gzipped pprof profile of the selection.
    pub async fn pprof(&self, q: &PprofQuery) -> Result<Vec<u8>, QueryError> {
        self.bounded(self.run_pprof(q)).await
    }

    /// Locates a stored profile: its metadata, and the scope that selects exactly its
    /// samples. `profile_type` picks one when the id was sent with several types;
    /// without it, such an id is an [`QueryError::InvalidArgument`] naming the types.
    /// An unknown id is [`QueryError::NotFound`].
    pub async fn find_profile(
        &self,
        tenant: &str,
        profile_id: [u8; 16],
        profile_type: Option<&ProfileType>,
    ) -> Result<(ProfileMeta, Scope), QueryError> {
        self.bounded(self.locate_profile(tenant, profile_id, profile_type))
            .await
    }

    /// Runs a query under the configured timeout; dropping the future cancels its scans.
    /// A memory error is told the budget here, where it is known.
    async fn bounded<T>(&self, query: impl Future<Output = Result<T, QueryError>>) -> Result<T, QueryError> {
        let result = tokio::time::timeout(self.limits.timeout, query)
            .await
            .unwrap_or(Err(QueryError::Timeout(self.limits.timeout)));
        result.map_err(|e| match e {
            QueryError::ResourcesExhausted { budget: None, detail } if is_memory_pool(&detail) => {
                QueryError::ResourcesExhausted {
                    budget: self.memory_limit_bytes,
                    detail,
                }
            }
            e => e,
        })
    }
}

/// Whether a DataFusion "resources exhausted" message is the memory pool's refusal
/// (rather than, say, the spill files' disk limit); DataFusion tells them apart only in
/// the text, whose pool message ends "remain available for the total memory pool".
fn is_memory_pool(detail: &str) -> bool {
    detail.contains("memory pool")
}
