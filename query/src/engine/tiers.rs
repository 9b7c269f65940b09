//! Which resolution answers which stretch of a query's range. Compaction writes, beside an
//! hour block's raw samples, rollups summed per (series, stack, minute) and per (series,
//! stack, hour), and retention keeps them longer than the raw samples. A rollup row of step
//! `T` holds the samples of `[t, t + T)` of its own segment, so a stretch whose edges lie on
//! `T`'s grid is answered exactly by the tier: the coarsest tier answers the middle of a
//! range, finer tiers and raw samples only its ragged edges.
//!
//! Each segment reads each stretch from the coarsest resolution it still holds that can
//! answer it. Where a segment lost everything fine enough (retention), the stretch is
//! widened to the grid of what it has, and the answer says which range it covers; a query
//! that needs raw samples (links, sample attributes, timestamps) is refused there instead.

use std::collections::BTreeMap;

use stackhouse_storage::catalog::{SegmentMeta, TableKind};
use stackhouse_storage::model::TimeRange;
use stackhouse_storage::rollup::Resolution;

/// Segments that read the same resolution over the same stretches: one table of a scan.
#[derive(Clone, Debug)]
pub(crate) struct Source {
    pub resolution: Resolution,
    /// Sorted, disjoint and not adjacent.
    pub ranges: Vec<TimeRange>,
    pub segments: Vec<SegmentMeta>,
    /// Read from the rollup's totals over stacks (see [`stackless`]).
    pub totals: bool,
}

impl Source {
    /// The table its segments' rows are read from.
    pub(crate) fn kind(&self) -> TableKind {
        match self.resolution.totals_kind() {
            Some(totals) if self.totals => totals,
            _ => self.resolution.kind(),
        }
    }
}

/// `sources` for a query that needs no stack: each rollup source's segments that carry
/// the rollup's totals read those (one row per series and bucket instead of one per
/// stack); segments written before totals existed read the rollup as before.
pub(crate) fn stackless(sources: Vec<Source>) -> Vec<Source> {
    let mut out = Vec::with_capacity(sources.len());
    for source in sources {
        let Some(kind) = source.resolution.totals_kind() else {
            out.push(source);
            continue;
        };
        let (totals, rollups): (Vec<SegmentMeta>, Vec<SegmentMeta>) = source
            .segments
            .into_iter()
            .partition(|s| s.object(kind).is_some());
        for (segments, totals) in [(totals, true), (rollups, false)] {
            if !segments.is_empty() {
                out.push(Source {
                    resolution: source.resolution,
                    ranges: source.ranges.clone(),
                    segments,
                    totals,
                });
            }
        }
    }
    out
}

/// How a query's range is read.
#[derive(Clone, Debug)]
pub(crate) struct Reading {
    pub sources: Vec<Source>,
    /// The range the answer covers: the asked range, or wider where a segment's finer
    /// data is gone and its stretch was widened to a coarser grid.
    pub answered: TimeRange,
}

/// A stretch of the range that `missing` segments cannot answer at all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RawGone {
    /// The last sample time of the segments that lost their raw samples.
    pub until: i64,
}

/// `range` cut into stretches, each on the grid of the coarsest of `allowed` (finest first,
/// raw included) it can be, adjacent stretches of one resolution merged.
#[cfg(test)]
fn stretches(range: TimeRange, allowed: &[Resolution]) -> Vec<(Resolution, TimeRange)> {
    cut_at(range, allowed, &[])
}

/// The stretches of each piece of `range` between the times of `cuts` (sorted): no cell
/// of a tier straddles a cut.
fn cut_at(range: TimeRange, allowed: &[Resolution], cuts: &[i64]) -> Vec<(Resolution, TimeRange)> {
    let mut out: Vec<(Resolution, TimeRange)> = Vec::new();
    let mut start = range.start;
    for &at in cuts.iter().filter(|&&t| range.start < t && t < range.end) {
        cut(TimeRange { start, end: at }, allowed, &mut out);
        start = at;
    }
    cut(
        TimeRange {
            start,
            end: range.end,
        },
        allowed,
        &mut out,
    );
    out
}

fn cut(range: TimeRange, allowed: &[Resolution], out: &mut Vec<(Resolution, TimeRange)>) {
    if range.start >= range.end {
        return;
    }
    let Some((&coarsest, finer)) = allowed.split_last() else {
        return;
    };
    let inner = TimeRange {
        start: ceil(range.start, coarsest),
        end: coarsest.bucket(range.end),
    };
    if finer.is_empty() || inner.start >= inner.end {
        if finer.is_empty() {
            push(out, coarsest, range);
        } else {
            cut(range, finer, out);
        }
        return;
    }
    cut(
        TimeRange {
            start: range.start,
            end: inner.start,
        },
        finer,
        out,
    );
    push(out, coarsest, inner);
    cut(
        TimeRange {
            start: inner.end,
            end: range.end,
        },
        finer,
        out,
    );
}

fn push(out: &mut Vec<(Resolution, TimeRange)>, resolution: Resolution, range: TimeRange) {
    match out.last_mut() {
        Some((r, last)) if *r == resolution && last.end == range.start => last.end = range.end,
        _ => out.push((resolution, range)),
    }
}

/// The cells of `resolution`'s grid that hold `segment`'s samples.
fn cells_around(segment: &SegmentMeta, resolution: Resolution) -> TimeRange {
    TimeRange {
        start: resolution.bucket(segment.min_time),
        end: ceil(segment.max_time.saturating_add(1), resolution),
    }
}

/// The start of the first bucket of `resolution` at or after `t`.
fn ceil(t: i64, resolution: Resolution) -> i64 {
    let down = resolution.bucket(t);
    if down == t {
        t
    } else {
        down.saturating_add(resolution.step_nanos())
    }
}

/// Assigns every stretch of `range` to a resolution per segment. `allowed` (finest first)
/// are the resolutions the query can be answered from; raw alone means it needs raw
/// samples, and a segment without them is [`RawGone`].
///
/// When the answer does not depend on when in the range a sample lies (`timeless`: no
/// time or bucket dimension), a segment whose samples all lie inside the range is read
/// whole from the coarsest allowed resolution it holds: every cell of it holds only
/// samples of the range, whatever the range's edges, so the ragged edges need neither raw
/// samples nor a time filter there. A dashboard's range usually ends after the newest
/// sample, so this is the common case for the last block.
///
/// `cuts` (sorted) are times no cell read from a tier may straddle (the edges of deleted
/// stretches); a segment spanning one is not read whole.
///
/// `days` are fresh day segments: each sums every other segment's samples of its day, so
/// a whole day of the range that has one is read from it alone, and the other segments
/// skip that day. A day without one is read from the hour tier. A query without a stack
/// dimension (`stackless`) reads the whole days of its hour stretches from their day
/// segments' hour totals as well.
pub(crate) fn read(
    segments: Vec<SegmentMeta>,
    days: Vec<SegmentMeta>,
    range: TimeRange,
    allowed: &[Resolution],
    timeless: bool,
    stackless: bool,
    cuts: &[i64],
) -> Result<Reading, RawGone> {
    let days: BTreeMap<i64, SegmentMeta> = days.into_iter().map(|d| (d.day().start, d)).collect();
    let asked = range;
    let range = if timeless && allowed.contains(&Resolution::Day) {
        to_whole_days(range, &days)
    } else {
        range
    };
    let wanted = by_day(cut_at(range, allowed, cuts), &days);
    let (wanted, hourly) = if stackless {
        hours_of_days(wanted, &days)
    } else {
        (wanted, Vec::new())
    };
    let daily: Vec<TimeRange> = wanted
        .iter()
        .filter(|(r, _)| *r == Resolution::Day)
        .map(|&(_, stretch)| stretch)
        .collect();
    let covered: Vec<TimeRange> = daily.iter().chain(&hourly).copied().collect();
    let widen = allowed != [Resolution::Raw];
    let mut answered = asked;
    let mut gone: Option<i64> = None;
    // Segments that hold the same resolutions read alike: one table per resolution.
    let mut by_held: BTreeMap<Vec<Resolution>, Vec<SegmentMeta>> = BTreeMap::new();
    // Segments inside the range, read whole, by the resolution they are read from.
    let mut whole: BTreeMap<Resolution, (TimeRange, Vec<SegmentMeta>)> = BTreeMap::new();
    for segment in segments {
        let in_days = covered
            .iter()
            .find(|c| c.overlaps(segment.min_time, segment.max_time));
        if in_days.is_some_and(|c| c.start <= segment.min_time && segment.max_time < c.end) {
            continue;
        }
        let held: Vec<Resolution> = Resolution::ALL
            .into_iter()
            .filter(|r| segment.object(r.kind()).is_some())
            .collect();
        let inside = range.start <= segment.min_time && segment.max_time < range.end;
        // The coarsest tier whose cells around the segment's samples straddle no cut: a
        // rollup row is stamped with the start of its cell, which may lie before a cut
        // that the samples themselves all lie after, and the deletion mask reads only
        // that stamp.
        let whole_from = (timeless && inside && in_days.is_none())
            .then(|| {
                held.iter()
                    .rev()
                    .filter(|r| allowed.contains(r))
                    .map(|&r| (r, cells_around(&segment, r)))
                    .find(|(_, cells)| !cuts.iter().any(|&t| cells.start < t && t < cells.end))
            })
            .flatten();
        if let Some((coarsest, cells)) = whole_from {
            let (hull, segments) = whole.entry(coarsest).or_insert((cells, Vec::new()));
            hull.start = hull.start.min(cells.start);
            hull.end = hull.end.max(cells.end);
            segments.push(segment);
            continue;
        }
        for &(want, stretch) in &wanted {
            if want == Resolution::Day || !stretch.overlaps(segment.min_time, segment.max_time) {
                continue;
            }
            match assign(&held, want, stretch, widen) {
                None => gone = Some(gone.unwrap_or(i64::MIN).max(segment.max_time)),
                Some((read, widened)) if read > want => {
                    answered.start = answered.start.min(widened.start.max(segment.min_time));
                    answered.end = answered
                        .end
                        .max(widened.end.min(segment.max_time.saturating_add(1)));
                }
                Some(_) => {}
            }
        }
        by_held.entry(held).or_default().push(segment);
    }
    if let Some(until) = gone {
        return Err(RawGone { until });
    }
    let mut sources = Vec::new();
    for (held, segments) in by_held {
        // Every stretch, not only those a segment overlaps: a filter on a stretch without
        // its rows costs nothing, and alike segments stay one table.
        let mut by_resolution: BTreeMap<Resolution, Vec<TimeRange>> = BTreeMap::new();
        for &(want, stretch) in wanted.iter().filter(|(r, _)| *r != Resolution::Day) {
            if let Some((read, stretch)) = assign(&held, want, stretch, widen) {
                by_resolution.entry(read).or_default().push(stretch);
            }
        }
        for (resolution, ranges) in by_resolution {
            sources.push(Source {
                resolution,
                ranges: merged(ranges),
                segments: segments.clone(),
                totals: false,
            });
        }
    }
    // One range over every such segment's cells: each segment's rows lie inside it, so
    // the scan's filter finds it implied and checks no row's time.
    for (resolution, (hull, segments)) in whole {
        sources.push(Source {
            resolution,
            ranges: vec![hull],
            segments,
            totals: false,
        });
    }
    let (mut read_daily, mut read_hourly) = (Vec::new(), Vec::new());
    for day in days.into_values() {
        let within = |c: &TimeRange| c.start <= day.day().start && day.day().end <= c.end;
        if daily.iter().any(within) {
            read_daily.push(day);
        } else if hourly.iter().any(within) {
            read_hourly.push(day);
        }
    }
    for (resolution, ranges, segments, totals) in [
        (Resolution::Day, daily, read_daily, false),
        (Resolution::Hour, hourly, read_hourly, true),
    ] {
        if !segments.is_empty() {
            sources.push(Source {
                resolution,
                ranges,
                segments,
                totals,
            });
        }
    }
    Ok(Reading { sources, answered })
}

/// `range` stretched to the edges of the days at its ends whose samples all lie inside
/// it: nothing of such a day lies outside the range, so where the answer has no time
/// dimension its day segment answers for the whole day, one object instead of up to 24
/// hour blocks. A store's first day, and a range that ends after the newest sample of a
/// summed day, are the common cases.
fn to_whole_days(range: TimeRange, days: &BTreeMap<i64, SegmentMeta>) -> TimeRange {
    let inside = |day: &SegmentMeta| range.start <= day.min_time && day.max_time < range.end;
    let mut out = range;
    if let Some(first) = days
        .get(&Resolution::Day.bucket(range.start))
        .filter(|d| inside(d))
    {
        out.start = first.day().start;
    }
    if let Some(last) = days
        .get(&Resolution::Day.bucket(range.end.saturating_sub(1)))
        .filter(|d| inside(d))
    {
        out.end = out.end.max(last.day().end);
    }
    out
}

/// `wanted` without the whole days of its hour stretches that have a day segment with
/// hour totals, and those days (adjacent ones merged).
fn hours_of_days(
    wanted: Vec<(Resolution, TimeRange)>,
    days: &BTreeMap<i64, SegmentMeta>,
) -> (Vec<(Resolution, TimeRange)>, Vec<TimeRange>) {
    let step = Resolution::Day.step_nanos();
    let (mut out, mut taken) = (Vec::with_capacity(wanted.len()), Vec::new());
    for (resolution, stretch) in wanted {
        if resolution != Resolution::Hour {
            push(&mut out, resolution, stretch);
            continue;
        }
        let mut rest = stretch.start;
        let mut day = ceil(stretch.start, Resolution::Day);
        while day.saturating_add(step) <= stretch.end {
            let end = day.saturating_add(step);
            if days
                .get(&day)
                .is_some_and(|d| d.object(TableKind::Totals1h).is_some())
            {
                if rest < day {
                    push(
                        &mut out,
                        resolution,
                        TimeRange {
                            start: rest,
                            end: day,
                        },
                    );
                }
                taken.push(TimeRange { start: day, end });
                rest = end;
            }
            day = end;
        }
        if rest < stretch.end {
            push(
                &mut out,
                resolution,
                TimeRange {
                    start: rest,
                    end: stretch.end,
                },
            );
        }
    }
    (out, merged(taken))
}

/// `wanted` with each day stretch cut into its days: those with a day segment stay day
/// stretches, the others become hour stretches (adjacent ones of a kind merged).
fn by_day(
    wanted: Vec<(Resolution, TimeRange)>,
    days: &BTreeMap<i64, SegmentMeta>,
) -> Vec<(Resolution, TimeRange)> {
    let step = Resolution::Day.step_nanos();
    let mut out = Vec::with_capacity(wanted.len());
    for (resolution, stretch) in wanted {
        if resolution != Resolution::Day {
            push(&mut out, resolution, stretch);
            continue;
        }
        let mut start = stretch.start;
        while start < stretch.end {
            let end = start.saturating_add(step);
            let read = if days.contains_key(&start) {
                Resolution::Day
            } else {
                Resolution::Hour
            };
            push(&mut out, read, TimeRange { start, end });
            start = end;
        }
    }
    out
}

/// What a segment holding `held` (finest first) reads a stretch wanted at `want` from: the
/// coarsest held resolution no coarser than `want` (a finer grid answers a stretch on a
/// coarser one); else, when `widen`, the finest held one over the cells around the
/// stretch; else nothing.
fn assign(
    held: &[Resolution],
    want: Resolution,
    stretch: TimeRange,
    widen: bool,
) -> Option<(Resolution, TimeRange)> {
    if let Some(&read) = held.iter().rev().find(|r| **r <= want) {
        return Some((read, stretch));
    }
    let &coarser = held.first().filter(|_| widen)?;
    Some((
        coarser,
        TimeRange {
            start: coarser.bucket(stretch.start),
            end: ceil(stretch.end, coarser),
        },
    ))
}

/// Sorted and with overlapping or adjacent ranges joined: widened stretches of one
/// segment can cover the same cells, which must be read once.
fn merged(mut ranges: Vec<TimeRange>) -> Vec<TimeRange> {
    ranges.sort_by_key(|r| (r.start, r.end));
    let mut out: Vec<TimeRange> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match out.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use stackhouse_storage::catalog::{ObjectMeta, SegmentSeries};

    use super::*;

    const M: i64 = 60_000_000_000;
    const H: i64 = 60 * M;
    const ALL: [Resolution; 3] = Resolution::BLOCK;

    fn r(start: i64, end: i64) -> TimeRange {
        TimeRange { start, end }
    }

    fn segment(id: &str, min_time: i64, max_time: i64, held: &[Resolution]) -> SegmentMeta {
        SegmentMeta {
            id: id.into(),
            tenant: "t".into(),
            min_time,
            max_time,
            level: 2,
            created_at_nanos: 0,
            objects: held
                .iter()
                .map(|res| ObjectMeta {
                    kind: res.kind(),
                    key: format!("{id}/{}", res.kind().as_str()),
                    size_bytes: 1,
                    rows: 1,
                })
                .collect(),
            series: vec![SegmentSeries {
                series_id: 1,
                min_time,
                max_time,
                samples: 1,
            }],
        }
    }

    #[test]
    fn stackless_reads_read_totals_where_segments_carry_them() {
        use Resolution::{Hour, Minute, Raw};
        let mut new = segment("new", 0, H - 1, &ALL);
        for r in Resolution::ROLLUPS {
            let kind = r.totals_kind().unwrap();
            new.objects.push(ObjectMeta {
                kind,
                key: format!("new/{}", kind.as_str()),
                size_bytes: 1,
                rows: 1,
            });
        }
        // Written before totals existed.
        let old = segment("old", H, 2 * H - 1, &ALL);
        // Raw samples, then minutes, then the second hour.
        let reading = read(
            vec![new, old],
            vec![],
            r(30 * M + 1, 2 * H),
            &ALL,
            false,
            false,
            &[],
        )
        .unwrap();
        let mut got: Vec<(Resolution, TableKind, Vec<String>)> = stackless(reading.sources)
            .iter()
            .map(|s| {
                (
                    s.resolution,
                    s.kind(),
                    s.segments.iter().map(|x| x.id.clone()).collect(),
                )
            })
            .collect();
        got.sort_by_key(|(r, kind, _)| (*r, kind.as_str()));
        let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            got,
            vec![
                (Raw, TableKind::Samples, ids(&["new", "old"])),
                (Minute, TableKind::Rollup1m, ids(&["old"])),
                (Minute, TableKind::Totals1m, ids(&["new"])),
                (Hour, TableKind::Rollup1h, ids(&["old"])),
                (Hour, TableKind::Totals1h, ids(&["new"])),
            ]
        );
    }

    /// Each source's resolution, ranges and segment ids.
    fn sources(reading: &Reading) -> Vec<(Resolution, Vec<TimeRange>, Vec<String>)> {
        reading
            .sources
            .iter()
            .map(|s| {
                (
                    s.resolution,
                    s.ranges.clone(),
                    s.segments.iter().map(|x| x.id.clone()).collect(),
                )
            })
            .collect()
    }

    /// A day segment of the day starting at `start`, with its tables.
    fn day_segment(id: &str, start: i64) -> SegmentMeta {
        SegmentMeta {
            id: id.into(),
            tenant: "t".into(),
            min_time: start + 5,
            max_time: start + 24 * H - 7,
            level: stackhouse_storage::catalog::DAY_LEVEL,
            created_at_nanos: 0,
            objects: [TableKind::Rollup1d, TableKind::Totals1d, TableKind::Totals1h]
                .map(|kind| ObjectMeta {
                    kind,
                    key: format!("{id}/{}", kind.as_str()),
                    size_bytes: 1,
                    rows: 1,
                })
                .to_vec(),
            series: Vec::new(),
        }
    }

    #[test]
    fn whole_days_with_a_day_segment_are_read_from_it_alone() {
        use Resolution::{Day, Hour, Minute};
        const D: i64 = 24 * H;
        let blocks = || {
            vec![
                segment("b0", D - H, D - 1, &ALL),
                // Inside day 1, which has a day segment: not read at all.
                segment("b1", D + H, D + 2 * H - 1, &ALL),
                // Across midnight into day 2: its part of day 1 is in the day segment.
                segment("x", 2 * D - M, 2 * D + M, &ALL),
                segment("b2", 2 * D + 5 * H, 2 * D + 6 * H - 1, &ALL),
                segment("b3", 3 * D, 3 * D + H - 1, &ALL),
            ]
        };
        // Day 0 lies partly outside the range: its day segment is not read either.
        let days = || vec![day_segment("d0", 0), day_segment("d1", D)];
        let range = r(D - 30 * M, 3 * D + 2 * H);
        let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let reading = read(blocks(), days(), range, &Resolution::ALL, false, false, &[]).unwrap();
        assert_eq!(reading.answered, range);
        assert_eq!(
            sources(&reading),
            vec![
                (Minute, vec![r(D - 30 * M, D)], ids(&["b0", "x", "b2", "b3"])),
                // Day 2 has no day segment: hours.
                (Hour, vec![r(2 * D, 3 * D + 2 * H)], ids(&["b0", "x", "b2", "b3"])),
                (Day, vec![r(D, 2 * D)], ids(&["d1"])),
            ]
        );
        // Without a time dimension, blocks inside the range outside covered days are read
        // whole; one reaching into a covered day is not.
        let reading = read(blocks(), days(), range, &Resolution::ALL, true, false, &[]).unwrap();
        assert_eq!(
            sources(&reading),
            vec![
                (Minute, vec![r(D - 30 * M, D)], ids(&["b0", "x"])),
                (Hour, vec![r(2 * D, 3 * D + 2 * H)], ids(&["b0", "x"])),
                (Hour, vec![r(2 * D + 5 * H, 3 * D + H)], ids(&["b2", "b3"])),
                (Day, vec![r(D, 2 * D)], ids(&["d1"])),
            ]
        );
        // A query that needs no stack reads the day's totals.
        let kinds: Vec<TableKind> = stackless(reading.sources).iter().map(Source::kind).collect();
        assert!(kinds.contains(&TableKind::Totals1d), "{kinds:?}");
        // Where the day tier is not allowed (buckets of an hour), the day is read in hours.
        let hourly = read(blocks(), days(), range, &ALL, false, false, &[]).unwrap();
        assert!(sources(&hourly).iter().all(|(res, _, _)| *res != Day));
        assert!(
            sources(&hourly)
                .iter()
                .any(|(_, _, ids)| ids.contains(&"b1".to_string()))
        );
        // Without stacks, the same hours of day 1 come from its day segment's hour totals
        // alone; the blocks read the rest.
        let hourly = read(blocks(), days(), range, &ALL, false, true, &[]).unwrap();
        assert_eq!(
            sources(&hourly),
            vec![
                (Minute, vec![r(D - 30 * M, D)], ids(&["b0", "x", "b2", "b3"])),
                (Hour, vec![r(2 * D, 3 * D + 2 * H)], ids(&["b0", "x", "b2", "b3"])),
                (Hour, vec![r(D, 2 * D)], ids(&["d1"])),
            ]
        );
        let kinds: Vec<TableKind> = hourly.sources.iter().map(Source::kind).collect();
        assert_eq!(kinds.last(), Some(&TableKind::Totals1h), "{kinds:?}");
        // A day segment without hour totals leaves its day's hours to the blocks.
        let mut bare = day_segment("d1", D);
        bare.objects.retain(|o| o.kind != TableKind::Totals1h);
        let from_blocks = read(blocks(), vec![bare], range, &ALL, false, true, &[]).unwrap();
        assert!(
            sources(&from_blocks)
                .iter()
                .all(|(_, _, ids)| !ids.contains(&"d1".to_string()) && ids.len() == 5),
            "{:?}",
            sources(&from_blocks)
        );
        // A deleted stretch's edge inside day 1 keeps its cells apart: day 1 is read in
        // hours and minutes around the cut, and its day segment not at all.
        let cut = read(
            blocks(),
            days(),
            range,
            &Resolution::ALL,
            false,
            false,
            &[D + 90 * M],
        )
        .unwrap();
        assert!(
            sources(&cut).iter().all(|(res, _, _)| *res != Day),
            "{:?}",
            sources(&cut)
        );
    }

    #[test]
    fn the_middle_is_read_coarse_and_the_edges_fine() {
        use Resolution::{Hour, Minute, Raw};
        let s = 10 * H - 90 * M - 5;
        let e = 14 * H + 3 * M + 7;
        assert_eq!(
            stretches(r(s, e), &ALL),
            vec![
                (Raw, r(s, 10 * H - 90 * M)),
                (Minute, r(10 * H - 90 * M, 9 * H)),
                (Hour, r(9 * H, 14 * H)),
                (Minute, r(14 * H, 14 * H + 3 * M)),
                (Raw, r(14 * H + 3 * M, e)),
            ]
        );
        // Aligned edges need nothing finer.
        assert_eq!(stretches(r(2 * H, 5 * H), &ALL), vec![(Hour, r(2 * H, 5 * H))]);
        // Less than a minute: raw only; raw alone allowed: one stretch.
        assert_eq!(stretches(r(5, 50), &ALL), vec![(Raw, r(5, 50))]);
        assert_eq!(stretches(r(s, e), &[Raw]), vec![(Raw, r(s, e))]);
        // Without the hour tier the middle is minutes.
        assert_eq!(
            stretches(r(H - 1, 3 * H), &[Raw, Minute]),
            vec![(Raw, r(H - 1, H)), (Minute, r(H, 3 * H))]
        );
        // Negative times floor toward minus infinity.
        assert_eq!(
            stretches(r(-H - M - 1, 0), &ALL),
            vec![
                (Raw, r(-H - M - 1, -H - M)),
                (Minute, r(-H - M, -H)),
                (Hour, r(-H, 0))
            ]
        );
    }

    #[test]
    fn each_segment_reads_what_it_holds() {
        use Resolution::{Hour, Minute, Raw};
        let range = r(H - 30, 3 * H);
        let fresh = segment("fresh", 2 * H + 5, 2 * H + 50, &[Raw]);
        let block = segment("block", H - 100, 2 * H - 1, &[Raw, Minute, Hour]);
        let reading = read(vec![fresh, block], vec![], range, &ALL, false, false, &[]).unwrap();
        assert_eq!(reading.answered, range);
        assert_eq!(
            sources(&reading),
            vec![
                (Raw, vec![r(H - 30, 3 * H)], vec!["fresh".into()]),
                (Raw, vec![r(H - 30, H)], vec!["block".into()]),
                (Hour, vec![r(H, 3 * H)], vec!["block".into()]),
            ]
        );
    }

    #[test]
    fn a_segment_inside_the_range_is_read_whole_from_its_coarsest_tier() {
        use Resolution::{Hour, Minute, Raw};
        // Samples from 10:00:00.000036 to 10:05:14.99; the range ends after the last one.
        let block = segment(
            "block",
            10 * H + 36,
            10 * H + 5 * M + 14_990_000_000,
            &[Raw, Minute, Hour],
        );
        let straddling = segment("older", 9 * H + 30 * M, 9 * H + 59 * M, &[Raw, Minute, Hour]);
        let range = r(9 * H + 45 * M + 7, 10 * H + 5 * M + 15_000_000_000);
        // A segment read by stretches gets every stretch of the range (see `read`).
        let by_stretches = |id: &str| {
            vec![
                (
                    Raw,
                    vec![r(range.start, 9 * H + 46 * M), r(10 * H + 5 * M, range.end)],
                    vec![id.to_string()],
                ),
                (
                    Minute,
                    vec![r(9 * H + 46 * M, 10 * H + 5 * M)],
                    vec![id.to_string()],
                ),
            ]
        };
        let reading = read(
            vec![block.clone(), straddling],
            vec![],
            range,
            &ALL,
            true,
            false,
            &[],
        )
        .unwrap();
        assert_eq!(reading.answered, range);
        let mut want = by_stretches("older");
        want.push((Hour, vec![r(10 * H, 11 * H)], vec!["block".into()]));
        assert_eq!(sources(&reading), want);
        // Over time buckets the edges stay exact: the block's last seconds are raw.
        let by_time = read(vec![block.clone()], vec![], range, &ALL, false, false, &[]).unwrap();
        assert_eq!(sources(&by_time), by_stretches("block"));
        // Only the resolutions a query allows: raw alone reads the whole block raw.
        assert_eq!(
            sources(&read(vec![block.clone()], vec![], range, &[Raw], true, false, &[]).unwrap()),
            vec![(
                Raw,
                vec![r(block.min_time, block.max_time + 1)],
                vec!["block".into()]
            )]
        );
        // A sample at the range's end is outside it: the block is cut as before.
        let at_end = r(10 * H, block.max_time);
        let cut = sources(&read(vec![block], vec![], at_end, &ALL, true, false, &[]).unwrap());
        assert!(cut.iter().any(|(res, _, _)| *res == Raw), "{cut:?}");
    }

    #[test]
    fn no_tier_cell_straddles_a_cut_and_a_cut_segment_is_not_read_whole() {
        use Resolution::{Hour, Minute, Raw};
        let block = segment("block", 0, 3 * H - 1, &ALL);
        let at = H + 30 * M + 5;
        let reading = read(vec![block], vec![], r(0, 3 * H), &ALL, true, false, &[at]).unwrap();
        assert_eq!(
            sources(&reading),
            vec![
                (Raw, vec![r(H + 30 * M, H + 31 * M)], vec!["block".into()]),
                (
                    Minute,
                    vec![r(H, H + 30 * M), r(H + 31 * M, 2 * H)],
                    vec!["block".into()]
                ),
                (Hour, vec![r(0, H), r(2 * H, 3 * H)], vec!["block".into()]),
            ]
        );
        // Cuts outside the range change nothing.
        assert_eq!(cut_at(r(H, 2 * H), &ALL, &[0, 5 * H]), vec![(Hour, r(H, 2 * H))]);
    }

    #[test]
    fn a_day_whose_samples_all_lie_inside_the_range_is_read_from_its_day_segment() {
        use Resolution::Day;
        const D: i64 = 24 * H;
        // A store from 18:00 of day 0 to 18:00 of day 2, every day summed.
        let mut first = day_segment("d0", 0);
        first.min_time = 18 * H + 3;
        let mut last = day_segment("d2", 2 * D);
        last.max_time = 2 * D + 18 * H - 9;
        let days = || vec![first.clone(), day_segment("d1", D), last.clone()];
        let blocks = || {
            vec![
                segment("b0", 18 * H + 3, 19 * H - 1, &ALL),
                segment("b2", 2 * D + 17 * H, 2 * D + 18 * H - 9, &ALL),
            ]
        };
        let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let range = r(18 * H, 2 * D + 18 * H);
        let reading = read(blocks(), days(), range, &Resolution::ALL, true, false, &[]).unwrap();
        assert_eq!(reading.answered, range);
        assert_eq!(
            sources(&reading),
            vec![(Day, vec![r(0, 3 * D)], ids(&["d0", "d1", "d2"]))]
        );
        // A range that starts after the first day's first sample, a time dimension, or a
        // deletion's edge inside the day: that day is read from its blocks.
        let reads = |reading: &Reading, id: &str| {
            sources(reading)
                .iter()
                .any(|(_, _, ids)| ids.contains(&id.to_string()))
        };
        let later = r(18 * H + 5, 2 * D + 18 * H);
        let reading = read(blocks(), days(), later, &Resolution::ALL, true, false, &[]).unwrap();
        assert!(reads(&reading, "b0") && !reads(&reading, "d0") && reads(&reading, "d2"));
        let by_time = read(blocks(), days(), range, &Resolution::ALL, false, false, &[]).unwrap();
        assert!(reads(&by_time, "b0") && reads(&by_time, "b2") && !reads(&by_time, "d0"));
        let cut = read(blocks(), days(), range, &Resolution::ALL, true, false, &[20 * H]).unwrap();
        assert!(reads(&cut, "b0") && !reads(&cut, "d0") && reads(&cut, "d2"));
    }

    #[test]
    fn a_segment_read_whole_takes_no_tier_whose_cells_straddle_a_cut() {
        use Resolution::{Hour, Minute, Raw};
        const S: i64 = 1_000_000_000;
        // A minute window's segment holding the samples of 10:00:57 to 10:00:59.5, and a
        // deletion from 10:00:56: every sample lies after the cut, but the minute and hour
        // cells around them start before it, and a rollup row carries its cell's start.
        let window = segment(
            "window",
            10 * H + 57 * S,
            10 * H + 59 * S + S / 2,
            &[Raw, Minute, Hour],
        );
        let range = r(9 * H, 11 * H);
        let reading = read(
            vec![window.clone()],
            vec![],
            range,
            &ALL,
            true,
            false,
            &[10 * H + 56 * S],
        )
        .unwrap();
        assert_eq!(
            sources(&reading),
            vec![(
                Raw,
                vec![r(window.min_time, window.max_time + 1)],
                vec!["window".into()]
            )]
        );
        // A cut on the minute's edge leaves the minute cell whole, not the hour's.
        let reading = read(vec![window.clone()], vec![], range, &ALL, true, false, &[10 * H]).unwrap();
        assert_eq!(
            sources(&reading),
            vec![(Hour, vec![r(10 * H, 11 * H)], vec!["window".into()])]
        );
        let reading = read(
            vec![window],
            vec![],
            range,
            &ALL,
            true,
            false,
            &[10 * H + M, 10 * H + 30 * M],
        )
        .unwrap();
        assert_eq!(
            sources(&reading),
            vec![(Minute, vec![r(10 * H, 10 * H + M)], vec!["window".into()])]
        );
    }

    #[test]
    fn lost_raw_widens_to_the_minute_or_is_refused() {
        use Resolution::{Hour, Minute, Raw};
        let old = segment("old", H, 2 * H - 1, &[Minute, Hour]);
        let range = r(H + 90 * 1_000_000_000, 3 * H);
        let reading = read(vec![old.clone()], vec![], range, &ALL, false, false, &[]).unwrap();
        assert_eq!(reading.answered, r(H + M, 3 * H));
        let got: Vec<(Resolution, Vec<TimeRange>)> = reading
            .sources
            .iter()
            .map(|s| (s.resolution, s.ranges.clone()))
            .collect();
        assert_eq!(
            got,
            vec![(Minute, vec![r(H + M, 2 * H)]), (Hour, vec![r(2 * H, 3 * H)])]
        );
        assert_eq!(
            read(vec![old], vec![], range, &[Raw], false, false, &[]).unwrap_err(),
            RawGone { until: 2 * H - 1 }
        );
        // Only the hour left: the hour cell is read once, though three stretches need it.
        let hour_only = segment("h", H, 2 * H - 1, &[Hour]);
        let reading = read(
            vec![hour_only],
            vec![],
            r(H + 5, 2 * H - 7),
            &ALL,
            false,
            false,
            &[],
        )
        .unwrap();
        assert_eq!(reading.sources[0].ranges, vec![r(H, 2 * H)]);
        assert_eq!(reading.answered, r(H, 2 * H));
    }
}
