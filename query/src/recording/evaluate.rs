//! Rules' points over a range: the time series of what each selects at a one-minute step,
//! one series per group, read from whatever tiers hold the range (raw samples and the
//! minute rollup answer per minute; where retention left only the hour rollup, the hour's
//! total is one point).
//!
//! The rules of one profile type share one read: every series of the type summed per
//! (minute, series), and per stack too where a rule has a function filter, whose stacks
//! are each symbolized once for all such rules; each rule then picks and groups its series
//! from those rows by their labels. So a tenant's evaluation costs about the same for one rule as for its
//! twenty-five. A rule whose selector or grouping names a label that some series lacks
//! (a sample attribute, or `unknown_service`) is read on its own, as a time series query
//! reads it.

use std::collections::{BTreeMap, HashMap};

use stackhouse_storage::model::{FastMap, IdMap, Series, SymbolId, TimeRange};

use super::definition::{RULE_ID_LABEL, RuleDefinition};
use crate::call_paths::Through;
use crate::endpoints::timeseries::{Aggregation, TimeseriesQuery};
use crate::engine::QueryEngine;
use crate::engine::aggregate::Dim;
use crate::engine::plan::Needs;
use crate::engine::scope::{GroupKey, Scope};
use crate::error::QueryError;
use crate::pyroscope::names::{self, Matchers, Names};
use crate::pyroscope::scope::scope_with;
use crate::selector::Selector;
use crate::stack_filter::{FrameMatch, StackFilter};
use crate::types::ScanStats;

/// One minute, the step of recorded points.
pub const STEP_NANOS: i64 = 60_000_000_000;
const HOUR_NANOS: i64 = 3_600_000_000_000;
const NANOS_PER_MILLI: i64 = 1_000_000;

/// The resolution of a range's points.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Step {
    /// One point per minute.
    Minute,
    /// One point per hour: only the hour rollup holds the range.
    Hour,
}

/// One recorded series.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedSeries {
    /// Sorted by name: `__name__`, the rule id, the group's labels and the rule's
    /// external labels.
    pub labels: Vec<(String, String)>,
    /// `(unix milliseconds, value)` in time order; a point is stamped with the end of the
    /// minute (or hour) it sums, as Pyroscope stamps series points.
    pub points: Vec<(i64, f64)>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Recorded {
    pub series: Vec<RecordedSeries>,
    pub step: Step,
}

/// Per group (the rule's `group_by` values), per bucket start: the sum.
type Sums = HashMap<Vec<String>, BTreeMap<i64, i64>>;

/// A rule as read: our label names, its type's scope.
struct Resolved<'a> {
    id: &'a str,
    rule: &'a RuleDefinition,
    /// The profile type id its matchers name.
    type_id: String,
    /// Every series of the type over the range; no segment when its selectors exclude
    /// the type.
    scope: Scope,
    keys: Vec<GroupKey>,
    matchers: Selector,
}

impl QueryEngine {
    /// The points of each of `rules` (`(id, rule)`) over `range`, whose edges lie on
    /// minutes and which stays within one hour; in the order given. Minutes without
    /// samples have no point.
    pub async fn record(
        &self,
        tenant: &str,
        rules: &[(String, RuleDefinition)],
        range: TimeRange,
    ) -> Result<Vec<Recorded>, QueryError> {
        self.bounded("recording_rules", async {
            if range.start % STEP_NANOS != 0
                || range.end % STEP_NANOS != 0
                || range.end <= range.start
                || (range.end - 1).div_euclid(HOUR_NANOS) != range.start.div_euclid(HOUR_NANOS)
            {
                return Err(QueryError::InvalidArgument(format!(
                    "a recorded range must be whole minutes within one hour, got [{}, {})",
                    range.start, range.end
                )));
            }
            // Label names are listed once, if any rule names one that needs them.
            let mut needed = false;
            for (_, rule) in rules {
                let selectors: Vec<&str> = rule.matchers.iter().map(String::as_str).collect();
                needed |= names::mentioned(&selectors)?.iter().any(|n| Names::needed_for(n))
                    || rule.group_by.iter().any(|n| Names::needed_for(n));
            }
            let names = match needed {
                true => Names::new(self.label_names(tenant, range).await?),
                false => Names::default(),
            };
            let mut resolved = Vec::with_capacity(rules.len());
            for (id, rule) in rules {
                resolved.push(resolve(tenant, id, rule, range, &names)?);
            }
            let mut out: Vec<Option<Recorded>> = vec![None; rules.len()];
            // Rules of one type share one read, by stack where any has a function filter.
            let mut shared: BTreeMap<String, Vec<usize>> = BTreeMap::new();
            for (i, r) in resolved.iter().enumerate() {
                if r.scope.segments.as_ref().is_some_and(Vec::is_empty) {
                    out[i] = Some(Recorded {
                        series: Vec::new(),
                        step: Step::Minute,
                    });
                    continue;
                }
                shared.entry(r.type_id.clone()).or_default().push(i);
            }
            for members in shared.into_values() {
                let stacks = members.iter().any(|&i| resolved[i].rule.function_name.is_some());
                let scope = resolved[members[0]].scope.clone();
                let mut dims = vec![Dim::Bucket {
                    start: range.start,
                    step: STEP_NANOS,
                }];
                dims.push(Dim::Series);
                if stacks {
                    dims.push(Dim::Stack);
                }
                let plan = match self.plan(&scope, Needs::grouped(dims, &[])).await {
                    // More series of the type than one query may read: each rule reads its own.
                    Err(QueryError::LimitExceeded { .. }) => {
                        for i in members {
                            out[i] = Some(self.record_alone(&resolved[i], range).await?);
                        }
                        continue;
                    }
                    plan => plan?,
                };
                let Some(plan) = plan else {
                    for &i in &members {
                        out[i] = Some(Recorded {
                            series: Vec::new(),
                            step: Step::Minute,
                        });
                    }
                    continue;
                };
                let (rows, stats) = self.aggregate(&plan).await?;
                let step = step_of(&stats);
                let (alone, together): (Vec<usize>, Vec<usize>) = members
                    .into_iter()
                    .partition(|&i| !reads_series_labels_only(&resolved[i], plan.series.values()));
                for i in alone {
                    out[i] = Some(self.record_alone(&resolved[i], range).await?);
                }
                // Which stacks pass through each rule's function: a bit per function, every
                // stack's path walked once for all of them.
                let functions: Vec<String> = together
                    .iter()
                    .filter_map(|&i| resolved[i].rule.function_name.clone())
                    .collect();
                let mut masks: Vec<IdMap<u64>> = Vec::new();
                if !functions.is_empty() {
                    let ids: Vec<SymbolId> = rows
                        .iter()
                        .map(|r| (r.stack_id, ()))
                        .collect::<IdMap<()>>()
                        .into_keys()
                        .collect();
                    for chunk in functions.chunks(Through::MAX_NAMES) {
                        masks.push(self.stacks_through(tenant, ids.clone(), chunk).await?);
                    }
                }
                // The rows summed once per (series, bucket): over every stack, and over the
                // stacks through each function.
                let plain = together.iter().any(|&i| resolved[i].rule.function_name.is_none());
                let mut all: FastMap<(i64, i64), i64> = FastMap::default();
                let mut through: Vec<FastMap<(i64, i64), i64>> = vec![FastMap::default(); functions.len()];
                for row in &rows {
                    let key = (row.series_id, row.bucket);
                    if plain {
                        *all.entry(key).or_default() += row.value;
                    }
                    for (chunk, masks) in masks.iter().enumerate() {
                        let mut mask = masks.get(&row.stack_id).copied().unwrap_or(0);
                        while mask != 0 {
                            let bit = mask.trailing_zeros() as usize;
                            mask &= mask - 1;
                            *through[chunk * Through::MAX_NAMES + bit].entry(key).or_default() += row.value;
                        }
                    }
                }
                let mut next_function = 0;
                for i in together {
                    let r = &resolved[i];
                    let summed = match r.rule.function_name {
                        Some(_) => {
                            next_function += 1;
                            &through[next_function - 1]
                        }
                        None => &all,
                    };
                    // Each series the rule selects, with the index of its group.
                    let mut groups: Vec<Vec<String>> = Vec::new();
                    let mut index: HashMap<Vec<String>, usize> = HashMap::new();
                    let mut of_series: FastMap<i64, usize> = FastMap::default();
                    for (&id, s) in &plan.series {
                        if !r.matchers.selects(|name| s.labels.get(name).map(String::as_str)) {
                            continue;
                        }
                        let group: Vec<String> = r
                            .keys
                            .iter()
                            .map(|k| s.labels.get(k.name()).cloned().unwrap_or_default())
                            .collect();
                        let at = *index.entry(group.clone()).or_insert_with(|| {
                            groups.push(group);
                            groups.len() - 1
                        });
                        of_series.insert(id, at);
                    }
                    let mut buckets: Vec<BTreeMap<i64, i64>> = vec![BTreeMap::new(); groups.len()];
                    for (&(series, bucket), &value) in summed {
                        if let Some(&at) = of_series.get(&series) {
                            *buckets[at].entry(range.start + bucket * STEP_NANOS).or_default() += value;
                        }
                    }
                    let sums: Sums = groups
                        .into_iter()
                        .zip(buckets)
                        .filter(|(_, b)| !b.is_empty())
                        .collect();
                    out[i] = Some(points(r, sums, step, range));
                }
            }
            Ok(out.into_iter().map(|r| r.expect("every rule recorded")).collect())
        })
        .await
    }

    /// A rule read on its own, as `filtered_timeseries` reads a selection. A rule on sample
    /// attributes over a stretch that raw retention emptied has nothing it can answer
    /// exactly there: no point, and the other rules go on.
    async fn record_alone(&self, r: &Resolved<'_>, range: TimeRange) -> Result<Recorded, QueryError> {
        match self.record_selection(r, range).await {
            Err(QueryError::RawGone(_)) => Ok(Recorded {
                series: Vec::new(),
                step: Step::Minute,
            }),
            recorded => recorded,
        }
    }

    async fn record_selection(&self, r: &Resolved<'_>, range: TimeRange) -> Result<Recorded, QueryError> {
        let mut scope = r.scope.clone();
        scope.selector = r.matchers.clone();
        let query = TimeseriesQuery {
            scope,
            step_nanos: STEP_NANOS,
            group_by: r.keys.clone(),
            aggregation: Aggregation::Sum,
        };
        let filter = function_filter(r.rule)?.unwrap_or_default();
        let timeseries = self.filtered_timeseries(&query, &filter).await?;
        let step = timeseries.stats.as_ref().map_or(Step::Minute, step_of);
        let sums = timeseries
            .series
            .into_iter()
            .map(|g| {
                let group = r
                    .keys
                    .iter()
                    .map(|k| g.group.get(k.name()).cloned().unwrap_or_default())
                    .collect();
                let points = g.points.iter().map(|&(t, v)| (t, v as i64)).collect();
                (group, points)
            })
            .collect();
        Ok(points(r, sums, step, range))
    }
}

/// A rule's scope over `range` (its type's every series: the rule's are picked from the
/// shared rows), and its selector and group keys in our label names.
fn resolve<'a>(
    tenant: &str,
    id: &'a str,
    rule: &'a RuleDefinition,
    range: TimeRange,
    names: &Names,
) -> Result<Resolved<'a>, QueryError> {
    let type_id = rule.validate().map_err(QueryError::InvalidArgument)?;
    let selectors: Vec<&str> = rule.matchers.iter().map(String::as_str).collect();
    let parsed = Matchers::parse(&selectors, names)?;
    // The rule's own selectors may exclude its type (a selector on `__name__`): then its
    // scope selects no segment.
    let mut scope = scope_with(tenant, &type_id, &parsed, Some(range))?;
    scope.selector = Selector::default();
    let keys = rule
        .group_by
        .iter()
        .map(|n| GroupKey::Label(names.resolve(n)))
        .collect();
    Ok(Resolved {
        id,
        rule,
        type_id,
        scope,
        keys,
        matchers: parsed.selector(),
    })
}

/// Where only the hour rollup holds the range, its rows sit at the hour's start: the
/// whole hour is one point, whatever minutes the range names.
fn step_of(stats: &ScanStats) -> Step {
    match stats.rows_by_tier.get("1h").copied().unwrap_or(0) {
        0 => Step::Minute,
        _ => Step::Hour,
    }
}

fn function_filter(rule: &RuleDefinition) -> Result<Option<StackFilter>, QueryError> {
    rule.function_name
        .as_ref()
        .map(|name| {
            Ok(StackFilter {
                include: FrameMatch::new(vec![name.clone()], &[], "function_name")?,
                ..StackFilter::default()
            })
        })
        .transpose()
}

/// Whether every label the rule selects or groups by is one that every series carries:
/// then the series' labels alone decide, as they would for the engine.
fn reads_series_labels_only<'a>(r: &Resolved<'_>, mut series: impl Iterator<Item = &'a Series>) -> bool {
    let names: Vec<&str> = r
        .matchers
        .matchers
        .iter()
        .map(|m| m.name.as_str())
        .chain(r.keys.iter().map(GroupKey::name))
        .collect();
    series.all(|s| names.iter().all(|n| s.labels.contains_key(*n)))
}

/// A rule's series from its sums: labels as Prometheus takes them, points stamped with
/// their bucket's end.
fn points(r: &Resolved<'_>, sums: Sums, step: Step, range: TimeRange) -> Recorded {
    let hour = range.start.div_euclid(HOUR_NANOS);
    let mut series: Vec<RecordedSeries> = sums
        .into_iter()
        .map(|(group, buckets)| {
            let mut labels: BTreeMap<String, String> = r.rule.external_labels.clone();
            labels.insert("__name__".to_string(), r.rule.metric_name.clone());
            labels.insert(RULE_ID_LABEL.to_string(), r.id.to_string());
            for (wire, value) in r.rule.group_by.iter().zip(group) {
                // Prometheus has no empty labels: a sample without the key leaves it out.
                if !value.is_empty() {
                    labels.insert(wire.clone(), value);
                }
            }
            let points = match step {
                Step::Minute => buckets
                    .into_iter()
                    .map(|(start, value)| ((start + STEP_NANOS) / NANOS_PER_MILLI, value as f64))
                    .collect(),
                Step::Hour => vec![(
                    (hour + 1) * HOUR_NANOS / NANOS_PER_MILLI,
                    buckets.values().sum::<i64>() as f64,
                )],
            };
            RecordedSeries {
                labels: labels.into_iter().collect(),
                points,
            }
        })
        .collect();
    series.sort_by(|a, b| a.labels.cmp(&b.labels));
    Recorded { series, step }
}
