//! What the `querier.v1` methods read alike from their requests: a range in milliseconds
//! (an empty one selects nothing), the scope a profile type id and label selector select
//! (with the trace, span and profile ids a request lists), the stored series a listing's
//! matchers select, and the parameters several methods take (`max_nodes`, the stack trace
//! selector). Each method itself lives in its endpoint's module.

use std::collections::BTreeSet;

use stackhouse_proto::pyroscope_querier::{
    SelectMergeProfileRequest, SelectMergeSpanProfileRequest, SelectMergeStacktracesRequest,
};
use stackhouse_proto::pyroscope_types::{LabelPair, StackTraceSelector};
use stackhouse_storage::model::{Series, TimeRange};

use super::names::{self, Matchers, Names};
use super::{Caller, NANOS_PER_MILLI, profile_type};
use crate::engine::QueryEngine;
use crate::engine::scope::{GroupKey, Scope};
use crate::error::QueryError;
use crate::request::hex_ids;
use crate::stack_filter::{FrameMatch, StackFilter};

/// The window of a request that gives neither start nor end.
const DEFAULT_WINDOW_NANOS: i64 = 3_600 * 1_000_000_000;

/// `[start, end)` of a request, from milliseconds. `end` 0 means `now`, and with `start` 0
/// too an hour before. `None` for an empty range, which selects nothing.
pub(crate) fn range_ms(start: i64, end: i64, now: i64) -> Result<Option<TimeRange>, QueryError> {
    let nanos = |ms: i64, what: &str| {
        ms.checked_mul(NANOS_PER_MILLI)
            .ok_or_else(|| QueryError::bad_request(format!("{what} {ms} ms is out of range")))
    };
    let end = if end == 0 { now } else { nanos(end, "end")? };
    let start = if start == 0 && end == now {
        now - DEFAULT_WINDOW_NANOS
    } else {
        nanos(start, "start")?
    };
    if start > end {
        return Err(QueryError::bad_request(format!(
            "invalid time range: start ({start} ns) is after end ({end} ns)"
        )));
    }
    Ok((start < end).then_some(TimeRange { start, end }))
}

/// The stored series of a range that the selectors select, and the label names only
/// samples carry (which a series-level listing cannot filter by).
pub(crate) struct Listing {
    pub(crate) series: Vec<Series>,
    pub(crate) sample_only: BTreeSet<String>,
    pub(crate) names: Names,
}

pub(crate) async fn listing(
    engine: &QueryEngine,
    tenant: &str,
    range: TimeRange,
    selectors: &[String],
) -> Result<Listing, QueryError> {
    let selectors: Vec<&str> = selectors.iter().map(String::as_str).collect();
    let all = engine.series(tenant, range).await?;
    let known = engine.label_names(tenant, range).await?;
    let series_names: BTreeSet<&String> = all.iter().flat_map(|s| s.labels.keys()).collect();
    let sample_only: BTreeSet<String> = known
        .iter()
        .filter(|n| !series_names.contains(n))
        .cloned()
        .collect();
    let names = Names::new(known);
    let matchers = Matchers::parse(&selectors, &names)?;
    let series = all
        .into_iter()
        .filter(|s| matchers.series_matches(s, &sample_only))
        .collect();
    Ok(Listing {
        series,
        sample_only,
        names,
    })
}

pub(crate) fn pairs(labels: impl IntoIterator<Item = (String, String)>) -> Vec<LabelPair> {
    labels
        .into_iter()
        .map(|(name, value)| LabelPair { name, value })
        .collect()
}

/// The ids of one kind a request lists, in hex; dashes are dropped, so UUIDs are taken.
pub(crate) fn ids<const N: usize>(what: &str, values: &[String]) -> Result<Vec<[u8; N]>, QueryError> {
    let hex: Vec<String> = values.iter().map(|v| v.replace('-', "")).collect();
    hex_ids::<N>(what, &hex)
}

/// What a Select request selects. A type its selector excludes, or an empty range,
/// selects no segment, so every endpoint answers empty without special cases.
pub async fn select_scope(
    engine: &QueryEngine,
    call: &Caller,
    profile_type_id: &str,
    label_selector: &str,
    start: i64,
    end: i64,
) -> Result<Scope, QueryError> {
    let range = range_ms(start, end, engine.now_nanos())?;
    let names = match range {
        Some(range)
            if names::mentioned(&[label_selector])?
                .iter()
                .any(|n| Names::needed_for(n)) =>
        {
            Names::new(engine.label_names(&call.tenant, range).await?)
        }
        _ => Names::default(),
    };
    let matchers = Matchers::parse(&[label_selector], &names)?;
    scope_with(&call.tenant, profile_type_id, &matchers, range)
}

/// What a profile type id and parsed matchers select over `range`. A type the matchers
/// exclude, or no range, selects no segment.
pub(crate) fn scope_with(
    tenant: &str,
    profile_type_id: &str,
    matchers: &Matchers,
    range: Option<TimeRange>,
) -> Result<Scope, QueryError> {
    let requested = profile_type::parse(profile_type_id)?;
    let empty = TimeRange {
        start: range.map_or(0, |r| r.start),
        end: range.map_or(1, |r| r.end),
    };
    let mut scope = Scope::new(tenant, requested.profile_type.clone(), range.unwrap_or(empty));
    scope.selector = matchers.selector();
    scope.in_time = requested.in_time;
    if range.is_none() || !requested.exists || !matchers.type_matches(&requested.profile_type) {
        scope.segments = Some(Vec::new());
    }
    Ok(scope)
}

/// The scope of a series request (`SelectSeries`, `SelectHeatmap`) and its `group_by`
/// keys, label names resolved as its selector's are.
pub(crate) async fn series_scope(
    engine: &QueryEngine,
    call: &Caller,
    profile_type_id: &str,
    label_selector: &str,
    (start, end): (i64, i64),
    group_by: &[String],
) -> Result<(Scope, Vec<GroupKey>), QueryError> {
    let scope = select_scope(engine, call, profile_type_id, label_selector, start, end).await?;
    let names = if group_by.iter().any(|n| Names::needed_for(n)) {
        Names::new(engine.label_names(&call.tenant, scope.range).await?)
    } else {
        Names::default()
    };
    let keys = group_by
        .iter()
        .map(|n| GroupKey::Label(names.resolve(n)))
        .collect();
    Ok((scope, keys))
}

/// `max_nodes` as the engine takes it: absent or 0 is the default.
pub(crate) fn max_nodes(asked: Option<i64>) -> Result<usize, QueryError> {
    let asked = asked.unwrap_or(0);
    usize::try_from(asked)
        .map_err(|_| QueryError::bad_request(format!("max_nodes must not be negative, got {asked}")))
}

/// `max_nodes` of a pprof answer: as Pyroscope, a profile is cut only when the request
/// sets it; within the engine's node limit.
pub(crate) fn explicit_max_nodes(engine: &QueryEngine, asked: Option<i64>) -> Result<usize, QueryError> {
    match max_nodes(asked)? {
        0 => Ok(0),
        n => Ok(engine.max_nodes(n)?),
    }
}

/// Grafana's call-site and frame filter as the engine applies them; Go PGO settings
/// are ignored (they only shape Pyroscope's pprof for Go's compiler).
pub(crate) fn stack_filter(selector: Option<&StackTraceSelector>) -> Result<StackFilter, QueryError> {
    let Some(selector) = selector else {
        return Ok(StackFilter::default());
    };
    let mut filter = StackFilter {
        call_site: selector.call_site.iter().map(|l| l.name.clone()).collect(),
        ..StackFilter::default()
    };
    if let Some(f) = &selector.frame_filter {
        filter.include = FrameMatch::new(
            f.include_function_names.clone(),
            &f.include_function_name_regexes,
            "include_function_name",
        )?;
        filter.exclude = FrameMatch::new(
            f.exclude_function_names.clone(),
            &f.exclude_function_name_regexes,
            "exclude_function_name",
        )?;
    }
    Ok(filter)
}

/// What a `SelectMerge*` message selects: a profile type, a label selector, a range in
/// milliseconds, and the id selectors its message has (the others stay empty).
#[derive(Default)]
pub(crate) struct MergeSelection<'a> {
    pub(crate) profile_type_id: &'a str,
    pub(crate) label_selector: &'a str,
    pub(crate) start: i64,
    pub(crate) end: i64,
    pub(crate) profile_ids: &'a [String],
    pub(crate) trace_ids: &'a [String],
    pub(crate) span_ids: &'a [String],
}

impl<'a> From<&'a SelectMergeStacktracesRequest> for MergeSelection<'a> {
    fn from(r: &'a SelectMergeStacktracesRequest) -> Self {
        MergeSelection {
            profile_type_id: &r.profile_type_id,
            label_selector: &r.label_selector,
            start: r.start,
            end: r.end,
            profile_ids: &r.profile_id_selector,
            trace_ids: &r.trace_id_selector,
            span_ids: &r.span_selector,
        }
    }
}

impl<'a> From<&'a SelectMergeSpanProfileRequest> for MergeSelection<'a> {
    fn from(r: &'a SelectMergeSpanProfileRequest) -> Self {
        MergeSelection {
            profile_type_id: &r.profile_type_id,
            label_selector: &r.label_selector,
            start: r.start,
            end: r.end,
            span_ids: &r.span_selector,
            ..MergeSelection::default()
        }
    }
}

impl<'a> From<&'a SelectMergeProfileRequest> for MergeSelection<'a> {
    fn from(r: &'a SelectMergeProfileRequest) -> Self {
        MergeSelection {
            profile_type_id: &r.profile_type_id,
            label_selector: &r.label_selector,
            start: r.start,
            end: r.end,
            profile_ids: &r.profile_id_selector,
            trace_ids: &r.trace_id_selector,
            ..MergeSelection::default()
        }
    }
}

/// The scope a `SelectMerge*` message selects, its id selectors included.
pub(crate) async fn merge_scope(
    engine: &QueryEngine,
    call: &Caller,
    s: MergeSelection<'_>,
) -> Result<Scope, QueryError> {
    let mut scope = select_scope(engine, call, s.profile_type_id, s.label_selector, s.start, s.end).await?;
    scope.profile_ids = ids::<16>("profile id", s.profile_ids)?;
    scope.trace_ids = ids::<16>("trace id", s.trace_ids)?;
    scope.span_ids = ids::<8>("span id", s.span_ids)?;
    Ok(scope)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_in_milliseconds() {
        const NOW: i64 = 1_700_000_000_000_000_000;
        let r = range_ms(1_000, 4_000, NOW).unwrap().unwrap();
        assert_eq!((r.start, r.end), (1_000_000_000, 4_000_000_000));
        assert_eq!(range_ms(5, 5, NOW).unwrap(), None);
        assert!(range_ms(5, 4, NOW).is_err());
        assert!(range_ms(i64::MAX, i64::MAX, NOW).is_err());
        let default = range_ms(0, 0, NOW).unwrap().unwrap();
        assert_eq!((default.start, default.end), (NOW - DEFAULT_WINDOW_NANOS, NOW));
    }

    #[test]
    fn ids_take_uuids_and_hex() {
        let got = ids::<16>("profile id", &["0b1e57a8-5d2c-4f6e-9a1b-2c3d4e5f6a7b".into()]).unwrap();
        assert_eq!(hex::encode(got[0]), "0b1e57a85d2c4f6e9a1b2c3d4e5f6a7b");
        let err = ids::<16>("trace id", &["abc".into()]).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"invalid trace id "abc": expected 32 hex characters"#
        );
        assert_eq!(
            ids::<8>("span id", &["00000000000000aa".into(), "00000000000000aa".into()])
                .unwrap()
                .len(),
            1
        );
    }
}
