//! Day segments: once a UTC day has closed and settled, the hour rollups of its blocks are
//! summed per (series, stack) into one `rollup_1d` object (and its `totals_1d`), listed as
//! a segment of [`DAY_LEVEL`]. A query over many days then reads one object per day from
//! the day tier instead of 24 hour blocks' rollups, which is what keeps a month's answer
//! close to an hour's: per-segment work (listing, opening a file) and rows both shrink.
//!
//! A day segment owns no samples: its day's blocks keep every tier, and retention, purges
//! and compaction go on rewriting them as before. Every commit or swap of a segment with
//! samples in the day marks the day segment stale in the same transaction (see
//! [`crate::catalog::STALE_DAY_LEVEL`]); queries read only fresh ones, and a later pass
//! removes the stale one and sums the day again once its blocks are settled.
//!
//! A day is summed only while its blocks agree on the tiers they hold: where a retention
//! cutoff lies inside the day, its blocks are about to be rewritten one by one, and a day
//! segment would go stale as often.

use std::collections::BTreeMap;

use arrow::compute::concat_batches;

use super::plan::{CompactMode, Policy, TOP_LEVEL};
use super::{CompactionError, CompactionReport, Compactor, Lease};
use crate::catalog::{CatalogError, DAY_LEVEL, DayCommit, STALE_DAY_LEVEL, SegmentMeta, TableKind};
use crate::compaction::merge::filter_rows;
use crate::model::TimeRange;
use crate::rollup::{Resolution, rollup, totals};
use crate::schema;
use crate::segment::{Tier, put_table, read_table, segment_object_key, sort_samples};
use crate::store::{Store, StoreError, blocking};

/// A day to sum, with every segment holding samples in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DayGroup {
    pub day: TimeRange,
    pub sources: Vec<SegmentMeta>,
}

/// What the days of `segments` (a tenant's whole listing) need at `now`: the stale day
/// segments to remove, and the days to sum.
pub fn plan(
    segments: &[SegmentMeta],
    now: i64,
    policy: &Policy,
    mode: CompactMode,
) -> (Vec<SegmentMeta>, Vec<DayGroup>) {
    let day = Resolution::Day.step_nanos();
    let settle = i64::try_from(policy.settle.as_nanos()).unwrap_or(i64::MAX);
    let mut stale = Vec::new();
    let mut summed: std::collections::HashSet<i64> = std::collections::HashSet::new();
    let mut days: BTreeMap<i64, Vec<&SegmentMeta>> = BTreeMap::new();
    for s in segments {
        match s.level {
            DAY_LEVEL => {
                summed.insert(s.day().start);
            }
            STALE_DAY_LEVEL => stale.push(s.clone()),
            _ => {
                // A segment straddling midnight has samples in both days.
                let mut start = Resolution::Day.bucket(s.min_time);
                while start <= s.max_time {
                    days.entry(start).or_default().push(s);
                    start = start.saturating_add(day);
                }
            }
        }
    }
    let groups = days
        .into_iter()
        .filter(|(start, _)| !summed.contains(start))
        .filter(|(start, _)| {
            mode == CompactMode::Full || start.saturating_add(day).saturating_add(settle) <= now
        })
        .filter(|(_, sources)| summable(sources, policy.max_block_rows))
        .map(|(start, sources)| DayGroup {
            day: TimeRange {
                start,
                end: start.saturating_add(day),
            },
            sources: sources.into_iter().cloned().collect(),
        })
        .collect();
    (stale, groups)
}

/// Whether a day's segments are worth summing now: at least two hour blocks, all with
/// their hour rollup and all holding the same tiers, whose hour rollups fit one merge.
fn summable(sources: &[&SegmentMeta], max_rows: u64) -> bool {
    let Some(first) = sources.first() else {
        return false;
    };
    let tiers = first.resolutions();
    let rows: u64 = sources
        .iter()
        .filter_map(|s| s.object(TableKind::Rollup1h))
        .map(|o| o.rows)
        .sum();
    sources.len() >= 2
        && rows <= max_rows
        && sources
            .iter()
            .all(|s| s.level == TOP_LEVEL && s.has(Resolution::Hour) && s.resolutions() == tiers)
}

/// Removes the stale day segments and sums the days that are due.
pub(super) async fn compact(
    compactor: &Compactor,
    tenant: &str,
    segments: &[SegmentMeta],
    mode: CompactMode,
    lease: &Lease,
) -> Result<CompactionReport, CompactionError> {
    let now = compactor.clock().now_nanos();
    let (stale, groups) = plan(segments, now, &compactor.config().policy, mode);
    let mut report = CompactionReport::default();
    if !stale.is_empty() {
        report.add_from(compactor.replace(tenant, &stale, Vec::new(), None, lease).await?);
    }
    for group in groups {
        lease.renew().await?;
        let segment = sum_day(compactor.store(), tenant, &group, now).await?;
        let commit = DayCommit {
            sources: group.sources.iter().map(|s| s.id.clone()).collect(),
            segment,
            delete_after_nanos: compactor.deletion_deadline(),
        };
        match lease.commit(compactor.catalog().commit_day(&commit)).await {
            Ok(()) => report.days_summed += 1,
            Err(e) => {
                for object in &commit.segment.objects {
                    let _ = compactor.store().delete(&object.key).await;
                }
                match e {
                    CompactionError::Catalog(CatalogError::Conflict(reason)) => {
                        // A segment arrived in the day meanwhile; a later pass sums it.
                        tracing::info!(%tenant, %reason, "day segment dropped");
                        report.conflicts += 1;
                    }
                    e => return Err(e),
                }
            }
        }
    }
    Ok(report)
}

/// Sums the hour rollups of `group`'s sources inside its day and writes the day rollup, its
/// totals and the day's hour totals as a new day segment (not listed yet). The hour totals
/// are what a time series stepped by the hour reads of a whole day: one object instead of
/// its 24 blocks'.
async fn sum_day(
    store: &Store,
    tenant: &str,
    group: &DayGroup,
    created_at_nanos: i64,
) -> Result<SegmentMeta, StoreError> {
    let mut parts = Vec::new();
    for source in &group.sources {
        let object = source
            .object(TableKind::Rollup1h)
            .expect("summable days' sources hold their hour rollup");
        parts.extend(read_table(store, TableKind::Rollup1h, object).await?);
    }
    let day = group.day;
    let tables = blocking("summing a day", move || {
        let table = concat_batches(&schema::ROLLUP, &parts)?;
        drop(parts);
        let inside = sort_samples(&filter_rows(&table, |_, t| day.start <= t && t < day.end)?)?;
        let hourly = totals(&inside)?;
        let summed = rollup(&inside, Resolution::Day)?;
        let daily = totals(&summed)?;
        Ok::<_, StoreError>([
            (TableKind::Rollup1d, summed),
            (TableKind::Totals1d, daily),
            (TableKind::Totals1h, hourly),
        ])
    })
    .await?;
    let id = uuid::Uuid::now_v7().to_string();
    let mut objects = Vec::new();
    for (kind, table) in tables {
        let key = segment_object_key(tenant, &id, kind);
        objects.push(put_table(store, key, kind, Tier::Compacted, table).await?);
    }
    let min_time = group
        .sources
        .iter()
        .map(|s| s.min_time)
        .min()
        .unwrap_or(day.start);
    let max_time = group
        .sources
        .iter()
        .map(|s| s.max_time)
        .max()
        .unwrap_or(day.end - 1);
    Ok(SegmentMeta {
        id,
        tenant: tenant.to_string(),
        min_time: min_time.max(day.start),
        max_time: max_time.min(day.end - 1),
        level: DAY_LEVEL,
        created_at_nanos,
        objects,
        series: Vec::new(),
    })
}
