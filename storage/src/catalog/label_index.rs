//! The label index: label listings over long ranges without probing every series.
//!
//! Per UTC day, the hull (first and last time) of each label name and each (name, value)
//! over the series extents of compacted segments (level 1 and up), and each (name,
//! value)'s hull over all days (`migrations/*/0008_label_index.sql`). A listing asks the
//! whole-history hulls first; only a value whose hull lies across the whole range (data
//! before and after it, maybe none inside) is looked up per day. A range over two or more
//! days is exact from day rows alone: a day at an edge holds something in the range iff
//! its last time (first day) or first time (last day) does, and a day inside the range
//! holds something in it by being there. What is still undecided, a day row across a range
//! inside one day, and the level-0 segments not compacted yet, are read from the segments
//! themselves. Sample times are never negative (every ingest path refuses them), so days
//! are plain integer division.

use std::collections::{BTreeMap, BTreeSet};

use sqlx::{Database, Encode, Executor, IntoArguments, Transaction, Type};

use super::CatalogResult;
use super::backend::PerDialect;
use crate::model::TimeRange;

pub(crate) const DAY_NANOS: i64 = 86_400_000_000_000;

/// The day a time falls on, as the index's SQL computes it.
pub(crate) fn day(nanos: i64) -> i64 {
    nanos / DAY_NANOS
}

/// `WITH RECURSIVE piece (tenant, series_id, day, min_time, last)`: the series extents of
/// the segments `$filter` selects (`ss` segment_series, `g` segments), cut at midnight. A
/// piece's last time is `last` on its final day and the day's last nanosecond before, so
/// the pieces of an extent cover exactly what it covers.
macro_rules! pieces {
    ($filter:literal) => {
        concat!(
            "WITH RECURSIVE piece (tenant, series_id, day, min_time, last) AS (
                SELECT ss.tenant, ss.series_id, ss.min_time / 86400000000000, ss.min_time, ss.max_time
                FROM segment_series ss JOIN segments g ON g.id = ss.segment_id
                WHERE ",
            $filter,
            "
                UNION ALL
                SELECT tenant, series_id, day + 1, (day + 1) * 86400000000000, last
                FROM piece WHERE day < last / 86400000000000
            ),
            clipped (tenant, series_id, day, min_time, max_time) AS (
                SELECT tenant, series_id, day, min_time,
                       CASE WHEN day < last / 86400000000000
                            THEN day * 86400000000000 + 86399999999999 ELSE last END
                FROM piece
            ) "
        )
    };
}

/// Widens an index row to take in `excluded`'s hull; a row it does not widen is not
/// written again.
macro_rules! widen {
    ($table:literal) => {
        concat!(
            "DO UPDATE SET
                min_time = CASE WHEN excluded.min_time < ",
            $table,
            ".min_time
                                THEN excluded.min_time ELSE ",
            $table,
            ".min_time END,
                max_time = CASE WHEN excluded.max_time > ",
            $table,
            ".max_time
                                THEN excluded.max_time ELSE ",
            $table,
            ".max_time END
             WHERE excluded.min_time < ",
            $table,
            ".min_time OR excluded.max_time > ",
            $table,
            ".max_time"
        )
    };
}

/// `$1` a segment id: its rows into the three tables.
const INDEX_VALUE_DAYS: &str = concat!(
    pieces!("ss.segment_id = $1"),
    "INSERT INTO label_value_days (tenant, name, value, day, min_time, max_time)
    SELECT c.tenant, sl.name, sl.value, c.day, MIN(c.min_time), MAX(c.max_time)
    FROM clipped c JOIN series_labels sl ON sl.tenant = c.tenant AND sl.series_id = c.series_id
    WHERE true GROUP BY c.tenant, sl.name, sl.value, c.day
    ON CONFLICT (tenant, name, day, value) ",
    widen!("label_value_days")
);

const INDEX_NAME_DAYS: &str = concat!(
    pieces!("ss.segment_id = $1"),
    "INSERT INTO label_name_days (tenant, day, name, min_time, max_time)
    SELECT c.tenant, c.day, sl.name, MIN(c.min_time), MAX(c.max_time)
    FROM clipped c JOIN series_labels sl ON sl.tenant = c.tenant AND sl.series_id = c.series_id
    WHERE true GROUP BY c.tenant, c.day, sl.name
    ON CONFLICT (tenant, day, name) ",
    widen!("label_name_days")
);

const INDEX_VALUES: &str = concat!(
    "INSERT INTO label_values (tenant, name, value, min_time, max_time)
    SELECT ss.tenant, sl.name, sl.value, MIN(ss.min_time), MAX(ss.max_time)
    FROM segment_series ss JOIN series_labels sl ON sl.tenant = ss.tenant AND sl.series_id = ss.series_id
    WHERE ss.segment_id = $1 GROUP BY ss.tenant, sl.name, sl.value
    ON CONFLICT (tenant, name, value) ",
    widen!("label_values")
);

/// `$1` tenant, days `$2` to `$3`, their times `[$4, $5)`: the day rows again from the
/// compacted segments that remain.
const FORGET_VALUE_DAYS: &str = "DELETE FROM label_value_days WHERE tenant = $1 AND day BETWEEN $2 AND $3";
const FORGET_NAME_DAYS: &str = "DELETE FROM label_name_days WHERE tenant = $1 AND day BETWEEN $2 AND $3";

const REBUILD_VALUE_DAYS: &str = concat!(
    pieces!(
        "g.tenant = $1 AND g.level >= 1 AND g.min_time < $5 AND g.max_time >= $4
         AND ss.min_time < $5 AND ss.max_time >= $4"
    ),
    "INSERT INTO label_value_days (tenant, name, value, day, min_time, max_time)
    SELECT c.tenant, sl.name, sl.value, c.day, MIN(c.min_time), MAX(c.max_time)
    FROM clipped c JOIN series_labels sl ON sl.tenant = c.tenant AND sl.series_id = c.series_id
    WHERE c.day BETWEEN $2 AND $3 GROUP BY c.tenant, sl.name, sl.value, c.day"
);

const REBUILD_NAME_DAYS: &str = "INSERT INTO label_name_days (tenant, day, name, min_time, max_time)
    SELECT tenant, day, name, MIN(min_time), MAX(max_time) FROM label_value_days
    WHERE tenant = $1 AND day BETWEEN $2 AND $3 GROUP BY tenant, day, name";

/// `$1` tenant, `[$2, $3)` the rebuilt days' times: whole-history hulls that reach into
/// them, gone with their last day row or narrowed to the rows left.
const FORGET_VALUES: &str = "DELETE FROM label_values
    WHERE tenant = $1 AND min_time < $3 AND max_time >= $2
      AND NOT EXISTS (SELECT 1 FROM label_value_days d
                      WHERE d.tenant = label_values.tenant AND d.name = label_values.name
                        AND d.value = label_values.value)";

const REBUILD_VALUES: &str = "UPDATE label_values SET
      min_time = (SELECT MIN(d.min_time) FROM label_value_days d
                  WHERE d.tenant = label_values.tenant AND d.name = label_values.name
                    AND d.value = label_values.value),
      max_time = (SELECT MAX(d.max_time) FROM label_value_days d
                  WHERE d.tenant = label_values.tenant AND d.name = label_values.name
                    AND d.value = label_values.value)
    WHERE tenant = $1 AND min_time < $3 AND max_time >= $2";

/// Takes a compacted segment's series extents into the index; a level-0 segment stays out
/// (listings read those from the segments).
pub(crate) async fn index_segment<DB>(tx: &mut Transaction<'_, DB>, id: &str, level: i32) -> CatalogResult<()>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
{
    if level < 1 {
        return Ok(());
    }
    for statement in [INDEX_VALUE_DAYS, INDEX_NAME_DAYS, INDEX_VALUES] {
        sqlx::query(statement).bind(id).execute(&mut **tx).await?;
    }
    Ok(())
}

/// Rebuilds the days `hull` touches from the compacted segments left, after a swap removed
/// extents no added segment covers (retention, a split): a day row must never claim a time
/// whose data is gone.
pub(crate) async fn reindex_days<DB>(
    tx: &mut Transaction<'_, DB>,
    tenant: &str,
    hull: (i64, i64),
) -> CatalogResult<()>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
{
    let (first, last) = (day(hull.0), day(hull.1));
    let start = first.saturating_mul(DAY_NANOS);
    let end = last.saturating_add(1).saturating_mul(DAY_NANOS);
    for statement in [FORGET_VALUE_DAYS, FORGET_NAME_DAYS] {
        sqlx::query(statement)
            .bind(tenant)
            .bind(first)
            .bind(last)
            .execute(&mut **tx)
            .await?;
    }
    sqlx::query(REBUILD_VALUE_DAYS)
        .bind(tenant)
        .bind(first)
        .bind(last)
        .bind(start)
        .bind(end)
        .execute(&mut **tx)
        .await?;
    sqlx::query(REBUILD_NAME_DAYS)
        .bind(tenant)
        .bind(first)
        .bind(last)
        .execute(&mut **tx)
        .await?;
    for statement in [FORGET_VALUES, REBUILD_VALUES] {
        sqlx::query(statement)
            .bind(tenant)
            .bind(start)
            .bind(end)
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

/// `$1` the removed segments, `$2` the added ones: the hull of the removed compacted
/// extents that no added compacted extent of the same series covers, which
/// [`reindex_days`] rebuilds. A compaction covers everything it removes; retention does not.
pub(crate) const UNCOVERED: PerDialect = PerDialect {
    sqlite: "SELECT MIN(r.min_time), MAX(r.max_time)
        FROM segment_series r JOIN segments g ON g.id = r.segment_id
        WHERE r.segment_id IN (SELECT value FROM json_each($1)) AND g.level >= 1
          AND NOT EXISTS (SELECT 1 FROM segment_series a JOIN segments ag ON ag.id = a.segment_id
                          WHERE a.segment_id IN (SELECT value FROM json_each($2)) AND ag.level >= 1
                            AND a.series_id = r.series_id
                            AND a.min_time <= r.min_time AND a.max_time >= r.max_time)",
    postgres: "SELECT MIN(r.min_time), MAX(r.max_time)
        FROM segment_series r JOIN segments g ON g.id = r.segment_id
        WHERE r.segment_id = ANY($1) AND g.level >= 1
          AND NOT EXISTS (SELECT 1 FROM segment_series a JOIN segments ag ON ag.id = a.segment_id
                          WHERE a.segment_id = ANY($2) AND ag.level >= 1
                            AND a.series_id = r.series_id
                            AND a.min_time <= r.min_time AND a.max_time >= r.max_time)",
};

/// The first and last day of `range`'s times, as the day rows are keyed.
pub(crate) fn days(range: TimeRange) -> (i64, i64) {
    (day(range.start), day(range.end.saturating_sub(1)))
}

/// Whether a hull row that overlaps `range` shows data inside it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Hull {
    /// Its first or last time is inside the range.
    Inside,
    /// It lies across the whole range: data before and after, maybe none within.
    Across,
}

pub(crate) fn hull(range: TimeRange, min_time: i64, max_time: i64) -> Hull {
    if min_time < range.start && max_time >= range.end {
        Hull::Across
    } else {
        Hull::Inside
    }
}

/// Keys of overlapping hull rows, split into those with data in the range and those to
/// decide further (none of their rows is [`Hull::Inside`]).
pub(crate) fn classify(
    range: TimeRange,
    rows: Vec<(String, i64, i64)>,
) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut by_key: BTreeMap<String, Hull> = BTreeMap::new();
    for (key, min_time, max_time) in rows {
        let h = hull(range, min_time, max_time);
        by_key
            .entry(key)
            .and_modify(|seen| {
                if h == Hull::Inside {
                    *seen = Hull::Inside;
                }
            })
            .or_insert(h);
    }
    let (inside, across): (Vec<_>, Vec<_>) = by_key.into_iter().partition(|(_, h)| *h == Hull::Inside);
    (
        inside.into_iter().map(|(k, _)| k).collect(),
        across.into_iter().map(|(k, _)| k).collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(start: i64, end: i64) -> TimeRange {
        TimeRange { start, end }
    }

    #[test]
    fn a_hull_across_the_range_is_undecided_and_one_that_ends_inside_is_not() {
        assert_eq!(hull(r(10, 20), 5, 25), Hull::Across);
        assert_eq!(hull(r(10, 20), 5, 20), Hull::Across);
        assert_eq!(hull(r(10, 20), 5, 19), Hull::Inside);
        assert_eq!(hull(r(10, 20), 10, 30), Hull::Inside);
        let (inside, across) = classify(
            r(10, 20),
            vec![
                ("a".into(), 5, 25),
                ("a".into(), 12, 12),
                ("b".into(), 0, 40),
                ("c".into(), 15, 50),
            ],
        );
        assert_eq!(inside.into_iter().collect::<Vec<_>>(), ["a", "c"]);
        assert_eq!(across.into_iter().collect::<Vec<_>>(), ["b"]);
    }

    #[test]
    fn days_are_integer_division() {
        assert_eq!(day(0), 0);
        assert_eq!(day(DAY_NANOS - 1), 0);
        assert_eq!(day(DAY_NANOS), 1);
    }
}
