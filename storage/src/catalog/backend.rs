//! One catalog type over either database. Where SQLite and Postgres agree, an entity's SQL
//! is written once, in the entity's module, and [`on_either!`] runs it against whichever
//! pool the catalog holds (so it is type-checked against both drivers, with no trait
//! bounds to spell out). What really differs is a [`Dialect`] method, or a [`PerDialect`]
//! statement where only the text differs.

use sqlx::postgres::PgPool;
use sqlx::sqlite::SqlitePool;
use sqlx::{Database, Transaction};

use super::{CatalogResult, CommitOutcome, ObjectMeta, SegmentCommit, SegmentMeta, SegmentReplacement};
use crate::model::{ProfileKey, ProfileRecord, Series};

/// The metadata index in one SQLite file (the single binary) or in Postgres (replicas
/// sharing it); open one with [`super::open_catalog`].
#[derive(Clone, Debug)]
pub struct SqlCatalog {
    pub(crate) backend: Backend,
}

#[derive(Clone, Debug)]
pub(crate) enum Backend {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// `on_either!(catalog, |pool| body)`: `body` once per backend, with `pool` the catalog's
/// `SqlitePool` or `PgPool`.
macro_rules! on_either {
    ($catalog:expr, |$pool:ident| $body:expr) => {
        match &$catalog.backend {
            $crate::catalog::backend::Backend::Sqlite($pool) => $body,
            $crate::catalog::backend::Backend::Postgres($pool) => $body,
        }
    };
}
pub(crate) use on_either;

/// A statement whose text differs between the dialects, e.g. where Postgres needs
/// `COLLATE "C"` to order keys bytewise as SQLite does.
pub(crate) struct PerDialect {
    pub(crate) sqlite: &'static str,
    pub(crate) postgres: &'static str,
}

/// What each backend does its own way: SQLite binds lists as one JSON parameter read with
/// `json_each` and writes row by row under `BEGIN IMMEDIATE`; Postgres binds arrays,
/// `UNNEST`s them and locks rows with `FOR UPDATE`.
pub(crate) trait Dialect {
    type Db: Database;

    fn sql(&self, statement: &PerDialect) -> &'static str;

    /// A transaction whose reads see one snapshot, so the rows of several statements agree.
    async fn begin_snapshot(&self) -> CatalogResult<Transaction<'static, Self::Db>>;

    async fn commit_segment(&self, claim: Claim<'_>) -> CatalogResult<CommitOutcome>;

    async fn replace_segments(&self, swap: SegmentSwap<'_>) -> CatalogResult<()>;

    async fn replace_symbols(&self, swap: SymbolSwap<'_>) -> CatalogResult<()>;

    /// Inserts a segment's row with its objects and series extents.
    async fn insert_segment_rows(
        &self,
        tx: &mut Transaction<'_, Self::Db>,
        segment: &SegmentMeta,
    ) -> CatalogResult<()>;

    /// A transaction that may change `tenant`'s symbol epoch: it waits for the segment
    /// commits checking the epoch, and they for it.
    async fn begin_symbol_epoch_change(&self, tenant: &str) -> CatalogResult<Transaction<'static, Self::Db>>;

    /// A transaction that changes `tenant`'s recording rules, one at a time per tenant, so
    /// two creations cannot both take the last place under the tenant's rule limit.
    async fn begin_rules_change(&self, tenant: &str) -> CatalogResult<Transaction<'static, Self::Db>>;

    async fn forget_deletions(&self, keys: &[String]) -> CatalogResult<()>;

    /// Distinct keys among `keys` nothing refers to, in no particular order.
    async fn unreferenced(&self, keys: &[String]) -> CatalogResult<Vec<String>>;

    /// The `(profile_id, series_id, start_nanos)` rows of `keys` that `tenant` has stored.
    async fn stored_profiles(
        &self,
        tenant: &str,
        keys: &[ProfileKey],
    ) -> CatalogResult<Vec<(Vec<u8>, i64, i64)>>;
}

/// A [`super::SegmentCatalog::commit_segment_within`] call, checked.
pub(crate) struct Claim<'a> {
    pub(crate) commit: &'a SegmentCommit,
    /// The commit's distinct series, sorted by id.
    pub(crate) series: &'a [&'a Series],
    /// The commit's profiles, one per key and sorted by key: concurrent commits claim keys
    /// in one order, so two of them cannot deadlock waiting for each other's keys.
    pub(crate) profiles: &'a [&'a ProfileRecord],
    /// 0: no limit.
    pub(crate) max_series: usize,
}

/// A [`super::SegmentCatalog::replace_segments`] call, checked.
pub(crate) struct SegmentSwap<'a> {
    pub(crate) replacement: &'a SegmentReplacement,
    /// The ids of `replacement.removed`, distinct and sorted.
    pub(crate) removed: &'a [String],
    /// The keys the merged segment lists: an object merged again must not be deleted.
    pub(crate) kept_keys: &'a [String],
}

/// A [`super::SymbolCatalog::replace_symbols`] call.
pub(crate) struct SymbolSwap<'a> {
    pub(crate) tenant: &'a str,
    /// Distinct, sorted and not empty: `added` takes the place of the oldest of them.
    pub(crate) removed: &'a [String],
    pub(crate) added: &'a [ObjectMeta],
    /// The keys of `added`: an object merged again into itself must not be deleted.
    pub(crate) kept_keys: &'a [String],
    pub(crate) delete_after_nanos: i64,
    /// The epoch of the collection this swap ends, if it ends one.
    pub(crate) collection: Option<i64>,
}
