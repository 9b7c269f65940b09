//! Retention, per tier: a tenant keeps its samples (the raw tier) for a while, their minute
//! rollups longer, their hour rollups longest ([`crate::rollup`]). The rule, per segment
//! and tier, finest first: a tier's object goes once the segment's last sample is older
//! than the tier's cutoff and every finer object of the segment has gone. So
//!
//! - a segment entirely before the raw cutoff loses its samples object and keeps its
//!   rollups (computed from the samples first when it has none yet, so dropping samples
//!   never drops what the longer tiers cover); profiles go with the samples;
//! - a segment with samples on both sides of the raw cutoff is split there: one segment
//!   with the samples at or after it (and their rollups), one with the rollups of those
//!   before it, so raw retention stays exact to the nanosecond;
//! - a segment that still has samples keeps every rollup, even when raw retention is the
//!   longer one; its minute rollup goes with its samples if the minute cutoff has passed
//!   it by then;
//! - rollups have no finer grain to cut: a segment of rollups only stays whole until its
//!   last sample is past a cutoff, so hour blocks expire by the hour;
//! - a segment with no object left is removed. A zero retention keeps its tier forever.
//!
//! The raw cutoff crosses an hour block one retention pass at a time: each split sums the
//! rollups of the part before the cutoff into the rollup segment an earlier split left in
//! that hour, so an hour ends as one segment of rollups, not one per pass.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use arrow::compute::concat_batches;

use crate::catalog::{SegmentMeta, SegmentSeries};
use crate::compaction::merge::{filter_rows, read_sorted, relist, write_block};
use crate::compaction::{CompactionError, CompactionReport, Compactor};
use crate::model::TimeRange;
use crate::per_tenant::PerTenant;
use crate::rollup::{Resolution, rollup, write_rollups};
use crate::schema;
use crate::segment::{extents, read_table, sort_samples};
use crate::store::{Store, StoreError, blocking};

/// How long each tenant keeps each tier; zero keeps it forever.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetentionConfig {
    /// The samples themselves.
    pub raw: PerTenant<Duration>,
    /// Their sums per minute.
    pub minute: PerTenant<Duration>,
    /// Their sums per hour.
    pub hour: PerTenant<Duration>,
}

/// The raw retention of a tenant no flag names.
pub const DEFAULT_RAW_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);
/// The minute-rollup retention of a tenant no flag names.
pub const DEFAULT_MINUTE_RETENTION: Duration = Duration::from_secs(30 * 24 * 3600);
/// The hour-rollup retention of a tenant no flag names.
pub const DEFAULT_HOUR_RETENTION: Duration = Duration::from_secs(400 * 24 * 3600);

impl Default for RetentionConfig {
    fn default() -> Self {
        RetentionConfig {
            raw: PerTenant::uniform(DEFAULT_RAW_RETENTION),
            minute: PerTenant::uniform(DEFAULT_MINUTE_RETENTION),
            hour: PerTenant::uniform(DEFAULT_HOUR_RETENTION),
        }
    }
}

impl RetentionConfig {
    /// The same retention for every tier of every tenant.
    pub fn uniform(keep: Duration) -> RetentionConfig {
        RetentionConfig::new(keep, &[])
    }

    /// The same retention for every tier: `default`, and that of `overrides` for their
    /// tenants.
    pub fn new(default: Duration, overrides: &[(String, Duration)]) -> RetentionConfig {
        let tier = PerTenant::new(default, overrides);
        RetentionConfig {
            raw: tier.clone(),
            minute: tier.clone(),
            hour: tier,
        }
    }

    /// The retention of the tier of `resolution`.
    pub fn of(&self, resolution: Resolution) -> &PerTenant<Duration> {
        match resolution {
            Resolution::Raw => &self.raw,
            Resolution::Minute => &self.minute,
            // Day segments go with the hour blocks they sum.
            Resolution::Hour | Resolution::Day => &self.hour,
        }
    }

    /// The cutoffs of `tenant` at `now` (unix nanos).
    pub fn cutoffs(&self, tenant: &str, now: i64) -> Cutoffs {
        let [raw, minute, hour] = Resolution::BLOCK.map(|r| self.of(r).cutoff(tenant, now));
        Cutoffs { raw, minute, hour }
    }
}

impl PerTenant<Duration> {
    /// The oldest time (unix nanos) `tenant` keeps at `now`, or `None` when it keeps
    /// everything.
    pub fn cutoff(&self, tenant: &str, now: i64) -> Option<i64> {
        let keep = self.of(tenant);
        if keep.is_zero() {
            return None;
        }
        Some(now.saturating_sub(i64::try_from(keep.as_nanos()).unwrap_or(i64::MAX)))
    }
}

/// The oldest time (unix nanos) each tier keeps; `None` keeps the tier forever.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cutoffs {
    pub raw: Option<i64>,
    pub minute: Option<i64>,
    pub hour: Option<i64>,
}

impl Cutoffs {
    /// One cutoff for every tier: nothing before it stays.
    pub fn all(cutoff: i64) -> Cutoffs {
        Cutoffs {
            raw: Some(cutoff),
            minute: Some(cutoff),
            hour: Some(cutoff),
        }
    }

    pub fn of(&self, resolution: Resolution) -> Option<i64> {
        match resolution {
            Resolution::Raw => self.raw,
            Resolution::Minute => self.minute,
            Resolution::Hour | Resolution::Day => self.hour,
        }
    }

    /// The latest cutoff, `None` when every tier is kept forever.
    fn latest(&self) -> Option<i64> {
        Resolution::ALL.into_iter().filter_map(|r| self.of(r)).max()
    }

    /// Which of `present` (finest first) a segment whose last sample is at `max_time`
    /// keeps: each goes once its cutoff has passed `max_time` and every finer one has
    /// gone (the rule of this module).
    pub fn kept(&self, max_time: i64, present: &[Resolution]) -> Vec<Resolution> {
        let mut kept = Vec::new();
        for &r in present {
            let expired = kept.is_empty() && self.of(r).is_some_and(|cutoff| max_time < cutoff);
            if !expired {
                kept.push(r);
            }
        }
        kept
    }
}

/// What retention does with one segment.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Fate {
    Keep,
    /// Nothing of it is left.
    Remove,
    /// It has samples on both sides of the raw cutoff.
    Split(i64),
    /// It becomes a segment of the same extent with only the objects of `kept`, those of
    /// `computed` computed from its samples first.
    Relist {
        kept: Vec<Resolution>,
        computed: Vec<Resolution>,
    },
}

fn fate(segment: &SegmentMeta, cutoffs: &Cutoffs) -> Fate {
    let raw = segment.has(Resolution::Raw);
    if let Some(cutoff) = cutoffs.raw
        && raw
        && segment.min_time < cutoff
        && cutoff <= segment.max_time
    {
        return Fate::Split(cutoff);
    }
    let present = segment.resolutions();
    // While it has samples, a segment can still compute the rollups it lacks.
    let available: &[Resolution] = if raw { &Resolution::BLOCK } else { &present };
    let kept = cutoffs.kept(segment.max_time, available);
    if kept.is_empty() {
        return Fate::Remove;
    }
    if kept.contains(&Resolution::Raw) || kept == present {
        return Fate::Keep;
    }
    let (kept, computed) = kept.into_iter().partition(|r| present.contains(r));
    Fate::Relist { kept, computed }
}

/// Applies retention to every tenant; tenants another process holds are skipped this time.
pub async fn run_once(
    compactor: &Compactor,
    config: &RetentionConfig,
) -> Result<CompactionReport, CompactionError> {
    let mut report = CompactionReport::default();
    for tenant in compactor.catalog().tenants().await? {
        let cutoffs = config.cutoffs(&tenant, compactor.clock().now_nanos());
        if cutoffs.latest().is_none() {
            continue;
        }
        match expire_tiers(compactor, &tenant, cutoffs).await {
            Ok(r) => report.add_from(r),
            Err(CompactionError::Busy(_)) => {}
            Err(e) => tracing::warn!(%tenant, error = %e, "retention failed"),
        }
    }
    Ok(report)
}

/// Removes everything of `tenant` before `cutoff` (unix nanos), samples and rollups alike.
pub async fn expire(
    compactor: &Compactor,
    tenant: &str,
    cutoff: i64,
) -> Result<CompactionReport, CompactionError> {
    expire_tiers(compactor, tenant, Cutoffs::all(cutoff)).await
}

/// Removes what each tier of `tenant` keeps no longer at `cutoffs`, by the rule of this
/// module.
pub async fn expire_tiers(
    compactor: &Compactor,
    tenant: &str,
    cutoffs: Cutoffs,
) -> Result<CompactionReport, CompactionError> {
    let Some(latest) = cutoffs.latest() else {
        return Ok(CompactionReport::default());
    };
    let catalog = compactor.catalog();
    let lease = compactor.lease(tenant).await?;
    let result = async {
        // Day segments are not cut: the swaps below make those of their days stale, and
        // compaction removes or rebuilds them.
        let old: Vec<SegmentMeta> = catalog
            .segments(
                tenant,
                TimeRange {
                    start: i64::MIN,
                    end: latest,
                },
            )
            .await?
            .into_iter()
            .filter(|s| !s.is_day())
            .collect();
        let fates: Vec<Fate> = old.iter().map(|s| fate(s, &cutoffs)).collect();
        let mut report = CompactionReport::default();
        let mut removed = Vec::new();
        let mut absorbed_ids: HashSet<&str> = HashSet::new();
        for (segment, fate) in old.iter().zip(&fates) {
            match fate {
                Fate::Keep => continue,
                Fate::Remove => {
                    removed.push(segment.clone());
                    continue;
                }
                Fate::Split(_) | Fate::Relist { .. } => {}
            }
            lease.renew().await?;
            let (gone, added) = match fate {
                Fate::Split(cutoff) => {
                    let hour = Resolution::Hour.bucket(segment.min_time);
                    let candidates: Vec<&SegmentMeta> = old
                        .iter()
                        .zip(&fates)
                        .filter(|(s, f)| {
                            **f == Fate::Keep
                                && !s.has(Resolution::Raw)
                                && Resolution::Hour.bucket(s.min_time) == hour
                                && !absorbed_ids.contains(s.id.as_str())
                        })
                        .map(|(s, _)| s)
                        .collect();
                    let split = split(
                        compactor.store(),
                        segment,
                        *cutoff,
                        &cutoffs,
                        &candidates,
                        compactor.clock().now_nanos(),
                    )
                    .await?;
                    absorbed_ids.extend(split.absorbed.iter().map(|s| s.id.as_str()));
                    let mut gone = vec![segment.clone()];
                    gone.extend(split.absorbed.into_iter().cloned());
                    (gone, split.added)
                }
                Fate::Relist { kept, computed } => (
                    vec![segment.clone()],
                    vec![
                        relist(
                            compactor.store(),
                            segment,
                            compactor.clock().now_nanos(),
                            kept,
                            computed,
                        )
                        .await?,
                    ],
                ),
                Fate::Keep | Fate::Remove => unreachable!("handled above"),
            };
            report.add_from(
                compactor
                    .replace(tenant, &gone, added, cutoffs.raw, &lease)
                    .await?,
            );
        }
        if !removed.is_empty() {
            report.add_from(
                compactor
                    .replace(tenant, &removed, Vec::new(), cutoffs.raw, &lease)
                    .await?,
            );
        }
        Ok(report)
    }
    .await;
    lease.release().await;
    result
}

/// What replaces a segment whose samples straddle the raw cutoff.
struct Split<'a> {
    /// Rollup segments of its hour whose rollups the new rollup segment sums in.
    absorbed: Vec<&'a SegmentMeta>,
    /// The samples at or after the cutoff with their rollups, then the rollups the tiers
    /// keep of the samples before it.
    added: Vec<SegmentMeta>,
}

/// Splits `segment` at the raw `cutoff` into segments created at `created_at_nanos`. Of
/// `candidates` (rollup segments of its hour that retention keeps as they are), those with
/// the tiers the part before the cutoff keeps are summed into that part's rollup segment.
async fn split<'a>(
    store: &Store,
    segment: &SegmentMeta,
    cutoff: i64,
    cutoffs: &Cutoffs,
    candidates: &[&'a SegmentMeta],
    created_at_nanos: i64,
) -> Result<Split<'a>, StoreError> {
    let table = read_sorted(store, std::slice::from_ref(segment)).await?;
    let (before, after) = (
        filter_rows(&table, |_, t| t < cutoff)?,
        filter_rows(&table, |_, t| t >= cutoff)?,
    );
    drop(table);
    let tenant = &segment.tenant;
    let mut split = Split {
        absorbed: Vec::new(),
        added: vec![
            write_block(
                store,
                tenant,
                segment.level,
                created_at_nanos,
                after,
                &Resolution::ROLLUPS,
            )
            .await?,
        ],
    };
    let Some((min_time, max_time, series)) = extents(&before) else {
        return Ok(split);
    };
    let kept = cutoffs.kept(max_time, &Resolution::BLOCK);
    let Some(&finest) = kept.first() else {
        return Ok(split);
    };
    split.absorbed = candidates
        .iter()
        .copied()
        .filter(|s| s.resolutions() == kept)
        .collect();
    let mut parts = Vec::new();
    for s in &split.absorbed {
        let object = s
            .object(finest.kind())
            .expect("absorbed segments hold the kept tiers");
        parts.extend(read_table(store, finest.kind(), object).await?);
    }
    // The part's rollup and the absorbed ones, summed again as one table.
    let summed = blocking("summing rollups", move || {
        parts.push(rollup(&before, finest)?);
        sort_samples(&concat_batches(&schema::ROLLUP, &parts)?)
    })
    .await?;
    let id = uuid::Uuid::now_v7().to_string();
    let objects = write_rollups(store, tenant, &id, &summed, &kept).await?;
    let absorbed = || split.absorbed.iter();
    let rollups = SegmentMeta {
        id,
        tenant: tenant.clone(),
        min_time: absorbed().map(|s| s.min_time).fold(min_time, i64::min),
        max_time: absorbed().map(|s| s.max_time).fold(max_time, i64::max),
        level: segment.level,
        created_at_nanos,
        objects,
        series: merged_series(series.iter().chain(absorbed().flat_map(|s| &s.series))),
    };
    split.added.push(rollups);
    Ok(split)
}

/// Per-series extents of segments put together, by series id.
fn merged_series<'a>(parts: impl Iterator<Item = &'a SegmentSeries>) -> Vec<SegmentSeries> {
    let mut by_id: BTreeMap<i64, SegmentSeries> = BTreeMap::new();
    for s in parts {
        by_id
            .entry(s.series_id)
            .and_modify(|m| {
                m.min_time = m.min_time.min(s.min_time);
                m.max_time = m.max_time.max(s.max_time);
                m.samples += s.samples;
            })
            .or_insert_with(|| s.clone());
    }
    by_id.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::ObjectMeta;

    const R: Resolution = Resolution::Raw;
    const M: Resolution = Resolution::Minute;
    const H: Resolution = Resolution::Hour;

    fn segment(min_time: i64, max_time: i64, resolutions: &[Resolution]) -> SegmentMeta {
        SegmentMeta {
            id: "s".into(),
            tenant: "t".into(),
            min_time,
            max_time,
            level: 2,
            created_at_nanos: 0,
            objects: resolutions
                .iter()
                .map(|r| ObjectMeta {
                    kind: r.kind(),
                    key: r.kind().as_str().into(),
                    size_bytes: 1,
                    rows: 1,
                })
                .collect(),
            series: vec![],
        }
    }

    fn cutoffs(raw: Option<i64>, minute: Option<i64>, hour: Option<i64>) -> Cutoffs {
        Cutoffs { raw, minute, hour }
    }

    fn relist(kept: &[Resolution], computed: &[Resolution]) -> Fate {
        Fate::Relist {
            kept: kept.to_vec(),
            computed: computed.to_vec(),
        }
    }

    #[test]
    fn raw_expiry_keeps_the_rollups_and_computes_missing_ones() {
        let c = cutoffs(Some(100), Some(50), Some(10));
        assert_eq!(fate(&segment(0, 99, &[R, M, H]), &c), relist(&[M, H], &[]));
        assert_eq!(fate(&segment(0, 99, &[R]), &c), relist(&[], &[M, H]));
        assert_eq!(fate(&segment(100, 200, &[R]), &c), Fate::Keep);
        assert_eq!(fate(&segment(50, 150, &[R]), &c), Fate::Split(100));
        assert_eq!(fate(&segment(99, 100, &[R, M, H]), &c), Fate::Split(100));
        // The minute cutoff has passed too: the minute rollup goes with the samples.
        assert_eq!(fate(&segment(0, 49, &[R, M, H]), &c), relist(&[H], &[]));
        assert_eq!(fate(&segment(0, 49, &[R]), &c), relist(&[], &[H]));
        assert_eq!(fate(&segment(0, 9, &[R]), &c), Fate::Remove);
    }

    #[test]
    fn rollups_expire_finest_first_and_by_the_whole_segment() {
        let c = cutoffs(Some(100), Some(50), Some(10));
        assert_eq!(fate(&segment(0, 60, &[M, H]), &c), Fate::Keep);
        assert_eq!(fate(&segment(0, 49, &[M, H]), &c), relist(&[H], &[]));
        // Straddling a rollup cutoff: kept whole.
        assert_eq!(fate(&segment(0, 10, &[H]), &c), Fate::Keep);
        assert_eq!(fate(&segment(0, 9, &[H]), &c), Fate::Remove);
        assert_eq!(fate(&segment(0, 9, &[M, H]), &c), Fate::Remove);
    }

    #[test]
    fn raw_kept_longer_keeps_every_rollup_and_zero_keeps_forever() {
        // Raw 100 s, rollups shorter: a segment with samples keeps everything.
        let c = cutoffs(Some(10), Some(50), Some(50));
        assert_eq!(fate(&segment(20, 40, &[R, M, H]), &c), Fate::Keep);
        assert_eq!(fate(&segment(0, 9, &[R, M, H]), &c), Fate::Remove);
        let forever = cutoffs(None, None, None);
        assert_eq!(fate(&segment(0, 1, &[M, H]), &forever), Fate::Keep);
        assert_eq!(fate(&segment(0, 1, &[R]), &forever), Fate::Keep);
        // Minute rollups kept forever: the hour ones behind them stay too.
        let minute_forever = cutoffs(Some(100), None, Some(100));
        assert_eq!(
            fate(&segment(0, 1, &[R, M, H]), &minute_forever),
            relist(&[M, H], &[])
        );
        assert_eq!(fate(&segment(0, 1, &[M, H]), &minute_forever), Fate::Keep);
        // Raw kept forever: nothing ever goes.
        let raw_forever = cutoffs(None, Some(100), Some(100));
        assert_eq!(fate(&segment(0, 1, &[R]), &raw_forever), Fate::Keep);
    }

    #[test]
    fn config_cutoffs_follow_each_tier() {
        let config = RetentionConfig {
            raw: PerTenant::new(Duration::from_nanos(10), &[("a".into(), Duration::ZERO)]),
            minute: PerTenant::uniform(Duration::from_nanos(20)),
            hour: PerTenant::uniform(Duration::ZERO),
        };
        assert_eq!(config.cutoffs("b", 100), cutoffs(Some(90), Some(80), None));
        assert_eq!(config.cutoffs("a", 100), cutoffs(None, Some(80), None));
        assert_eq!(
            RetentionConfig::uniform(Duration::from_nanos(1)).cutoffs("x", 5),
            Cutoffs::all(4)
        );
        let defaults = RetentionConfig::default();
        assert_eq!(defaults.raw.of("x"), DEFAULT_RAW_RETENTION);
        assert_eq!(defaults.of(Resolution::Minute).of("x"), DEFAULT_MINUTE_RETENTION);
        assert_eq!(defaults.hour.of("x"), DEFAULT_HOUR_RETENTION);
    }
}
