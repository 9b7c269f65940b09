//! Symbol objects: the tenant's stacks, locations, functions and mappings, which belong to
//! the tenant rather than to a time window.

use async_trait::async_trait;

use super::backend::{Dialect, PerDialect, SqlCatalog, SymbolSwap, on_either};
use super::common::{ObjectColumns, distinct_sorted};
use super::{CatalogError, CatalogResult, ObjectMeta};

#[async_trait]
pub trait SymbolCatalog: Send + Sync {
    /// Every symbol object of `tenant`, oldest first.
    async fn symbol_objects(&self, tenant: &str) -> CatalogResult<Vec<ObjectMeta>>;

    /// Swaps symbol objects of `tenant` for merged ones in one transaction. Every key in
    /// `removed` must still be listed, else [`super::CatalogError::Conflict`]; the removed
    /// objects are queued for deletion after `delete_after_nanos`. The merged objects take
    /// the place of the oldest one they replace in the tenant's order, so adding objects
    /// without removing any is refused.
    async fn replace_symbols(
        &self,
        tenant: &str,
        removed: &[String],
        added: &[ObjectMeta],
        delete_after_nanos: i64,
    ) -> CatalogResult<()>;
}

const SYMBOL_OBJECTS: PerDialect = PerDialect {
    sqlite: "SELECT kind, key, size_bytes, rows FROM symbol_objects WHERE tenant = $1
        ORDER BY created_at_nanos, key",
    postgres: "SELECT kind, key, size_bytes, rows FROM symbol_objects WHERE tenant = $1
        ORDER BY created_at_nanos, key COLLATE \"C\"",
};

#[async_trait]
impl SymbolCatalog for SqlCatalog {
    async fn symbol_objects(&self, tenant: &str) -> CatalogResult<Vec<ObjectMeta>> {
        let rows: Vec<ObjectColumns> = on_either!(self, |pool| sqlx::query_as(pool.sql(&SYMBOL_OBJECTS))
            .bind(tenant)
            .fetch_all(pool)
            .await?);
        rows.into_iter().map(ObjectMeta::try_from).collect()
    }

    async fn replace_symbols(
        &self,
        tenant: &str,
        removed: &[String],
        added: &[ObjectMeta],
        delete_after_nanos: i64,
    ) -> CatalogResult<()> {
        if removed.is_empty() {
            return match added {
                [] => Ok(()),
                _ => Err(CatalogError::Corrupt(format!(
                    "symbol replacement for tenant {tenant:?} adds objects but removes none, so they have no place in the tenant's order"
                ))),
            };
        }
        let removed = distinct_sorted(removed);
        let kept_keys: Vec<String> = added.iter().map(|o| o.key.clone()).collect();
        let swap = SymbolSwap {
            tenant,
            removed: &removed,
            added,
            kept_keys: &kept_keys,
            delete_after_nanos,
        };
        on_either!(self, |pool| pool.replace_symbols(swap).await)
    }
}
