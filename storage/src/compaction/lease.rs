//! The lease that serializes compaction and retention of one tenant. Its holder renews it
//! on a heartbeat for as long as the pass runs, so the TTL only has to outlast a few missed
//! renewals, not the longest rewrite: a killed holder's tenant is free again one TTL after
//! its last heartbeat. A pass commits only while it knows the lease is still its own.
//!
//! Two clocks: the catalog row expires by the injected wall clock, which every replica
//! compares against, while the holder's own certainty is measured on the monotonic clock
//! from before each renewal, so a wall clock that steps cannot make it overestimate.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::CompactionError;
use crate::catalog::{CatalogError, LeaseCatalog};
use crate::clock::{Clock, SharedClock};

/// The shortest lease TTL: the holder renews every [`heartbeat_period`], and a renewal is a
/// catalog round trip that may be slow under load, so a shorter TTL would let a live holder
/// lose its lease.
pub const MIN_LEASE_TTL: Duration = Duration::from_secs(3);

/// How often a holder renews its lease: three times per TTL, so two renewals may fail or
/// straggle before the lease lapses.
pub fn heartbeat_period(ttl: Duration) -> Duration {
    ttl / 3
}

/// The catalog name of the lease on `tenant`.
pub fn tenant_lease(tenant: &str) -> String {
    format!("compaction/{tenant}")
}

/// A held lease on one tenant, renewed in the background until [`Lease::release`] or drop.
/// Dropping it without releasing stops the heartbeat and leaves the lease to expire.
pub struct Lease {
    catalog: Arc<dyn LeaseCatalog>,
    clock: SharedClock,
    tenant: String,
    name: String,
    holder: String,
    ttl: Duration,
    held: Arc<Held>,
    /// Dropping it stops the heartbeat.
    stop: Option<oneshot::Sender<()>>,
    heartbeat: Option<JoinHandle<()>>,
}

impl Lease {
    /// Takes the lease on `tenant` for `holder`; `None` while another holder has it.
    pub async fn acquire(
        catalog: Arc<dyn LeaseCatalog>,
        clock: SharedClock,
        tenant: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>, CatalogError> {
        let name = tenant_lease(tenant);
        let started = Instant::now();
        if !catalog
            .acquire_lease(&name, holder, clock.now_nanos(), ttl)
            .await?
        {
            return Ok(None);
        }
        let held = Arc::new(Held(Mutex::new(Some(started + ttl))));
        let (stop, stopped) = oneshot::channel();
        let heartbeat = tokio::spawn(heartbeat(
            catalog.clone(),
            clock.clone(),
            name.clone(),
            holder.to_string(),
            ttl,
            held.clone(),
            stopped,
        ));
        Ok(Some(Lease {
            catalog,
            clock,
            tenant: tenant.to_string(),
            name,
            holder: holder.to_string(),
            ttl,
            held,
            stop: Some(stop),
            heartbeat: Some(heartbeat),
        }))
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Renews now, before a rewrite, so the rewrite starts with a whole TTL ahead even if
    /// heartbeats have been failing.
    pub async fn renew(&self) -> Result<(), CompactionError> {
        if self
            .held
            .renew(&*self.catalog, &*self.clock, &self.name, &self.holder, self.ttl)
            .await?
        {
            Ok(())
        } else {
            Err(CompactionError::LeaseLost(self.tenant.clone()))
        }
    }

    /// Ok while the lease is certainly this holder's: no renewal found another holder, and
    /// the last successful one is less than a TTL old. Checked right before each commit.
    pub fn check(&self) -> Result<(), CompactionError> {
        if self.held.is_held() {
            Ok(())
        } else {
            Err(CompactionError::LeaseLost(self.tenant.clone()))
        }
    }

    /// Runs `commit` only while the lease is certainly held (see [`Lease::check`]): every
    /// catalog swap of a pass goes through here.
    pub async fn commit(
        &self,
        commit: impl Future<Output = Result<(), CatalogError>>,
    ) -> Result<(), CompactionError> {
        self.check()?;
        Ok(commit.await?)
    }

    /// Stops the heartbeat, then gives the lease up. The heartbeat is waited for first, so
    /// a renewal in flight cannot take the lease again after the release.
    pub async fn release(mut self) {
        drop(self.stop.take());
        if let Some(heartbeat) = self.heartbeat.take() {
            let _ = heartbeat.await;
        }
        // A failed release only delays the next holder until the lease expires.
        if let Err(e) = self.catalog.release_lease(&self.name, &self.holder).await {
            tracing::warn!(tenant = %self.tenant, error = %e, "releasing the compaction lease failed");
        }
    }
}

/// Until when the lease is certainly held; `None` once it may have been another holder's.
struct Held(Mutex<Option<Instant>>);

impl Held {
    /// One renewal. Its expiry is counted from before the request, so it is never later
    /// than the catalog's. Losing the lease is final, and so is a lapse (a renewal that
    /// starts after the lease expired): another holder may have taken it and committed in
    /// between, so what this pass planned may be stale.
    async fn renew(
        &self,
        catalog: &dyn LeaseCatalog,
        clock: &dyn Clock,
        name: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<bool, CatalogError> {
        let started = Instant::now();
        let renewed = catalog
            .acquire_lease(name, holder, clock.now_nanos(), ttl)
            .await?;
        let mut until = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match (renewed, *until) {
            // Renewals may finish out of order; the latest expiry counts.
            (true, Some(old)) if started < old => *until = Some(old.max(started + ttl)),
            (_, Some(_)) => lose(&mut until),
            (_, None) => {}
        }
        Ok(renewed && until.is_some())
    }

    /// Whether the last renewal is less than a TTL old; once it is not, the lease is lost
    /// for good, as a lapse found by a renewal is.
    fn is_held(&self) -> bool {
        let mut until = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match *until {
            Some(t) if Instant::now() < t => true,
            Some(_) => {
                lose(&mut until);
                false
            }
            None => false,
        }
    }
}

/// Marks a held lease lost, counted once per lease in
/// `stackhouse_compaction_leases_lost_total`.
fn lose(until: &mut Option<Instant>) {
    if until.take().is_some() {
        metrics::counter!("stackhouse_compaction_leases_lost_total").increment(1);
    }
}

/// Renews every [`heartbeat_period`] until `stop` fires or the lease is lost. A failed
/// renewal is retried at the next beat; if none succeeds for a TTL, the lease has lapsed.
async fn heartbeat(
    catalog: Arc<dyn LeaseCatalog>,
    clock: SharedClock,
    name: String,
    holder: String,
    ttl: Duration,
    held: Arc<Held>,
    mut stop: oneshot::Receiver<()>,
) {
    let period = heartbeat_period(ttl);
    loop {
        tokio::select! {
            biased;
            _ = &mut stop => return,
            _ = tokio::time::sleep(period) => {}
        }
        match held.renew(&*catalog, &*clock, &name, &holder, ttl).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(lease = %name, "the lease lapsed or another compactor holds it; this pass commits nothing more");
                return;
            }
            Err(e) => tracing::warn!(lease = %name, error = %e, "renewing the lease failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use metrics_exporter_prometheus::PrometheusBuilder;

    use super::*;

    #[test]
    fn a_lapsed_lease_is_lost_for_good_and_counted_once() {
        let recorder = PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        let lapsed = Held(Mutex::new(Some(Instant::now() - Duration::from_millis(1))));
        let fresh = Held(Mutex::new(Some(Instant::now() + Duration::from_secs(600))));
        metrics::with_local_recorder(&recorder, || {
            assert!(fresh.is_held());
            assert!(!lapsed.is_held());
            assert!(!lapsed.is_held(), "a lapse is final");
        });
        let text = handle.render();
        assert!(
            text.contains("stackhouse_compaction_leases_lost_total 1\n"),
            "{text}"
        );
    }
}
