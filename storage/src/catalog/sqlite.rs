//! The single-binary default: the catalog in one SQLite file next to the data. Writers
//! take the write lock up front and insert row by row; lists are bound as one JSON array
//! read back with `json_each`, since SQLite caps the number of bound parameters.

use std::collections::BTreeSet;
use std::str::FromStr;
use std::time::Duration;

use sqlx::migrate::Migrator;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{Row, Sqlite, Transaction};

use super::backend::{Backend, Claim, Dialect, PerDialect, SegmentSwap, SqlCatalog, SymbolSwap};
use super::common::{
    distinct_sample_labels, encode_labels, outcome, over_limit, profiles_heir, same_identity, segments_gone,
    series_from_columns, stale_symbols, symbols_gone, to_i64,
};
use super::label_index::{UNCOVERED, index_segment, reindex_days};
use super::segments::{INSERT_SEGMENT, LIVE_SERIES, REMOVED_EXTENT, mark_days_stale, swap_extent};
use super::symbols::{end_collection, epoch_in};
use super::{CatalogError, CatalogResult, CommitOutcome, ObjectMeta, SegmentCommit, SegmentMeta};
use crate::model::{ProfileKey, ProfileRecord, Series};

static MIGRATOR: Migrator = sqlx::migrate!("../migrations/sqlite");

/// Writers wait this long for one another instead of failing with `SQLITE_BUSY`.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// SQLite serializes writers anyway; a few connections let readers run beside a writer.
const MAX_CONNECTIONS: u32 = 8;

impl SqlCatalog {
    /// Opens (creating the file and its directory if missing) and migrates the catalog at
    /// `url`: `sqlite:///abs/path/catalog.db`, `sqlite:relative.db` or `sqlite::memory:`.
    pub async fn open_sqlite(url: &str) -> CatalogResult<SqlCatalog> {
        let invalid = |reason: String| CatalogError::InvalidUrl {
            url: url.to_string(),
            reason,
        };
        let options = SqliteConnectOptions::from_str(url).map_err(|e| invalid(e.to_string()))?;
        let in_memory = url.contains(":memory:") || url.contains("mode=memory");
        if !in_memory {
            let path = options.get_filename();
            if path.as_os_str().is_empty() {
                return Err(invalid("no database file given".to_string()));
            }
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(sqlx::Error::Io)?;
            }
        }
        let options = options
            .create_if_missing(true)
            .foreign_keys(true)
            .journal_mode(SqliteJournalMode::Wal)
            // FULL, not NORMAL: an acknowledged commit must survive a power loss.
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(BUSY_TIMEOUT);
        let pool = if in_memory {
            // An in-memory database lives as long as its last connection: keep exactly one
            // open forever (one also avoids shared-cache table locks).
            SqlitePoolOptions::new()
                .max_connections(1)
                .min_connections(1)
                .idle_timeout(None)
                .max_lifetime(None)
                .connect_with(options)
                .await?
        } else {
            SqlitePoolOptions::new()
                .max_connections(MAX_CONNECTIONS)
                .connect_with(options)
                .await?
        };
        Self::from_sqlite_pool(pool).await
    }

    /// Wraps an existing pool (configured by the caller) and runs the migrations.
    pub async fn from_sqlite_pool(pool: SqlitePool) -> CatalogResult<SqlCatalog> {
        MIGRATOR.run(&pool).await?;
        Ok(SqlCatalog {
            backend: Backend::Sqlite(pool),
        })
    }
}

async fn upsert_series(
    tx: &mut Transaction<'_, Sqlite>,
    tenant: &str,
    series: &[&Series],
) -> CatalogResult<()> {
    for s in series {
        let stored = sqlx::query(
            "SELECT sample_type, sample_unit, period_type, period_unit, labels
             FROM series WHERE tenant = ?1 AND series_id = ?2",
        )
        .bind(tenant)
        .bind(s.id)
        .fetch_optional(&mut **tx)
        .await?;
        if let Some(row) = stored {
            let profile_type = [row.try_get(0)?, row.try_get(1)?, row.try_get(2)?, row.try_get(3)?];
            let stored = series_from_columns(s.id, profile_type, row.try_get(4)?, 0)?;
            if !same_identity(&stored, s) {
                return Err(CatalogError::SeriesCollision { id: s.id });
            }
            sqlx::query(
                "UPDATE series SET period = ?3 WHERE tenant = ?1 AND series_id = ?2 AND period <> ?3",
            )
            .bind(tenant)
            .bind(s.id)
            .bind(s.period)
            .execute(&mut **tx)
            .await?;
            continue;
        }
        let pt = &s.profile_type;
        sqlx::query(
            "INSERT INTO series (tenant, series_id, profile_type, sample_type, sample_unit, period_type,
                                 period_unit, labels, period)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )
        .bind(tenant)
        .bind(s.id)
        .bind(pt.id())
        .bind(&pt.sample_type)
        .bind(&pt.sample_unit)
        .bind(&pt.period_type)
        .bind(&pt.period_unit)
        .bind(encode_labels(&s.labels)?)
        .bind(s.period)
        .execute(&mut **tx)
        .await?;
        for (name, value) in &s.labels {
            sqlx::query("INSERT INTO series_labels (tenant, series_id, name, value) VALUES (?1, ?2, ?3, ?4)")
                .bind(tenant)
                .bind(s.id)
                .bind(name)
                .bind(value)
                .execute(&mut **tx)
                .await?;
        }
    }
    Ok(())
}

/// The segment row with its objects and series extents: what a flush and a compaction
/// both write.
async fn insert_segment_rows(tx: &mut Transaction<'_, Sqlite>, seg: &SegmentMeta) -> CatalogResult<()> {
    sqlx::query(INSERT_SEGMENT)
        .bind(&seg.id)
        .bind(&seg.tenant)
        .bind(seg.min_time)
        .bind(seg.max_time)
        .bind(seg.level)
        .bind(seg.created_at_nanos)
        .execute(&mut **tx)
        .await?;
    for (position, o) in seg.objects.iter().enumerate() {
        sqlx::query(
            "INSERT INTO segment_objects (segment_id, position, kind, key, size_bytes, rows)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )
        .bind(&seg.id)
        .bind(position as i64)
        .bind(o.kind.as_str())
        .bind(&o.key)
        .bind(to_i64(o.size_bytes, "object size")?)
        .bind(to_i64(o.rows, "object row count")?)
        .execute(&mut **tx)
        .await?;
    }
    for (position, s) in seg.series.iter().enumerate() {
        sqlx::query(
            "INSERT INTO segment_series (segment_id, tenant, series_id, position, min_time, max_time, samples)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )
        .bind(&seg.id)
        .bind(&seg.tenant)
        .bind(s.series_id)
        .bind(position as i64)
        .bind(s.min_time)
        .bind(s.max_time)
        .bind(to_i64(s.samples, "sample count")?)
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

async fn insert_symbols(
    tx: &mut Transaction<'_, Sqlite>,
    tenant: &str,
    objects: &[ObjectMeta],
    created_at_nanos: i64,
) -> CatalogResult<()> {
    for o in objects {
        sqlx::query(
            "INSERT INTO symbol_objects (tenant, key, kind, size_bytes, rows, created_at_nanos)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )
        .bind(tenant)
        .bind(&o.key)
        .bind(o.kind.as_str())
        .bind(to_i64(o.size_bytes, "object size")?)
        .bind(to_i64(o.rows, "object row count")?)
        .bind(created_at_nanos)
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

async fn insert_segment(tx: &mut Transaction<'_, Sqlite>, commit: &SegmentCommit) -> CatalogResult<()> {
    let seg = &commit.segment;
    insert_segment_rows(tx, seg).await?;
    insert_symbols(tx, &seg.tenant, &commit.symbols, seg.created_at_nanos).await?;
    for (name, value) in distinct_sample_labels(commit) {
        sqlx::query("INSERT INTO sample_labels (segment_id, name, value) VALUES (?1, ?2, ?3)")
            .bind(&seg.id)
            .bind(name)
            .bind(value)
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

/// Inserts the profiles whose keys no commit stored yet and returns those keys.
async fn claim_profiles(
    tx: &mut Transaction<'_, Sqlite>,
    seg: &SegmentMeta,
    profiles: &[&ProfileRecord],
) -> CatalogResult<BTreeSet<ProfileKey>> {
    let mut claimed = BTreeSet::new();
    for p in profiles {
        let inserted = sqlx::query(
            "INSERT INTO profiles (tenant, profile_id, segment_id, series_id, start_nanos, end_nanos, sample_count,
                                   resource, attributes)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
             ON CONFLICT (tenant, profile_id, series_id, start_nanos) DO NOTHING",
        )
        .bind(&seg.tenant)
        .bind(&p.profile_id[..])
        .bind(&seg.id)
        .bind(p.series_id)
        .bind(p.start_nanos)
        .bind(p.end_nanos)
        .bind(p.sample_count)
        .bind(encode_labels(&p.resource)?)
        .bind(encode_labels(&p.attributes)?)
        .execute(&mut **tx)
        .await?
        .rows_affected();
        if inserted == 1 {
            claimed.insert(p.key());
        }
    }
    Ok(claimed)
}

/// The new series of the commit over `max_series`; the write lock the transaction holds
/// keeps the count from changing until it ends.
async fn series_over_limit(
    tx: &mut Transaction<'_, Sqlite>,
    tenant: &str,
    series: &[&Series],
    max_series: usize,
) -> CatalogResult<Vec<i64>> {
    if max_series == 0 {
        return Ok(Vec::new());
    }
    let ids: Vec<i64> = series.iter().map(|s| s.id).collect();
    let ids = serde_json::to_string(&ids)
        .map_err(|e| CatalogError::Corrupt(format!("ids do not serialize: {e}")))?;
    let live: Vec<i64> = sqlx::query_scalar(
        "SELECT DISTINCT ss.series_id FROM segment_series ss
         JOIN segment_objects o ON o.segment_id = ss.segment_id
         WHERE ss.tenant = ?1 AND ss.series_id IN (SELECT value FROM json_each(?2)) AND o.kind = 'samples'",
    )
    .bind(tenant)
    .bind(ids)
    .fetch_all(&mut **tx)
    .await?;
    let live: BTreeSet<i64> = live.into_iter().collect();
    // Series the tenant has already take no new place: nothing to count.
    if series.iter().all(|s| live.contains(&s.id)) {
        return Ok(Vec::new());
    }
    let live_count: i64 = sqlx::query_scalar(LIVE_SERIES)
        .bind(tenant)
        .fetch_one(&mut **tx)
        .await?;
    Ok(over_limit(series, &live, live_count, max_series))
}

/// A list bound as one JSON array parameter, read back with `json_each`.
fn json_list(items: &[String]) -> CatalogResult<String> {
    serde_json::to_string(items).map_err(|e| CatalogError::Corrupt(format!("keys do not serialize: {e}")))
}

impl Dialect for SqlitePool {
    type Db = Sqlite;

    fn sql(&self, statement: &PerDialect) -> &'static str {
        statement.sqlite
    }

    async fn begin_snapshot(&self) -> CatalogResult<Transaction<'static, Sqlite>> {
        Ok(self.begin().await?)
    }

    async fn commit_segment(&self, claim: Claim<'_>) -> CatalogResult<CommitOutcome> {
        let Claim {
            commit,
            series,
            profiles,
            max_series,
        } = claim;
        let tenant = &commit.segment.tenant;
        // IMMEDIATE takes the write lock up front: a deferred transaction that reads first
        // fails with SQLITE_BUSY instead of waiting when another writer got there between.
        // It also serializes every commit, which is what the series count needs.
        let mut tx = self.begin_with("BEGIN IMMEDIATE").await?;
        let refused_series = series_over_limit(&mut tx, tenant, series, max_series).await?;
        if epoch_in(&mut tx, tenant).await? != commit.symbol_epoch {
            tx.rollback().await?;
            return Ok(stale_symbols());
        }
        upsert_series(&mut tx, tenant, series).await?;
        insert_segment(&mut tx, commit).await?;
        mark_days_stale!(tx, tenant, (commit.segment.min_time, commit.segment.max_time))?;
        index_segment(&mut tx, &commit.segment.id, commit.segment.level).await?;
        let claimed = claim_profiles(&mut tx, &commit.segment, profiles).await?;
        let outcome = outcome(profiles, &claimed, refused_series);
        if outcome == CommitOutcome::Committed {
            tx.commit().await?;
        } else {
            tx.rollback().await?;
        }
        Ok(outcome)
    }

    async fn replace_segments(&self, swap: SegmentSwap<'_>) -> CatalogResult<()> {
        let SegmentSwap {
            replacement,
            removed,
            kept_keys,
        } = swap;
        let tenant = &replacement.tenant;
        let removed_json = json_list(removed)?;
        // The write lock is taken before counting, so no other replacement can delete the
        // segments between the check and the delete below.
        let mut tx = self.begin_with("BEGIN IMMEDIATE").await?;
        let found: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM segments WHERE tenant = ?1 AND id IN (SELECT value FROM json_each(?2))",
        )
        .bind(tenant)
        .bind(&removed_json)
        .fetch_one(&mut *tx)
        .await?;
        if found != removed.len() as i64 {
            return Err(segments_gone(removed, found as usize));
        }
        // An object a new segment lists again must not be deleted under it.
        sqlx::query(
            "INSERT INTO pending_deletions (key, tenant, delete_after_nanos)
             SELECT o.key, ?2, ?3 FROM segment_objects o
             WHERE o.segment_id IN (SELECT value FROM json_each(?1))
               AND o.key NOT IN (SELECT value FROM json_each(?4))
             ON CONFLICT (key) DO NOTHING",
        )
        .bind(&removed_json)
        .bind(tenant)
        .bind(replacement.delete_after_nanos)
        .bind(json_list(kept_keys)?)
        .execute(&mut *tx)
        .await?;
        let removed_extent: (Option<i64>, Option<i64>) = sqlx::query_as(REMOVED_EXTENT.sqlite)
            .bind(tenant)
            .bind(&removed_json)
            .fetch_one(&mut *tx)
            .await?;
        if let Some(extent) = swap_extent(removed_extent, &replacement.added) {
            mark_days_stale!(tx, tenant, extent)?;
        }
        // Added rows first: deleting the removed segments cascades to their profiles and
        // sample labels, which must have moved by then. Profiles move by UPDATE, never by
        // copying: a copy would meet its original under the unique profile key.
        for added in &replacement.added {
            insert_segment_rows(&mut tx, added).await?;
            sqlx::query(
                "INSERT INTO sample_labels (segment_id, name, value)
                 SELECT DISTINCT ?1, name, value FROM sample_labels
                 WHERE segment_id IN (SELECT value FROM json_each(?2))
                 ON CONFLICT DO NOTHING",
            )
            .bind(&added.id)
            .bind(&removed_json)
            .execute(&mut *tx)
            .await?;
        }
        if let Some(heir) = profiles_heir(replacement) {
            sqlx::query(
                "UPDATE profiles SET segment_id = ?1
                 WHERE segment_id IN (SELECT value FROM json_each(?2))
                   AND (?3 IS NULL OR end_nanos >= ?3)",
            )
            .bind(&heir.id)
            .bind(&removed_json)
            .bind(replacement.drop_profiles_before)
            .execute(&mut *tx)
            .await?;
        }
        let added_ids: Vec<String> = replacement.added.iter().map(|s| s.id.clone()).collect();
        let uncovered: (Option<i64>, Option<i64>) = sqlx::query_as(UNCOVERED.sqlite)
            .bind(&removed_json)
            .bind(json_list(&added_ids)?)
            .fetch_one(&mut *tx)
            .await?;
        let deleted =
            sqlx::query("DELETE FROM segments WHERE tenant = ?1 AND id IN (SELECT value FROM json_each(?2))")
                .bind(tenant)
                .bind(&removed_json)
                .execute(&mut *tx)
                .await?
                .rows_affected();
        if deleted != removed.len() as u64 {
            return Err(segments_gone(removed, deleted as usize));
        }
        if let (Some(first), Some(last)) = uncovered {
            reindex_days(&mut tx, tenant, (first, last)).await?;
        }
        for added in &replacement.added {
            index_segment(&mut tx, &added.id, added.level).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn insert_segment_rows(
        &self,
        tx: &mut Transaction<'_, Sqlite>,
        segment: &SegmentMeta,
    ) -> CatalogResult<()> {
        insert_segment_rows(tx, segment).await
    }

    async fn replace_symbols(&self, swap: SymbolSwap<'_>) -> CatalogResult<()> {
        let SymbolSwap {
            tenant,
            removed,
            added,
            kept_keys,
            delete_after_nanos,
            collection,
        } = swap;
        let removed_json = json_list(removed)?;
        let mut tx = self.begin_with("BEGIN IMMEDIATE").await?;
        let found = sqlx::query(
            "SELECT COUNT(*), MIN(created_at_nanos) FROM symbol_objects
             WHERE tenant = ?1 AND key IN (SELECT value FROM json_each(?2))",
        )
        .bind(tenant)
        .bind(&removed_json)
        .fetch_one(&mut *tx)
        .await?;
        let (count, oldest): (i64, Option<i64>) = (found.try_get(0)?, found.try_get(1)?);
        if count != removed.len() as i64 {
            return Err(symbols_gone(tenant, removed, count as usize));
        }
        sqlx::query(
            "INSERT INTO pending_deletions (key, tenant, delete_after_nanos)
             SELECT key, tenant, ?3 FROM symbol_objects
             WHERE tenant = ?1 AND key IN (SELECT value FROM json_each(?2))
               AND key NOT IN (SELECT value FROM json_each(?4))
             ON CONFLICT (key) DO NOTHING",
        )
        .bind(tenant)
        .bind(&removed_json)
        .bind(delete_after_nanos)
        .bind(json_list(kept_keys)?)
        .execute(&mut *tx)
        .await?;
        let deleted = sqlx::query(
            "DELETE FROM symbol_objects WHERE tenant = ?1 AND key IN (SELECT value FROM json_each(?2))",
        )
        .bind(tenant)
        .bind(&removed_json)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if deleted != removed.len() as u64 {
            return Err(symbols_gone(tenant, removed, deleted as usize));
        }
        // Merged objects take the place of what they replace in the tenant's order.
        if let Some(oldest) = oldest {
            insert_symbols(&mut tx, tenant, added, oldest).await?;
        }
        if let Some(epoch) = collection {
            end_collection(&mut tx, tenant, epoch).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn begin_symbol_epoch_change(&self, _tenant: &str) -> CatalogResult<Transaction<'static, Sqlite>> {
        // SQLite's write lock serializes it with every commit.
        Ok(self.begin_with("BEGIN IMMEDIATE").await?)
    }

    async fn begin_rules_change(&self, _tenant: &str) -> CatalogResult<Transaction<'static, Sqlite>> {
        Ok(self.begin_with("BEGIN IMMEDIATE").await?)
    }

    async fn forget_deletions(&self, keys: &[String]) -> CatalogResult<()> {
        sqlx::query("DELETE FROM pending_deletions WHERE key IN (SELECT value FROM json_each(?1))")
            .bind(json_list(keys)?)
            .execute(self)
            .await?;
        Ok(())
    }

    async fn unreferenced(&self, keys: &[String]) -> CatalogResult<Vec<String>> {
        // json_each instead of an IN list: SQLite caps the number of bound parameters.
        let found = sqlx::query_scalar(
            "SELECT DISTINCT j.value FROM json_each(?1) j
             WHERE NOT EXISTS (SELECT 1 FROM segment_objects o WHERE o.key = j.value)
               AND NOT EXISTS (SELECT 1 FROM symbol_objects s WHERE s.key = j.value)
               AND NOT EXISTS (SELECT 1 FROM pending_deletions d WHERE d.key = j.value)",
        )
        .bind(json_list(keys)?)
        .fetch_all(self)
        .await?;
        Ok(found)
    }

    async fn stored_profiles(
        &self,
        tenant: &str,
        keys: &[ProfileKey],
    ) -> CatalogResult<Vec<(Vec<u8>, i64, i64)>> {
        // json_each instead of an IN list: SQLite caps the number of bound parameters.
        let keys: Vec<serde_json::Value> = keys
            .iter()
            .map(|(id, series, start)| serde_json::json!([hex::encode(id), series, start]))
            .collect();
        let rows = sqlx::query_as::<_, (Vec<u8>, i64, i64)>(
            "SELECT DISTINCT p.profile_id, p.series_id, p.start_nanos
             FROM json_each(?2) j
             JOIN profiles p ON p.tenant = ?1
              AND p.profile_id = unhex(j.value ->> 0)
              AND p.series_id = j.value ->> 1
              AND p.start_nanos = j.value ->> 2",
        )
        .bind(tenant)
        .bind(serde_json::Value::Array(keys).to_string())
        .fetch_all(self)
        .await?;
        Ok(rows)
    }
}
