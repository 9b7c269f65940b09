//! Rollup tiers: a segment's samples summed per (series, minute, stack) and per (series,
//! hour, stack), stored beside its samples object as the `rollup_1m` and `rollup_1h`
//! objects. Queries over long ranges read them instead of every sample, and retention keeps
//! them longer than the samples (see [`crate::retention`]). Per-sample attributes and links
//! (trace, span and profile ids) are not kept: a rollup answers by series and stack only.
//!
//! Each rollup has a `totals_*` companion, the rollup summed over its stacks: one row per
//! (series, bucket). A time series needs no stack, and at fleet cardinality a series holds
//! hundreds of stacks a bucket, so it reads the totals instead of every stack's row.
//!
//! Compaction writes both rollups with every hour block, from the samples it has just
//! sorted, so the tiers cost one pass over samples already in memory.

use std::sync::Arc;

use arrow::array::{AsArray, FixedSizeBinaryArray, Int64Array, RecordBatch};
use arrow::datatypes::Int64Type;

use crate::catalog::{ObjectMeta, TableKind};
use crate::model::FastMap;
use crate::schema::{self, samples as col};
use crate::segment::{Tier, put_table, segment_object_key};
use crate::store::{Store, StoreError, blocking};

const MINUTE_NANOS: i64 = 60_000_000_000;
const HOUR_NANOS: i64 = 3_600_000_000_000;
const DAY_NANOS: i64 = 24 * HOUR_NANOS;

/// A time resolution data is kept at: the samples themselves, or one of their rollups.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Resolution {
    Raw,
    Minute,
    Hour,
    /// Held only by day segments (see [`crate::compaction::days`]), summed from the hour
    /// rollups of a closed day's blocks.
    Day,
}

impl Resolution {
    /// Finest first.
    pub const ALL: [Resolution; 4] = [
        Resolution::Raw,
        Resolution::Minute,
        Resolution::Hour,
        Resolution::Day,
    ];

    /// What an hour block can hold, finest first: the tiers retention cuts one by one.
    pub const BLOCK: [Resolution; 3] = [Resolution::Raw, Resolution::Minute, Resolution::Hour];

    /// The rollup tiers an hour block carries, finest first.
    pub const ROLLUPS: [Resolution; 2] = [Resolution::Minute, Resolution::Hour];

    /// Width of a bucket; 1 for raw samples, whose times are exact.
    pub const fn step_nanos(self) -> i64 {
        match self {
            Resolution::Raw => 1,
            Resolution::Minute => MINUTE_NANOS,
            Resolution::Hour => HOUR_NANOS,
            Resolution::Day => DAY_NANOS,
        }
    }

    /// The table a segment keeps this resolution in.
    pub const fn kind(self) -> TableKind {
        match self {
            Resolution::Raw => TableKind::Samples,
            Resolution::Minute => TableKind::Rollup1m,
            Resolution::Hour => TableKind::Rollup1h,
            Resolution::Day => TableKind::Rollup1d,
        }
    }

    pub const fn name(self) -> &'static str {
        match self {
            Resolution::Raw => "raw",
            Resolution::Minute => "1m",
            Resolution::Hour => "1h",
            Resolution::Day => "1d",
        }
    }

    /// The table a segment keeps this rollup's totals over stacks in; `None` for raw.
    pub const fn totals_kind(self) -> Option<TableKind> {
        match self {
            Resolution::Raw => None,
            Resolution::Minute => Some(TableKind::Totals1m),
            Resolution::Hour => Some(TableKind::Totals1h),
            Resolution::Day => Some(TableKind::Totals1d),
        }
    }

    /// The resolution a table holds (its totals included); `None` for symbol tables.
    pub const fn of_kind(kind: TableKind) -> Option<Resolution> {
        match kind {
            TableKind::Samples => Some(Resolution::Raw),
            TableKind::Rollup1m | TableKind::Totals1m => Some(Resolution::Minute),
            TableKind::Rollup1h | TableKind::Totals1h => Some(Resolution::Hour),
            TableKind::Rollup1d | TableKind::Totals1d => Some(Resolution::Day),
            _ => None,
        }
    }

    /// The start of the bucket holding `time_nanos` (negative times round down too). The
    /// first bucket starts before `i64::MIN`: its start is clamped to it.
    pub const fn bucket(self, time_nanos: i64) -> i64 {
        let step = self.step_nanos();
        time_nanos.div_euclid(step).saturating_mul(step)
    }
}

/// Sums `input` per (series, bucket of `resolution`, stack) into a [`schema::ROLLUP`]
/// table sorted by (series, time, stack). `input` is a samples table or a finer rollup,
/// sorted by (series, time) at least (as [`crate::segment::sort_samples`] sorts), so each
/// (series, bucket) is one run of rows; sums wrap on overflow, as the queries' sums do.
pub fn rollup(input: &RecordBatch, resolution: Resolution) -> Result<RecordBatch, StoreError> {
    let column = |name: &str| input.schema().index_of(name).map(|i| input.column(i).clone());
    let (times, series, stacks, values) = (
        column(col::TIME)?,
        column(col::SERIES_ID)?,
        column(col::STACK_ID)?,
        column(col::VALUE)?,
    );
    let times = times.as_primitive::<Int64Type>().values();
    let series = series.as_primitive::<Int64Type>().values();
    let values = values.as_primitive::<Int64Type>().values();
    let stacks = stacks.as_fixed_size_binary().value_data();
    let stack = |i: usize| {
        let bytes: [u8; 16] = stacks[i * 16..i * 16 + 16].try_into().expect("16-byte ids");
        // Big-endian, so keys order as the bytes do (the stack_id column's order).
        u128::from_be_bytes(bytes)
    };

    let step = resolution.step_nanos();
    let n = times.len();
    let mut out = RollupColumns::default();
    let mut sums: FastMap<u128, i64> = FastMap::default();
    let mut run: Vec<(u128, i64)> = Vec::new();
    let mut start = 0;
    while start < n {
        let (s, bucket) = (series[start], resolution.bucket(times[start]));
        // Bounds instead of a division per row; the end overflows only for the last
        // bucket before i64::MAX.
        let end = (times[start].div_euclid(step) + 1).checked_mul(step);
        let mut stop = start + 1;
        while stop < n && series[stop] == s && times[stop] >= bucket && end.is_none_or(|e| times[stop] < e) {
            stop += 1;
        }
        if stop - start == 1 {
            out.push(bucket, s, stack(start), values[start]);
        } else {
            for i in start..stop {
                let sum = sums.entry(stack(i)).or_insert(0);
                *sum = sum.wrapping_add(values[i]);
            }
            run.extend(sums.drain());
            run.sort_unstable_by_key(|&(stack, _)| stack);
            for &(stack, value) in &run {
                out.push(bucket, s, stack, value);
            }
            run.clear();
        }
        start = stop;
    }
    out.finish()
}

/// The columns of a rollup table under construction.
#[derive(Default)]
struct RollupColumns {
    time: Vec<i64>,
    series: Vec<i64>,
    stack: Vec<u8>,
    value: Vec<i64>,
}

impl RollupColumns {
    fn push(&mut self, time: i64, series: i64, stack: u128, value: i64) {
        self.time.push(time);
        self.series.push(series);
        self.stack.extend_from_slice(&stack.to_be_bytes());
        self.value.push(value);
    }

    fn finish(self) -> Result<RecordBatch, StoreError> {
        Ok(RecordBatch::try_new(
            schema::ROLLUP.clone(),
            vec![
                Arc::new(Int64Array::from(self.time)),
                Arc::new(Int64Array::from(self.series)),
                Arc::new(FixedSizeBinaryArray::new(16, self.stack.into(), None)),
                Arc::new(Int64Array::from(self.value)),
            ],
        )?)
    }
}

/// `rollup` (a [`schema::ROLLUP`] table sorted by (series, time, stack)) summed over its
/// stacks into a [`schema::TOTALS`] table: one row per (series, time), in the same order.
pub fn totals(rollup: &RecordBatch) -> Result<RecordBatch, StoreError> {
    let column = |name: &str| {
        rollup
            .schema()
            .index_of(name)
            .map(|i| rollup.column(i).as_primitive::<Int64Type>().values().clone())
    };
    let (times, series, values) = (column(col::TIME)?, column(col::SERIES_ID)?, column(col::VALUE)?);
    let (mut time, mut ids, mut sums) = (Vec::new(), Vec::new(), Vec::<i64>::new());
    for i in 0..times.len() {
        let same = ids.last() == Some(&series[i]) && time.last() == Some(&times[i]);
        if same {
            let last = sums.last_mut().expect("a row was pushed");
            *last = last.wrapping_add(values[i]);
        } else {
            time.push(times[i]);
            ids.push(series[i]);
            sums.push(values[i]);
        }
    }
    Ok(RecordBatch::try_new(
        schema::TOTALS.clone(),
        vec![
            Arc::new(Int64Array::from(time)),
            Arc::new(Int64Array::from(ids)),
            Arc::new(Int64Array::from(sums)),
        ],
    )?)
}

/// The rollup tables of the tiers in `resolutions`, finest first (`Raw` is ignored), each
/// summed from the one before it: the first from `input`, a samples table or a rollup table
/// no coarser than it, sorted by (series, time).
pub fn rollups(
    input: &RecordBatch,
    resolutions: &[Resolution],
) -> Result<Vec<(Resolution, RecordBatch)>, StoreError> {
    let mut out: Vec<(Resolution, RecordBatch)> = Vec::new();
    for r in Resolution::ROLLUPS
        .into_iter()
        .filter(|r| resolutions.contains(r))
    {
        let finer = out.last().map_or(input, |(_, table)| table);
        let table = rollup(finer, r)?;
        out.push((r, table));
    }
    Ok(out)
}

/// Computes the [`rollups`] of `input` (a segment's samples, or rollups to sum again) and
/// their [`totals`], and writes them as objects of segment `segment_id`, finest first.
/// Nothing is visible until the catalog lists the objects.
pub async fn write_rollups(
    store: &Store,
    tenant: &str,
    segment_id: &str,
    input: &RecordBatch,
    resolutions: &[Resolution],
) -> Result<Vec<ObjectMeta>, StoreError> {
    let (input, resolutions) = (input.clone(), resolutions.to_vec());
    let tables = blocking("computing rollups", move || {
        let mut tables = Vec::new();
        for (r, table) in rollups(&input, &resolutions)? {
            let totals = totals(&table)?;
            tables.push((r.kind(), table));
            tables.extend(r.totals_kind().map(|kind| (kind, totals)));
        }
        Ok(tables)
    })
    .await?;
    let writes = tables.into_iter().map(|(kind, table)| {
        let key = segment_object_key(tenant, segment_id, kind);
        put_table(store, key, kind, Tier::Compacted, table)
    });
    futures::future::try_join_all(writes).await
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use arrow::array::RecordBatch;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::model::{SampleRow, SymbolId};
    use crate::segment::{samples_batch, sort_samples};

    type Key = (i64, i64, [u8; 16]);

    fn stack(i: u8) -> [u8; 16] {
        let mut id = [0u8; 16];
        id[0] = i % 3;
        id[15] = i;
        id
    }

    /// A samples table of `rows` (time, series, stack, value), sorted as segments are.
    fn samples(rows: &[(i64, i64, [u8; 16], i64)]) -> RecordBatch {
        let rows: Vec<SampleRow> = rows
            .iter()
            .map(|&(time_nanos, series_id, stack, value)| SampleRow {
                time_nanos,
                series_id,
                stack_id: SymbolId(stack),
                value,
                attr_set_id: SymbolId::ZERO,
                trace_id: None,
                span_id: None,
                profile_id: None,
            })
            .collect();
        let order: Vec<u32> = (0..rows.len() as u32).collect();
        sort_samples(&samples_batch(&rows, &order).unwrap()).unwrap()
    }

    /// The sums computed row by row into a sorted map, independently of [`rollup`].
    fn expected(rows: &[(i64, i64, [u8; 16], i64)], step: i64) -> BTreeMap<Key, i64> {
        let mut sums = BTreeMap::new();
        for &(t, s, stack, v) in rows {
            let bucket =
                (i128::from(t).div_euclid(i128::from(step)) * i128::from(step)).max(i128::from(i64::MIN));
            let sum: &mut i64 = sums.entry((s, bucket as i64, stack)).or_default();
            *sum = sum.wrapping_add(v);
        }
        sums
    }

    /// The rows of a rollup table, in order, keyed as [`expected`] is.
    fn rows_of(table: &RecordBatch) -> Vec<(Key, i64)> {
        assert_eq!(table.schema(), *schema::ROLLUP);
        let c = table.columns();
        let (t, s, st, v) = (
            c[0].as_primitive::<Int64Type>(),
            c[1].as_primitive::<Int64Type>(),
            c[2].as_fixed_size_binary(),
            c[3].as_primitive::<Int64Type>(),
        );
        (0..table.num_rows())
            .map(|i| {
                let stack: [u8; 16] = st.value(i).try_into().unwrap();
                ((s.value(i), t.value(i), stack), v.value(i))
            })
            .collect()
    }

    fn random_rows(rng: &mut SmallRng, n: usize) -> Vec<(i64, i64, [u8; 16], i64)> {
        (0..n)
            .map(|_| {
                let t = rng.random_range(-3 * HOUR_NANOS..3 * HOUR_NANOS);
                let series = rng.random_range(-2..3);
                (
                    t,
                    series,
                    stack(rng.random_range(0..12)),
                    rng.random_range(-5..1_000),
                )
            })
            .collect()
    }

    #[test]
    fn sums_per_series_bucket_and_stack_match_sums_of_the_rows() {
        let mut rng = SmallRng::seed_from_u64(33);
        let rows = random_rows(&mut rng, 20_000);
        let table = samples(&rows);
        let minute = rollup(&table, Resolution::Minute).unwrap();
        let want: Vec<(Key, i64)> = expected(&rows, MINUTE_NANOS).into_iter().collect();
        assert_eq!(rows_of(&minute), want);
        assert!(want.iter().any(|((_, t, _), _)| *t < 0), "negative times covered");

        let hour = rollup(&minute, Resolution::Hour).unwrap();
        let want: Vec<(Key, i64)> = expected(&rows, HOUR_NANOS).into_iter().collect();
        assert_eq!(rows_of(&hour), want);
        assert_eq!(rows_of(&rollup(&table, Resolution::Hour).unwrap()), want);
    }

    #[test]
    fn totals_are_the_sums_per_series_and_bucket_of_the_rows() {
        let mut rng = SmallRng::seed_from_u64(34);
        let mut rows = random_rows(&mut rng, 20_000);
        // Sums that wrap, as the queries' sums do.
        rows.extend([(0, 7, stack(1), i64::MAX), (1, 7, stack(2), 3)]);
        let table = samples(&rows);
        for (resolution, step) in [(Resolution::Minute, MINUTE_NANOS), (Resolution::Hour, HOUR_NANOS)] {
            let mut want: BTreeMap<(i64, i64), i64> = BTreeMap::new();
            for ((series, time, _), value) in expected(&rows, step) {
                let sum = want.entry((series, time)).or_default();
                *sum = sum.wrapping_add(value);
            }
            let got = totals(&rollup(&table, resolution).unwrap()).unwrap();
            assert_eq!(got.schema(), *schema::TOTALS);
            let c = got.columns();
            let (t, s, v) = (
                c[0].as_primitive::<Int64Type>(),
                c[1].as_primitive::<Int64Type>(),
                c[2].as_primitive::<Int64Type>(),
            );
            let got: Vec<((i64, i64), i64)> = (0..got.num_rows())
                .map(|i| ((s.value(i), t.value(i)), v.value(i)))
                .collect();
            assert_eq!(got, want.into_iter().collect::<Vec<_>>(), "{resolution:?}");
        }
    }

    #[test]
    fn negative_times_round_down_to_their_bucket() {
        let rows = [
            (-1, 1, stack(1), 5),
            (-MINUTE_NANOS, 1, stack(1), 7),
            (-MINUTE_NANOS - 1, 1, stack(1), 11),
            (0, 1, stack(1), 13),
        ];
        let minute = rows_of(&rollup(&samples(&rows), Resolution::Minute).unwrap());
        assert_eq!(
            minute,
            [
                ((1, -2 * MINUTE_NANOS, stack(1)), 11),
                ((1, -MINUTE_NANOS, stack(1)), 12),
                ((1, 0, stack(1)), 13),
            ]
        );
    }

    #[test]
    fn sums_wrap_as_the_queries_do() {
        let rows = [
            (10, 1, stack(1), i64::MAX),
            (20, 1, stack(1), 2),
            (30, 1, stack(2), i64::MIN),
            (40, 1, stack(2), -1),
            (i64::MAX, 2, stack(1), 1),
            (i64::MAX - 1, 2, stack(1), 1),
            (i64::MIN, 2, stack(1), 1),
        ];
        let table = samples(&rows);
        for (resolution, step) in [(Resolution::Minute, MINUTE_NANOS), (Resolution::Hour, HOUR_NANOS)] {
            let got = rows_of(&rollup(&table, resolution).unwrap());
            let want: Vec<(Key, i64)> = expected(&rows, step).into_iter().collect();
            assert_eq!(got, want);
        }
        let minute = rows_of(&rollup(&table, Resolution::Minute).unwrap());
        assert_eq!(minute[0].1, i64::MIN + 1, "{minute:?}");
        assert_eq!(minute[1].1, i64::MAX, "{minute:?}");
    }

    #[test]
    fn resolutions_name_their_tables() {
        for r in Resolution::ALL {
            assert_eq!(Resolution::of_kind(r.kind()), Some(r));
        }
        assert_eq!(Resolution::of_kind(TableKind::Stacks), None);
        for r in Resolution::ROLLUPS {
            let totals = r.totals_kind().unwrap();
            assert_eq!(Resolution::of_kind(totals), Some(r));
            assert!(totals.holds_values());
        }
        assert_eq!(Resolution::Raw.totals_kind(), None);
        assert_eq!(Resolution::Hour.totals_kind().unwrap().as_str(), "totals_1h");
        assert_eq!(Resolution::Minute.kind().as_str(), "rollup_1m");
        assert_eq!(Resolution::Hour.kind().as_str(), "rollup_1h");
        assert_eq!(Resolution::ALL.map(Resolution::name), ["raw", "1m", "1h", "1d"]);
        assert_eq!(Resolution::Day.totals_kind().unwrap().as_str(), "totals_1d");
        assert_eq!(Resolution::Day.bucket(DAY_NANOS + 5), DAY_NANOS);
        assert_eq!(Resolution::Raw.step_nanos(), 1);
        assert_eq!(Resolution::Hour.step_nanos(), 3600 * 1_000_000_000);
    }

    /// `cargo test --release --workspace --lib -- rollup::tests::cost --ignored --nocapture`
    #[test]
    #[ignore = "a measurement, not a check"]
    fn cost() {
        let mut rng = SmallRng::seed_from_u64(1);
        let rows: Vec<_> = (0..2_000_000i64)
            .map(|i| {
                let t = i * 1_000_000;
                (t, rng.random_range(0..50), stack(rng.random_range(0..200)), 1)
            })
            .collect();
        let table = samples(&rows);
        let started = std::time::Instant::now();
        let minute = rollup(&table, Resolution::Minute).unwrap();
        let hour = rollup(&minute, Resolution::Hour).unwrap();
        let elapsed = started.elapsed();
        println!(
            "{} samples -> {} minute rows, {} hour rows in {elapsed:?}: {:.1} ns per sample",
            rows.len(),
            minute.num_rows(),
            hour.num_rows(),
            elapsed.as_nanos() as f64 / rows.len() as f64
        );
    }
}
