//! From a [`Scope`] to what to scan: the selected series, the segments that can hold
//! their samples, and the row filter pushed into the Parquet scan.

use std::collections::{HashMap, HashSet};

use datafusion::common::ScalarValue;
use datafusion::logical_expr::{Expr, case, col, lit};
use stackhouse_storage::catalog::{DAY_LEVEL, SegmentMeta};
use stackhouse_storage::model::{Series, TimeRange};
use stackhouse_storage::rollup::Resolution;
use stackhouse_storage::schema::samples;

use super::QueryEngine;
use super::aggregate::Dim;
use super::deleted::Deleted;
use super::grouping::group_dims;
use super::scan::{Implied, selection_filter};
use super::scope::{GroupKey, Scope};
use super::selection::{match_series, segments_to_scan, series_groups};
use super::tiers::{self, Source};
use crate::error::QueryError;
use crate::limits::exceeded;

/// A query's scan, decided before any Parquet is read.
pub(crate) struct Plan {
    /// What to read: one table per resolution and stretches, each with its row filter.
    pub scans: Vec<Scan>,
    /// The columns to group or order by: what was asked, with [`Dim::AttrSet`] added
    /// where a grouped label is not a label of every selected series.
    pub dims: Vec<Dim>,
    /// The selected series by id.
    pub series: HashMap<i64, Series>,
    /// The largest sampling period of the selected series.
    pub period: i64,
    /// What is summed: `value`, or for a scope [`Scope::in_time`] `value` times the
    /// period of each counted series.
    pub value: Expr,
    /// The range the answer covers when it is not the range asked (see
    /// [`tiers::Reading::answered`]).
    pub answered: Option<TimeRange>,
}

/// One table of a plan.
pub(crate) struct Scan {
    pub source: Source,
    /// The rows to keep; `None` keeps every row.
    pub filter: Option<Expr>,
    /// XORed into the series ids of its rows, keeping a tenant's series apart from
    /// another's in a read over several (see `tenants`); 0 for the first tenant.
    pub salt: i64,
}

impl Plan {
    /// Every segment the plan reads, once.
    pub(crate) fn segment_count(&self) -> usize {
        self.scans
            .iter()
            .flat_map(|s| s.source.segments.iter().map(|seg| seg.id.as_str()))
            .collect::<HashSet<_>>()
            .len()
    }
}

/// What a query needs from its scan.
pub(crate) struct Needs<'a> {
    /// Columns to group or order by.
    pub dims: Vec<Dim>,
    /// Labels grouped by: read from a series' labels when it carries them, else from the
    /// sample attributes.
    pub labels: Vec<&'a str>,
}

impl<'a> Needs<'a> {
    /// `dims` and what grouping by `group_by` adds to them.
    pub(crate) fn grouped(mut dims: Vec<Dim>, group_by: &'a [GroupKey]) -> Needs<'a> {
        for d in group_dims(group_by) {
            if !dims.contains(&d) {
                dims.push(d);
            }
        }
        let labels = group_by
            .iter()
            .filter_map(|k| match k {
                GroupKey::Label(name) => Some(name.as_str()),
                _ => None,
            })
            .collect();
        Needs { dims, labels }
    }
}

impl QueryEngine {
    /// [`QueryEngine::plan`] of one tenant.
    pub(super) async fn plan_tenant(
        &self,
        scope: &Scope,
        needs: Needs<'_>,
    ) -> Result<Option<Plan>, QueryError> {
        self.check_scope(scope)?;
        // A profile lookup names its segments, so its range is not what bounds the work.
        if scope.segments.is_none() {
            self.check_range(&scope.tenant, scope.range).await?;
        }
        // The deletion requests come in the same round trip's time as the series.
        let (mut series, requests) = futures::try_join!(
            self.catalog.series(&scope.tenant, scope.range),
            self.catalog.delete_requests(&scope.tenant)
        )?;
        let mut deleted = Deleted::of(&requests, &series, scope.range)?;
        series.retain(|s| !deleted.whole.contains(&s.id));
        let matched = match_series(&series, &scope.profile_types(), &scope.selector);
        let matched_count: usize = matched.values().map(Vec::len).sum();
        if matched_count > self.limits.max_series {
            return Err(exceeded(
                "max_series",
                format!(
                    "the selector matches {matched_count} series, more than {} allowed; narrow the selector",
                    self.limits.max_series
                ),
            ));
        }
        if matched.is_empty() {
            return Ok(None);
        }
        // What the scan groups by, and so which tiers may answer, follows from the matched
        // series: a grouped label some of them lack is read from the sample attributes.
        let mut dims = needs.dims;
        if needs
            .labels
            .iter()
            .any(|name| matched.values().flatten().any(|s| !s.labels.contains_key(*name)))
        {
            dims.push(Dim::AttrSet);
        }
        let on_samples = matched.keys().any(|k| !k.is_empty());
        let raw_reason = raw_reason(scope, &dims, on_samples);
        let allowed = self.resolutions(&dims, raw_reason.is_some());
        // Where the selector picks some of the range's series, only theirs are listed: at
        // fleet cardinality the extents of every series are most of a query's catalog
        // time. Where whole days may be read from day segments, what those sum is not
        // listed at all. The segments are listed before the symbols are read, so that the
        // symbol cache already holds every attribute set these segments can reference.
        let matched_ids: Vec<i64> = matched.values().flatten().map(|s| s.id).collect();
        let partial = matched_ids.len() < series.len();
        let selection = partial.then_some(matched_ids.as_slice());
        // Whole days are read from day segments where the query may read the day tier, or
        // the hour tier without stacks (a day segment's hour totals).
        let stackless = !dims.contains(&Dim::Stack);
        let summed = allowed.contains(&Resolution::Day) || (stackless && allowed.contains(&Resolution::Hour));
        let mut segments = if summed && deleted.cuts().is_empty() {
            self.catalog
                .segments_summed(&scope.tenant, scope.range, selection)
                .await?
        } else if let Some(ids) = selection {
            self.catalog
                .segments_holding(&scope.tenant, scope.range, ids)
                .await?
        } else {
            self.catalog.segments(&scope.tenant, scope.range).await?
        };
        if let Some(only) = &scope.segments {
            let only: HashSet<&str> = only.iter().map(String::as_str).collect();
            segments.retain(|s| only.contains(s.id.as_str()));
        }
        let groups = {
            let symbols = self.symbols.read(&scope.tenant).await?;
            series_groups(&matched, &scope.selector, &symbols.attr_sets)
        };
        let selected: HashSet<i64> = groups.iter().flat_map(|g| g.series_ids.iter().copied()).collect();
        let series: HashMap<i64, Series> = series
            .into_iter()
            .filter(|s| selected.contains(&s.id))
            .map(|s| (s.id, s))
            .collect();
        deleted.narrow(&selected);
        let period = series.values().map(|s| s.period).max().unwrap_or(0);
        // Day segments list no series: they are read where the tiers need their day.
        let (days, segments): (Vec<SegmentMeta>, Vec<SegmentMeta>) =
            segments.into_iter().partition(|s| s.is_day());
        let days: Vec<SegmentMeta> = days.into_iter().filter(|s| s.level == DAY_LEVEL).collect();
        let segments = segments_to_scan(segments, &selected, scope.range);
        tracing::debug!(
            series = selected.len(),
            groups = groups.len(),
            segments = segments.len(),
            "query planned"
        );
        if groups.is_empty() || segments.is_empty() {
            return Ok(None);
        }
        let timeless = !dims.iter().any(|d| matches!(d, Dim::Time | Dim::Bucket { .. }));
        let reading = tiers::read(
            segments,
            days,
            scope.range,
            &allowed,
            timeless,
            stackless,
            &deleted.cuts(),
        )
        .map_err(|gone| {
            QueryError::RawGone(format!(
                "{} needs raw samples, and raw retention removed them up to {}; start the range after it",
                raw_reason.unwrap_or("this query"),
                rfc3339(gone.until)
            ))
        })?;
        let links = link_filter(scope);
        let hidden = deleted.filter();
        let sources = if stackless {
            tiers::stackless(reading.sources)
        } else {
            reading.sources
        };
        let scans = sources
            .into_iter()
            .map(|source| {
                let implied = Implied::of(&source.segments, &source.ranges, &groups, &selected);
                // Partial listings do not show the unselected series a segment holds.
                let implied = Implied {
                    series: implied.series && !partial,
                    ..implied
                };
                let filter = [
                    selection_filter(&source.ranges, &groups, implied),
                    links.clone(),
                    hidden.clone(),
                ]
                .into_iter()
                .flatten()
                .reduce(Expr::and);
                Scan {
                    source,
                    filter,
                    salt: 0,
                }
            })
            .collect();
        let value = value_expr(scope, &series);
        Ok(Some(Plan {
            scans,
            dims,
            series,
            period,
            value,
            answered: (reading.answered != scope.range).then_some(reading.answered),
        }))
    }

    /// The resolutions a query may read, finest first: raw alone when it needs raw
    /// samples; a tier only when the query's buckets lie on its grid.
    fn resolutions(&self, dims: &[Dim], raw_only: bool) -> Vec<Resolution> {
        if raw_only || !self.rollups {
            return vec![Resolution::Raw];
        }
        Resolution::ALL
            .into_iter()
            .filter(|r| {
                let step = r.step_nanos();
                dims.iter().all(|d| match *d {
                    Dim::Bucket { start, step: bucket } => start % step == 0 && bucket % step == 0,
                    _ => true,
                })
            })
            .collect()
    }

    fn check_scope(&self, scope: &Scope) -> Result<(), QueryError> {
        if scope.tenant.is_empty() {
            return Err(QueryError::InvalidArgument("tenant must not be empty".into()));
        }
        let range = scope.range;
        if range.start >= range.end {
            return Err(QueryError::InvalidArgument(format!(
                "time range start {} must be before its end {}",
                range.start, range.end
            )));
        }
        let ids = scope.trace_ids.len() + scope.span_ids.len() + scope.profile_ids.len();
        if ids > self.limits.max_ids {
            return Err(exceeded(
                "max_ids",
                format!(
                    "the query names {ids} trace, span and profile ids, more than {} allowed",
                    self.limits.max_ids
                ),
            ));
        }
        Ok(())
    }
}

impl QueryEngine {
    /// Holds a query to `max_range` by the part of its range the tenant has data in: what
    /// bounds the scan. A `from=0` query over a store of one day costs a day, not decades.
    /// The catalog is asked only when the range itself is over the limit. Listings (label
    /// names and values, series, profile types) are held to it as data queries are.
    pub(crate) async fn check_range(&self, tenant: &str, range: TimeRange) -> Result<(), QueryError> {
        let max = self.limits.max_range.as_nanos();
        let span = |r: TimeRange| (r.end as i128 - r.start as i128).max(0) as u128;
        if span(range) <= max {
            return Ok(());
        }
        let Some((first, last)) = self.catalog_data_range(tenant).await? else {
            return Ok(());
        };
        let covered = TimeRange {
            start: range.start.max(first),
            end: range.end.min(last.saturating_add(1)),
        };
        if span(covered) <= max {
            return Ok(());
        }
        Err(exceeded(
            "max_range",
            format!(
                "the time range spans {} of stored data, more than {} allowed; narrow from/to",
                humanize_nanos(span(covered)),
                humanize_nanos(max)
            ),
        ))
    }
}

/// `trace_id IN (...) AND span_id IN (...) AND profile_id IN (...)` for the lists given.
/// Equality on these columns is what the Parquet bloom filters answer.
fn link_filter(scope: &Scope) -> Option<Expr> {
    fn in_list<const N: usize>(column: &str, ids: &[[u8; N]]) -> Option<Expr> {
        if ids.is_empty() {
            return None;
        }
        let literal = |id: &[u8; N]| lit(ScalarValue::FixedSizeBinary(N as i32, Some(id.to_vec())));
        Some(match ids {
            [one] => col(column).eq(literal(one)),
            many => col(column).in_list(many.iter().map(literal).collect(), false),
        })
    }
    [
        in_list(samples::TRACE_ID, &scope.trace_ids),
        in_list(samples::SPAN_ID, &scope.span_ids),
        in_list(samples::PROFILE_ID, &scope.profile_ids),
    ]
    .into_iter()
    .flatten()
    .reduce(Expr::and)
}

/// `value`, each row of a counted series (see [`Scope::in_time`]) multiplied by the
/// series' period: by one literal when every selected series has the same weight.
pub(super) fn value_expr(scope: &Scope, series: &HashMap<i64, Series>) -> Expr {
    let weight = |s: &Series| {
        if s.profile_type == scope.profile_type {
            1
        } else {
            s.period
        }
    };
    let mut weights: Vec<(i64, i64)> = series.values().map(|s| (s.id, weight(s))).collect();
    weights.sort_unstable();
    let value = col(samples::VALUE);
    match weights.first() {
        None => value,
        Some(&(_, w)) if weights.iter().all(|&(_, other)| other == w) => {
            if w == 1 {
                value
            } else {
                value * lit(w)
            }
        }
        Some(_) => {
            let mut by_series = case(col(samples::SERIES_ID));
            for (id, w) in weights.into_iter().filter(|&(_, w)| w != 1) {
                by_series = by_series.when(lit(id), lit(w));
            }
            let weight = by_series.otherwise(lit(1i64)).expect("a case with branches");
            value * weight
        }
    }
}

/// Why a query needs raw samples, which the rollup tiers do not hold; `None` when the
/// tiers can answer it. `on_samples`: the selector matches labels on sample attributes.
fn raw_reason(scope: &Scope, dims: &[Dim], on_samples: bool) -> Option<&'static str> {
    if !scope.trace_ids.is_empty() {
        Some("a trace id filter")
    } else if !scope.span_ids.is_empty() {
        Some("a span id filter")
    } else if !scope.profile_ids.is_empty() || scope.segments.is_some() {
        Some("a profile id lookup")
    } else if on_samples {
        Some("a selector on sample attributes")
    } else if dims.contains(&Dim::AttrSet) {
        Some("grouping by sample attributes")
    } else if dims
        .iter()
        .any(|d| matches!(d, Dim::Trace | Dim::Span | Dim::Profile))
    {
        Some("grouping by trace, span or profile id")
    } else if dims.iter().any(|d| matches!(d, Dim::Time | Dim::Value)) {
        Some("reading single samples (events, avg aggregation)")
    } else {
        None
    }
}

fn rfc3339(nanos: i64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(nanos.max(0) as u64);
    humantime::format_rfc3339_seconds(at).to_string()
}

fn humanize_nanos(nanos: u128) -> String {
    let secs = (nanos / 1_000_000_000).min(u64::MAX as u128) as u64;
    humantime::format_duration(std::time::Duration::from_secs(secs)).to_string()
}
