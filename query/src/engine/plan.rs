//! From a [`Scope`] to what to scan: the selected series, the segments that can hold
//! their samples, and the row filter pushed into the Parquet scan.

use std::collections::{HashMap, HashSet};

use datafusion::common::ScalarValue;
use datafusion::logical_expr::{Expr, col, lit};
use stackhouse_storage::catalog::SegmentMeta;
use stackhouse_storage::model::{Series, TimeRange};
use stackhouse_storage::schema::samples;

use super::QueryEngine;
use super::scan::{Implied, selection_filter};
use super::scope::Scope;
use super::selection::{match_series, segments_to_scan, series_groups};
use crate::error::QueryError;
use crate::limits::exceeded;

/// A query's scan, decided before any Parquet is read.
pub(crate) struct Plan {
    pub segments: Vec<SegmentMeta>,
    /// The rows of the segments to keep; `None` keeps every row.
    pub filter: Option<Expr>,
    /// The selected series by id.
    pub series: HashMap<i64, Series>,
    /// The largest sampling period of the selected series.
    pub period: i64,
}

impl QueryEngine {
    /// Checks the scope against the limits, then prunes with the catalog. `Ok(None)` when
    /// nothing can match (no series, no segment): the caller answers with an empty result.
    pub(crate) async fn plan(&self, scope: &Scope) -> Result<Option<Plan>, QueryError> {
        self.check_scope(scope)?;
        // A profile lookup names its segments, so its range is not what bounds the work.
        if scope.segments.is_none() {
            self.check_range(&scope.tenant, scope.range).await?;
        }
        // Both listings in one round trip's time; the segments are listed before the
        // symbols are read, so that the symbol cache already holds every attribute set
        // these segments can reference.
        let (series, mut segments) = futures::try_join!(
            self.catalog.series(&scope.tenant, scope.range),
            self.catalog.segments(&scope.tenant, scope.range),
        )?;
        let matched = match_series(&series, &scope.profile_type, &scope.selector);
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
        let period = series.values().map(|s| s.period).max().unwrap_or(0);
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
        let implied = Implied::of(&segments, scope.range, &groups, &selected);
        let filter = [
            selection_filter(scope.range, &groups, implied),
            link_filter(scope),
        ]
        .into_iter()
        .flatten()
        .reduce(Expr::and);
        Ok(Some(Plan {
            segments,
            filter,
            series,
            period,
        }))
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
        let Some((first, last)) = self.catalog.data_range(tenant).await? else {
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

fn humanize_nanos(nanos: u128) -> String {
    let secs = (nanos / 1_000_000_000).min(u64::MAX as u128) as u64;
    humantime::format_duration(std::time::Duration::from_secs(secs)).to_string()
}
