//! Which segments to merge: a pure function of the catalog's segments and the clock, so the
//! policy is tested without storage.
//!
//! Level 0 is what ingest flushes (one segment per tenant per flush). Level 1 merges the
//! level-0 segments of one minute window as soon as they are a few seconds old, so a burst
//! of small segments is gone within the compaction interval plus `l0_max_age`. Level 2 is
//! the hour block: the level-1 segments of an hour are merged when too many pile up, and
//! everything of an hour becomes one block once the hour has closed and settled.
//!
//! Hour blocks carry the rollups, so a closed hour ends as blocks with rollups: a lone
//! segment below the top level is rewritten alone, and a block written before rollups
//! existed is rewritten to get them. A segment whose samples retention removed keeps only
//! its rollups and is never merged: merging reads samples, and would lose the rollups.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::catalog::SegmentMeta;
use crate::rollup::Resolution;

/// The level of the hour blocks, the highest level compaction writes.
pub const TOP_LEVEL: i32 = 2;

#[derive(Clone, Debug)]
pub struct Policy {
    /// Window of level 1 (level-0 segments are grouped by the window of their first sample).
    pub l1_window: Duration,
    /// Window of the top level, the hour block.
    pub top_window: Duration,
    /// Level-0 segments older than this are merged even if their window is still open.
    pub l0_max_age: Duration,
    /// A window with this many segments below a level is merged at once.
    pub max_segments: usize,
    /// How long after its end a window counts as closed (late data has arrived).
    pub settle: Duration,
    /// Largest block a merge writes, in samples; bounds compaction memory.
    pub max_block_rows: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompactMode {
    /// What the policy says is due now.
    Due,
    /// Everything of each hour window into one block now, whatever its age.
    Full,
}

/// Segments to merge into one segment of `level`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    pub level: i32,
    pub segments: Vec<SegmentMeta>,
}

fn nanos(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX).max(1)
}

/// The start of the window of `width` that holds `t`.
fn window_of(t: i64, width: i64) -> i64 {
    t.div_euclid(width) * width
}

fn samples(segment: &SegmentMeta) -> u64 {
    segment.series.iter().map(|s| s.samples).sum()
}

/// Whether a segment with samples is worth rewriting even with nothing to merge it with:
/// it is not an hour block yet, or it lacks the rollups an hour block carries.
fn unfinished(segment: &SegmentMeta) -> bool {
    segment.level < TOP_LEVEL || Resolution::ROLLUPS.iter().any(|&r| !segment.has(r))
}

/// Groups due at `now`, in no particular order; no segment is in two groups.
pub fn plan(segments: &[SegmentMeta], now: i64, policy: &Policy, mode: CompactMode) -> Vec<Group> {
    let segments: Vec<&SegmentMeta> = segments.iter().filter(|s| s.has(Resolution::Raw)).collect();
    let top = nanos(policy.top_window);
    let settle = nanos(policy.settle);
    let closed = |start: i64, width: i64| start.saturating_add(width).saturating_add(settle) <= now;
    let mut groups = Vec::new();
    let mut taken = std::collections::HashSet::new();

    if mode == CompactMode::Due {
        let l1 = nanos(policy.l1_window);
        let old = now.saturating_sub(nanos(policy.l0_max_age));
        let mut level1 = by_window(segments.iter().copied().filter(|s| s.level == 1), l1);
        for (start, window) in by_window(segments.iter().copied().filter(|s| s.level == 0), l1) {
            let due = window.len() >= policy.max_segments
                || closed(start, l1)
                || window.iter().any(|s| s.created_at_nanos <= old);
            // The minute's level-1 segment joins the merge, so a minute that keeps
            // receiving data stays one level-1 segment instead of one per merge.
            let mut merged = window;
            merged.extend(level1.remove(&start).unwrap_or_default());
            if due && merged.len() >= 2 {
                taken.extend(merged.iter().map(|s| s.id.clone()));
                groups.push(Group {
                    level: 1,
                    segments: merged.into_iter().cloned().collect(),
                });
            }
        }
    }

    let rest = segments
        .iter()
        .copied()
        .filter(|s| !taken.contains(&s.id) && s.level <= TOP_LEVEL);
    for (start, window) in by_window(rest, top) {
        let below: Vec<&SegmentMeta> = window.iter().copied().filter(|s| s.level < TOP_LEVEL).collect();
        let chosen = if mode == CompactMode::Full || closed(start, top) {
            // Merging lone top blocks with nothing new would only rewrite them.
            let tops = window.len() - below.len();
            (tops >= 2 || window.iter().any(|s| unfinished(s))).then_some(window)
        } else {
            let level1: Vec<_> = below.into_iter().filter(|s| s.level == 1).collect();
            (level1.len() >= policy.max_segments).then_some(level1)
        };
        if let Some(chosen) = chosen {
            for chunk in bounded(chosen, policy.max_block_rows) {
                groups.push(Group {
                    level: TOP_LEVEL,
                    segments: chunk.into_iter().cloned().collect(),
                });
            }
        }
    }
    groups
}

/// Segments by the window of their first sample, oldest window first.
fn by_window<'a>(
    segments: impl Iterator<Item = &'a SegmentMeta>,
    width: i64,
) -> BTreeMap<i64, Vec<&'a SegmentMeta>> {
    let mut windows: BTreeMap<i64, Vec<&SegmentMeta>> = BTreeMap::new();
    for s in segments {
        windows.entry(window_of(s.min_time, width)).or_default().push(s);
    }
    windows
}

/// Splits a window's segments (in time order) into merges of at most `max_rows` samples;
/// a chunk of one segment is left alone unless it is [`unfinished`].
fn bounded(mut segments: Vec<&SegmentMeta>, max_rows: u64) -> Vec<Vec<&SegmentMeta>> {
    segments.sort_by_key(|s| (s.min_time, s.id.clone()));
    let mut chunks: Vec<Vec<&SegmentMeta>> = vec![Vec::new()];
    let mut rows = 0;
    for s in segments {
        let n = samples(s);
        let current = chunks.last_mut().expect("never empty");
        if !current.is_empty() && rows + n > max_rows {
            chunks.push(Vec::new());
            rows = 0;
        }
        rows += n;
        chunks.last_mut().expect("never empty").push(s);
    }
    chunks.retain(|c| c.len() >= 2 || c.iter().any(|s| unfinished(s)));
    chunks
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{ObjectMeta, SegmentSeries};

    const SEC: i64 = 1_000_000_000;
    const HOUR: i64 = 3600 * SEC;

    fn policy() -> Policy {
        Policy {
            l1_window: Duration::from_secs(60),
            top_window: Duration::from_secs(3600),
            l0_max_age: Duration::from_secs(10),
            max_segments: 4,
            settle: Duration::from_secs(30),
            max_block_rows: 1_000,
        }
    }

    fn object(id: &str, r: Resolution) -> ObjectMeta {
        ObjectMeta {
            kind: r.kind(),
            key: format!("{id}/{}", r.kind().as_str()),
            size_bytes: 1,
            rows: 1,
        }
    }

    /// A segment with samples, and with rollups when it is an hour block.
    fn seg(id: &str, level: i32, t: i64, created: i64, rows: u64) -> SegmentMeta {
        let resolutions: &[Resolution] = if level == TOP_LEVEL {
            &Resolution::ALL
        } else {
            &[Resolution::Raw]
        };
        with(id, level, t, created, rows, resolutions)
    }

    fn with(
        id: &str,
        level: i32,
        t: i64,
        created: i64,
        rows: u64,
        resolutions: &[Resolution],
    ) -> SegmentMeta {
        SegmentMeta {
            id: id.into(),
            tenant: "t".into(),
            min_time: t,
            max_time: t + SEC,
            level,
            created_at_nanos: created,
            objects: resolutions.iter().map(|&r| object(id, r)).collect(),
            series: vec![SegmentSeries {
                series_id: 1,
                min_time: t,
                max_time: t + SEC,
                samples: rows,
            }],
        }
    }

    fn ids(g: &Group) -> Vec<&str> {
        let mut v: Vec<&str> = g.segments.iter().map(|s| s.id.as_str()).collect();
        v.sort();
        v
    }

    #[test]
    fn young_level0_waits_and_old_level0_merges_per_minute() {
        let now = 10 * HOUR + 30 * SEC;
        let young = [
            seg("a", 0, 10 * HOUR, now - SEC, 1),
            seg("b", 0, 10 * HOUR + SEC, now, 1),
        ];
        assert!(plan(&young, now, &policy(), CompactMode::Due).is_empty());

        let old = now - 11 * SEC;
        let segs = [
            seg("a", 0, 10 * HOUR, old, 1),
            seg("b", 0, 10 * HOUR + SEC, now, 1),
            // Another minute: merged on its own.
            seg("c", 0, 10 * HOUR - 60 * SEC, old, 1),
            seg("d", 0, 10 * HOUR - 50 * SEC, old, 1),
        ];
        let mut groups = plan(&segs, now, &policy(), CompactMode::Due);
        groups.sort_by_key(|g| ids(g).concat());
        assert_eq!(groups.len(), 2);
        assert!(groups.iter().all(|g| g.level == 1));
        assert_eq!(ids(&groups[0]), ["a", "b"]);
        assert_eq!(ids(&groups[1]), ["c", "d"]);
    }

    #[test]
    fn late_level0_joins_its_minutes_level1_segment() {
        let now = 10 * HOUR + 30 * SEC;
        let old = now - 11 * SEC;
        let segs = [
            seg("l1", 1, 10 * HOUR, old, 10),
            seg("late", 0, 10 * HOUR + 5 * SEC, old, 1),
            // A level-1 segment of another minute with nothing new stays level 1 (its hour
            // has closed, so it becomes that hour's block alone).
            seg("other", 1, 10 * HOUR - 60 * SEC, old, 10),
        ];
        let mut groups = plan(&segs, now, &policy(), CompactMode::Due);
        groups.sort_by_key(|g| g.level);
        assert_eq!(groups.len(), 2, "{groups:?}");
        assert_eq!(groups[0].level, 1);
        assert_eq!(ids(&groups[0]), ["l1", "late"]);
        assert_eq!((groups[1].level, ids(&groups[1])), (TOP_LEVEL, vec!["other"]));
        // Nothing new in the minute: its level-1 segment is not rewritten.
        assert!(plan(&segs[..1], now, &policy(), CompactMode::Due).is_empty());
    }

    #[test]
    fn many_level0_merge_at_once() {
        let now = 10 * HOUR + 30 * SEC;
        let segs: Vec<_> = (0..4)
            .map(|i| seg(&format!("s{i}"), 0, 10 * HOUR + i * SEC, now, 1))
            .collect();
        let groups = plan(&segs, now, &policy(), CompactMode::Due);
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].segments.len(), 4);
    }

    #[test]
    fn closed_hour_becomes_one_block_and_lone_blocks_stay() {
        let now = 12 * HOUR;
        let segs = [
            seg("a", 1, 10 * HOUR, 0, 1),
            seg("b", 1, 10 * HOUR + 600 * SEC, 0, 1),
            seg("c", 0, 10 * HOUR + 3599 * SEC, 0, 1),
            seg("d", 2, 9 * HOUR, 0, 1),
        ];
        let groups = plan(&segs, now, &policy(), CompactMode::Due);
        assert_eq!(groups.len(), 1, "{groups:?}");
        assert_eq!(groups[0].level, TOP_LEVEL);
        assert_eq!(ids(&groups[0]), ["a", "b", "c"]);
    }

    #[test]
    fn open_hour_merges_level1_only_when_many() {
        let now = 10 * HOUR + 1800 * SEC;
        let three: Vec<_> = (0..3)
            .map(|i| seg(&format!("s{i}"), 1, 10 * HOUR + i * 60 * SEC, 0, 1))
            .collect();
        assert!(plan(&three, now, &policy(), CompactMode::Due).is_empty());
        let four: Vec<_> = (0..4)
            .map(|i| seg(&format!("s{i}"), 1, 10 * HOUR + i * 60 * SEC, 0, 1))
            .collect();
        let groups = plan(&four, now, &policy(), CompactMode::Due);
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].level, TOP_LEVEL);
    }

    #[test]
    fn full_mode_merges_every_hour_whatever_its_age_within_the_row_bound() {
        let now = 10 * HOUR + 5 * SEC;
        let segs = [
            seg("a", 0, 10 * HOUR, now, 400),
            seg("b", 0, 10 * HOUR + SEC, now, 400),
            seg("c", 1, 10 * HOUR + 2 * SEC, now, 400),
            seg("d", 0, 10 * HOUR + 3 * SEC, now, 10),
            seg("e", 0, 9 * HOUR, now, 1),
        ];
        let mut groups = plan(&segs, now, &policy(), CompactMode::Full);
        groups.sort_by_key(|g| ids(g).concat());
        // 1,000 rows at most: a+b, then c+d; e is alone in its hour and becomes its block.
        assert_eq!(groups.len(), 3, "{groups:?}");
        assert_eq!(ids(&groups[0]), ["a", "b"]);
        assert_eq!(ids(&groups[1]), ["c", "d"]);
        assert_eq!(ids(&groups[2]), ["e"]);
        assert!(groups.iter().all(|g| g.level == TOP_LEVEL));
    }

    #[test]
    fn a_lone_segment_of_a_closed_hour_becomes_its_block() {
        let now = 12 * HOUR;
        let segs = [
            seg("l0", 0, 9 * HOUR, 0, 1),
            seg("l1", 1, 10 * HOUR, 0, 1),
            seg("top", TOP_LEVEL, 8 * HOUR, 0, 1),
        ];
        let mut groups = plan(&segs, now, &policy(), CompactMode::Due);
        groups.sort_by_key(|g| ids(g).concat());
        assert_eq!(groups.len(), 2, "{groups:?}");
        assert_eq!(ids(&groups[0]), ["l0"]);
        assert_eq!(ids(&groups[1]), ["l1"]);
        assert!(groups.iter().all(|g| g.level == TOP_LEVEL));
        // A still open hour waits.
        assert!(
            plan(
                &[seg("open", 1, 12 * HOUR, 0, 1)],
                now,
                &policy(),
                CompactMode::Due
            )
            .is_empty()
        );
    }

    #[test]
    fn an_oversized_segment_alone_in_its_chunk_still_becomes_a_block() {
        let now = 12 * HOUR;
        let segs = [
            seg("big", 1, 10 * HOUR, 0, 2_000),
            seg("small", 0, 10 * HOUR + 60 * SEC, 0, 10),
        ];
        let mut groups = plan(&segs, now, &policy(), CompactMode::Due);
        groups.sort_by_key(|g| ids(g).concat());
        assert_eq!(groups.len(), 2, "{groups:?}");
        assert_eq!(ids(&groups[0]), ["big"]);
        assert_eq!(ids(&groups[1]), ["small"]);
        // Two blocks past the bound stay as they are.
        let blocks = [
            seg("a", TOP_LEVEL, 10 * HOUR, 0, 2_000),
            seg("b", TOP_LEVEL, 10 * HOUR + SEC, 0, 2_000),
        ];
        assert!(plan(&blocks, now, &policy(), CompactMode::Due).is_empty());
    }

    #[test]
    fn a_block_without_rollups_is_rewritten_alone() {
        let now = 12 * HOUR;
        let old = with("old", TOP_LEVEL, 10 * HOUR, 0, 1, &[Resolution::Raw]);
        let groups = plan(std::slice::from_ref(&old), now, &policy(), CompactMode::Due);
        assert_eq!(groups.len(), 1, "{groups:?}");
        assert_eq!((groups[0].level, ids(&groups[0])), (TOP_LEVEL, vec!["old"]));
        // One rollup is not enough either; both is.
        let half = with(
            "half",
            TOP_LEVEL,
            10 * HOUR,
            0,
            1,
            &[Resolution::Raw, Resolution::Minute],
        );
        assert_eq!(plan(&[half], now, &policy(), CompactMode::Due).len(), 1);
        let done = seg("done", TOP_LEVEL, 10 * HOUR, 0, 1);
        assert!(plan(&[done], now, &policy(), CompactMode::Full).is_empty());
    }

    #[test]
    fn segments_without_samples_are_never_merged() {
        let now = 12 * HOUR;
        let rollups = &[Resolution::Minute, Resolution::Hour];
        let segs = [
            with("r0", 0, 10 * HOUR, 0, 1, rollups),
            with("r1", 0, 10 * HOUR + SEC, 0, 1, rollups),
            with("r2", TOP_LEVEL, 10 * HOUR + 2 * SEC, 0, 1, &[Resolution::Hour]),
            seg("raw", 1, 10 * HOUR + 3 * SEC, 0, 1),
        ];
        for mode in [CompactMode::Due, CompactMode::Full] {
            let groups = plan(&segs, now, &policy(), mode);
            assert_eq!(groups.len(), 1, "{groups:?}");
            assert_eq!(ids(&groups[0]), ["raw"]);
            assert!(plan(&segs[..3], now, &policy(), mode).is_empty());
        }
        // Nor in a minute window, whatever its age.
        let minute = [
            with("r0", 0, 10 * HOUR, 0, 1, rollups),
            with("r1", 0, 10 * HOUR + SEC, 0, 1, rollups),
        ];
        assert!(plan(&minute, 10 * HOUR + 30 * SEC, &policy(), CompactMode::Due).is_empty());
    }
}
