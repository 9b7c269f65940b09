//! Segments: what a flush commits, what compaction and retention swap, what queries list.

use async_trait::async_trait;

use super::backend::{Claim, Dialect, PerDialect, SegmentSwap, SqlCatalog, on_either};
use super::common::{
    ObjectRow, SegmentRow, SegmentSeriesRow, add_table_stats, assemble_segments, check_replacement,
    distinct_profiles, distinct_series, distinct_sorted, empty_stats, json_ids, sorted_distinct,
};
use super::{
    CatalogError, CatalogResult, CatalogStats, CommitOutcome, DAY_LEVEL, DayCommit, STALE_DAY_LEVEL,
    SegmentCommit, SegmentMeta, SegmentReplacement,
};
use crate::model::TimeRange;
use crate::rollup::Resolution;

#[async_trait]
pub trait SegmentCatalog: Send + Sync {
    /// Makes a written segment visible: segment, series, sample labels and profiles in one
    /// transaction, and claims its profile keys (a key is stored once per tenant, however
    /// many ingesters commit it). When `max_series` is not 0, the tenant's commits are
    /// serialized and its series with samples plus the new ones of this commit may not
    /// exceed it. Nothing is visible unless it returns [`CommitOutcome::Committed`]; a
    /// refusal names the profile keys and series that kept it from being stored.
    async fn commit_segment_within(
        &self,
        commit: &SegmentCommit,
        max_series: usize,
    ) -> CatalogResult<CommitOutcome>;

    /// [`Self::commit_segment_within`] without a series limit, a refusal being
    /// [`CatalogError::Refused`].
    async fn commit_segment(&self, commit: &SegmentCommit) -> CatalogResult<()> {
        match self.commit_segment_within(commit, 0).await? {
            CommitOutcome::Committed => Ok(()),
            CommitOutcome::Refused(refusal) => Err(CatalogError::Refused(refusal)),
        }
    }

    /// Segments of `tenant` whose time extent overlaps `range`, with objects and series.
    async fn segments(&self, tenant: &str, range: TimeRange) -> CatalogResult<Vec<SegmentMeta>>;

    /// [`Self::segments`] with only the extents of `series_ids` that overlap `range`, and only
    /// the segments holding one, and the day segments (which list no series): what a query
    /// that selects a few of many series plans from.
    async fn segments_holding(
        &self,
        tenant: &str,
        range: TimeRange,
        series_ids: &[i64],
    ) -> CatalogResult<Vec<SegmentMeta>>;

    /// [`Self::segments`], or [`Self::segments_holding`] when `series_ids` are given, for a
    /// read that takes whole days from day segments: a segment lying inside a whole UTC day
    /// of `range` that has a fresh day segment is left out, since that day segment sums
    /// it. A month's read then lists a day segment per day, not 24 blocks with their
    /// series extents.
    async fn segments_summed(
        &self,
        tenant: &str,
        range: TimeRange,
        series_ids: Option<&[i64]>,
    ) -> CatalogResult<Vec<SegmentMeta>> {
        match series_ids {
            Some(ids) => self.segments_holding(tenant, range, ids).await,
            None => self.segments(tenant, range).await,
        }
    }

    /// Every tenant that has segments or symbols.
    async fn tenants(&self) -> CatalogResult<Vec<String>>;

    /// Applies a compaction or retention swap; see [`SegmentReplacement`].
    async fn replace_segments(&self, replacement: &SegmentReplacement) -> CatalogResult<()>;

    /// Lists a day segment in place of the day segments of its day (stale ones included),
    /// if its sources are still every segment with samples in its day; see [`DayCommit`].
    /// It waits for the segment commits in progress, and they for it, so none can slip a
    /// segment into the day between the check and the insert.
    async fn commit_day(&self, day: &DayCommit) -> CatalogResult<()>;

    async fn stats(&self, tenant: &str) -> CatalogResult<CatalogStats>;

    /// Cheap round trip for readiness checks.
    async fn ping(&self) -> CatalogResult<()>;

    /// The first and last sample time `tenant` has stored, `None` when nothing.
    async fn data_range(&self, tenant: &str) -> CatalogResult<Option<(i64, i64)>>;
}

pub(crate) const INSERT_SEGMENT: &str =
    "INSERT INTO segments (id, tenant, min_time, max_time, level, created_at_nanos)
    VALUES ($1, $2, $3, $4, $5, $6)";

const SEGMENTS_IN_RANGE: &str = "SELECT s.id, s.tenant, s.min_time, s.max_time, s.level, s.created_at_nanos
    FROM segments s
    WHERE s.tenant = $1 AND s.min_time < $2 AND s.max_time >= $3";

const OBJECTS_IN_RANGE: &str = "SELECT o.segment_id, o.position, o.kind, o.key, o.size_bytes, o.rows
    FROM segment_objects o JOIN segments s ON s.id = o.segment_id
    WHERE s.tenant = $1 AND s.min_time < $2 AND s.max_time >= $3";

const SEGMENT_SERIES_IN_RANGE: &str =
    "SELECT ss.segment_id, ss.position, ss.series_id, ss.min_time, ss.max_time, ss.samples
    FROM segment_series ss JOIN segments s ON s.id = ss.segment_id
    WHERE s.tenant = $1 AND s.min_time < $2 AND s.max_time >= $3";

/// `$4` a JSON array of series ids.
const SELECTED_SEGMENT_SERIES_IN_RANGE: PerDialect = PerDialect {
    sqlite: "SELECT ss.segment_id, ss.position, ss.series_id, ss.min_time, ss.max_time, ss.samples
        FROM segment_series ss JOIN segments s ON s.id = ss.segment_id
        WHERE s.tenant = $1 AND s.min_time < $2 AND s.max_time >= $3
          AND ss.tenant = $1 AND ss.min_time < $2 AND ss.max_time >= $3
          AND ss.series_id IN (SELECT value FROM json_each($4))",
    postgres: "SELECT ss.segment_id, ss.position, ss.series_id, ss.min_time, ss.max_time, ss.samples
        FROM segment_series ss JOIN segments s ON s.id = ss.segment_id
        WHERE s.tenant = $1 AND s.min_time < $2 AND s.max_time >= $3
          AND ss.tenant = $1 AND ss.min_time < $2 AND ss.max_time >= $3
          AND ss.series_id IN (SELECT jsonb_array_elements_text($4::jsonb)::BIGINT)",
};

/// The objects of the segments `$1` (a JSON array of ids).
const OBJECTS_OF: PerDialect = PerDialect {
    sqlite: "SELECT o.segment_id, o.position, o.kind, o.key, o.size_bytes, o.rows
        FROM segment_objects o WHERE o.segment_id IN (SELECT value FROM json_each($1))",
    postgres: "SELECT o.segment_id, o.position, o.kind, o.key, o.size_bytes, o.rows
        FROM segment_objects o WHERE o.segment_id IN (SELECT jsonb_array_elements_text($1::jsonb))",
};

/// The series extents of the segments `$1` (a JSON array of ids).
const SEGMENT_SERIES_OF: PerDialect = PerDialect {
    sqlite: "SELECT ss.segment_id, ss.position, ss.series_id, ss.min_time, ss.max_time, ss.samples
        FROM segment_series ss WHERE ss.segment_id IN (SELECT value FROM json_each($1))",
    postgres: "SELECT ss.segment_id, ss.position, ss.series_id, ss.min_time, ss.max_time, ss.samples
        FROM segment_series ss WHERE ss.segment_id IN (SELECT jsonb_array_elements_text($1::jsonb))",
};

/// [`SEGMENT_SERIES_OF`], only the extents of the series `$4` (a JSON array) overlapping
/// `[$3, $2)`.
const SELECTED_SEGMENT_SERIES_OF: PerDialect = PerDialect {
    sqlite: "SELECT ss.segment_id, ss.position, ss.series_id, ss.min_time, ss.max_time, ss.samples
        FROM segment_series ss WHERE ss.segment_id IN (SELECT value FROM json_each($1))
          AND ss.min_time < $2 AND ss.max_time >= $3
          AND ss.series_id IN (SELECT value FROM json_each($4))",
    postgres: "SELECT ss.segment_id, ss.position, ss.series_id, ss.min_time, ss.max_time, ss.samples
        FROM segment_series ss WHERE ss.segment_id IN (SELECT jsonb_array_elements_text($1::jsonb))
          AND ss.min_time < $2 AND ss.max_time >= $3
          AND ss.series_id IN (SELECT jsonb_array_elements_text($4::jsonb)::BIGINT)",
};

/// Series of a tenant that have raw samples, what the series limit counts (as the
/// ingesters' own counters do): a series whose samples retention removed frees its place,
/// though its rollups stay.
pub(crate) const LIVE_SERIES: &str = "SELECT COUNT(*) FROM series s
    WHERE s.tenant = $1
      AND EXISTS (SELECT 1 FROM segment_series ss JOIN segment_objects o ON o.segment_id = ss.segment_id
                  WHERE ss.tenant = s.tenant AND ss.series_id = s.series_id AND o.kind = 'samples')";

/// Ids of a tenant's series with raw samples; see [`LIVE_SERIES`].
pub(crate) const LIVE_SERIES_IDS: &str = "SELECT DISTINCT ss.series_id FROM segment_series ss
    JOIN segment_objects o ON o.segment_id = ss.segment_id
    WHERE ss.tenant = $1 AND o.kind = 'samples'";

/// Marks stale the day segments of the days in `[$2, $3)`: a segment with samples in them
/// was committed, added or removed, so their sums no longer hold.
pub(crate) const STALE_DAYS: &str = "UPDATE segments SET level = $5
    WHERE tenant = $1 AND level = $4 AND min_time >= $2 AND min_time < $3";

/// The segments other than day segments with samples in `[$2, $3)`.
const SEGMENTS_OF_DAY: &str = "SELECT id FROM segments
    WHERE tenant = $1 AND min_time < $3 AND max_time >= $2 AND level <> $4 AND level <> $5";

/// The objects of the day segments (fresh or stale) of the day `[$2, $3)`.
const DAY_OBJECTS: &str = "SELECT o.key FROM segment_objects o JOIN segments s ON s.id = o.segment_id
    WHERE s.tenant = $1 AND s.min_time >= $2 AND s.min_time < $3 AND (s.level = $4 OR s.level = $5)";

const DELETE_DAYS: &str = "DELETE FROM segments
    WHERE tenant = $1 AND min_time >= $2 AND min_time < $3 AND (level = $4 OR level = $5)";

const QUEUE_DELETION: &str = "INSERT INTO pending_deletions (key, tenant, delete_after_nanos)
    VALUES ($1, $2, $3) ON CONFLICT (key) DO NOTHING";

/// The hull of the sample times of the removed segments `$2` other than day segments.
pub(crate) const REMOVED_EXTENT: PerDialect = PerDialect {
    sqlite: "SELECT MIN(min_time), MAX(max_time) FROM segments
        WHERE tenant = $1 AND id IN (SELECT value FROM json_each($2)) AND level <> 3 AND level <> 4",
    postgres: "SELECT MIN(min_time), MAX(max_time) FROM segments
        WHERE tenant = $1 AND id = ANY($2) AND level <> 3 AND level <> 4",
};

/// The hull of the sample times a swap adds or removes (`removed` from
/// [`REMOVED_EXTENT`]), day segments aside: the days whose day segments it makes stale.
pub(crate) fn swap_extent(removed: (Option<i64>, Option<i64>), added: &[SegmentMeta]) -> Option<(i64, i64)> {
    let removed = removed.0.zip(removed.1);
    added
        .iter()
        .filter(|s| !s.is_day())
        .map(|s| (s.min_time, s.max_time))
        .chain(removed)
        .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)))
}

/// The days (`[start, end)`, UTC) that samples in `[min_time, max_time]` touch.
pub(crate) fn days_of(min_time: i64, max_time: i64) -> (i64, i64) {
    let day = Resolution::Day;
    (
        day.bucket(min_time),
        day.bucket(max_time).saturating_add(day.step_nanos()),
    )
}

/// Runs [`STALE_DAYS`] over the days `extent` (a hull of sample times) touches.
macro_rules! mark_days_stale {
    ($tx:expr, $tenant:expr, $extent:expr) => {{
        let (start, end) = $crate::catalog::segments::days_of($extent.0, $extent.1);
        sqlx::query($crate::catalog::segments::STALE_DAYS)
            .bind($tenant)
            .bind(start)
            .bind(end)
            .bind($crate::catalog::DAY_LEVEL)
            .bind($crate::catalog::STALE_DAY_LEVEL)
            .execute(&mut *$tx)
            .await
    }};
}
pub(crate) use mark_days_stale;

const TENANTS: &str = "SELECT tenant FROM segments UNION SELECT tenant FROM symbol_objects";

const STATS_COUNTS: &str = "SELECT (SELECT COUNT(*) FROM segments WHERE tenant = $1),
           (SELECT COUNT(*) FROM series WHERE tenant = $1)";

// SUM(BIGINT) is NUMERIC in Postgres; the cast fails loudly rather than wrapping (SQLite
// sums integers as integers and fails on overflow itself).
const STATS_TABLES: &str =
    "SELECT kind, COUNT(*), CAST(COALESCE(SUM(rows), 0) AS BIGINT), CAST(COALESCE(SUM(size_bytes), 0) AS BIGINT)
    FROM (SELECT o.kind, o.rows, o.size_bytes
          FROM segment_objects o JOIN segments s ON s.id = o.segment_id
          WHERE s.tenant = $1
          UNION ALL
          SELECT kind, rows, size_bytes FROM symbol_objects WHERE tenant = $1) AS objects
    GROUP BY kind";

const PING: &str = "SELECT 1";

const DATA_RANGE: &str = "SELECT MIN(min_time), MAX(max_time) FROM segments WHERE tenant = $1";

impl SqlCatalog {
    /// The listing of [`SegmentCatalog::segments_summed`] when `summed`, else of
    /// `segments` or `segments_holding`.
    async fn segments_summed_or_not(
        &self,
        tenant: &str,
        range: TimeRange,
        series_ids: Option<&[i64]>,
        summed: bool,
    ) -> CatalogResult<Vec<SegmentMeta>> {
        let Some(series_ids) = series_ids else {
            return self.list_segments(tenant, range, None, summed).await;
        };
        let ids = json_ids(series_ids);
        let mut segments = self.list_segments(tenant, range, Some(&ids), summed).await?;
        segments.retain(|s| !s.series.is_empty() || s.is_day());
        Ok(segments)
    }

    /// Segments overlapping `range` with their objects and their series extents, only those
    /// of `series_ids` (a JSON array) when given, and without what day segments sum when
    /// `summed`: three queries inside one snapshot, so the rows agree with each other.
    async fn list_segments(
        &self,
        tenant: &str,
        range: TimeRange,
        series_ids: Option<&str>,
        summed: bool,
    ) -> CatalogResult<Vec<SegmentMeta>> {
        on_either!(self, |pool| {
            let mut tx = pool.begin_snapshot().await?;
            let mut segments = sqlx::query_as::<_, SegmentRow>(SEGMENTS_IN_RANGE)
                .bind(tenant)
                .bind(range.end)
                .bind(range.start)
                .fetch_all(&mut *tx)
                .await?;
            let before = segments.len();
            if summed {
                leave_out_summed(&mut segments, range);
            }
            if segments.len() < before {
                // Only the rest's objects and extents: what the left out ones hold is most
                // of a long range's rows.
                let ids = serde_json::to_string(&segments.iter().map(|s| &s.id).collect::<Vec<_>>())
                    .expect("strings serialize");
                let objects = sqlx::query_as::<_, ObjectRow>(pool.sql(&OBJECTS_OF))
                    .bind(&ids)
                    .fetch_all(&mut *tx)
                    .await?;
                let series = match series_ids {
                    None => {
                        sqlx::query_as::<_, SegmentSeriesRow>(pool.sql(&SEGMENT_SERIES_OF))
                            .bind(&ids)
                            .fetch_all(&mut *tx)
                            .await?
                    }
                    Some(series_ids) => {
                        sqlx::query_as::<_, SegmentSeriesRow>(pool.sql(&SELECTED_SEGMENT_SERIES_OF))
                            .bind(&ids)
                            .bind(range.end)
                            .bind(range.start)
                            .bind(series_ids)
                            .fetch_all(&mut *tx)
                            .await?
                    }
                };
                tx.commit().await?;
                return assemble_segments(segments, objects, series);
            }
            let objects = sqlx::query_as::<_, ObjectRow>(OBJECTS_IN_RANGE)
                .bind(tenant)
                .bind(range.end)
                .bind(range.start)
                .fetch_all(&mut *tx)
                .await?;
            let series = match series_ids {
                None => {
                    sqlx::query_as::<_, SegmentSeriesRow>(SEGMENT_SERIES_IN_RANGE)
                        .bind(tenant)
                        .bind(range.end)
                        .bind(range.start)
                        .fetch_all(&mut *tx)
                        .await?
                }
                Some(ids) => {
                    sqlx::query_as::<_, SegmentSeriesRow>(pool.sql(&SELECTED_SEGMENT_SERIES_IN_RANGE))
                        .bind(tenant)
                        .bind(range.end)
                        .bind(range.start)
                        .bind(ids)
                        .fetch_all(&mut *tx)
                        .await?
                }
            };
            tx.commit().await?;
            assemble_segments(segments, objects, series)
        })
    }
}

/// Drops from `segments` those other than day segments that lie inside a whole UTC day of
/// `range` listed with a fresh day segment.
fn leave_out_summed(segments: &mut Vec<SegmentRow>, range: TimeRange) {
    let day = Resolution::Day;
    let summed: std::collections::HashSet<i64> = segments
        .iter()
        .filter(|s| s.level == DAY_LEVEL)
        .map(|s| day.bucket(s.min_time))
        .filter(|&start| range.start <= start && start.saturating_add(day.step_nanos()) <= range.end)
        .collect();
    if summed.is_empty() {
        return;
    }
    segments.retain(|s| {
        let start = day.bucket(s.min_time);
        s.level == DAY_LEVEL
            || s.level == STALE_DAY_LEVEL
            || start != day.bucket(s.max_time)
            || !summed.contains(&start)
    });
}

#[async_trait]
impl SegmentCatalog for SqlCatalog {
    async fn commit_segment_within(
        &self,
        commit: &SegmentCommit,
        max_series: usize,
    ) -> CatalogResult<CommitOutcome> {
        let series = distinct_series(commit)?;
        let profiles = distinct_profiles(commit);
        let claim = Claim {
            commit,
            series: &series,
            profiles: &profiles,
            max_series,
        };
        on_either!(self, |pool| pool.commit_segment(claim).await)
    }

    async fn segments(&self, tenant: &str, range: TimeRange) -> CatalogResult<Vec<SegmentMeta>> {
        self.list_segments(tenant, range, None, false).await
    }

    async fn segments_holding(
        &self,
        tenant: &str,
        range: TimeRange,
        series_ids: &[i64],
    ) -> CatalogResult<Vec<SegmentMeta>> {
        self.segments_summed_or_not(tenant, range, Some(series_ids), false)
            .await
    }

    async fn segments_summed(
        &self,
        tenant: &str,
        range: TimeRange,
        series_ids: Option<&[i64]>,
    ) -> CatalogResult<Vec<SegmentMeta>> {
        self.segments_summed_or_not(tenant, range, series_ids, true).await
    }

    async fn tenants(&self) -> CatalogResult<Vec<String>> {
        let rows: Vec<(String,)> = on_either!(self, |pool| sqlx::query_as(TENANTS).fetch_all(pool).await?);
        Ok(sorted_distinct(
            rows.into_iter().map(|(tenant,)| tenant).collect(),
        ))
    }

    async fn replace_segments(&self, replacement: &SegmentReplacement) -> CatalogResult<()> {
        check_replacement(replacement)?;
        let removed = distinct_sorted(&replacement.removed);
        // Every new segment's objects: retention lists a removed segment's rollups again.
        let kept_keys: Vec<String> = replacement
            .added
            .iter()
            .flat_map(|seg| seg.objects.iter().map(|o| o.key.clone()))
            .collect();
        let swap = SegmentSwap {
            replacement,
            removed: &removed,
            kept_keys: &kept_keys,
        };
        on_either!(self, |pool| pool.replace_segments(swap).await)
    }

    async fn commit_day(&self, day: &DayCommit) -> CatalogResult<()> {
        let segment = &day.segment;
        if segment.level != DAY_LEVEL || !segment.series.is_empty() {
            return Err(CatalogError::Corrupt(format!(
                "segment {} is not a day segment: level {}, {} series extents",
                segment.id,
                segment.level,
                segment.series.len()
            )));
        }
        let span = segment.day();
        let mut sources = distinct_sorted(&day.sources);
        on_either!(self, |pool| {
            let mut tx = pool.begin_symbol_epoch_change(&segment.tenant).await?;
            let mut found: Vec<String> = sqlx::query_scalar(SEGMENTS_OF_DAY)
                .bind(&segment.tenant)
                .bind(span.start)
                .bind(span.end)
                .bind(DAY_LEVEL)
                .bind(STALE_DAY_LEVEL)
                .fetch_all(&mut *tx)
                .await?;
            found.sort();
            if found != sources {
                sources.retain(|id| !found.contains(id));
                return Err(CatalogError::Conflict(format!(
                    "the segments of the day of day segment {} changed since it was summed ({} listed now, {} of its sources gone)",
                    segment.id,
                    found.len(),
                    sources.len()
                )));
            }
            let replaced: Vec<String> = sqlx::query_scalar(DAY_OBJECTS)
                .bind(&segment.tenant)
                .bind(span.start)
                .bind(span.end)
                .bind(DAY_LEVEL)
                .bind(STALE_DAY_LEVEL)
                .fetch_all(&mut *tx)
                .await?;
            for key in &replaced {
                sqlx::query(QUEUE_DELETION)
                    .bind(key)
                    .bind(&segment.tenant)
                    .bind(day.delete_after_nanos)
                    .execute(&mut *tx)
                    .await?;
            }
            sqlx::query(DELETE_DAYS)
                .bind(&segment.tenant)
                .bind(span.start)
                .bind(span.end)
                .bind(DAY_LEVEL)
                .bind(STALE_DAY_LEVEL)
                .execute(&mut *tx)
                .await?;
            pool.insert_segment_rows(&mut tx, segment).await?;
            tx.commit().await?;
        });
        Ok(())
    }

    async fn stats(&self, tenant: &str) -> CatalogResult<CatalogStats> {
        let ((segments, series), tables) = on_either!(self, |pool| {
            let mut tx = pool.begin_snapshot().await?;
            let counts: (i64, i64) = sqlx::query_as(STATS_COUNTS)
                .bind(tenant)
                .fetch_one(&mut *tx)
                .await?;
            let tables: Vec<(String, i64, i64, i64)> = sqlx::query_as(STATS_TABLES)
                .bind(tenant)
                .fetch_all(&mut *tx)
                .await?;
            tx.commit().await?;
            (counts, tables)
        });
        let mut stats = empty_stats(segments, series)?;
        for (kind, objects, rows, bytes) in &tables {
            add_table_stats(&mut stats, kind, *objects, *rows, *bytes)?;
        }
        Ok(stats)
    }

    async fn ping(&self) -> CatalogResult<()> {
        on_either!(self, |pool| {
            sqlx::query(PING).execute(pool).await?;
        });
        Ok(())
    }

    async fn data_range(&self, tenant: &str) -> CatalogResult<Option<(i64, i64)>> {
        let (min, max): (Option<i64>, Option<i64>) = on_either!(self, |pool| sqlx::query_as(DATA_RANGE)
            .bind(tenant)
            .fetch_one(pool)
            .await?);
        Ok(min.zip(max))
    }
}
