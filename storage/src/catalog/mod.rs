//! The metadata index: which segments exist, what series and profiles they hold, and the
//! label names and values answered without touching Parquet. One trait per entity (a
//! module each), gathered by [`Catalog`]; one implementation, [`SqlCatalog`], over SQLite
//! or Postgres, run against the same test suite.

mod backend;
pub(crate) mod common;
mod debug_files;
mod delete_requests;
mod deletions;
mod label_index;
mod leases;
mod postgres;
mod profiles;
mod recording_rules;
mod segments;
mod series;
mod settings;
mod sqlite;
mod symbols;
mod tenants;
mod tokens;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::model::{ProfileKey, ProfileRecord, Series, TimeRange};
use crate::rollup::Resolution;

pub use backend::SqlCatalog;
pub use common::redact_password;
pub use debug_files::{DebugFile, DebugFileCatalog};
pub use delete_requests::{Cancelled, DeleteRequest, DeleteRequestCatalog, DeleteState};
pub use deletions::DeletionQueue;
pub use leases::LeaseCatalog;
pub use profiles::ProfileCatalog;
pub use recording_rules::{RecordingRuleCatalog, RuleProgress, RuleUpsert, StoredRule};
pub use segments::SegmentCatalog;
pub use series::SeriesCatalog;
pub use settings::{Setting, SettingCatalog};
pub use symbols::{SymbolCatalog, SymbolEpoch};
pub use tenants::{TenantCatalog, TenantDeleted};
pub use tokens::{TenantToken, TokenCatalog};

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
    /// The segment's samples summed per minute (see [`crate::rollup`]).
    #[serde(rename = "rollup_1m")]
    Rollup1m,
    /// The segment's samples summed per hour.
    #[serde(rename = "rollup_1h")]
    Rollup1h,
    /// The minute rollup summed over stacks: what a series holds per minute.
    #[serde(rename = "totals_1m")]
    Totals1m,
    /// The hour rollup summed over stacks.
    #[serde(rename = "totals_1h")]
    Totals1h,
    /// A closed day's samples summed per day (day segments only).
    #[serde(rename = "rollup_1d")]
    Rollup1d,
    /// The day rollup summed over stacks.
    #[serde(rename = "totals_1d")]
    Totals1d,
}

impl TableKind {
    pub const ALL: [TableKind; 12] = [
        TableKind::Samples,
        TableKind::Stacks,
        TableKind::Locations,
        TableKind::Functions,
        TableKind::Mappings,
        TableKind::AttributeSets,
        TableKind::Rollup1m,
        TableKind::Rollup1h,
        TableKind::Totals1m,
        TableKind::Totals1h,
        TableKind::Rollup1d,
        TableKind::Totals1d,
    ];

    pub fn as_str(&self) -> &'static str {
        match self {
            TableKind::Samples => "samples",
            TableKind::Stacks => "stacks",
            TableKind::Locations => "locations",
            TableKind::Functions => "functions",
            TableKind::Mappings => "mappings",
            TableKind::AttributeSets => "attribute_sets",
            TableKind::Rollup1m => "rollup_1m",
            TableKind::Rollup1h => "rollup_1h",
            TableKind::Totals1m => "totals_1m",
            TableKind::Totals1h => "totals_1h",
            TableKind::Rollup1d => "rollup_1d",
            TableKind::Totals1d => "totals_1d",
        }
    }

    /// Whether the table holds sample values (samples, rollups, totals) rather than
    /// symbols; such tables are sorted by (series, time).
    pub const fn holds_values(&self) -> bool {
        matches!(
            self,
            TableKind::Samples
                | TableKind::Rollup1m
                | TableKind::Rollup1h
                | TableKind::Totals1m
                | TableKind::Totals1h
                | TableKind::Rollup1d
                | TableKind::Totals1d
        )
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
    /// 0 for what ingest writes; compaction writes higher levels, up to the hour block's,
    /// and [`DAY_LEVEL`] for a day segment.
    pub level: i32,
    pub created_at_nanos: i64,
    pub objects: Vec<ObjectMeta>,
    pub series: Vec<SegmentSeries>,
}

impl SegmentMeta {
    pub fn object(&self, kind: TableKind) -> Option<&ObjectMeta> {
        self.objects.iter().find(|o| o.kind == kind)
    }

    /// Whether the segment keeps its data at `resolution` (its samples, or that rollup).
    pub fn has(&self, resolution: Resolution) -> bool {
        self.object(resolution.kind()).is_some()
    }

    /// The resolutions the segment keeps its data at, finest first.
    pub fn resolutions(&self) -> Vec<Resolution> {
        Resolution::ALL.into_iter().filter(|&r| self.has(r)).collect()
    }

    /// Whether it is a day segment, fresh or stale: sums of other segments' samples that
    /// own none themselves, so it has no series extents and nothing but queries reads it.
    pub fn is_day(&self) -> bool {
        self.level == DAY_LEVEL || self.level == STALE_DAY_LEVEL
    }

    /// The UTC day a day segment sums (its samples' times lie in it).
    pub fn day(&self) -> TimeRange {
        let start = Resolution::Day.bucket(self.min_time);
        TimeRange {
            start,
            end: start.saturating_add(Resolution::Day.step_nanos()),
        }
    }
}

/// The level of a day segment: the day rollup of every other segment holding samples of
/// one closed UTC day (see [`crate::compaction::days`]). It stays only while those
/// segments do: a commit or swap of a segment with samples in its day marks it
/// [`STALE_DAY_LEVEL`] in the same transaction, and queries read it only at this level.
/// Its objects: `rollup_1d`, `totals_1d`, and `totals_1h` (the day's hour totals, so that
/// a time series by the hour reads a whole day from it as well).
pub const DAY_LEVEL: i32 = 3;

/// A day segment that no longer sums its day's segments; compaction removes it.
pub const STALE_DAY_LEVEL: i32 = 4;

/// A day segment's commit ([`SegmentCatalog::commit_day`]).
#[derive(Clone, Debug)]
pub struct DayCommit {
    /// At [`DAY_LEVEL`], with no series extents.
    pub segment: SegmentMeta,
    /// Ids of the segments it sums: every segment other than day segments with samples in
    /// its day, else [`CatalogError::Conflict`] and nothing changes.
    pub sources: Vec<String>,
    /// When the objects of the day segments it replaces may be deleted.
    pub delete_after_nanos: i64,
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
    /// The tenant's symbol epoch when the writer listed the symbols it left out of
    /// `symbols` as stored; the commit is refused once the epoch moved on
    /// ([`CommitRefusal::stale_symbols`]), since symbols may have been collected since.
    pub symbol_epoch: i64,
}

/// How a [`SegmentCatalog::commit_segment_within`] ended. The catalog is the arbiter
/// between ingesters: each commit claims its profile keys and counts its new series
/// against the tenant's limit, and a commit that may not store all it carries stores
/// nothing, so the writer can take the refused part out of its segment and commit the rest.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub enum CommitOutcome {
    Committed,
    Refused(CommitRefusal),
}

/// What kept a commit from being stored; nothing of it is visible.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommitRefusal {
    /// Profile keys another commit stored first (a retried export that two ingesters
    /// received), sorted.
    pub repeated: Vec<ProfileKey>,
    /// New series over the tenant's series limit, sorted. New series are admitted lowest id
    /// first, so which ones are refused does not depend on the order of the batch.
    pub refused_series: Vec<i64>,
    /// The tenant's symbol epoch is no longer the commit's: symbols the segment uses but
    /// does not bring may have been collected. Nothing else was checked.
    pub stale_symbols: bool,
}

impl CommitRefusal {
    pub fn is_empty(&self) -> bool {
        self.repeated.is_empty() && self.refused_series.is_empty() && !self.stale_symbols
    }
}

/// Swaps segments for new ones in one transaction: many for one merged segment
/// (compaction), one for its recent samples and its older rollups (retention), or for
/// nothing.
#[derive(Clone, Debug)]
pub struct SegmentReplacement {
    pub tenant: String,
    /// Ids of the segments that disappear; all must still exist, else
    /// [`CatalogError::Conflict`] and nothing changes.
    pub removed: Vec<String>,
    /// The new segments; their series must exist already. Each gets the removed segments'
    /// sample labels; their profiles move to the first one with a samples object, and are
    /// dropped when none has one (their samples are gone). A new segment may list an object
    /// of a removed one again: that object is kept.
    pub added: Vec<SegmentMeta>,
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

impl CatalogStats {
    /// Adds `other`'s totals (of another tenant) to these.
    pub fn add(&mut self, other: &CatalogStats) {
        self.segments += other.segments;
        self.series += other.series;
        for (kind, stats) in &other.tables {
            let total = self.tables.entry(kind.clone()).or_default();
            total.objects += stats.objects;
            total.rows += stats.rows;
            total.bytes += stats.bytes;
        }
    }
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
    /// A [`SegmentCatalog::commit_segment`] that [`SegmentCatalog::commit_segment_within`]
    /// would have refused: some of its profiles are stored already.
    #[error(
        "commit refused: {} profile keys are stored already, {} series are over the limit",
        .0.repeated.len(),
        .0.refused_series.len()
    )]
    Refused(CommitRefusal),
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

/// Declares [`Catalog`] over the entity traits, its blanket impl and the prelude from one
/// list, so the three cannot drift apart.
macro_rules! umbrella {
    ($($entity:ident),+ $(,)?; roles: $($role:path),+ $(,)?) => {
        /// Every entity of the catalog, what the servers pass around. Code takes the entity
        /// trait it uses instead (`Arc<dyn TokenCatalog>`), or the role of its component
        /// when that uses a few ([`WriterCatalog`]); an `Arc<dyn Catalog>`
        /// upcasts to either. The roles follow from the entities by their blanket impls and
        /// are listed only so that the upcast exists.
        pub trait Catalog: $($entity +)+ $($role +)+ Send + Sync + 'static {}

        impl<T> Catalog for T where T: $($entity +)+ Send + Sync + 'static {}

        /// Every catalog trait, for code that implements or wraps a catalog.
        pub mod prelude {
            pub use super::{Catalog, $($entity),+};
        }
    };
}

umbrella!(
    SegmentCatalog,
    SymbolCatalog,
    SeriesCatalog,
    ProfileCatalog,
    LeaseCatalog,
    DeletionQueue,
    SettingCatalog,
    RecordingRuleCatalog,
    DebugFileCatalog,
    DeleteRequestCatalog,
    TenantCatalog,
    TokenCatalog;
    roles: WriterCatalog, CompactionCatalog,
);

/// What the writer asks of the catalog: which profiles are stored already, and the commit.
pub trait WriterCatalog: SegmentCatalog + ProfileCatalog {}

impl<T: SegmentCatalog + ProfileCatalog + ?Sized> WriterCatalog for T {}

/// What compaction, retention and purges ask of the catalog: a tenant's segments and symbol
/// objects to swap under the tenant's lease, and the deletion requests to purge with the
/// series and profiles they match.
pub trait CompactionCatalog:
    SegmentCatalog + SymbolCatalog + LeaseCatalog + SeriesCatalog + DeleteRequestCatalog + ProfileCatalog
{
}

impl<T> CompactionCatalog for T where
    T: SegmentCatalog
        + SymbolCatalog
        + LeaseCatalog
        + SeriesCatalog
        + DeleteRequestCatalog
        + ProfileCatalog
        + ?Sized
{
}

/// Opens the catalog a url names: `sqlite:///abs/path/catalog.db`, `sqlite::memory:`, or
/// `postgres://user@host/db` (also `postgresql://`). Migrations run before it returns.
pub async fn open_catalog(url: &str) -> CatalogResult<Arc<dyn Catalog>> {
    let scheme = url.split_once(':').map_or("", |(scheme, _)| scheme);
    match scheme {
        "sqlite" => Ok(Arc::new(SqlCatalog::open_sqlite(url).await?)),
        "postgres" | "postgresql" => Ok(Arc::new(SqlCatalog::connect_postgres(url).await?)),
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
