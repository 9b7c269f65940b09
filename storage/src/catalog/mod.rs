//! The metadata index: which segments exist, what series and profiles they hold, and the
//! label names and values answered without touching Parquet. One trait, a SQLite and a
//! Postgres implementation, both run against the same test suite.

pub(crate) mod common;
pub mod postgres;
mod reads;
mod sql;
pub mod sqlite;

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::model::{ProfileKey, ProfileRecord, ProfileType, Series, TimeRange};

pub use common::redact_password;
pub use postgres::PostgresCatalog;
pub use sqlite::SqliteCatalog;

/// The tables a segment may carry, one Parquet object each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TableKind {
    Samples,
    Stacks,
    Locations,
    Functions,
    Mappings,
    AttributeSets,
}

impl TableKind {
    pub const ALL: [TableKind; 6] = [
        TableKind::Samples,
        TableKind::Stacks,
        TableKind::Locations,
        TableKind::Functions,
        TableKind::Mappings,
        TableKind::AttributeSets,
    ];

    pub fn as_str(&self) -> &'static str {
        match self {
            TableKind::Samples => "samples",
            TableKind::Stacks => "stacks",
            TableKind::Locations => "locations",
            TableKind::Functions => "functions",
            TableKind::Mappings => "mappings",
            TableKind::AttributeSets => "attribute_sets",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectMeta {
    pub kind: TableKind,
    /// Object key relative to the store's root.
    pub key: String,
    pub size_bytes: u64,
    pub rows: u64,
}

/// Per-series extent inside a segment, used to prune segments by selector.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentSeries {
    pub series_id: i64,
    pub min_time: i64,
    pub max_time: i64,
    pub samples: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentMeta {
    /// A UUIDv7, so ids sort by creation.
    pub id: String,
    pub tenant: String,
    /// Closed interval of the sample times; every segment has at least one sample.
    pub min_time: i64,
    pub max_time: i64,
    /// 0 for what ingest writes; compaction writes higher levels.
    pub level: i32,
    pub created_at_nanos: i64,
    pub objects: Vec<ObjectMeta>,
    pub series: Vec<SegmentSeries>,
}

impl SegmentMeta {
    pub fn object(&self, kind: TableKind) -> Option<&ObjectMeta> {
        self.objects.iter().find(|o| o.kind == kind)
    }
}

/// Everything one flush makes visible, committed in one transaction.
#[derive(Clone, Debug)]
pub struct SegmentCommit {
    /// Only the samples object: symbols belong to the tenant, not to a time window.
    pub segment: SegmentMeta,
    /// Symbol objects written with the segment (only ids the tenant had not stored yet).
    pub symbols: Vec<ObjectMeta>,
    /// Definitions of every series in `segment.series` (upserted; a different label set
    /// under an existing id is a [`CatalogError::SeriesCollision`]).
    pub series: Vec<Series>,
    /// Distinct sample-attribute `(name, value)` pairs of the segment, so label queries
    /// cover `thread.name` and friends without reading Parquet.
    pub sample_labels: Vec<(String, String)>,
    pub profiles: Vec<ProfileRecord>,
}

/// Swaps segments for one merged segment (compaction) or for nothing (retention), in one
/// transaction.
#[derive(Clone, Debug)]
pub struct SegmentReplacement {
    pub tenant: String,
    /// Ids of the segments that disappear; all must still exist, else
    /// [`CatalogError::Conflict`] and nothing changes.
    pub removed: Vec<String>,
    /// The merged segment; its series must exist already. The removed segments' sample
    /// labels and profiles move to it.
    pub added: Option<SegmentMeta>,
    /// Profiles that ended before this time are dropped instead of moved (retention).
    pub drop_profiles_before: Option<i64>,
    /// The removed segments' objects are deleted from storage after this time, so queries
    /// that listed them before the swap can finish.
    pub delete_after_nanos: i64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableStats {
    pub objects: u64,
    pub rows: u64,
    pub bytes: u64,
}

/// Totals for one tenant, per table kind (keyed by [`TableKind::as_str`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CatalogStats {
    pub segments: u64,
    pub series: u64,
    pub tables: std::collections::BTreeMap<String, TableStats>,
}

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("catalog database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("catalog migration failed: {0}")]
    Migration(#[from] sqlx::migrate::MigrateError),
    #[error("series id {id} already names a different label set; refusing to merge them")]
    SeriesCollision { id: i64 },
    #[error("invalid catalog url {url:?}: {reason}")]
    InvalidUrl { url: String, reason: String },
    #[error("corrupt catalog row: {0}")]
    Corrupt(String),
    /// Another writer changed what a replacement expected (two compactors raced).
    #[error("catalog conflict: {0}")]
    Conflict(String),
}

impl CatalogError {
    /// Whether the database could not be reached (rather than refusing or failing the
    /// statement): the same request may succeed once it is back.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            CatalogError::Database(
                sqlx::Error::Io(_)
                    | sqlx::Error::PoolTimedOut
                    | sqlx::Error::PoolClosed
                    | sqlx::Error::Tls(_)
            )
        )
    }
}

pub type CatalogResult<T> = Result<T, CatalogError>;

#[async_trait]
pub trait Catalog: Send + Sync + 'static {
    /// Makes a written segment visible: segment, series, sample labels and profiles in one
    /// transaction. Nothing is visible if it fails.
    async fn commit_segment(&self, commit: &SegmentCommit) -> CatalogResult<()>;

    /// Segments of `tenant` whose time extent overlaps `range`, with objects and series.
    async fn segments(&self, tenant: &str, range: TimeRange) -> CatalogResult<Vec<SegmentMeta>>;

    /// Every symbol object of `tenant`, oldest first.
    async fn symbol_objects(&self, tenant: &str) -> CatalogResult<Vec<ObjectMeta>>;

    /// Every tenant that has segments or symbols.
    async fn tenants(&self) -> CatalogResult<Vec<String>>;

    /// Applies a compaction or retention swap; see [`SegmentReplacement`].
    async fn replace_segments(&self, replacement: &SegmentReplacement) -> CatalogResult<()>;

    /// Swaps symbol objects of `tenant` for merged ones in one transaction. Every key in
    /// `removed` must still be listed, else [`CatalogError::Conflict`]; the removed objects
    /// are queued for deletion after `delete_after_nanos`.
    async fn replace_symbols(
        &self,
        tenant: &str,
        removed: &[String],
        added: &[ObjectMeta],
        delete_after_nanos: i64,
    ) -> CatalogResult<()>;

    /// Takes or renews the lease `name` for `holder` until `now + ttl`. False while another
    /// holder's lease has not expired.
    async fn acquire_lease(&self, name: &str, holder: &str, ttl: std::time::Duration) -> CatalogResult<bool>;

    /// Gives a lease up early; a lease held by someone else is left alone.
    async fn release_lease(&self, name: &str, holder: &str) -> CatalogResult<()>;

    /// Up to `limit` object keys queued for deletion whose time has come (`<= now_nanos`).
    async fn due_deletions(&self, now_nanos: i64, limit: i64) -> CatalogResult<Vec<String>>;

    /// Removes keys from the deletion queue once their objects are gone.
    async fn forget_deletions(&self, keys: &[String]) -> CatalogResult<()>;

    /// The keys among `keys` that no segment, symbol object or queued deletion refers to.
    async fn unreferenced(&self, keys: &[String]) -> CatalogResult<Vec<String>>;

    /// Series of `tenant` with samples in `range`.
    async fn series(&self, tenant: &str, range: TimeRange) -> CatalogResult<Vec<Series>>;

    /// Distinct profile types with samples in `range`.
    async fn profile_types(&self, tenant: &str, range: TimeRange) -> CatalogResult<Vec<ProfileType>>;

    /// Sorted label names (series labels and sample attributes) with samples in `range`.
    async fn label_names(&self, tenant: &str, range: TimeRange) -> CatalogResult<Vec<String>>;

    /// Sorted values of one label name with samples in `range`.
    async fn label_values(&self, tenant: &str, name: &str, range: TimeRange) -> CatalogResult<Vec<String>>;

    /// Which of `keys` (profile id, series, start) `tenant` has stored already: a retried
    /// export finds its profiles here and is not stored twice.
    async fn stored_profiles(&self, tenant: &str, keys: &[ProfileKey]) -> CatalogResult<Vec<ProfileKey>>;

    /// Where a profile id was stored.
    async fn profile(
        &self,
        tenant: &str,
        profile_id: [u8; 16],
    ) -> CatalogResult<Vec<(String, ProfileRecord)>>;

    async fn stats(&self, tenant: &str) -> CatalogResult<CatalogStats>;

    /// Cheap round trip for readiness checks.
    async fn ping(&self) -> CatalogResult<()>;

    /// The first and last sample time `tenant` has stored, `None` when nothing.
    async fn data_range(&self, tenant: &str) -> CatalogResult<Option<(i64, i64)>>;

    /// Every setting of `tenant`, sorted by name.
    async fn settings(&self, tenant: &str) -> CatalogResult<Vec<Setting>>;

    /// Stores a setting unless one modified later is stored already; returns the stored one.
    async fn put_setting(&self, tenant: &str, setting: &Setting) -> CatalogResult<Setting>;

    /// Removes a setting; removing a missing one is not an error.
    async fn delete_setting(&self, tenant: &str, name: &str) -> CatalogResult<()>;

    /// Every debug file of `tenant`, sorted by build id.
    async fn debug_files(&self, tenant: &str) -> CatalogResult<Vec<DebugFile>>;

    /// The debug file of `build_id` (lowercase hex), if `tenant` uploaded one.
    async fn debug_file(&self, tenant: &str, build_id: &str) -> CatalogResult<Option<DebugFile>>;

    /// Records a stored debug file, replacing the row of an earlier upload of its build id.
    async fn put_debug_file(&self, tenant: &str, file: &DebugFile) -> CatalogResult<()>;

    /// Forgets a debug file; false when there was none (the caller deletes the object).
    async fn delete_debug_file(&self, tenant: &str, build_id: &str) -> CatalogResult<bool>;

    /// Stores a new access token of `token.tenant`; only the SHA-256 of its secret (hex).
    async fn create_token(&self, token: &TenantToken, sha256_hex: &str) -> CatalogResult<()>;

    /// The tokens of `tenant` (every tenant's when `None`), oldest first, revoked included.
    async fn tokens(&self, tenant: Option<&str>) -> CatalogResult<Vec<TenantToken>>;

    /// Marks a token revoked (a second revocation keeps the first time); false when no
    /// token has this id.
    async fn revoke_token(&self, id: &str, at_millis: i64) -> CatalogResult<bool>;

    /// The token whose secret hashes to `sha256_hex`, revoked or not.
    async fn token_by_hash(&self, sha256_hex: &str) -> CatalogResult<Option<TenantToken>>;
}

/// An access token of one tenant, as listed: never the secret.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct TenantToken {
    pub id: String,
    pub tenant: String,
    pub name: String,
    pub created_at_millis: i64,
    pub revoked_at_millis: Option<i64>,
}

/// A debug information file (ELF) a tenant uploaded, kept at `object_key`.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow, Serialize, Deserialize)]
pub struct DebugFile {
    /// GNU build id, lowercase hex.
    pub build_id: String,
    pub object_key: String,
    /// The name it was uploaded with, for listing; may be empty.
    pub file_name: String,
    pub size_bytes: i64,
    pub uploaded_at_millis: i64,
}

/// A named value a tenant keeps, as Grafana's settings API stores its plugin settings.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct Setting {
    pub name: String,
    pub value: String,
    pub modified_at_millis: i64,
}

/// Opens the catalog a url names: `sqlite:///abs/path/catalog.db`, `sqlite::memory:`, or
/// `postgres://user@host/db` (also `postgresql://`). Migrations run before it returns.
pub async fn open_catalog(url: &str) -> CatalogResult<Arc<dyn Catalog>> {
    let scheme = url.split_once(':').map_or("", |(scheme, _)| scheme);
    match scheme {
        "sqlite" => Ok(Arc::new(SqliteCatalog::open(url).await?)),
        "postgres" | "postgresql" => Ok(Arc::new(PostgresCatalog::connect(url).await?)),
        _ => Err(CatalogError::InvalidUrl {
            url: common::redact_password(url),
            reason: "expected a sqlite: or postgres:// url".to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_unreachable_database_is_transient() {
        assert!(CatalogError::Database(sqlx::Error::PoolTimedOut).is_transient());
        assert!(
            CatalogError::Database(sqlx::Error::Io(std::io::ErrorKind::ConnectionRefused.into()))
                .is_transient()
        );
        assert!(!CatalogError::Database(sqlx::Error::RowNotFound).is_transient());
        assert!(!CatalogError::Corrupt("bad row".into()).is_transient());
        assert!(!CatalogError::Conflict("raced".into()).is_transient());
    }
}
