//! Series and labels: what the label and series APIs answer without touching Parquet.

use async_trait::async_trait;
use sqlx::FromRow;
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;

use super::CatalogResult;
use super::backend::{Dialect, PerDialect, SqlCatalog, on_either};
use super::common::{ProfileTypeRow, SeriesRow, json_ids};
use super::label_index::{classify, days};
use super::segments::LIVE_SERIES_IDS;
use crate::model::{ProfileType, Series, TimeRange};

#[async_trait]
pub trait SeriesCatalog: Send + Sync {
    /// Series of `tenant` with samples in `range`.
    async fn series(&self, tenant: &str, range: TimeRange) -> CatalogResult<Vec<Series>>;

    /// Ids of the series of `tenant` that still have raw samples: what the series limit
    /// counts. A series whose samples retention removed frees its place while its rollups
    /// stay queryable.
    async fn live_series(&self, tenant: &str) -> CatalogResult<Vec<i64>>;

    /// Distinct profile types with samples in `range`.
    async fn profile_types(&self, tenant: &str, range: TimeRange) -> CatalogResult<Vec<ProfileType>>;

    /// Sorted label names (series labels and sample attributes) with samples in `range`.
    async fn label_names(&self, tenant: &str, range: TimeRange) -> CatalogResult<Vec<String>>;

    /// Sorted values of one label name with samples in `range`.
    async fn label_values(&self, tenant: &str, name: &str, range: TimeRange) -> CatalogResult<Vec<String>>;

    /// Forgets those of `series_ids` that no segment and no profile refers to any more,
    /// labels included (what a purge leaves of a series it deleted whole); how many.
    async fn forget_empty_series(&self, tenant: &str, series_ids: &[i64]) -> CatalogResult<u64>;
}

/// `$2` a JSON array of series ids. Labels go by cascade.
const FORGET_EMPTY_SERIES: PerDialect = PerDialect {
    sqlite: "DELETE FROM series WHERE tenant = $1
        AND series_id IN (SELECT value FROM json_each($2))
        AND NOT EXISTS (SELECT 1 FROM segment_series ss WHERE ss.tenant = $1 AND ss.series_id = series.series_id)
        AND NOT EXISTS (SELECT 1 FROM profiles p WHERE p.tenant = $1 AND p.series_id = series.series_id)",
    postgres: "DELETE FROM series WHERE tenant = $1
        AND series_id IN (SELECT jsonb_array_elements_text($2::jsonb)::BIGINT)
        AND NOT EXISTS (SELECT 1 FROM segment_series ss WHERE ss.tenant = $1 AND ss.series_id = series.series_id)
        AND NOT EXISTS (SELECT 1 FROM profiles p WHERE p.tenant = $1 AND p.series_id = series.series_id)",
};

const SERIES_IN_RANGE: &str =
    "SELECT s.series_id, s.sample_type, s.sample_unit, s.period_type, s.period_unit, s.labels, s.period
    FROM series s
    WHERE s.tenant = $1
      AND EXISTS (SELECT 1 FROM segment_series ss
                  WHERE ss.tenant = s.tenant AND ss.series_id = s.series_id
                    AND ss.min_time < $2 AND ss.max_time >= $3)
    ORDER BY s.series_id";

const PROFILE_TYPES_IN_RANGE: &str =
    "SELECT DISTINCT s.sample_type, s.sample_unit, s.period_type, s.period_unit
    FROM series s
    WHERE s.tenant = $1
      AND EXISTS (SELECT 1 FROM segment_series ss
                  WHERE ss.tenant = s.tenant AND ss.series_id = s.series_id
                    AND ss.min_time < $2 AND ss.max_time >= $3)";

// The label index (label_index.rs) answers for compacted segments; these read the segments
// themselves: level-0 ones only (`$5` false), or every one where the index left a name or
// value undecided (`$5` true), and sample attributes, known per segment.
// Postgres cannot see that a segment's `min_time` and `max_time` move together, so for a
// short range it expects a third of all segments and scans every extent; `LATERAL` with
// `OFFSET 0` makes it walk from the few segments of the range to their extents and labels
// by key. SQLite's planner walks that way by itself.
const SEGMENT_LABEL_NAMES: PerDialect = PerDialect {
    sqlite: "SELECT sl.name FROM segments g
        JOIN segment_series ss ON ss.segment_id = g.id
        JOIN series_labels sl ON sl.tenant = ss.tenant AND sl.series_id = ss.series_id
        WHERE g.tenant = $1 AND g.min_time < $2 AND g.max_time >= $3 AND (g.level = 0 OR $4)
          AND ss.min_time < $2 AND ss.max_time >= $3
        UNION
        SELECT l.name FROM sample_labels l JOIN segments g ON g.id = l.segment_id
        WHERE g.tenant = $1 AND g.min_time < $2 AND g.max_time >= $3",
    postgres: "SELECT sl.name FROM segments g
        CROSS JOIN LATERAL (SELECT ss.tenant, ss.series_id FROM segment_series ss
                            WHERE ss.segment_id = g.id AND ss.min_time < $2 AND ss.max_time >= $3
                            OFFSET 0) ss
        CROSS JOIN LATERAL (SELECT sl.name FROM series_labels sl
                            WHERE sl.tenant = ss.tenant AND sl.series_id = ss.series_id OFFSET 0) sl
        WHERE g.tenant = $1 AND g.min_time < $2 AND g.max_time >= $3 AND (g.level = 0 OR $4)
        UNION
        SELECT l.name FROM sample_labels l JOIN segments g ON g.id = l.segment_id
        WHERE g.tenant = $1 AND g.min_time < $2 AND g.max_time >= $3",
};

const SEGMENT_LABEL_VALUES: PerDialect = PerDialect {
    sqlite: "SELECT sl.value FROM segments g
        JOIN segment_series ss ON ss.segment_id = g.id
        JOIN series_labels sl ON sl.tenant = ss.tenant AND sl.series_id = ss.series_id
        WHERE g.tenant = $1 AND g.min_time < $2 AND g.max_time >= $3 AND (g.level = 0 OR $5)
          AND ss.min_time < $2 AND ss.max_time >= $3 AND sl.name = $4
        UNION
        SELECT l.value FROM sample_labels l JOIN segments g ON g.id = l.segment_id
        WHERE g.tenant = $1 AND l.name = $4 AND g.min_time < $2 AND g.max_time >= $3",
    postgres: "SELECT sl.value FROM segments g
        CROSS JOIN LATERAL (SELECT ss.tenant, ss.series_id FROM segment_series ss
                            WHERE ss.segment_id = g.id AND ss.min_time < $2 AND ss.max_time >= $3
                            OFFSET 0) ss
        CROSS JOIN LATERAL (SELECT sl.value FROM series_labels sl
                            WHERE sl.tenant = ss.tenant AND sl.series_id = ss.series_id AND sl.name = $4
                            OFFSET 0) sl
        WHERE g.tenant = $1 AND g.min_time < $2 AND g.max_time >= $3 AND (g.level = 0 OR $5)
        UNION
        SELECT l.value FROM sample_labels l JOIN segments g ON g.id = l.segment_id
        WHERE g.tenant = $1 AND l.name = $4 AND g.min_time < $2 AND g.max_time >= $3",
};

const NAME_DAYS: &str = "SELECT name, min_time, max_time FROM label_name_days
    WHERE tenant = $1 AND day BETWEEN $4 AND $5 AND min_time < $2 AND max_time >= $3";

const VALUE_HULLS: &str = "SELECT value, min_time, max_time FROM label_values
    WHERE tenant = $1 AND name = $4 AND min_time < $2 AND max_time >= $3";

const VALUE_DAYS: &str = "SELECT value, min_time, max_time FROM label_value_days
    WHERE tenant = $1 AND name = $4 AND day BETWEEN $5 AND $6 AND min_time < $2 AND max_time >= $3";

impl SqlCatalog {
    /// `sql` with `$1` tenant, `$2` range end and `$3` range start: the binds of every
    /// `*_IN_RANGE` statement.
    async fn in_range<O>(&self, sql: &'static str, tenant: &str, range: TimeRange) -> CatalogResult<Vec<O>>
    where
        O: for<'r> FromRow<'r, SqliteRow> + for<'r> FromRow<'r, PgRow> + Send + Unpin,
    {
        Ok(on_either!(self, |pool| sqlx::query_as(sql)
            .bind(tenant)
            .bind(range.end)
            .bind(range.start)
            .fetch_all(pool)
            .await?))
    }
}

#[async_trait]
impl SeriesCatalog for SqlCatalog {
    async fn series(&self, tenant: &str, range: TimeRange) -> CatalogResult<Vec<Series>> {
        let rows: Vec<SeriesRow> = self.in_range(SERIES_IN_RANGE, tenant, range).await?;
        rows.into_iter().map(Series::try_from).collect()
    }

    async fn live_series(&self, tenant: &str) -> CatalogResult<Vec<i64>> {
        Ok(on_either!(self, |pool| sqlx::query_scalar(LIVE_SERIES_IDS)
            .bind(tenant)
            .fetch_all(pool)
            .await?))
    }

    async fn forget_empty_series(&self, tenant: &str, series_ids: &[i64]) -> CatalogResult<u64> {
        if series_ids.is_empty() {
            return Ok(0);
        }
        let ids = json_ids(series_ids);
        Ok(on_either!(self, |pool| sqlx::query(
            pool.sql(&FORGET_EMPTY_SERIES)
        )
        .bind(tenant)
        .bind(ids.as_str())
        .execute(pool)
        .await?
        .rows_affected()))
    }

    async fn profile_types(&self, tenant: &str, range: TimeRange) -> CatalogResult<Vec<ProfileType>> {
        let rows: Vec<ProfileTypeRow> = self.in_range(PROFILE_TYPES_IN_RANGE, tenant, range).await?;
        let mut types: Vec<ProfileType> = rows.into_iter().map(ProfileType::from).collect();
        types.sort();
        Ok(types)
    }

    // One snapshot: a compaction between the index and the level-0 read would otherwise
    // hide what it moved.
    async fn label_names(&self, tenant: &str, range: TimeRange) -> CatalogResult<Vec<String>> {
        let (first, last) = days(range);
        on_either!(self, |pool| {
            let mut tx = pool.begin_snapshot().await?;
            let rows: Vec<(String, i64, i64)> = sqlx::query_as(NAME_DAYS)
                .bind(tenant)
                .bind(range.end)
                .bind(range.start)
                .bind(first)
                .bind(last)
                .fetch_all(&mut *tx)
                .await?;
            let (mut names, undecided) = classify(range, rows);
            let segments: Vec<(String,)> = sqlx::query_as(pool.sql(&SEGMENT_LABEL_NAMES))
                .bind(tenant)
                .bind(range.end)
                .bind(range.start)
                .bind(!undecided.is_empty())
                .fetch_all(&mut *tx)
                .await?;
            names.extend(segments.into_iter().map(|(name,)| name));
            Ok(names.into_iter().collect())
        })
    }

    async fn label_values(&self, tenant: &str, name: &str, range: TimeRange) -> CatalogResult<Vec<String>> {
        let (first, last) = days(range);
        on_either!(self, |pool| {
            let mut tx = pool.begin_snapshot().await?;
            let rows: Vec<(String, i64, i64)> = sqlx::query_as(VALUE_HULLS)
                .bind(tenant)
                .bind(range.end)
                .bind(range.start)
                .bind(name)
                .fetch_all(&mut *tx)
                .await?;
            let (mut values, mut undecided) = classify(range, rows);
            if !undecided.is_empty() {
                let rows: Vec<(String, i64, i64)> = sqlx::query_as(VALUE_DAYS)
                    .bind(tenant)
                    .bind(range.end)
                    .bind(range.start)
                    .bind(name)
                    .bind(first)
                    .bind(last)
                    .fetch_all(&mut *tx)
                    .await?;
                let rows = rows
                    .into_iter()
                    .filter(|(value, ..)| undecided.contains(value))
                    .collect();
                let (inside, across) = classify(range, rows);
                values.extend(inside);
                undecided = across;
            }
            let segments: Vec<(String,)> = sqlx::query_as(pool.sql(&SEGMENT_LABEL_VALUES))
                .bind(tenant)
                .bind(range.end)
                .bind(range.start)
                .bind(name)
                .bind(!undecided.is_empty())
                .fetch_all(&mut *tx)
                .await?;
            values.extend(segments.into_iter().map(|(value,)| value));
            Ok(values.into_iter().collect())
        })
    }
}
