//! The single-binary default: the catalog in one SQLite file next to the data.

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::migrate::Migrator;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{Row, Sqlite, Transaction};

use super::common::{
    ObjectColumns, ProfileRow, add_table_stats, check_replacement, distinct_sample_labels, distinct_series,
    distinct_sorted, duration_nanos, empty_stats, encode_labels, keep_in_order, now_nanos, profile_key,
    same_identity, segments_gone, series_from_columns, symbols_gone, to_i64,
};
use super::reads::Reads;
use super::sql;
use super::{
    Catalog, CatalogError, CatalogResult, CatalogStats, DebugFile, ObjectMeta, SegmentCommit, SegmentMeta,
    SegmentReplacement, Setting, TenantToken,
};
use crate::model::{ProfileKey, ProfileRecord, ProfileType, Series, TimeRange};

static MIGRATOR: Migrator = sqlx::migrate!("../migrations/sqlite");

/// Writers wait this long for one another instead of failing with `SQLITE_BUSY`.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// SQLite serializes writers anyway; a few connections let readers run beside a writer.
const MAX_CONNECTIONS: u32 = 8;

#[derive(Clone, Debug)]
pub struct SqliteCatalog {
    pool: SqlitePool,
}

impl SqliteCatalog {
    /// Opens (creating the file and its directory if missing) and migrates the catalog at
    /// `url`: `sqlite:///abs/path/catalog.db`, `sqlite:relative.db` or `sqlite::memory:`.
    pub async fn open(url: &str) -> CatalogResult<SqliteCatalog> {
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
        Self::from_pool(pool).await
    }

    /// Wraps an existing pool (configured by the caller) and runs the migrations.
    pub async fn from_pool(pool: SqlitePool) -> CatalogResult<SqliteCatalog> {
        MIGRATOR.run(&pool).await?;
        Ok(SqliteCatalog { pool })
    }

    pub fn pool(&self) -> &SqlitePool {
        &self.pool
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
                sqlx::query(
                    "INSERT INTO series_labels (tenant, series_id, name, value) VALUES (?1, ?2, ?3, ?4)",
                )
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
        sqlx::query(sql::INSERT_SEGMENT)
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
        Self::insert_segment_rows(tx, seg).await?;
        Self::insert_symbols(tx, &seg.tenant, &commit.symbols, seg.created_at_nanos).await?;
        for (name, value) in distinct_sample_labels(commit) {
            sqlx::query("INSERT INTO sample_labels (segment_id, name, value) VALUES (?1, ?2, ?3)")
                .bind(&seg.id)
                .bind(name)
                .bind(value)
                .execute(&mut **tx)
                .await?;
        }
        for p in &commit.profiles {
            sqlx::query(
                "INSERT INTO profiles (tenant, profile_id, segment_id, series_id, start_nanos, end_nanos, sample_count,
                                       resource, attributes)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
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
            .await?;
        }
        Ok(())
    }

    /// Segments overlapping `range`, in three queries inside one read transaction so the
    /// rows agree with each other.
    async fn fetch_segments(&self, tenant: &str, range: TimeRange) -> CatalogResult<Vec<SegmentMeta>> {
        let mut tx = self.pool.begin().await?;
        let segments = Reads::<Sqlite>::segments(&mut tx, tenant, range).await?;
        tx.commit().await?;
        Ok(segments)
    }
}

/// A list bound as one JSON array parameter, read back with `json_each`.
fn json_list(items: &[String]) -> CatalogResult<String> {
    serde_json::to_string(items).map_err(|e| CatalogError::Corrupt(format!("keys do not serialize: {e}")))
}

#[async_trait]
impl Catalog for SqliteCatalog {
    async fn commit_segment(&self, commit: &SegmentCommit) -> CatalogResult<()> {
        let series = distinct_series(commit)?;
        // IMMEDIATE takes the write lock up front: a deferred transaction that reads first
        // fails with SQLITE_BUSY instead of waiting when another writer got there between.
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        Self::upsert_series(&mut tx, &commit.segment.tenant, &series).await?;
        Self::insert_segment(&mut tx, commit).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn segments(&self, tenant: &str, range: TimeRange) -> CatalogResult<Vec<SegmentMeta>> {
        self.fetch_segments(tenant, range).await
    }

    async fn symbol_objects(&self, tenant: &str) -> CatalogResult<Vec<ObjectMeta>> {
        let rows = sqlx::query_as::<_, ObjectColumns>(
            "SELECT kind, key, size_bytes, rows FROM symbol_objects WHERE tenant = ?1
             ORDER BY created_at_nanos, key",
        )
        .bind(tenant)
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(ObjectMeta::try_from).collect()
    }

    async fn tenants(&self) -> CatalogResult<Vec<String>> {
        Reads(&self.pool).tenants().await
    }

    async fn replace_segments(&self, replacement: &SegmentReplacement) -> CatalogResult<()> {
        check_replacement(replacement)?;
        let tenant = &replacement.tenant;
        let removed = distinct_sorted(&replacement.removed);
        let removed_json = json_list(&removed)?;
        let kept_keys: Vec<String> = replacement
            .added
            .iter()
            .flat_map(|seg| seg.objects.iter().map(|o| o.key.clone()))
            .collect();
        // The write lock is taken before counting, so no other replacement can delete the
        // segments between the check and the delete below.
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let found: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM segments WHERE tenant = ?1 AND id IN (SELECT value FROM json_each(?2))",
        )
        .bind(tenant)
        .bind(&removed_json)
        .fetch_one(&mut *tx)
        .await?;
        if found != removed.len() as i64 {
            return Err(segments_gone(&removed, found as usize));
        }
        // An object the merged segment lists again must not be deleted under it.
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
        .bind(json_list(&kept_keys)?)
        .execute(&mut *tx)
        .await?;
        // Added rows first: deleting the removed segments cascades to their profiles and
        // sample labels, which must have moved by then.
        if let Some(added) = &replacement.added {
            Self::insert_segment_rows(&mut tx, added).await?;
            sqlx::query(
                "UPDATE profiles SET segment_id = ?1
                 WHERE segment_id IN (SELECT value FROM json_each(?2))
                   AND (?3 IS NULL OR end_nanos >= ?3)",
            )
            .bind(&added.id)
            .bind(&removed_json)
            .bind(replacement.drop_profiles_before)
            .execute(&mut *tx)
            .await?;
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
        let deleted =
            sqlx::query("DELETE FROM segments WHERE tenant = ?1 AND id IN (SELECT value FROM json_each(?2))")
                .bind(tenant)
                .bind(&removed_json)
                .execute(&mut *tx)
                .await?
                .rows_affected();
        if deleted != removed.len() as u64 {
            return Err(segments_gone(&removed, deleted as usize));
        }
        tx.commit().await?;
        Ok(())
    }

    async fn replace_symbols(
        &self,
        tenant: &str,
        removed: &[String],
        added: &[ObjectMeta],
        delete_after_nanos: i64,
    ) -> CatalogResult<()> {
        let removed = distinct_sorted(removed);
        let removed_json = json_list(&removed)?;
        let kept_keys: Vec<String> = added.iter().map(|o| o.key.clone()).collect();
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
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
            return Err(symbols_gone(tenant, &removed, count as usize));
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
        .bind(json_list(&kept_keys)?)
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
            return Err(symbols_gone(tenant, &removed, deleted as usize));
        }
        // Merged objects take the place of what they replace in the tenant's order.
        Self::insert_symbols(&mut tx, tenant, added, oldest.unwrap_or_else(now_nanos)).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn acquire_lease(&self, name: &str, holder: &str, ttl: Duration) -> CatalogResult<bool> {
        let now = now_nanos();
        let held: Option<String> = sqlx::query_scalar(
            "INSERT INTO leases (name, holder, expires_at_nanos) VALUES (?1, ?2, ?3)
             ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at_nanos = excluded.expires_at_nanos
             WHERE leases.holder = excluded.holder OR leases.expires_at_nanos <= ?4
             RETURNING holder",
        )
        .bind(name)
        .bind(holder)
        .bind(now.saturating_add(duration_nanos(ttl)))
        .bind(now)
        .fetch_optional(&self.pool)
        .await?;
        Ok(held.is_some())
    }

    async fn release_lease(&self, name: &str, holder: &str) -> CatalogResult<()> {
        sqlx::query(sql::RELEASE_LEASE)
            .bind(name)
            .bind(holder)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn due_deletions(&self, now_nanos: i64, limit: i64) -> CatalogResult<Vec<String>> {
        // A negative LIMIT means "no limit" to SQLite.
        let keys = sqlx::query_scalar(
            "SELECT key FROM pending_deletions WHERE delete_after_nanos <= ?1
             ORDER BY delete_after_nanos, key LIMIT ?2",
        )
        .bind(now_nanos)
        .bind(limit.max(0))
        .fetch_all(&self.pool)
        .await?;
        Ok(keys)
    }

    async fn forget_deletions(&self, keys: &[String]) -> CatalogResult<()> {
        sqlx::query("DELETE FROM pending_deletions WHERE key IN (SELECT value FROM json_each(?1))")
            .bind(json_list(keys)?)
            .execute(&self.pool)
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
        .fetch_all(&self.pool)
        .await?;
        Ok(keep_in_order(keys, found))
    }
    async fn series(&self, tenant: &str, range: TimeRange) -> CatalogResult<Vec<Series>> {
        Reads(&self.pool).series(tenant, range).await
    }

    async fn profile_types(&self, tenant: &str, range: TimeRange) -> CatalogResult<Vec<ProfileType>> {
        Reads(&self.pool).profile_types(tenant, range).await
    }

    async fn label_names(&self, tenant: &str, range: TimeRange) -> CatalogResult<Vec<String>> {
        Reads(&self.pool).label_names(tenant, range).await
    }

    async fn label_values(&self, tenant: &str, name: &str, range: TimeRange) -> CatalogResult<Vec<String>> {
        Reads(&self.pool).label_values(tenant, name, range).await
    }

    async fn stored_profiles(&self, tenant: &str, keys: &[ProfileKey]) -> CatalogResult<Vec<ProfileKey>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
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
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(profile_key).collect()
    }

    async fn profile(&self, tenant: &str, id: [u8; 16]) -> CatalogResult<Vec<(String, ProfileRecord)>> {
        let rows = sqlx::query_as::<_, ProfileRow>(
            "SELECT segment_id, profile_id, series_id, start_nanos, end_nanos, sample_count, resource, attributes
             FROM profiles WHERE tenant = ?1 AND profile_id = ?2
             ORDER BY segment_id, series_id, start_nanos",
        )
        .bind(tenant)
        .bind(&id[..])
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(ProfileRow::into_record).collect()
    }

    async fn stats(&self, tenant: &str) -> CatalogResult<CatalogStats> {
        let mut tx = self.pool.begin().await?;
        let (segments, series) = sqlx::query_as::<_, (i64, i64)>(sql::STATS_COUNTS)
            .bind(tenant)
            .fetch_one(&mut *tx)
            .await?;
        let mut stats = empty_stats(segments, series)?;
        let tables = sqlx::query_as::<_, (String, i64, i64, i64)>(
            "SELECT kind, COUNT(*), COALESCE(SUM(rows), 0), COALESCE(SUM(size_bytes), 0)
             FROM (SELECT o.kind, o.rows, o.size_bytes
                   FROM segment_objects o JOIN segments s ON s.id = o.segment_id
                   WHERE s.tenant = ?1
                   UNION ALL
                   SELECT kind, rows, size_bytes FROM symbol_objects WHERE tenant = ?1)
             GROUP BY kind",
        )
        .bind(tenant)
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        for (kind, objects, rows, bytes) in &tables {
            add_table_stats(&mut stats, kind, *objects, *rows, *bytes)?;
        }
        Ok(stats)
    }

    async fn ping(&self) -> CatalogResult<()> {
        Reads(&self.pool).ping().await
    }

    async fn data_range(&self, tenant: &str) -> CatalogResult<Option<(i64, i64)>> {
        Reads(&self.pool).data_range(tenant).await
    }

    async fn settings(&self, tenant: &str) -> CatalogResult<Vec<Setting>> {
        Reads(&self.pool).settings(tenant).await
    }

    async fn put_setting(&self, tenant: &str, setting: &Setting) -> CatalogResult<Setting> {
        Reads(&self.pool).put_setting(tenant, setting).await
    }

    async fn delete_setting(&self, tenant: &str, name: &str) -> CatalogResult<()> {
        Reads(&self.pool).delete_setting(tenant, name).await
    }

    async fn debug_files(&self, tenant: &str) -> CatalogResult<Vec<DebugFile>> {
        Reads(&self.pool).debug_files(tenant).await
    }

    async fn debug_file(&self, tenant: &str, build_id: &str) -> CatalogResult<Option<DebugFile>> {
        Reads(&self.pool).debug_file(tenant, build_id).await
    }

    async fn put_debug_file(&self, tenant: &str, file: &DebugFile) -> CatalogResult<()> {
        Reads(&self.pool).put_debug_file(tenant, file).await
    }

    async fn delete_debug_file(&self, tenant: &str, build_id: &str) -> CatalogResult<bool> {
        Reads(&self.pool).delete_debug_file(tenant, build_id).await
    }

    async fn create_token(&self, token: &TenantToken, sha256_hex: &str) -> CatalogResult<()> {
        Reads(&self.pool).create_token(token, sha256_hex).await
    }

    async fn tokens(&self, tenant: Option<&str>) -> CatalogResult<Vec<TenantToken>> {
        Reads(&self.pool).tokens(tenant).await
    }

    async fn revoke_token(&self, id: &str, at_millis: i64) -> CatalogResult<bool> {
        Reads(&self.pool).revoke_token(id, at_millis).await
    }

    async fn token_by_hash(&self, sha256_hex: &str) -> CatalogResult<Option<TenantToken>> {
        Reads(&self.pool).token_by_hash(sha256_hex).await
    }
}
