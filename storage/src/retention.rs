//! Retention: samples older than a tenant's retention disappear. Segments entirely older
//! are dropped from the catalog; a segment straddling the cutoff is rewritten without its
//! expired samples, so queries see exactly what is retained.

use std::time::Duration;

use crate::catalog::SegmentReplacement;
use crate::compaction::{CompactionError, CompactionReport, Compactor, tenant_lease};
use crate::model::TimeRange;
use crate::per_tenant::PerTenant;

/// How long each tenant keeps its samples; zero keeps them forever.
pub type RetentionConfig = PerTenant<Duration>;

/// The retention of a tenant no flag names.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(30 * 24 * 3600);

impl PerTenant<Duration> {
    /// The oldest time (unix nanos) `tenant` keeps at `now`, or `None` when it keeps
    /// everything.
    pub fn cutoff(&self, tenant: &str, now: i64) -> Option<i64> {
        let keep = self.of(tenant);
        if keep.is_zero() {
            return None;
        }
        Some(now.saturating_sub(i64::try_from(keep.as_nanos()).unwrap_or(i64::MAX)))
    }
}

/// Applies retention to every tenant; tenants another process holds are skipped this time.
pub async fn run_once(
    compactor: &Compactor,
    config: &RetentionConfig,
) -> Result<CompactionReport, CompactionError> {
    let mut report = CompactionReport::default();
    for tenant in compactor.catalog().tenants().await? {
        let Some(cutoff) = config.cutoff(&tenant, compactor.clock().now_nanos()) else {
            continue;
        };
        match expire(compactor, &tenant, cutoff).await {
            Ok(r) => report.add_from(r),
            Err(CompactionError::Busy(_)) => {}
            Err(e) => tracing::warn!(%tenant, error = %e, "retention failed"),
        }
    }
    Ok(report)
}

/// Removes every sample of `tenant` before `cutoff` (unix nanos).
pub async fn expire(
    compactor: &Compactor,
    tenant: &str,
    cutoff: i64,
) -> Result<CompactionReport, CompactionError> {
    let catalog = compactor.catalog();
    let lease = tenant_lease(tenant);
    if !catalog
        .acquire_lease(&lease, compactor.holder(), compactor.config().lease_ttl)
        .await?
    {
        return Err(CompactionError::Busy(tenant.to_string()));
    }
    let result = async {
        let old = catalog
            .segments(
                tenant,
                TimeRange {
                    start: i64::MIN,
                    end: cutoff,
                },
            )
            .await?;
        let (expired, straddling): (Vec<_>, Vec<_>) = old.into_iter().partition(|s| s.max_time < cutoff);
        let mut report = CompactionReport::default();
        if !expired.is_empty() {
            let replacement = SegmentReplacement {
                tenant: tenant.to_string(),
                removed: expired.iter().map(|s| s.id.clone()).collect(),
                added: None,
                drop_profiles_before: Some(cutoff),
                delete_after_nanos: compactor.deletion_deadline(),
            };
            catalog.replace_segments(&replacement).await?;
            report.segments_removed += expired.len();
            report.removed_ids.extend(replacement.removed);
        }
        for segment in straddling {
            let level = segment.level;
            report.add_from(compactor.merge(tenant, &[segment], level, Some(cutoff)).await?);
        }
        Ok(report)
    }
    .await;
    if let Err(e) = catalog.release_lease(&lease, compactor.holder()).await {
        tracing::warn!(%tenant, error = %e, "releasing the compaction lease failed");
    }
    result
}
