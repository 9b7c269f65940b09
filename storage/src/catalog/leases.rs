//! Leases: which replica runs compaction, retention and cleanup for now.

use std::time::Duration;

use async_trait::async_trait;

use super::CatalogResult;
use super::backend::{SqlCatalog, on_either};
use super::common::duration_nanos;

#[async_trait]
pub trait LeaseCatalog: Send + Sync {
    /// Takes or renews the lease `name` for `holder` until `now_nanos + ttl`. False while
    /// another holder's lease has not expired at `now_nanos`.
    ///
    /// `now_nanos` is the asker's clock, not the database's, so replicas must keep their
    /// clocks roughly in sync: ttls are seconds to minutes, skew is milliseconds.
    async fn acquire_lease(
        &self,
        name: &str,
        holder: &str,
        now_nanos: i64,
        ttl: Duration,
    ) -> CatalogResult<bool>;

    /// Gives a lease up early; a lease held by someone else is left alone.
    async fn release_lease(&self, name: &str, holder: &str) -> CatalogResult<()>;
}

const ACQUIRE_LEASE: &str = "INSERT INTO leases (name, holder, expires_at_nanos) VALUES ($1, $2, $3)
    ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at_nanos = excluded.expires_at_nanos
    WHERE leases.holder = excluded.holder OR leases.expires_at_nanos <= $4
    RETURNING holder";

const RELEASE_LEASE: &str = "DELETE FROM leases WHERE name = $1 AND holder = $2";

#[async_trait]
impl LeaseCatalog for SqlCatalog {
    async fn acquire_lease(&self, name: &str, holder: &str, now: i64, ttl: Duration) -> CatalogResult<bool> {
        let held: Option<String> = on_either!(self, |pool| sqlx::query_scalar(ACQUIRE_LEASE)
            .bind(name)
            .bind(holder)
            .bind(now.saturating_add(duration_nanos(ttl)))
            .bind(now)
            .fetch_optional(pool)
            .await?);
        Ok(held.is_some())
    }

    async fn release_lease(&self, name: &str, holder: &str) -> CatalogResult<()> {
        on_either!(self, |pool| {
            sqlx::query(RELEASE_LEASE)
                .bind(name)
                .bind(holder)
                .execute(pool)
                .await?;
        });
        Ok(())
    }
}
