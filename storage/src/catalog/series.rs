//! Series and labels: what the label and series APIs answer without touching Parquet.

use async_trait::async_trait;
use sqlx::FromRow;
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;

use super::CatalogResult;
use super::backend::{SqlCatalog, on_either};
use super::common::{ProfileTypeRow, SeriesRow, sorted_distinct};
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
}

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

const LABEL_NAMES_IN_RANGE: &str = "SELECT sl.name FROM series_labels sl
    WHERE sl.tenant = $1
      AND EXISTS (SELECT 1 FROM segment_series ss
                  WHERE ss.tenant = sl.tenant AND ss.series_id = sl.series_id
                    AND ss.min_time < $2 AND ss.max_time >= $3)
    UNION
    SELECT l.name FROM sample_labels l JOIN segments g ON g.id = l.segment_id
    WHERE g.tenant = $1 AND g.min_time < $2 AND g.max_time >= $3";

const LABEL_VALUES_IN_RANGE: &str = "SELECT sl.value FROM series_labels sl
    WHERE sl.tenant = $1 AND sl.name = $4
      AND EXISTS (SELECT 1 FROM segment_series ss
                  WHERE ss.tenant = sl.tenant AND ss.series_id = sl.series_id
                    AND ss.min_time < $2 AND ss.max_time >= $3)
    UNION
    SELECT l.value FROM sample_labels l JOIN segments g ON g.id = l.segment_id
    WHERE g.tenant = $1 AND l.name = $4 AND g.min_time < $2 AND g.max_time >= $3";

impl SqlCatalog {
    /// `sql` with `$1` tenant, `$2` range end, `$3` range start and, when given, `$4` name:
    /// the binds of every `*_IN_RANGE` statement.
    async fn in_range<O>(
        &self,
        sql: &'static str,
        tenant: &str,
        range: TimeRange,
        name: Option<&str>,
    ) -> CatalogResult<Vec<O>>
    where
        O: for<'r> FromRow<'r, SqliteRow> + for<'r> FromRow<'r, PgRow> + Send + Unpin,
    {
        Ok(on_either!(self, |pool| {
            let mut query = sqlx::query_as(sql).bind(tenant).bind(range.end).bind(range.start);
            if let Some(name) = name {
                query = query.bind(name);
            }
            query.fetch_all(pool).await?
        }))
    }
}

#[async_trait]
impl SeriesCatalog for SqlCatalog {
    async fn series(&self, tenant: &str, range: TimeRange) -> CatalogResult<Vec<Series>> {
        let rows: Vec<SeriesRow> = self.in_range(SERIES_IN_RANGE, tenant, range, None).await?;
        rows.into_iter().map(Series::try_from).collect()
    }

    async fn live_series(&self, tenant: &str) -> CatalogResult<Vec<i64>> {
        Ok(on_either!(self, |pool| sqlx::query_scalar(LIVE_SERIES_IDS)
            .bind(tenant)
            .fetch_all(pool)
            .await?))
    }

    async fn profile_types(&self, tenant: &str, range: TimeRange) -> CatalogResult<Vec<ProfileType>> {
        let rows: Vec<ProfileTypeRow> = self.in_range(PROFILE_TYPES_IN_RANGE, tenant, range, None).await?;
        let mut types: Vec<ProfileType> = rows.into_iter().map(ProfileType::from).collect();
        types.sort();
        Ok(types)
    }

    async fn label_names(&self, tenant: &str, range: TimeRange) -> CatalogResult<Vec<String>> {
        let rows: Vec<(String,)> = self.in_range(LABEL_NAMES_IN_RANGE, tenant, range, None).await?;
        Ok(sorted_distinct(rows.into_iter().map(|(name,)| name).collect()))
    }

    async fn label_values(&self, tenant: &str, name: &str, range: TimeRange) -> CatalogResult<Vec<String>> {
        let rows: Vec<(String,)> = self
            .in_range(LABEL_VALUES_IN_RANGE, tenant, range, Some(name))
            .await?;
        Ok(sorted_distinct(rows.into_iter().map(|(value,)| value).collect()))
    }
}
