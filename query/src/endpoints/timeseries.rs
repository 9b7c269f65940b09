//! `timeseries`: values bucketed by step, one series per group. The query API reads it as
//! `GET /api/v1/timeseries`; Pyroscope as `SelectSeries`, with exemplars on its points.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;
use stackhouse_proto::pyroscope_querier::{SelectSeriesRequest, SelectSeriesResponse};
use stackhouse_proto::pyroscope_types::{Point, Series, TimeSeriesAggregationType};
use stackhouse_storage::model::TimeRange;
use utoipa::ToSchema;

use crate::endpoints::exemplars::{EXEMPLARS_PER_POINT, Exemplar, Exemplars, ExemplarsQuery};
use crate::engine::QueryEngine;
use crate::engine::aggregate::Dim;
use crate::engine::grouping::{group_values, too_many_groups};
use crate::engine::plan::Needs;
use crate::engine::scope::{GroupKey, Scope};
use crate::error::QueryError;
use crate::limits::exceeded;
use crate::pyroscope::scope::{pairs, series_scope, stack_filter};
use crate::pyroscope::{Caller, NANOS_PER_MILLI, exemplars};
use crate::request::ScopeRequest;
use crate::stack_filter::StackFilter;
use crate::types::{ProfileTypeInfo, ScanStats};

/// Buckets a time series gets at most when no step is given.
const DEFAULT_BUCKETS: i64 = 1000;
const NANOS_PER_SEC: i64 = 1_000_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Aggregation {
    /// The sum of the values in the bucket.
    Sum,
    /// The mean over the bucket's points, a point being what one series recorded at one
    /// timestamp (one aggregated profile, or one timestamped sample).
    Avg,
}

impl Aggregation {
    pub fn parse(value: &str) -> Option<Aggregation> {
        match value {
            "sum" => Some(Aggregation::Sum),
            "avg" | "average" => Some(Aggregation::Avg),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
pub struct TimeseriesGroup {
    /// The `group_by` keys and their values (`""` for samples without the key); empty
    /// without `group_by`.
    pub group: BTreeMap<String, String>,
    /// `[bucket start in unix nanoseconds, value]`, in time order; buckets without samples
    /// are absent.
    #[schema(value_type = Vec<Vec<f64>>)]
    pub points: Vec<(i64, f64)>,
    /// Sum of the points' values (for `avg`, of the bucket sums).
    pub total: i64,
}

#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
pub struct Timeseries {
    #[serde(flatten)]
    pub kind: ProfileTypeInfo,
    pub unit: String,
    /// Start of the first bucket; bucket `i` covers `[from + i*step, from + (i+1)*step)`.
    pub from: i64,
    pub to: i64,
    pub step_nanos: i64,
    pub aggregation: Aggregation,
    pub group_by: Vec<String>,
    /// Sorted by total, largest first, then by group.
    pub series: Vec<TimeseriesGroup>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stats: Option<ScanStats>,
}

#[derive(Clone, Debug)]
pub struct TimeseriesQuery {
    pub scope: Scope,
    pub step_nanos: i64,
    pub group_by: Vec<GroupKey>,
    pub aggregation: Aggregation,
}

impl QueryEngine {
    /// Values bucketed by `step`, one series per group.
    pub async fn timeseries(&self, q: &TimeseriesQuery) -> Result<Timeseries, QueryError> {
        self.filtered_timeseries(q, &StackFilter::default()).await
    }

    /// [`QueryEngine::timeseries`] of only the stacks `stacks` keeps.
    pub async fn filtered_timeseries(
        &self,
        q: &TimeseriesQuery,
        stacks: &StackFilter,
    ) -> Result<Timeseries, QueryError> {
        self.bounded("timeseries", async {
            let range = q.scope.range;
            if q.step_nanos <= 0 {
                return Err(QueryError::InvalidArgument(format!(
                    "step must be positive, got {} ns",
                    q.step_nanos
                )));
            }
            if range.start < range.end {
                let span = range.end as i128 - range.start as i128;
                let points = (span + q.step_nanos as i128 - 1) / q.step_nanos as i128;
                if points > self.limits.max_points as i128 {
                    return Err(exceeded(
                        "max_points",
                        format!(
                            "step {} ns over this range gives {points} points per series, more than {} allowed; use a larger step",
                            q.step_nanos, self.limits.max_points
                        ),
                    ));
                }
            }
            let mut result = Timeseries {
                kind: ProfileTypeInfo::from(&q.scope.profile_type),
                unit: q.scope.profile_type.sample_unit.clone(),
                from: range.start.div_euclid(q.step_nanos).saturating_mul(q.step_nanos),
                to: range.end,
                step_nanos: q.step_nanos,
                aggregation: q.aggregation,
                group_by: q.group_by.iter().map(|k| k.name().to_string()).collect(),
                series: Vec::new(),
                stats: None,
            };
            let mut dims = vec![Dim::Bucket {
                start: result.from,
                step: q.step_nanos,
            }];
            if q.aggregation == Aggregation::Avg {
                dims.extend([Dim::Series, Dim::Time]);
            }
            if !stacks.is_empty() || q.scope.frames.filters_stacks() {
                dims.push(Dim::Stack);
            }
            let Some(plan) = self.plan(&q.scope, Needs::grouped(dims, &q.group_by)).await? else {
                return Ok(result);
            };
            let (mut rows, stats) = self.aggregate(&plan).await?;
            self.retain_stacks(&q.scope.tenant, &mut rows, stacks).await?;
            self.retain_focused(&q.scope, &mut rows).await?;
            let symbols = self.symbols.loaded(&q.scope.tenant).await;
            let mut groups: HashMap<Vec<String>, BTreeMap<i64, Bucket>> = HashMap::new();
            for row in &rows {
                let key = group_values(&q.group_by, row, &plan, &symbols);
                if !groups.contains_key(&key) && groups.len() >= self.limits.max_groups {
                    return Err(too_many_groups(self.limits.max_groups));
                }
                let bucket = groups.entry(key).or_default().entry(row.bucket).or_default();
                bucket.sum += row.value;
                if q.aggregation == Aggregation::Avg {
                    bucket.points.insert((row.series_id, row.time));
                }
            }
            drop(symbols);
            result.series = groups
                .into_iter()
                .map(|(values, buckets)| TimeseriesGroup {
                    group: q
                        .group_by
                        .iter()
                        .map(|k| k.name().to_string())
                        .zip(values)
                        .collect(),
                    total: buckets.values().map(|b| b.sum).sum(),
                    points: buckets
                        .into_iter()
                        .map(|(i, b)| {
                            let value = match q.aggregation {
                                Aggregation::Sum => b.sum as f64,
                                Aggregation::Avg => b.sum as f64 / b.points.len().max(1) as f64,
                            };
                            (result.from + i * q.step_nanos, value)
                        })
                        .collect(),
                })
                .collect();
            result
                .series
                .sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.group.cmp(&b.group)));
            result.stats = Some(stats);
            Ok(result)
        })
        .await
    }
}

/// Per group and bucket: the summed value and, for `avg`, the distinct points.
#[derive(Default)]
struct Bucket {
    sum: i64,
    points: HashSet<(i64, i64)>,
}

#[derive(Clone, Debug)]
pub struct TimeseriesRequest {
    pub scope: ScopeRequest,
    /// Bucket width; without one, the smallest whole number of seconds giving at most 1000
    /// buckets over the range.
    pub step_nanos: Option<i64>,
    pub group_by: Vec<GroupKey>,
    pub aggregation: Aggregation,
}

impl QueryEngine {
    /// `GET /api/v1/timeseries`.
    pub async fn read_timeseries(&self, r: &TimeseriesRequest) -> Result<Timeseries, QueryError> {
        self.bounded("timeseries", async {
            let scope = self.resolve_scope(&r.scope).await?;
            let step_nanos = r.step_nanos.unwrap_or_else(|| default_step_nanos(scope.range));
            let query = TimeseriesQuery {
                scope,
                step_nanos,
                group_by: r.group_by.clone(),
                aggregation: r.aggregation,
            };
            self.timeseries(&query).await
        })
        .await
    }
}

/// The smallest whole number of seconds, at least one, that divides `range` into at most
/// [`DEFAULT_BUCKETS`] buckets.
pub fn default_step_nanos(range: TimeRange) -> i64 {
    let span = (range.end as i128 - range.start as i128).max(0) as u128;
    let per_bucket = span.div_ceil(DEFAULT_BUCKETS as u128);
    let secs = per_bucket.div_ceil(NANOS_PER_SEC as u128).max(1);
    i64::try_from(secs * NANOS_PER_SEC as u128).unwrap_or(i64::MAX / NANOS_PER_SEC * NANOS_PER_SEC)
}

/// Pyroscope's `SelectSeries`.
pub async fn select_series(
    engine: &QueryEngine,
    call: &Caller,
    r: SelectSeriesRequest,
) -> Result<SelectSeriesResponse, QueryError> {
    engine
        .bounded("timeseries", async move {
            let step_nanos = exemplars::step_nanos(r.step)?;
            let (scope, group_by) = series_scope(
                engine,
                call,
                &r.profile_type_id,
                &r.label_selector,
                (r.start, r.end),
                &r.group_by,
            )
            .await?;
            let aggregation = match r.aggregation.map(TimeSeriesAggregationType::try_from) {
                Some(Ok(TimeSeriesAggregationType::Average)) => Aggregation::Avg,
                _ => Aggregation::Sum,
            };
            let query = TimeseriesQuery {
                scope,
                step_nanos,
                group_by: group_by.clone(),
                aggregation,
            };
            let stacks = stack_filter(r.stack_trace_selector.as_ref())?;
            let mut timeseries = engine.filtered_timeseries(&query, &stacks).await?;
            if let Some(limit) = r.limit.filter(|&l| l > 0) {
                // Sorted by total, largest first: the top series by total are kept.
                timeseries
                    .series
                    .truncate(usize::try_from(limit).unwrap_or(usize::MAX));
            }
            let mut series: Vec<_> = timeseries
                .series
                .iter()
                .map(|s| {
                    let labels = r
                        .group_by
                        .iter()
                        .zip(&group_by)
                        .map(|(wire, key)| {
                            (wire.clone(), s.group.get(key.name()).cloned().unwrap_or_default())
                        })
                        .filter(|(_, value)| !value.is_empty());
                    stackhouse_proto::pyroscope_types::Series {
                        labels: pairs(labels),
                        points: s
                            .points
                            .iter()
                            .map(|&(bucket_start, value)| Point {
                                value,
                                // As Pyroscope: a point is stamped with its bucket's end.
                                timestamp: (bucket_start + step_nanos) / NANOS_PER_MILLI,
                                ..Default::default()
                            })
                            .collect(),
                    }
                })
                .collect();
            attach(engine, call, &r, &query, &stacks, &timeseries.series, &mut series).await?;
            Ok(SelectSeriesResponse { series })
        })
        .await
}

/// Puts on each point of `series` (built in order from `groups`) the largest profile or
/// span of its bucket, when the request's `exemplar_type` asks for them, as Pyroscope
/// spells exemplars ([`exemplars`]).
async fn attach(
    engine: &QueryEngine,
    call: &Caller,
    r: &SelectSeriesRequest,
    query: &TimeseriesQuery,
    stacks: &StackFilter,
    groups: &[TimeseriesGroup],
    series: &mut [Series],
) -> Result<(), QueryError> {
    let wire_group_by = &r.group_by;
    let Some(kind) = exemplars::kind(r.exemplar_type) else {
        return Ok(());
    };
    if series.is_empty() {
        return Ok(());
    }
    let q = ExemplarsQuery {
        scope: query.scope.clone(),
        step_nanos: query.step_nanos,
        group_by: query.group_by.clone(),
        kind,
    };
    let found = match engine.exemplars(&q, stacks).await {
        Ok(found) => found,
        Err(QueryError::RawGone(_)) => return Ok(()),
        Err(e) => return Err(e),
    };
    for (group, wire) in groups.iter().zip(series.iter_mut()) {
        let key: Vec<String> = query
            .group_by
            .iter()
            .map(|k| group.group.get(k.name()).cloned().unwrap_or_default())
            .collect();
        let Some(found_group) = found.groups.iter().find(|g| g.group == key) else {
            continue;
        };
        let top = found_group.top_per_bucket(EXEMPLARS_PER_POINT);
        for (&(bucket_start, _), point) in group.points.iter().zip(wire.points.iter_mut()) {
            add(
                point,
                top.get(&bucket_start),
                &found,
                wire_group_by,
                call.utf8_names,
            );
        }
    }
    Ok(())
}

fn add(
    point: &mut Point,
    top: Option<&Vec<&Exemplar>>,
    found: &Exemplars,
    wire_group_by: &[String],
    utf8: bool,
) {
    point.exemplars = top
        .into_iter()
        .flatten()
        .map(|e| exemplars::to_wire(e, found, wire_group_by, utf8))
        .collect();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_step_keeps_at_most_1000_buckets_in_whole_seconds() {
        let hour = TimeRange {
            start: 0,
            end: 3600 * NANOS_PER_SEC,
        };
        // 3600 s / 1000 = 3.6 s, rounded up to whole seconds.
        assert_eq!(default_step_nanos(hour), 4 * NANOS_PER_SEC);
        let exact = TimeRange {
            start: 5,
            end: 5 + 2000 * NANOS_PER_SEC,
        };
        assert_eq!(default_step_nanos(exact), 2 * NANOS_PER_SEC);
        let short = TimeRange { start: 0, end: 10 };
        assert_eq!(default_step_nanos(short), NANOS_PER_SEC);
        let all = TimeRange {
            start: i64::MIN,
            end: i64::MAX,
        };
        let step = default_step_nanos(all);
        assert!(step > 0 && step % NANOS_PER_SEC == 0);
        assert!((all.end as i128 - all.start as i128) / step as i128 <= 1000);
    }
}
