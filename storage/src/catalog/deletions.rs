//! The deletion queue: objects replaced by compaction or retention, deleted from storage
//! once queries that listed them have had time to finish.

use async_trait::async_trait;

use super::CatalogResult;
use super::backend::{Dialect, PerDialect, SqlCatalog, on_either};
use super::common::keep_in_order;

#[async_trait]
pub trait DeletionQueue: Send + Sync {
    /// Up to `limit` object keys queued for deletion whose time has come (`<= now_nanos`).
    async fn due_deletions(&self, now_nanos: i64, limit: i64) -> CatalogResult<Vec<String>>;

    /// Removes keys from the deletion queue once their objects are gone.
    async fn forget_deletions(&self, keys: &[String]) -> CatalogResult<()>;

    /// The keys among `keys` that no segment, symbol object or queued deletion refers to.
    async fn unreferenced(&self, keys: &[String]) -> CatalogResult<Vec<String>>;
}

const DUE_DELETIONS: PerDialect = PerDialect {
    sqlite: "SELECT key FROM pending_deletions WHERE delete_after_nanos <= $1
        ORDER BY delete_after_nanos, key LIMIT $2",
    postgres: "SELECT key FROM pending_deletions WHERE delete_after_nanos <= $1
        ORDER BY delete_after_nanos, key COLLATE \"C\" LIMIT $2",
};

#[async_trait]
impl DeletionQueue for SqlCatalog {
    async fn due_deletions(&self, now_nanos: i64, limit: i64) -> CatalogResult<Vec<String>> {
        // A negative LIMIT means "no limit" to SQLite.
        Ok(on_either!(self, |pool| sqlx::query_scalar(
            pool.sql(&DUE_DELETIONS)
        )
        .bind(now_nanos)
        .bind(limit.max(0))
        .fetch_all(pool)
        .await?))
    }

    async fn forget_deletions(&self, keys: &[String]) -> CatalogResult<()> {
        on_either!(self, |pool| pool.forget_deletions(keys).await)
    }

    async fn unreferenced(&self, keys: &[String]) -> CatalogResult<Vec<String>> {
        let found = on_either!(self, |pool| pool.unreferenced(keys).await?);
        Ok(keep_in_order(keys, found))
    }
}
