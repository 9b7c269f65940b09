//! Compaction: a tenant's small segments of one window become one larger block (levels
//! in [`plan`]), and its many small symbol objects become few. Every hour block carries its
//! rollups ([`crate::rollup`]). The catalog swap is one transaction; replaced objects are
//! deleted later (see [`crate::cleanup`]) so queries that listed them finish first.

pub mod days;
mod lease;
pub(crate) mod merge;
pub mod plan;
mod symbols;

use std::sync::Arc;
use std::time::Duration;

pub use lease::{Lease, MIN_LEASE_TTL, heartbeat_period, tenant_lease};
pub use merge::rewrite;
pub use plan::{CompactMode, Group, Policy, TOP_LEVEL};

use crate::catalog::{CatalogError, SegmentMeta, SegmentReplacement};
use crate::clock::SharedClock;
use crate::model::TimeRange;
use crate::rollup::Resolution;
use crate::store::{Store, StoreError};

#[derive(Clone, Debug)]
pub struct CompactionConfig {
    /// How often the background task looks for work.
    pub interval: Duration,
    pub policy: Policy,
    /// Symbol objects of one size tier merged at once (size-tiered, so each symbol is
    /// rewritten a logarithmic number of times).
    pub symbol_tier_objects: usize,
    /// How long replaced objects stay readable after the swap.
    pub deletion_grace: Duration,
    /// How long a compactor's lease on a tenant lasts without renewal (see [`Lease`]).
    pub lease_ttl: Duration,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        CompactionConfig {
            interval: Duration::from_secs(5),
            policy: Policy {
                l1_window: Duration::from_secs(60),
                top_window: Duration::from_secs(3600),
                l0_max_age: Duration::from_secs(10),
                max_segments: 16,
                settle: Duration::from_secs(60),
                max_block_rows: 50_000_000,
            },
            symbol_tier_objects: 4,
            deletion_grace: Duration::from_secs(300),
            lease_ttl: Duration::from_secs(30),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CompactionError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error("tenant {0:?} is being compacted by another compactor")]
    Busy(String),
    #[error("lost the compaction lease on tenant {0:?} mid-pass; the pass stopped before its next commit")]
    LeaseLost(String),
}

/// What one pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompactionReport {
    pub merges: usize,
    pub segments_removed: usize,
    pub segments_added: usize,
    pub symbol_objects_removed: usize,
    pub symbol_objects_added: usize,
    /// Symbols (stack nodes, locations, functions, mappings, attribute sets) dropped because
    /// no segment used them any more.
    pub symbols_collected: usize,
    /// Merges dropped because another compactor had already replaced a segment.
    pub conflicts: usize,
    /// Day segments written (see [`days`]).
    pub days_summed: usize,
    /// Ids of the segments this pass removed.
    pub removed_ids: Vec<String>,
}

impl CompactionReport {
    pub fn add_from(&mut self, other: CompactionReport) {
        self.merges += other.merges;
        self.segments_removed += other.segments_removed;
        self.segments_added += other.segments_added;
        self.symbol_objects_removed += other.symbol_objects_removed;
        self.symbol_objects_added += other.symbol_objects_added;
        self.symbols_collected += other.symbols_collected;
        self.conflicts += other.conflicts;
        self.days_summed += other.days_summed;
        self.removed_ids.extend(other.removed_ids);
    }
}

pub use crate::catalog::CompactionCatalog;

pub struct Compactor {
    store: Store,
    catalog: Arc<dyn CompactionCatalog>,
    config: CompactionConfig,
    /// This process's name in leases.
    holder: String,
    /// The time plans, new segments, leases, deletion deadlines and retention cutoffs are
    /// taken from.
    clock: SharedClock,
}

impl Compactor {
    pub fn new(
        store: Store,
        catalog: Arc<dyn CompactionCatalog>,
        config: CompactionConfig,
        clock: SharedClock,
    ) -> Compactor {
        Compactor {
            store,
            catalog,
            config,
            holder: uuid::Uuid::now_v7().to_string(),
            clock,
        }
    }

    pub fn config(&self) -> &CompactionConfig {
        &self.config
    }

    pub fn clock(&self) -> &SharedClock {
        &self.clock
    }

    /// When objects replaced now may be deleted: after the deletion grace.
    pub(crate) fn deletion_deadline(&self) -> i64 {
        let grace = i64::try_from(self.config.deletion_grace.as_nanos()).unwrap_or(i64::MAX);
        self.clock.now_nanos().saturating_add(grace)
    }

    /// One pass over every tenant; a tenant another compactor holds is skipped.
    pub async fn run_once(&self) -> Result<CompactionReport, CompactionError> {
        let mut report = CompactionReport::default();
        for tenant in self.catalog.tenants().await? {
            match self.compact_tenant(&tenant, CompactMode::Due).await {
                Ok(r) => report.add_from(r),
                Err(CompactionError::Busy(_)) => {}
                Err(e) => tracing::warn!(%tenant, error = %e, "compaction failed"),
            }
        }
        Ok(report)
    }

    /// Compacts one tenant under its lease.
    pub async fn compact_tenant(
        &self,
        tenant: &str,
        mode: CompactMode,
    ) -> Result<CompactionReport, CompactionError> {
        let lease = self.lease(tenant).await?;
        let result = self.compact_leased(tenant, mode, &lease).await;
        lease.release().await;
        result
    }

    /// Takes this compactor's lease on `tenant`; [`CompactionError::Busy`] while another
    /// compactor holds it.
    pub(crate) async fn lease(&self, tenant: &str) -> Result<Lease, CompactionError> {
        Lease::acquire(
            self.catalog.clone(),
            self.clock.clone(),
            tenant,
            &self.holder,
            self.config.lease_ttl,
        )
        .await?
        .ok_or_else(|| CompactionError::Busy(tenant.to_string()))
    }

    async fn compact_leased(
        &self,
        tenant: &str,
        mode: CompactMode,
        lease: &Lease,
    ) -> Result<CompactionReport, CompactionError> {
        let mut report = CompactionReport::default();
        let segments = self.catalog.segments(tenant, TimeRange::ALL).await?;
        let groups = plan::plan(&segments, self.clock.now_nanos(), &self.config.policy, mode);
        for group in groups {
            // Besides the heartbeat: a rewrite starts with a whole TTL ahead.
            lease.renew().await?;
            report.add_from(self.merge(tenant, &group, lease).await?);
        }
        let segments = if report.merges > 0 {
            self.catalog.segments(tenant, TimeRange::ALL).await?
        } else {
            segments
        };
        report.add_from(days::compact(self, tenant, &segments, mode, lease).await?);
        report.add_from(symbols::compact(self, tenant, mode, lease).await?);
        Ok(report)
    }

    /// Replaces a group's segments by one rewritten segment of its level. An hour block
    /// merged with nothing else only lacks its rollups: they are added, its samples object
    /// is kept as it is.
    async fn merge(
        &self,
        tenant: &str,
        group: &Group,
        lease: &Lease,
    ) -> Result<CompactionReport, CompactionError> {
        let now = self.clock.now_nanos();
        let added = match group.segments.as_slice() {
            [block] if block.level == TOP_LEVEL && group.level == TOP_LEVEL => {
                Some(merge::relist(&self.store, block, now, &[Resolution::Raw], &Resolution::ROLLUPS).await?)
            }
            segments => rewrite(&self.store, tenant, segments, group.level, now).await?,
        };
        self.replace(tenant, &group.segments, added.into_iter().collect(), None, lease)
            .await
    }

    /// Swaps `removed` for `added` in one catalog transaction, if `lease` is still held. A
    /// conflict means another compactor got there first: the objects written for `added`
    /// are deleted and the pass goes on. A lost lease ends the pass the same way but
    /// without committing.
    pub(crate) async fn replace(
        &self,
        tenant: &str,
        removed: &[SegmentMeta],
        added: Vec<SegmentMeta>,
        drop_profiles_before: Option<i64>,
        lease: &Lease,
    ) -> Result<CompactionReport, CompactionError> {
        let replacement = SegmentReplacement {
            tenant: tenant.to_string(),
            removed: removed.iter().map(|s| s.id.clone()).collect(),
            added,
            drop_profiles_before,
            delete_after_nanos: self.deletion_deadline(),
        };
        let committed = lease.commit(self.catalog.replace_segments(&replacement)).await;
        match committed {
            Ok(()) => Ok(CompactionReport {
                merges: 1,
                segments_removed: removed.len(),
                segments_added: replacement.added.len(),
                removed_ids: replacement.removed,
                ..Default::default()
            }),
            Err(e) => {
                // Objects listed again still belong to the segments that stay.
                let old: std::collections::HashSet<&str> = removed
                    .iter()
                    .flat_map(|s| &s.objects)
                    .map(|o| o.key.as_str())
                    .collect();
                for object in replacement.added.iter().flat_map(|s| &s.objects) {
                    if !old.contains(object.key.as_str()) {
                        let _ = self.store.delete(&object.key).await;
                    }
                }
                match e {
                    CompactionError::Catalog(CatalogError::Conflict(reason)) => {
                        tracing::info!(%tenant, %reason, "merge lost a race; dropped");
                        Ok(CompactionReport {
                            conflicts: 1,
                            ..Default::default()
                        })
                    }
                    e => Err(e),
                }
            }
        }
    }

    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    pub(crate) fn catalog(&self) -> &Arc<dyn CompactionCatalog> {
        &self.catalog
    }
}
