//! Queries across query processes, on datafusion-distributed: the coordinator's planner
//! cuts a plan into stages at its partition-gathering points and ships the scan stages to
//! workers; each worker sums near the data and sends back one row per group.
//!
//! What is configured here: where the workers are ([`WorkerSource`], probed by
//! [`Workers`]), how many bytes of objects make one task (a smaller query stays
//! in-process), the shared secret every call to a worker carries, and the codec of our
//! own plan nodes.

mod channel;
mod codec;
mod resolver;
mod worker;

use datafusion::error::Result as DfResult;
use datafusion::execution::SessionStateBuilder;
use datafusion_distributed::{DistributedExt, SessionStateBuilderExt};
use http::HeaderValue;

pub use codec::StackhouseCodec;
pub use resolver::{DNS_REFRESH, WorkerSource, Workers};

use self::channel::Channels;

/// The metadata key of the cluster's shared secret on calls to a worker.
pub const SECRET_HEADER: &str = "x-stackhouse-cluster-secret";

/// The default of `--query-distribute-bytes`: 256 MiB of objects per task.
pub const DEFAULT_DISTRIBUTE_BYTES: u64 = 256 << 20;

/// How this process hands work to query workers.
#[derive(Clone)]
pub struct ClusterConfig {
    workers: Workers,
    channels: Channels,
    distribute_bytes: u64,
}

impl ClusterConfig {
    /// Starts probing the workers of `source`. `distribute_bytes` of `samples` objects make
    /// a task: a query over fewer runs in-process, one over N times as many runs as N tasks
    /// (at most one per live worker). `secret` goes with every call to a worker, which
    /// refuses calls without it.
    pub async fn start(
        source: WorkerSource,
        distribute_bytes: u64,
        secret: &str,
    ) -> Result<ClusterConfig, String> {
        let channels = Channels::new(secret_header(secret)?);
        let workers = Workers::start(source, channels.clone()).await?;
        Ok(ClusterConfig {
            workers,
            channels,
            distribute_bytes: distribute_bytes.max(1),
        })
    }

    /// The workers that answered the last probe.
    pub fn live_workers(&self) -> Vec<url::Url> {
        self.workers.urls()
    }

    /// Probes the workers now, so that a query planned next leaves out one that just
    /// failed.
    pub(crate) async fn reprobe(&self) {
        self.workers.reprobe().await;
    }
}

/// `secret` as the value of [`SECRET_HEADER`].
pub fn secret_header(secret: &str) -> Result<HeaderValue, String> {
    if secret.is_empty() {
        return Err("the cluster secret must not be empty".into());
    }
    HeaderValue::from_str(secret).map_err(|_| "the cluster secret must be printable ASCII".to_string())
}

impl std::fmt::Debug for ClusterConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterConfig")
            .field("live_workers", &self.workers.urls())
            .field("distribute_bytes", &self.distribute_bytes)
            .finish_non_exhaustive()
    }
}

/// `builder` with the distributed planner over `cluster`'s workers.
pub(crate) fn distribute(
    builder: SessionStateBuilder,
    cluster: &ClusterConfig,
    target_partitions: usize,
) -> DfResult<SessionStateBuilder> {
    // The planner counts tasks as bytes / per-partition bytes / target partitions.
    let per_partition = (cluster.distribute_bytes as usize / target_partitions.max(1)).max(1);
    builder
        .with_distributed_worker_resolver(cluster.workers.clone())
        .with_distributed_channel_resolver(cluster.channels.clone())
        .with_distributed_user_codec(StackhouseCodec)
        .with_distributed_planner()
        .with_distributed_file_scan_config_bytes_per_partition(per_partition)
}
