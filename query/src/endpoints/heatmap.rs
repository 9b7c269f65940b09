//! A heatmap: per time slot, how many profiles (or spans) had a value in each value
//! bucket, with the largest of each cell as its exemplar.
//!
//! The value buckets are Pyroscope's (`pkg/querybackend/heatmap`): [`Y_BUCKETS`] linear
//! buckets from the smallest to the largest value over every series of the answer
//! (`max = min + 1` when all values are equal). Bucket `i` starts at
//! `min + trunc(i * (max - min) / Y_BUCKETS)` and covers `[its start, the next one's)`;
//! the last also holds `max`. Narrow ranges therefore give empty buckets of zero width,
//! which count nothing, as in Pyroscope. Every slot lists every bucket.
//!
//! Pyroscope reads it as `SelectHeatmap`.

use stackhouse_proto::pyroscope_querier::{HeatmapQueryType, SelectHeatmapRequest, SelectHeatmapResponse};
use stackhouse_proto::pyroscope_types::{self, HeatmapSeries, LabelPair};

use crate::endpoints::exemplars::{Exemplar, ExemplarGroup, ExemplarKind, Exemplars, ExemplarsQuery};
use crate::engine::QueryEngine;
use crate::error::QueryError;
use crate::pyroscope::exemplars::{self, step_nanos};
use crate::pyroscope::scope::series_scope;
use crate::pyroscope::{Caller, NANOS_PER_MILLI};
use crate::stack_filter::StackFilter;

/// Pyroscope's `DefaultYAxisBuckets`.
pub const Y_BUCKETS: usize = 20;

#[derive(Clone, Debug, PartialEq)]
pub struct Heatmap {
    /// The start of each value bucket, shared by every slot.
    pub y_min: Vec<i64>,
    pub series: Vec<HeatmapGroup>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct HeatmapGroup {
    /// As [`ExemplarGroup::group`].
    pub group: Vec<String>,
    /// In time order; slots without any profile are absent.
    pub slots: Vec<HeatmapSlot>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct HeatmapSlot {
    /// Start of the slot, unix nanoseconds.
    pub bucket_start: i64,
    /// Per value bucket.
    pub counts: Vec<i32>,
    /// The largest of each non-empty cell, in value bucket order.
    pub exemplars: Vec<Exemplar>,
}

/// The value buckets' starts and ends for values in `[min, max]`.
fn y_buckets(min: i64, max: i64) -> Vec<(i64, i64)> {
    let max = if min == max { min + 1 } else { max };
    let size = (max - min) as f64 / Y_BUCKETS as f64;
    let mut buckets: Vec<(i64, i64)> = (0..Y_BUCKETS)
        .map(|i| {
            (
                min + (i as f64 * size) as i64,
                min + ((i + 1) as f64 * size) as i64,
            )
        })
        .collect();
    buckets[Y_BUCKETS - 1].1 = max;
    buckets
}

fn y_bucket(value: i64, buckets: &[(i64, i64)]) -> Option<usize> {
    buckets
        .iter()
        .position(|&(start, end)| value >= start && value < end)
        .or_else(|| {
            let last = buckets.len().checked_sub(1)?;
            (value >= buckets[last].0).then_some(last)
        })
}

/// The heatmap of the first `limit` groups of `exemplars` (all when `None`).
pub fn heatmap(exemplars: &Exemplars, limit: Option<usize>) -> Heatmap {
    let groups: &[ExemplarGroup] =
        &exemplars.groups[..limit.map_or(exemplars.groups.len(), |l| l.min(exemplars.groups.len()))];
    let values = groups.iter().flat_map(|g| g.exemplars.iter().map(|e| e.value));
    let (Some(min), Some(max)) = (values.clone().min(), values.max()) else {
        return Heatmap {
            y_min: Vec::new(),
            series: Vec::new(),
        };
    };
    let buckets = y_buckets(min, max);
    let series = groups
        .iter()
        .map(|g| {
            let mut slots: Vec<HeatmapSlot> = Vec::new();
            let mut best: Vec<Option<&Exemplar>> = vec![None; Y_BUCKETS];
            // Exemplars come by bucket, largest first: a cell's first is its largest.
            for e in &g.exemplars {
                if slots.last().is_none_or(|s| s.bucket_start != e.bucket_start) {
                    flush(&mut slots, &mut best);
                    slots.push(HeatmapSlot {
                        bucket_start: e.bucket_start,
                        counts: vec![0; Y_BUCKETS],
                        exemplars: Vec::new(),
                    });
                }
                let Some(y) = y_bucket(e.value, &buckets) else {
                    continue;
                };
                let slot = slots.last_mut().expect("pushed above");
                slot.counts[y] += 1;
                best[y].get_or_insert(e);
            }
            flush(&mut slots, &mut best);
            HeatmapGroup {
                group: g.group.clone(),
                slots,
            }
        })
        .collect();
    Heatmap {
        y_min: buckets.iter().map(|b| b.0).collect(),
        series,
    }
}

/// Moves the cells' largest into the last slot.
fn flush(slots: &mut [HeatmapSlot], best: &mut [Option<&Exemplar>]) {
    if let Some(slot) = slots.last_mut() {
        slot.exemplars = best.iter_mut().filter_map(Option::take).cloned().collect();
    }
}

/// Pyroscope's `SelectHeatmap`: how the profiles (INDIVIDUAL) or spans (SPAN) of each time
/// slot are distributed over their totals, per `group_by` series, as Grafana's heatmap panel
/// reads it. Slots are the buckets `SelectSeries` uses, stamped with their right edge; the
/// value buckets are [`heatmap`]'s; each non-empty cell carries its largest profile or span
/// as exemplar when `exemplar_type` asks for exemplars. `limit` keeps the series with the
/// largest totals. A heatmap needs raw samples (profile and span ids): a range whose raw
/// samples are gone is refused.
pub async fn select_heatmap(
    engine: &QueryEngine,
    call: &Caller,
    r: SelectHeatmapRequest,
) -> Result<SelectHeatmapResponse, QueryError> {
    engine
        .bounded("exemplars", async move {
            let step = step_nanos(r.step)?;
            let kind = match HeatmapQueryType::try_from(r.query_type) {
                Ok(HeatmapQueryType::Unspecified | HeatmapQueryType::Individual) => ExemplarKind::Profile,
                Ok(HeatmapQueryType::Span) => ExemplarKind::Span,
                Err(_) => {
                    return Err(QueryError::bad_request(format!(
                        "unknown heatmap query_type {}",
                        r.query_type
                    )));
                }
            };
            let limit = match r.limit {
                Some(l) if l < 0 => {
                    return Err(QueryError::bad_request(format!(
                        "limit must not be negative, got {l}"
                    )));
                }
                Some(l) if l > 0 => Some(usize::try_from(l).unwrap_or(usize::MAX)),
                _ => None,
            };
            let (scope, group_by) = series_scope(
                engine,
                call,
                &r.profile_type_id,
                &r.label_selector,
                (r.start, r.end),
                &r.group_by,
            )
            .await?;
            let query = ExemplarsQuery {
                scope,
                step_nanos: step,
                group_by,
                kind,
            };
            let found = engine.exemplars(&query, &StackFilter::default()).await?;
            let map = heatmap(&found, limit);
            let with_exemplars = exemplars::kind(r.exemplar_type).is_some();
            let y_min: Vec<f64> = map.y_min.iter().map(|&y| y as f64).collect();
            let series = map
                .series
                .into_iter()
                .map(|g| HeatmapSeries {
                    labels: r
                        .group_by
                        .iter()
                        .zip(g.group)
                        .filter(|(_, value)| !value.is_empty())
                        .map(|(name, value)| LabelPair {
                            name: name.clone(),
                            value,
                        })
                        .collect(),
                    slots: g
                        .slots
                        .into_iter()
                        .map(|slot| pyroscope_types::HeatmapSlot {
                            timestamp: (slot.bucket_start + step) / NANOS_PER_MILLI,
                            y_min: y_min.clone(),
                            counts: slot.counts,
                            exemplars: if with_exemplars {
                                slot.exemplars
                                    .iter()
                                    .map(|e| exemplars::to_wire(e, &found, &r.group_by, call.utf8_names))
                                    .collect()
                            } else {
                                Vec::new()
                            },
                        })
                        .collect(),
                })
                .collect();
            Ok(SelectHeatmapResponse { series })
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoints::exemplars::profile_exemplar as e;

    #[test]
    fn buckets_are_pyroscopes() {
        let b = y_buckets(0, 100);
        assert_eq!(b[0], (0, 5));
        assert_eq!(b[19], (95, 100));
        assert_eq!(y_bucket(100, &b), Some(19));
        assert_eq!(y_bucket(4, &b), Some(0));
        assert_eq!(y_bucket(5, &b), Some(1));
        // Equal values: one unit wide, all in the last non-empty bucket.
        let b = y_buckets(7, 7);
        assert_eq!(b[0], (7, 7));
        assert_eq!(y_bucket(7, &b), Some(19));
        // Narrow: zero-width buckets count nothing.
        let b = y_buckets(0, 5);
        assert_eq!(b[3], (0, 1));
        assert_eq!(y_bucket(0, &b), Some(3));
    }

    #[test]
    fn counts_and_the_largest_per_cell() {
        let exemplars = Exemplars {
            step_nanos: 10,
            groups: vec![ExemplarGroup {
                group: Vec::new(),
                // by bucket, largest first
                exemplars: vec![e(0, 1, 100), e(0, 2, 98), e(0, 3, 0), e(10, 4, 50)],
                total: 248,
            }],
            series: Default::default(),
        };
        let h = heatmap(&exemplars, None);
        assert_eq!(h.y_min.len(), Y_BUCKETS);
        assert_eq!(h.y_min[0], 0);
        assert_eq!(h.y_min[10], 50);
        let slots = &h.series[0].slots;
        assert_eq!(slots.len(), 2);
        assert_eq!(slots[0].counts[19], 2);
        assert_eq!(slots[0].counts[0], 1);
        assert_eq!(slots[0].counts.iter().sum::<i32>(), 3);
        let ids: Vec<i64> = slots[0].exemplars.iter().map(|x| x.value).collect();
        assert_eq!(ids, [0, 100], "one per cell, in bucket order");
        assert_eq!(slots[1].counts[10], 1);
        assert_eq!(heatmap(&exemplars, Some(0)).series.len(), 0);
    }
}
