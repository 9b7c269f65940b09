//! The single-binary default: the catalog in one SQLite file next to the data.

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::migrate::Migrator;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow, SqliteSynchronous,
};
use sqlx::{Row, Sqlite, Transaction};

use super::common::{
    ObjectRow, SegmentRow, SegmentSeriesRow, add_table_stats, assemble_segments, decode_labels,
    distinct_sample_labels, distinct_series, empty_stats, encode_labels, profile_id, same_identity,
    series_from_columns, sorted_distinct, to_i64,
};
use super::{Catalog, CatalogError, CatalogResult, CatalogStats, SegmentCommit, SegmentMeta};
use crate::model::{ProfileRecord, ProfileType, Series, TimeRange};

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

    async fn insert_segment(tx: &mut Transaction<'_, Sqlite>, commit: &SegmentCommit) -> CatalogResult<()> {
        let seg = &commit.segment;
        sqlx::query(
            "INSERT INTO segments (id, tenant, min_time, max_time, level, created_at_nanos)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )
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

    /// Segments overlapping `range`, optionally only those with symbol objects, in three
    /// queries inside one read transaction so the rows agree with each other.
    async fn fetch_segments(
        &self,
        tenant: &str,
        range: TimeRange,
        symbols_only: bool,
    ) -> CatalogResult<Vec<SegmentMeta>> {
        let mut tx = self.pool.begin().await?;
        let segments = sqlx::query(
            "SELECT s.id, s.tenant, s.min_time, s.max_time, s.level, s.created_at_nanos
             FROM segments s
             WHERE s.tenant = ?1 AND s.min_time < ?2 AND s.max_time >= ?3
               AND (?4 = 0 OR EXISTS (SELECT 1 FROM segment_objects x
                                      WHERE x.segment_id = s.id AND x.kind <> 'samples'))",
        )
        .bind(tenant)
        .bind(range.end)
        .bind(range.start)
        .bind(symbols_only)
        .fetch_all(&mut *tx)
        .await?
        .iter()
        .map(segment_row)
        .collect::<CatalogResult<Vec<_>>>()?;
        let objects = sqlx::query(
            "SELECT o.segment_id, o.position, o.kind, o.key, o.size_bytes, o.rows
             FROM segment_objects o JOIN segments s ON s.id = o.segment_id
             WHERE s.tenant = ?1 AND s.min_time < ?2 AND s.max_time >= ?3",
        )
        .bind(tenant)
        .bind(range.end)
        .bind(range.start)
        .fetch_all(&mut *tx)
        .await?
        .iter()
        .map(object_row)
        .collect::<CatalogResult<Vec<_>>>()?;
        let series = sqlx::query(
            "SELECT ss.segment_id, ss.position, ss.series_id, ss.min_time, ss.max_time, ss.samples
             FROM segment_series ss JOIN segments s ON s.id = ss.segment_id
             WHERE s.tenant = ?1 AND s.min_time < ?2 AND s.max_time >= ?3",
        )
        .bind(tenant)
        .bind(range.end)
        .bind(range.start)
        .fetch_all(&mut *tx)
        .await?
        .iter()
        .map(segment_series_row)
        .collect::<CatalogResult<Vec<_>>>()?;
        tx.commit().await?;
        assemble_segments(segments, objects, series)
    }
}

fn segment_row(row: &SqliteRow) -> CatalogResult<SegmentRow> {
    Ok(SegmentRow {
        id: row.try_get(0)?,
        tenant: row.try_get(1)?,
        min_time: row.try_get(2)?,
        max_time: row.try_get(3)?,
        level: row.try_get(4)?,
        created_at_nanos: row.try_get(5)?,
    })
}

fn object_row(row: &SqliteRow) -> CatalogResult<ObjectRow> {
    Ok(ObjectRow {
        segment_id: row.try_get(0)?,
        position: row.try_get(1)?,
        kind: row.try_get(2)?,
        key: row.try_get(3)?,
        size_bytes: row.try_get(4)?,
        rows: row.try_get(5)?,
    })
}

fn segment_series_row(row: &SqliteRow) -> CatalogResult<SegmentSeriesRow> {
    Ok(SegmentSeriesRow {
        segment_id: row.try_get(0)?,
        position: row.try_get(1)?,
        series_id: row.try_get(2)?,
        min_time: row.try_get(3)?,
        max_time: row.try_get(4)?,
        samples: row.try_get(5)?,
    })
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
        self.fetch_segments(tenant, range, false).await
    }

    async fn symbol_segments(&self, tenant: &str) -> CatalogResult<Vec<SegmentMeta>> {
        self.fetch_segments(tenant, TimeRange::ALL, true).await
    }

    async fn series(&self, tenant: &str, range: TimeRange) -> CatalogResult<Vec<Series>> {
        let rows = sqlx::query(
            "SELECT s.series_id, s.sample_type, s.sample_unit, s.period_type, s.period_unit, s.labels, s.period
             FROM series s
             WHERE s.tenant = ?1
               AND EXISTS (SELECT 1 FROM segment_series ss
                           WHERE ss.tenant = s.tenant AND ss.series_id = s.series_id
                             AND ss.min_time < ?2 AND ss.max_time >= ?3)
             ORDER BY s.series_id",
        )
        .bind(tenant)
        .bind(range.end)
        .bind(range.start)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                let profile_type = [row.try_get(1)?, row.try_get(2)?, row.try_get(3)?, row.try_get(4)?];
                series_from_columns(row.try_get(0)?, profile_type, row.try_get(5)?, row.try_get(6)?)
            })
            .collect()
    }

    async fn profile_types(&self, tenant: &str, range: TimeRange) -> CatalogResult<Vec<ProfileType>> {
        let rows = sqlx::query(
            "SELECT DISTINCT s.sample_type, s.sample_unit, s.period_type, s.period_unit
             FROM series s
             WHERE s.tenant = ?1
               AND EXISTS (SELECT 1 FROM segment_series ss
                           WHERE ss.tenant = s.tenant AND ss.series_id = s.series_id
                             AND ss.min_time < ?2 AND ss.max_time >= ?3)",
        )
        .bind(tenant)
        .bind(range.end)
        .bind(range.start)
        .fetch_all(&self.pool)
        .await?;
        let mut types = rows
            .iter()
            .map(|row| {
                Ok(ProfileType {
                    sample_type: row.try_get(0)?,
                    sample_unit: row.try_get(1)?,
                    period_type: row.try_get(2)?,
                    period_unit: row.try_get(3)?,
                })
            })
            .collect::<CatalogResult<Vec<_>>>()?;
        types.sort();
        Ok(types)
    }

    async fn label_names(&self, tenant: &str, range: TimeRange) -> CatalogResult<Vec<String>> {
        let names = sqlx::query_scalar(
            "SELECT sl.name FROM series_labels sl
             WHERE sl.tenant = ?1
               AND EXISTS (SELECT 1 FROM segment_series ss
                           WHERE ss.tenant = sl.tenant AND ss.series_id = sl.series_id
                             AND ss.min_time < ?2 AND ss.max_time >= ?3)
             UNION
             SELECT l.name FROM sample_labels l JOIN segments g ON g.id = l.segment_id
             WHERE g.tenant = ?1 AND g.min_time < ?2 AND g.max_time >= ?3",
        )
        .bind(tenant)
        .bind(range.end)
        .bind(range.start)
        .fetch_all(&self.pool)
        .await?;
        Ok(sorted_distinct(names))
    }

    async fn label_values(&self, tenant: &str, name: &str, range: TimeRange) -> CatalogResult<Vec<String>> {
        let values = sqlx::query_scalar(
            "SELECT sl.value FROM series_labels sl
             WHERE sl.tenant = ?1 AND sl.name = ?4
               AND EXISTS (SELECT 1 FROM segment_series ss
                           WHERE ss.tenant = sl.tenant AND ss.series_id = sl.series_id
                             AND ss.min_time < ?2 AND ss.max_time >= ?3)
             UNION
             SELECT l.value FROM sample_labels l JOIN segments g ON g.id = l.segment_id
             WHERE g.tenant = ?1 AND l.name = ?4 AND g.min_time < ?2 AND g.max_time >= ?3",
        )
        .bind(tenant)
        .bind(range.end)
        .bind(range.start)
        .bind(name)
        .fetch_all(&self.pool)
        .await?;
        Ok(sorted_distinct(values))
    }

    async fn profile(&self, tenant: &str, id: [u8; 16]) -> CatalogResult<Vec<(String, ProfileRecord)>> {
        let rows = sqlx::query(
            "SELECT segment_id, profile_id, series_id, start_nanos, end_nanos, sample_count, resource, attributes
             FROM profiles WHERE tenant = ?1 AND profile_id = ?2
             ORDER BY segment_id, series_id, start_nanos",
        )
        .bind(tenant)
        .bind(&id[..])
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                let record = ProfileRecord {
                    profile_id: profile_id(row.try_get::<&[u8], _>(1)?)?,
                    series_id: row.try_get(2)?,
                    start_nanos: row.try_get(3)?,
                    end_nanos: row.try_get(4)?,
                    sample_count: row.try_get(5)?,
                    resource: decode_labels(row.try_get(6)?)?,
                    attributes: decode_labels(row.try_get(7)?)?,
                };
                Ok((row.try_get(0)?, record))
            })
            .collect()
    }

    async fn stats(&self, tenant: &str) -> CatalogResult<CatalogStats> {
        let mut tx = self.pool.begin().await?;
        let counts = sqlx::query(
            "SELECT (SELECT COUNT(*) FROM segments WHERE tenant = ?1),
                    (SELECT COUNT(*) FROM series WHERE tenant = ?1)",
        )
        .bind(tenant)
        .fetch_one(&mut *tx)
        .await?;
        let mut stats = empty_stats(counts.try_get(0)?, counts.try_get(1)?)?;
        let tables = sqlx::query(
            "SELECT o.kind, COUNT(*), COALESCE(SUM(o.rows), 0), COALESCE(SUM(o.size_bytes), 0)
             FROM segment_objects o JOIN segments s ON s.id = o.segment_id
             WHERE s.tenant = ?1
             GROUP BY o.kind",
        )
        .bind(tenant)
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        for row in &tables {
            add_table_stats(
                &mut stats,
                row.try_get(0)?,
                row.try_get(1)?,
                row.try_get(2)?,
                row.try_get(3)?,
            )?;
        }
        Ok(stats)
    }

    async fn ping(&self) -> CatalogResult<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }
}
