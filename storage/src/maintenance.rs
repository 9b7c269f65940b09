//! The background task of the compactor role: compaction, purges of deletion requests with
//! retention, and cleanup, each on its own interval, until shutdown.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::MissedTickBehavior;

use crate::catalog::DeletionQueue;
use crate::cleanup;
use crate::clock::SharedClock;
use crate::compaction::{CompactionCatalog, CompactionConfig, Compactor};
use crate::purge;
use crate::retention::{self, RetentionConfig};
use crate::store::Store;

#[derive(Clone, Debug)]
pub struct MaintenanceConfig {
    pub compaction: CompactionConfig,
    pub retention: RetentionConfig,
    pub retention_interval: Duration,
    /// How often queued deletions are carried out.
    pub cleanup_interval: Duration,
    pub orphan_interval: Duration,
    /// Unreferenced objects younger than this are left alone (a write may be committing).
    pub orphan_grace: Duration,
}

impl Default for MaintenanceConfig {
    fn default() -> Self {
        MaintenanceConfig {
            compaction: CompactionConfig::default(),
            retention: RetentionConfig::default(),
            retention_interval: Duration::from_secs(60),
            cleanup_interval: Duration::from_secs(30),
            orphan_interval: Duration::from_secs(3600),
            orphan_grace: Duration::from_secs(3600),
        }
    }
}

/// Runs until `shutdown` turns true: compaction and retention on `catalog`, cleanup of
/// what they replaced through `deletions`.
pub async fn run(
    store: Store,
    catalog: Arc<dyn CompactionCatalog>,
    deletions: Arc<dyn DeletionQueue>,
    config: MaintenanceConfig,
    clock: SharedClock,
    mut shutdown: watch::Receiver<bool>,
) {
    let compactor = Compactor::new(store.clone(), catalog, config.compaction.clone(), clock.clone());
    let ticker = |period: Duration| {
        let mut t = tokio::time::interval(period.max(Duration::from_millis(10)));
        t.set_missed_tick_behavior(MissedTickBehavior::Delay);
        t
    };
    let mut compact = ticker(config.compaction.interval);
    let mut retain = ticker(config.retention_interval);
    let mut clean = ticker(config.cleanup_interval);
    let mut orphans = ticker(config.orphan_interval);
    // At 0 from the first scrape: an alert on its increase has a series before any loss.
    metrics::counter!("stackhouse_compaction_leases_lost_total").increment(0);
    loop {
        tokio::select! {
            // The `Ref` that `wait_for` returns holds a lock: drop it inside, so this
            // future stays `Send` for `tokio::spawn`.
            _ = async { let _ = shutdown.wait_for(|stop| *stop).await; } => return,
            _ = compact.tick() => {
                let result = compactor.run_once().await;
                metrics::counter!("stackhouse_compaction_runs_total", "outcome" => outcome(&result)).increment(1);
                match result {
                    Ok(r) if r.merges > 0 => tracing::info!(merges = r.merges, removed = r.segments_removed,
                        symbol_objects = r.symbol_objects_removed, "compacted"),
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "compaction pass failed"),
                }
            }
            _ = retain.tick() => {
                // Purged first: retention then works from what deletions left.
                let result = purge::run_once(&compactor).await;
                metrics::counter!("stackhouse_purge_runs_total", "outcome" => outcome(&result)).increment(1);
                match result {
                    Ok(r) if r.segments_removed > 0 => tracing::info!(rewritten = r.segments_removed, "purged deleted samples"),
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "purge pass failed"),
                }
                let result = retention::run_once(&compactor, &config.retention).await;
                metrics::counter!("stackhouse_retention_runs_total", "outcome" => outcome(&result)).increment(1);
                match result {
                    Ok(r) if r.segments_removed > 0 => tracing::info!(removed = r.segments_removed, "retention"),
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "retention pass failed"),
                }
            }
            _ = clean.tick() => {
                if let Err(e) = cleanup::delete_due(&store, &*deletions, &*clock).await {
                    tracing::warn!(error = %e, "deleting replaced objects failed");
                }
            }
            _ = orphans.tick() => {
                if let Err(e) = cleanup::delete_orphans(&store, &*deletions, config.orphan_grace, &*clock).await {
                    tracing::warn!(error = %e, "orphan cleanup failed");
                }
            }
        }
    }
}

/// The `outcome` label of a maintenance run.
fn outcome<T, E>(result: &Result<T, E>) -> &'static str {
    if result.is_ok() { "ok" } else { "error" }
}
