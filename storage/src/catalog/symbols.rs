//! Symbol objects: the tenant's stacks, locations, functions and mappings, which belong to
//! the tenant rather than to a time window.

use async_trait::async_trait;
use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Transaction, Type};

use super::backend::{Dialect, PerDialect, SqlCatalog, SymbolSwap, on_either};
use super::common::{ObjectColumns, distinct_sorted};
use super::{CatalogError, CatalogResult, ObjectMeta};

/// Where a tenant's symbols stand (see migration `0011_symbol_epochs`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SymbolEpoch {
    /// Odd while a collection is under way: writers then bring every symbol they use.
    pub epoch: i64,
    /// A purge removed samples since the last collection.
    pub collect: bool,
}

impl SymbolEpoch {
    pub fn collecting(&self) -> bool {
        Self::collecting_at(self.epoch)
    }

    /// Whether a collection is under way at `epoch`.
    pub fn collecting_at(epoch: i64) -> bool {
        epoch % 2 == 1
    }
}

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

    /// The tenant's symbol epoch. A writer reads it before it lists symbol objects, so a
    /// collection committed in between makes its epoch stale rather than its listing.
    async fn symbol_epoch(&self, tenant: &str) -> CatalogResult<SymbolEpoch>;

    /// Notes that samples of `tenant` were removed, so some symbols may be used no more.
    async fn symbols_to_collect(&self, tenant: &str) -> CatalogResult<()>;

    /// Starts collecting `tenant`'s unused symbols: the epoch moves to the next odd number,
    /// which is returned. Every commit after this one is by a writer that brings all the
    /// symbols it uses, or is refused; so what the segments listed now use is all that
    /// the symbol objects listed now must keep.
    async fn begin_symbol_collection(&self, tenant: &str) -> CatalogResult<i64>;

    /// [`SymbolCatalog::replace_symbols`] that ends the collection begun at `epoch`: the
    /// epoch moves to the next even number and the tenant has nothing left to collect, in
    /// the same transaction. [`CatalogError::Conflict`] when the epoch moved meanwhile.
    async fn collect_symbols(
        &self,
        tenant: &str,
        removed: &[String],
        added: &[ObjectMeta],
        delete_after_nanos: i64,
        epoch: i64,
    ) -> CatalogResult<()>;
}

const SYMBOL_EPOCH: &str = "SELECT epoch, collect FROM symbol_epochs WHERE tenant = $1";

const TO_COLLECT: &str = "INSERT INTO symbol_epochs (tenant, epoch, collect) VALUES ($1, 0, TRUE)
    ON CONFLICT (tenant) DO UPDATE SET collect = TRUE";

/// The next odd epoch: a collection killed midway left an odd one, which moves on too, so
/// writers listed under it are refused as well.
const BEGIN_COLLECTION: &str = "INSERT INTO symbol_epochs (tenant, epoch, collect) VALUES ($1, 1, TRUE)
    ON CONFLICT (tenant) DO UPDATE SET epoch = symbol_epochs.epoch + 1 + symbol_epochs.epoch % 2
    RETURNING epoch";

/// `$2` the epoch the collection began at.
const END_COLLECTION: &str = "UPDATE symbol_epochs SET epoch = epoch + 1, collect = FALSE
    WHERE tenant = $1 AND epoch = $2 RETURNING epoch";

/// Ends the collection of `tenant`'s symbols begun at `epoch`, in the transaction that
/// swaps its symbol objects; a conflict when the epoch moved meanwhile.
pub(crate) async fn end_collection<DB>(
    tx: &mut Transaction<'_, DB>,
    tenant: &str,
    epoch: i64,
) -> CatalogResult<()>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Decode<'q, DB> + Type<DB>,
    usize: ColumnIndex<DB::Row>,
{
    let ended: Option<i64> = sqlx::query_scalar(END_COLLECTION)
        .bind(tenant)
        .bind(epoch)
        .fetch_optional(&mut **tx)
        .await?;
    match ended {
        Some(_) => Ok(()),
        None => Err(CatalogError::Conflict(format!(
            "the symbol collection of tenant {tenant:?} begun at epoch {epoch} was overtaken by another"
        ))),
    }
}

/// `tenant`'s symbol epoch as `tx` sees it (0 without a row): what a segment commit
/// checks its writer's epoch against.
pub(crate) async fn epoch_in<DB>(tx: &mut Transaction<'_, DB>, tenant: &str) -> CatalogResult<i64>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Decode<'q, DB> + Type<DB>,
    usize: ColumnIndex<DB::Row>,
{
    let epoch: Option<i64> = sqlx::query_scalar("SELECT epoch FROM symbol_epochs WHERE tenant = $1")
        .bind(tenant)
        .fetch_optional(&mut **tx)
        .await?;
    Ok(epoch.unwrap_or(0))
}

/// Moves `tenant` to a new even epoch after its symbols were all dropped (tenant deletion):
/// writers that listed them before are refused.
pub(crate) const FORGET_ALL: &str = "INSERT INTO symbol_epochs (tenant, epoch, collect) VALUES ($1, 2, FALSE)
    ON CONFLICT (tenant) DO UPDATE SET epoch = symbol_epochs.epoch + 2 - symbol_epochs.epoch % 2, collect = FALSE";

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
        self.swap_symbols(tenant, removed, added, delete_after_nanos, None)
            .await
    }

    async fn symbol_epoch(&self, tenant: &str) -> CatalogResult<SymbolEpoch> {
        let row: Option<(i64, bool)> = on_either!(self, |pool| sqlx::query_as(SYMBOL_EPOCH)
            .bind(tenant)
            .fetch_optional(pool)
            .await?);
        Ok(row
            .map(|(epoch, collect)| SymbolEpoch { epoch, collect })
            .unwrap_or_default())
    }

    async fn symbols_to_collect(&self, tenant: &str) -> CatalogResult<()> {
        on_either!(self, |pool| sqlx::query(TO_COLLECT)
            .bind(tenant)
            .execute(pool)
            .await
            .map(drop)?);
        Ok(())
    }

    async fn begin_symbol_collection(&self, tenant: &str) -> CatalogResult<i64> {
        on_either!(self, |pool| {
            let mut tx = pool.begin_symbol_epoch_change(tenant).await?;
            let epoch: i64 = sqlx::query_scalar(BEGIN_COLLECTION)
                .bind(tenant)
                .fetch_one(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(epoch)
        })
    }

    async fn collect_symbols(
        &self,
        tenant: &str,
        removed: &[String],
        added: &[ObjectMeta],
        delete_after_nanos: i64,
        epoch: i64,
    ) -> CatalogResult<()> {
        self.swap_symbols(tenant, removed, added, delete_after_nanos, Some(epoch))
            .await
    }
}

impl SqlCatalog {
    async fn swap_symbols(
        &self,
        tenant: &str,
        removed: &[String],
        added: &[ObjectMeta],
        delete_after_nanos: i64,
        collection: Option<i64>,
    ) -> CatalogResult<()> {
        if removed.is_empty() && !added.is_empty() {
            return Err(CatalogError::Corrupt(format!(
                "symbol replacement for tenant {tenant:?} adds objects but removes none, so they have no place in the tenant's order"
            )));
        }
        if removed.is_empty() && collection.is_none() {
            return Ok(());
        }
        let removed = distinct_sorted(removed);
        let kept_keys: Vec<String> = added.iter().map(|o| o.key.clone()).collect();
        let swap = SymbolSwap {
            tenant,
            removed: &removed,
            added,
            kept_keys: &kept_keys,
            delete_after_nanos,
            collection,
        };
        on_either!(self, |pool| pool.replace_symbols(swap).await)
    }
}
