//! The production catalog shared by ingest, query and compactor replicas. Bulk inserts
//! bind whole columns as arrays and `UNNEST` them, so a commit costs a fixed number of
//! round trips however many series, labels and profiles it carries.

use std::str::FromStr;

use async_trait::async_trait;
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgRow};
use sqlx::{Postgres, Row, Transaction};

use super::common::{
    ObjectRow, SegmentRow, SegmentSeriesRow, add_table_stats, assemble_segments, decode_labels,
    distinct_sample_labels, distinct_series, empty_stats, encode_labels, profile_id, redact_password,
    same_identity, series_from_columns, sorted_distinct, to_i64,
};
use super::{Catalog, CatalogError, CatalogResult, CatalogStats, SegmentCommit, SegmentMeta};
use crate::model::{ProfileRecord, ProfileType, Series, TimeRange};

static MIGRATOR: Migrator = sqlx::migrate!("../migrations/postgres");

const MAX_CONNECTIONS: u32 = 10;

#[derive(Clone, Debug)]
pub struct PostgresCatalog {
    pool: PgPool,
}

impl PostgresCatalog {
    /// Connects to `postgres://…` and runs the migrations (sqlx holds an advisory lock
    /// while migrating, so replicas starting together do not race).
    pub async fn connect(url: &str) -> CatalogResult<PostgresCatalog> {
        let options = PgConnectOptions::from_str(url).map_err(|e| CatalogError::InvalidUrl {
            url: redact_password(url),
            reason: e.to_string(),
        })?;
        let pool = PgPoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .connect_with(options)
            .await?;
        Self::from_pool(pool).await
    }

    /// Wraps an existing pool (configured by the caller) and runs the migrations.
    pub async fn from_pool(pool: PgPool) -> CatalogResult<PostgresCatalog> {
        MIGRATOR.run(&pool).await?;
        Ok(PostgresCatalog { pool })
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    async fn upsert_series(
        tx: &mut Transaction<'_, Postgres>,
        tenant: &str,
        series: &[&Series],
    ) -> CatalogResult<()> {
        let ids: Vec<i64> = series.iter().map(|s| s.id).collect();
        let periods: Vec<i64> = series.iter().map(|s| s.period).collect();
        let labels = series
            .iter()
            .map(|s| encode_labels(&s.labels))
            .collect::<CatalogResult<Vec<_>>>()?;
        let column = |f: fn(&ProfileType) -> &String| -> Vec<String> {
            series.iter().map(|s| f(&s.profile_type).clone()).collect()
        };
        // Inserting first (and skipping existing ids) makes a concurrent insert of the same
        // series wait for the other transaction instead of failing on the primary key; the
        // check below then sees whichever definition won.
        sqlx::query(
            "INSERT INTO series (tenant, series_id, profile_type, sample_type, sample_unit, period_type,
                                 period_unit, labels, period)
             SELECT $1::TEXT, u.id, u.st || ':' || u.su || ':' || u.pt || ':' || u.pu,
                    u.st, u.su, u.pt, u.pu, u.labels, u.period
             FROM UNNEST($2::BIGINT[], $3::TEXT[], $4::TEXT[], $5::TEXT[], $6::TEXT[], $7::TEXT[], $8::BIGINT[])
                  AS u(id, st, su, pt, pu, labels, period)
             ON CONFLICT (tenant, series_id) DO NOTHING",
        )
        .bind(tenant)
        .bind(&ids)
        .bind(column(|p| &p.sample_type))
        .bind(column(|p| &p.sample_unit))
        .bind(column(|p| &p.period_type))
        .bind(column(|p| &p.period_unit))
        .bind(&labels)
        .bind(&periods)
        .execute(&mut **tx)
        .await?;

        let stored = sqlx::query(
            "SELECT series_id, sample_type, sample_unit, period_type, period_unit, labels
             FROM series WHERE tenant = $1 AND series_id = ANY($2)",
        )
        .bind(tenant)
        .bind(&ids)
        .fetch_all(&mut **tx)
        .await?;
        for row in &stored {
            let id: i64 = row.try_get(0)?;
            let profile_type = [row.try_get(1)?, row.try_get(2)?, row.try_get(3)?, row.try_get(4)?];
            let stored = series_from_columns(id, profile_type, row.try_get(5)?, 0)?;
            let incoming = series.iter().find(|s| s.id == id);
            if incoming.is_some_and(|s| !same_identity(&stored, s)) {
                return Err(CatalogError::SeriesCollision { id });
            }
        }

        sqlx::query(
            "UPDATE series s SET period = u.period
             FROM UNNEST($2::BIGINT[], $3::BIGINT[]) AS u(id, period)
             WHERE s.tenant = $1 AND s.series_id = u.id AND s.period <> u.period",
        )
        .bind(tenant)
        .bind(&ids)
        .bind(&periods)
        .execute(&mut **tx)
        .await?;

        let (mut label_ids, mut names, mut values) = (Vec::new(), Vec::new(), Vec::new());
        for s in series {
            for (name, value) in &s.labels {
                label_ids.push(s.id);
                names.push(name.as_str());
                values.push(value.as_str());
            }
        }
        sqlx::query(
            "INSERT INTO series_labels (tenant, series_id, name, value)
             SELECT $1::TEXT, u.id, u.name, u.value FROM UNNEST($2::BIGINT[], $3::TEXT[], $4::TEXT[]) AS u(id, name, value)
             ON CONFLICT (tenant, series_id, name) DO NOTHING",
        )
        .bind(tenant)
        .bind(&label_ids)
        .bind(&names)
        .bind(&values)
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    async fn insert_segment(tx: &mut Transaction<'_, Postgres>, commit: &SegmentCommit) -> CatalogResult<()> {
        let seg = &commit.segment;
        sqlx::query(
            "INSERT INTO segments (id, tenant, min_time, max_time, level, created_at_nanos)
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&seg.id)
        .bind(&seg.tenant)
        .bind(seg.min_time)
        .bind(seg.max_time)
        .bind(seg.level)
        .bind(seg.created_at_nanos)
        .execute(&mut **tx)
        .await?;

        let positions: Vec<i64> = (0..seg.objects.len() as i64).collect();
        let kinds: Vec<&str> = seg.objects.iter().map(|o| o.kind.as_str()).collect();
        let keys: Vec<&str> = seg.objects.iter().map(|o| o.key.as_str()).collect();
        let sizes = seg
            .objects
            .iter()
            .map(|o| to_i64(o.size_bytes, "object size"))
            .collect::<CatalogResult<Vec<_>>>()?;
        let rows = seg
            .objects
            .iter()
            .map(|o| to_i64(o.rows, "object row count"))
            .collect::<CatalogResult<Vec<_>>>()?;
        sqlx::query(
            "INSERT INTO segment_objects (segment_id, position, kind, key, size_bytes, rows)
             SELECT $1::TEXT, u.* FROM UNNEST($2::BIGINT[], $3::TEXT[], $4::TEXT[], $5::BIGINT[], $6::BIGINT[]) AS u",
        )
        .bind(&seg.id)
        .bind(&positions)
        .bind(&kinds)
        .bind(&keys)
        .bind(&sizes)
        .bind(&rows)
        .execute(&mut **tx)
        .await?;

        let positions: Vec<i64> = (0..seg.series.len() as i64).collect();
        let ids: Vec<i64> = seg.series.iter().map(|s| s.series_id).collect();
        let mins: Vec<i64> = seg.series.iter().map(|s| s.min_time).collect();
        let maxs: Vec<i64> = seg.series.iter().map(|s| s.max_time).collect();
        let samples = seg
            .series
            .iter()
            .map(|s| to_i64(s.samples, "sample count"))
            .collect::<CatalogResult<Vec<_>>>()?;
        sqlx::query(
            "INSERT INTO segment_series (segment_id, tenant, series_id, position, min_time, max_time, samples)
             SELECT $1::TEXT, $2::TEXT, u.* FROM UNNEST($3::BIGINT[], $4::BIGINT[], $5::BIGINT[], $6::BIGINT[], $7::BIGINT[]) AS u",
        )
        .bind(&seg.id)
        .bind(&seg.tenant)
        .bind(&ids)
        .bind(&positions)
        .bind(&mins)
        .bind(&maxs)
        .bind(&samples)
        .execute(&mut **tx)
        .await?;

        let (names, values): (Vec<&str>, Vec<&str>) = distinct_sample_labels(commit).into_iter().unzip();
        sqlx::query(
            "INSERT INTO sample_labels (segment_id, name, value)
             SELECT $1::TEXT, u.* FROM UNNEST($2::TEXT[], $3::TEXT[]) AS u",
        )
        .bind(&seg.id)
        .bind(&names)
        .bind(&values)
        .execute(&mut **tx)
        .await?;

        let p = &commit.profiles;
        sqlx::query(
            "INSERT INTO profiles (tenant, profile_id, segment_id, series_id, start_nanos, end_nanos, sample_count,
                                   resource, attributes)
             SELECT $1::TEXT, u.pid, $2::TEXT, u.sid, u.start_nanos, u.end_nanos, u.sample_count,
                    u.resource, u.attributes
             FROM UNNEST($3::BYTEA[], $4::BIGINT[], $5::BIGINT[], $6::BIGINT[], $7::BIGINT[], $8::TEXT[], $9::TEXT[])
                  AS u(pid, sid, start_nanos, end_nanos, sample_count, resource, attributes)",
        )
        .bind(&seg.tenant)
        .bind(&seg.id)
        .bind(p.iter().map(|p| p.profile_id.to_vec()).collect::<Vec<_>>())
        .bind(p.iter().map(|p| p.series_id).collect::<Vec<_>>())
        .bind(p.iter().map(|p| p.start_nanos).collect::<Vec<_>>())
        .bind(p.iter().map(|p| p.end_nanos).collect::<Vec<_>>())
        .bind(p.iter().map(|p| p.sample_count).collect::<Vec<_>>())
        .bind(p.iter().map(|p| encode_labels(&p.resource)).collect::<CatalogResult<Vec<_>>>()?)
        .bind(p.iter().map(|p| encode_labels(&p.attributes)).collect::<CatalogResult<Vec<_>>>()?)
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    /// Segments overlapping `range`, optionally only those with symbol objects, in three
    /// queries inside one snapshot so the rows agree with each other.
    async fn fetch_segments(
        &self,
        tenant: &str,
        range: TimeRange,
        symbols_only: bool,
    ) -> CatalogResult<Vec<SegmentMeta>> {
        let mut tx = self
            .pool
            .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .await?;
        let segments = sqlx::query(
            "SELECT s.id, s.tenant, s.min_time, s.max_time, s.level, s.created_at_nanos
             FROM segments s
             WHERE s.tenant = $1 AND s.min_time < $2 AND s.max_time >= $3
               AND (NOT $4 OR EXISTS (SELECT 1 FROM segment_objects x
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
             WHERE s.tenant = $1 AND s.min_time < $2 AND s.max_time >= $3",
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
             WHERE s.tenant = $1 AND s.min_time < $2 AND s.max_time >= $3",
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

fn segment_row(row: &PgRow) -> CatalogResult<SegmentRow> {
    Ok(SegmentRow {
        id: row.try_get(0)?,
        tenant: row.try_get(1)?,
        min_time: row.try_get(2)?,
        max_time: row.try_get(3)?,
        level: row.try_get(4)?,
        created_at_nanos: row.try_get(5)?,
    })
}

fn object_row(row: &PgRow) -> CatalogResult<ObjectRow> {
    Ok(ObjectRow {
        segment_id: row.try_get(0)?,
        position: row.try_get(1)?,
        kind: row.try_get(2)?,
        key: row.try_get(3)?,
        size_bytes: row.try_get(4)?,
        rows: row.try_get(5)?,
    })
}

fn segment_series_row(row: &PgRow) -> CatalogResult<SegmentSeriesRow> {
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
impl Catalog for PostgresCatalog {
    async fn commit_segment(&self, commit: &SegmentCommit) -> CatalogResult<()> {
        let series = distinct_series(commit)?;
        let mut tx = self.pool.begin().await?;
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
             WHERE s.tenant = $1
               AND EXISTS (SELECT 1 FROM segment_series ss
                           WHERE ss.tenant = s.tenant AND ss.series_id = s.series_id
                             AND ss.min_time < $2 AND ss.max_time >= $3)
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
             WHERE s.tenant = $1
               AND EXISTS (SELECT 1 FROM segment_series ss
                           WHERE ss.tenant = s.tenant AND ss.series_id = s.series_id
                             AND ss.min_time < $2 AND ss.max_time >= $3)",
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
             WHERE sl.tenant = $1
               AND EXISTS (SELECT 1 FROM segment_series ss
                           WHERE ss.tenant = sl.tenant AND ss.series_id = sl.series_id
                             AND ss.min_time < $2 AND ss.max_time >= $3)
             UNION
             SELECT l.name FROM sample_labels l JOIN segments g ON g.id = l.segment_id
             WHERE g.tenant = $1 AND g.min_time < $2 AND g.max_time >= $3",
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
             WHERE sl.tenant = $1 AND sl.name = $4
               AND EXISTS (SELECT 1 FROM segment_series ss
                           WHERE ss.tenant = sl.tenant AND ss.series_id = sl.series_id
                             AND ss.min_time < $2 AND ss.max_time >= $3)
             UNION
             SELECT l.value FROM sample_labels l JOIN segments g ON g.id = l.segment_id
             WHERE g.tenant = $1 AND l.name = $4 AND g.min_time < $2 AND g.max_time >= $3",
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
             FROM profiles WHERE tenant = $1 AND profile_id = $2
             ORDER BY segment_id COLLATE \"C\", series_id, start_nanos",
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
        let mut tx = self
            .pool
            .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .await?;
        let counts = sqlx::query(
            "SELECT (SELECT COUNT(*) FROM segments WHERE tenant = $1),
                    (SELECT COUNT(*) FROM series WHERE tenant = $1)",
        )
        .bind(tenant)
        .fetch_one(&mut *tx)
        .await?;
        let mut stats = empty_stats(counts.try_get(0)?, counts.try_get(1)?)?;
        // SUM(BIGINT) is NUMERIC in Postgres; the cast fails loudly rather than wrapping.
        let tables = sqlx::query(
            "SELECT o.kind, COUNT(*), COALESCE(SUM(o.rows), 0)::BIGINT, COALESCE(SUM(o.size_bytes), 0)::BIGINT
             FROM segment_objects o JOIN segments s ON s.id = o.segment_id
             WHERE s.tenant = $1
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
