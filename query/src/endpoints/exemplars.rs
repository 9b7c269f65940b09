//! Exemplars: the profiles (or spans) behind each point of a time series, each with its
//! value in the point's bucket, so that a client can open exactly that profile or span.
//! Also what a heatmap counts ([`crate::endpoints::heatmap`]). Pyroscope reads them on
//! `SelectSeries` points and `SelectHeatmap` slots (`crate::pyroscope::exemplars`).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use datafusion::logical_expr::{Expr, col};
use stackhouse_storage::model::Series;
use stackhouse_storage::schema::samples;

use crate::engine::QueryEngine;
use crate::engine::aggregate::Dim;
use crate::engine::grouping::{group_values, too_many_groups};
use crate::engine::plan::Needs;
use crate::engine::scope::{GroupKey, Scope};
use crate::error::QueryError;
use crate::stack_filter::StackFilter;

/// As Pyroscope (`DefaultMaxExemplarsPerPoint`): one exemplar per point, the largest.
pub const EXEMPLARS_PER_POINT: usize = 1;

/// What one exemplar stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ExemplarKind {
    /// One profile (its profile id).
    Profile,
    /// One span (its span id, with the trace it belongs to).
    Span,
}

#[derive(Clone, Debug)]
pub struct ExemplarsQuery {
    pub scope: Scope,
    /// Buckets as [`crate::TimeseriesQuery`] makes them: `[from + i*step, from + (i+1)*step)`
    /// with `from` the range's start rounded down to the step.
    pub step_nanos: i64,
    pub group_by: Vec<GroupKey>,
    pub kind: ExemplarKind,
}

/// A profile's or span's id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ExemplarId {
    Profile([u8; 16]),
    Span {
        span: [u8; 8],
        /// The trace of the span's samples (the smallest id, should they name several).
        trace: Option<[u8; 16]>,
    },
}

/// One profile or span in one bucket of one group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exemplar {
    /// Start of the bucket, unix nanoseconds.
    pub bucket_start: i64,
    pub id: ExemplarId,
    /// The sum of its samples in the bucket (scaled as the series' values are).
    pub value: i64,
    /// Its earliest sample in the bucket, unix nanoseconds: the profile's own time when
    /// its samples carry none.
    pub time: i64,
    /// The series its samples in the bucket belong to, sorted.
    pub series_ids: Vec<i64>,
}

#[derive(Clone, Debug)]
pub struct ExemplarGroup {
    /// The value of each `group_by` key, in its order (`""` when absent), as
    /// [`crate::Timeseries`] groups.
    pub group: Vec<String>,
    /// Every profile (or span) of the group, by bucket, then largest value first.
    pub exemplars: Vec<Exemplar>,
    /// The sum of the exemplars' values.
    pub total: i64,
}

impl ExemplarGroup {
    /// The `n` largest of each bucket, by bucket start (ties: smaller id first).
    pub fn top_per_bucket(&self, n: usize) -> BTreeMap<i64, Vec<&Exemplar>> {
        let mut out: BTreeMap<i64, Vec<&Exemplar>> = BTreeMap::new();
        for e in &self.exemplars {
            let bucket = out.entry(e.bucket_start).or_default();
            if bucket.len() < n {
                bucket.push(e);
            }
        }
        out
    }
}

#[derive(Clone, Debug, Default)]
pub struct Exemplars {
    pub step_nanos: i64,
    /// Largest total first, then by group.
    pub groups: Vec<ExemplarGroup>,
    /// The series the exemplars name, by id.
    pub series: HashMap<i64, Series>,
}

/// An exemplar being summed.
struct Partial {
    value: i64,
    time: i64,
    trace: Option<[u8; 16]>,
    series_ids: BTreeSet<i64>,
}

impl QueryEngine {
    /// Every profile (or span) per bucket and group with its value, from raw samples
    /// (the rollup tiers keep no ids): samples without the id are not counted.
    pub async fn exemplars(&self, q: &ExemplarsQuery, stacks: &StackFilter) -> Result<Exemplars, QueryError> {
        self.bounded("exemplars", async {
            if q.step_nanos <= 0 {
                return Err(QueryError::InvalidArgument(format!(
                    "step must be positive, got {} ns",
                    q.step_nanos
                )));
            }
            let from = q
                .scope
                .range
                .start
                .div_euclid(q.step_nanos)
                .saturating_mul(q.step_nanos);
            let mut result = Exemplars {
                step_nanos: q.step_nanos,
                ..Exemplars::default()
            };
            let (id_dims, id_column) = match q.kind {
                ExemplarKind::Profile => (vec![Dim::Profile], samples::PROFILE_ID),
                ExemplarKind::Span => (vec![Dim::Span, Dim::Trace], samples::SPAN_ID),
            };
            let mut dims = vec![
                Dim::Bucket {
                    start: from,
                    step: q.step_nanos,
                },
                Dim::Series,
                Dim::Time,
            ];
            dims.extend(id_dims);
            if !stacks.is_empty() || q.scope.frames.filters_stacks() {
                dims.push(Dim::Stack);
            }
            let Some(mut plan) = self.plan(&q.scope, Needs::grouped(dims, &q.group_by)).await? else {
                return Ok(result);
            };
            // Samples without the id would only make rows that are dropped below.
            let has_id: Expr = col(id_column).is_not_null();
            for scan in &mut plan.scans {
                scan.filter = Some(match scan.filter.take() {
                    Some(f) => f.and(has_id.clone()),
                    None => has_id.clone(),
                });
            }
            let (mut rows, _) = self.aggregate(&plan).await?;
            self.retain_stacks(&q.scope.tenant, &mut rows, stacks).await?;
            self.retain_focused(&q.scope, &mut rows).await?;
            let symbols = self.symbols.loaded(&q.scope.tenant).await;
            let mut groups: HashMap<Vec<String>, HashMap<(i64, ExemplarId), Partial>> = HashMap::new();
            for row in &rows {
                let id = match (q.kind, row.profile_id, row.span_id) {
                    (ExemplarKind::Profile, Some(profile), _) => ExemplarId::Profile(profile),
                    (ExemplarKind::Span, _, Some(span)) => ExemplarId::Span { span, trace: None },
                    _ => continue,
                };
                let key = group_values(&q.group_by, row, &plan, &symbols);
                if !groups.contains_key(&key) && groups.len() >= self.limits.max_groups {
                    return Err(too_many_groups(self.limits.max_groups));
                }
                let partial = groups
                    .entry(key)
                    .or_default()
                    .entry((row.bucket, id))
                    .or_insert_with(|| Partial {
                        value: 0,
                        time: row.time,
                        trace: None,
                        series_ids: BTreeSet::new(),
                    });
                partial.value += row.value;
                partial.time = partial.time.min(row.time);
                partial.trace = match (partial.trace, row.trace_id) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                partial.series_ids.insert(row.series_id);
            }
            drop(symbols);
            result.groups = groups
                .into_iter()
                .map(|(group, partials)| {
                    let mut exemplars: Vec<Exemplar> = partials
                        .into_iter()
                        .map(|((bucket, id), p)| Exemplar {
                            bucket_start: from + bucket * q.step_nanos,
                            id: match id {
                                ExemplarId::Span { span, .. } => ExemplarId::Span { span, trace: p.trace },
                                profile => profile,
                            },
                            value: p.value,
                            time: p.time,
                            series_ids: p.series_ids.into_iter().collect(),
                        })
                        .collect();
                    exemplars.sort_by(|a, b| {
                        (a.bucket_start, std::cmp::Reverse(a.value), a.id).cmp(&(
                            b.bucket_start,
                            std::cmp::Reverse(b.value),
                            b.id,
                        ))
                    });
                    ExemplarGroup {
                        total: exemplars.iter().map(|e| e.value).sum(),
                        group,
                        exemplars,
                    }
                })
                .collect();
            result
                .groups
                .sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.group.cmp(&b.group)));
            let named: HashSet<i64> = result
                .groups
                .iter()
                .flat_map(|g| g.exemplars.iter().flat_map(|e| e.series_ids.iter().copied()))
                .collect();
            result.series = plan
                .series
                .into_iter()
                .filter(|(id, _)| named.contains(id))
                .collect();
            Ok(result)
        })
        .await
    }
}

/// A one-series profile exemplar stamped at its bucket's start, for tests.
#[cfg(test)]
pub(crate) fn profile_exemplar(bucket_start: i64, id: u8, value: i64) -> Exemplar {
    Exemplar {
        bucket_start,
        id: ExemplarId::Profile([id; 16]),
        value,
        time: bucket_start,
        series_ids: vec![1],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_per_bucket_keeps_the_first_n_of_each_bucket() {
        let group = ExemplarGroup {
            group: Vec::new(),
            exemplars: vec![
                profile_exemplar(0, 2, 9),
                profile_exemplar(0, 1, 5),
                profile_exemplar(10, 3, 4),
            ],
            total: 18,
        };
        let top = group.top_per_bucket(1);
        assert_eq!(top.len(), 2);
        assert_eq!(top[&0][0].value, 9);
        assert_eq!(top[&10][0].value, 4);
        assert_eq!(group.top_per_bucket(5)[&0].len(), 2);
    }
}
