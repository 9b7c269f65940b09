//! `querier.v1.QuerierService`: each method reads its request, runs it on the query
//! engine (listings included), and builds Pyroscope's answer. Times on the wire are Unix
//! milliseconds.

use std::collections::BTreeSet;

use crate::render::dot::dot;
use crate::render::flamebearer::{diff_levels, levels};
use crate::render::pprof_cut;
use crate::render::tree_bytes::tree_bytes;
use crate::{
    Aggregation, DiffQuery, Flamegraph, FlamegraphQuery, FrameMatch, GroupKey, PprofQuery, Scope,
    StackFilter, TimeseriesQuery,
};
use stackhouse_proto::pyroscope_profile::Profile;
use stackhouse_proto::pyroscope_querier::{
    AnalyzeQueryRequest, AnalyzeQueryResponse, DiffRequest, DiffResponse, FlameGraph, FlameGraphDiff, Level,
    PprofProfile, ProfileFormat, ProfileTypesRequest, ProfileTypesResponse, SelectMergeProfileRequest,
    SelectMergeSpanProfileRequest, SelectMergeSpanProfileResponse, SelectMergeStacktracesRequest,
    SelectMergeStacktracesResponse, SelectSeriesRequest, SelectSeriesResponse, SeriesRequest, SeriesResponse,
};
use stackhouse_proto::pyroscope_types::{
    GetProfileStatsRequest, GetProfileStatsResponse, LabelNamesRequest, LabelNamesResponse, LabelPair,
    LabelValuesRequest, LabelValuesResponse, Labels, Point, StackTraceSelector, TimeSeriesAggregationType,
};
use stackhouse_storage::model::{Series, TimeRange};

use super::names::{self, Matchers, Names};
use super::{Caller, NANOS_PER_MILLI, exemplars, pprof, profile_type};
use crate::engine::QueryEngine;
use crate::error::QueryError;
use crate::request::hex_ids;

/// The window of a request that gives neither start nor end.
const DEFAULT_WINDOW_NANOS: i64 = 3_600 * 1_000_000_000;

/// `[start, end)` of a request, from milliseconds. `end` 0 means `now`, and with `start` 0
/// too an hour before. `None` for an empty range, which selects nothing.
pub(super) fn range_ms(start: i64, end: i64, now: i64) -> Result<Option<TimeRange>, QueryError> {
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

pub async fn profile_types(
    engine: &QueryEngine,
    call: &Caller,
    r: ProfileTypesRequest,
) -> Result<ProfileTypesResponse, QueryError> {
    engine
        .bounded("profile_types", async move {
            let Some(range) = range_ms(r.start, r.end, engine.now_nanos())? else {
                return Ok(ProfileTypesResponse::default());
            };
            let mut profile_types: Vec<_> = engine
                .profile_types(&call.tenant, range)
                .await?
                .iter()
                .map(profile_type::to_wire)
                .collect();
            profile_types.sort_by(|a, b| a.id.cmp(&b.id));
            // Counted CPU samples and CPU time are served as one type.
            profile_types.dedup_by(|a, b| a.id == b.id);
            Ok(ProfileTypesResponse { profile_types })
        })
        .await
}

/// The stored series of a range that the selectors select, and the label names only
/// samples carry (which a series-level listing cannot filter by).
struct Listing {
    series: Vec<Series>,
    sample_only: BTreeSet<String>,
    names: Names,
}

async fn listing(
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

pub async fn label_names(
    engine: &QueryEngine,
    call: &Caller,
    r: LabelNamesRequest,
) -> Result<LabelNamesResponse, QueryError> {
    engine
        .bounded("label_names", async move {
            let Some(range) = range_ms(r.start, r.end, engine.now_nanos())? else {
                return Ok(LabelNamesResponse::default());
            };
            let listing = listing(engine, &call.tenant, range, &r.matchers).await?;
            let mut names: BTreeSet<String> = listing
                .series
                .iter()
                .flat_map(|s| names::series_labels(s, call.utf8_names))
                .map(|(name, _)| name)
                .collect();
            if !listing.series.is_empty() {
                names.extend(
                    listing
                        .sample_only
                        .iter()
                        .map(|n| names::wire_name(n, call.utf8_names).into_owned()),
                );
            }
            Ok(LabelNamesResponse {
                names: names.into_iter().collect(),
            })
        })
        .await
}

pub async fn label_values(
    engine: &QueryEngine,
    call: &Caller,
    r: LabelValuesRequest,
) -> Result<LabelValuesResponse, QueryError> {
    engine
        .bounded("label_values", async move {
            let Some(range) = range_ms(r.start, r.end, engine.now_nanos())? else {
                return Ok(LabelValuesResponse::default());
            };
            let listing = listing(engine, &call.tenant, range, &r.matchers).await?;
            let name = listing.names.resolve(&r.name);
            let mut values: BTreeSet<String> = if listing.sample_only.contains(&name) {
                engine
                    .label_values(&call.tenant, &name, range)
                    .await?
                    .into_iter()
                    .collect()
            } else {
                listing
                    .series
                    .iter()
                    .filter_map(|s| names::series_label(s, &name))
                    .collect()
            };
            values.remove("");
            Ok(LabelValuesResponse {
                names: values.into_iter().collect(),
            })
        })
        .await
}

pub async fn series(
    engine: &QueryEngine,
    call: &Caller,
    r: SeriesRequest,
) -> Result<SeriesResponse, QueryError> {
    engine
        .bounded("series", async move {
            let Some(range) = range_ms(r.start, r.end, engine.now_nanos())? else {
                return Ok(SeriesResponse::default());
            };
            let listing = listing(engine, &call.tenant, range, &r.matchers).await?;
            let wanted: Vec<(String, String)> = r
                .label_names
                .iter()
                .map(|wire| (wire.clone(), listing.names.resolve(wire)))
                .collect();
            let mut sets: BTreeSet<Vec<(String, String)>> = BTreeSet::new();
            for s in &listing.series {
                let set = if wanted.is_empty() {
                    names::series_labels(s, call.utf8_names)
                } else {
                    let mut set: Vec<(String, String)> = wanted
                        .iter()
                        .filter_map(|(wire, ours)| names::series_label(s, ours).map(|v| (wire.clone(), v)))
                        .collect();
                    set.sort();
                    set.dedup();
                    set
                };
                sets.insert(set);
            }
            Ok(SeriesResponse {
                labels_set: sets
                    .into_iter()
                    .map(|set| Labels { labels: pairs(set) })
                    .collect(),
            })
        })
        .await
}

fn pairs(labels: impl IntoIterator<Item = (String, String)>) -> Vec<LabelPair> {
    labels
        .into_iter()
        .map(|(name, value)| LabelPair { name, value })
        .collect()
}

/// The ids of one kind a request lists, in hex; dashes are dropped, so UUIDs are taken.
fn ids<const N: usize>(what: &str, values: &[String]) -> Result<Vec<[u8; N]>, QueryError> {
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
    let requested = profile_type::parse(profile_type_id)?;
    let range = range_ms(start, end, engine.now_nanos())?;
    let names = if names::mentioned(&[label_selector])?
        .iter()
        .any(|n| Names::needed_for(n))
        && let Some(range) = range
    {
        Names::new(engine.label_names(&call.tenant, range).await?)
    } else {
        Names::default()
    };
    let matchers = Matchers::parse(&[label_selector], &names)?;
    let empty = TimeRange {
        start: range.map_or(0, |r| r.start),
        end: range.map_or(1, |r| r.end),
    };
    let mut scope = Scope::new(
        &call.tenant,
        requested.profile_type.clone(),
        range.unwrap_or(empty),
    );
    scope.selector = matchers.selector();
    scope.in_time = requested.in_time;
    if range.is_none() || !requested.exists || !matchers.type_matches(&requested.profile_type) {
        scope.segments = Some(Vec::new());
    }
    Ok(scope)
}

/// The scope of a series request (`SelectSeries`, `SelectHeatmap`) and its `group_by`
/// keys, label names resolved as its selector's are.
pub(super) async fn series_scope(
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
fn max_nodes(asked: Option<i64>) -> Result<usize, QueryError> {
    let asked = asked.unwrap_or(0);
    usize::try_from(asked)
        .map_err(|_| QueryError::bad_request(format!("max_nodes must not be negative, got {asked}")))
}

/// `max_nodes` of a pprof answer: as Pyroscope, a profile is cut only when the request
/// sets it; within the engine's node limit.
fn explicit_max_nodes(engine: &QueryEngine, asked: Option<i64>) -> Result<usize, QueryError> {
    match max_nodes(asked)? {
        0 => Ok(0),
        n => Ok(engine.max_nodes(n)?),
    }
}

/// Grafana's call-site and frame filter as the engine applies them; Go PGO settings
/// are ignored (they only shape Pyroscope's pprof for Go's compiler).
fn stack_filter(selector: Option<&StackTraceSelector>) -> Result<StackFilter, QueryError> {
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

fn flame_graph(flamegraph: &Flamegraph) -> FlameGraph {
    let laid_out = levels(&flamegraph.root);
    FlameGraph {
        names: laid_out.names,
        levels: laid_out
            .levels
            .into_iter()
            .map(|values| Level { values })
            .collect(),
        total: flamegraph.root.total,
        max_self: laid_out.max_self,
    }
}

/// The request's scope with its trace, span and profile id selectors.
async fn stacktraces_scope(
    engine: &QueryEngine,
    call: &Caller,
    r: &SelectMergeStacktracesRequest,
) -> Result<Scope, QueryError> {
    let mut scope = select_scope(
        engine,
        call,
        &r.profile_type_id,
        &r.label_selector,
        r.start,
        r.end,
    )
    .await?;
    scope.profile_ids = ids::<16>("profile id", &r.profile_id_selector)?;
    scope.trace_ids = ids::<16>("trace id", &r.trace_id_selector)?;
    scope.span_ids = ids::<8>("span id", &r.span_selector)?;
    Ok(scope)
}

pub async fn select_merge_stacktraces(
    engine: &QueryEngine,
    call: &Caller,
    r: SelectMergeStacktracesRequest,
) -> Result<SelectMergeStacktracesResponse, QueryError> {
    engine
        .bounded("flamegraph", async move {
            let scope = stacktraces_scope(engine, call, &r).await?;
            match ProfileFormat::try_from(r.format) {
                Ok(ProfileFormat::Pprof) => {
                    let stacks = stack_filter(r.stack_trace_selector.as_ref())?;
                    let profile =
                        merged_profile(engine, scope, &stacks, explicit_max_nodes(engine, r.max_nodes)?)
                            .await?;
                    return Ok(SelectMergeStacktracesResponse {
                        pprof: Some(PprofProfile {
                            profile: Some(profile),
                        }),
                        ..Default::default()
                    });
                }
                Ok(ProfileFormat::Dot) => {
                    // `max_nodes` bounds the functions drawn; the graph is made from the default
                    // call tree, as Pyroscope draws it from a merged profile.
                    let query = FlamegraphQuery {
                        scope,
                        group_by: Vec::new(),
                        max_nodes: 0,
                    };
                    let stacks = stack_filter(r.stack_trace_selector.as_ref())?;
                    let flamegraph = engine.filtered_flamegraph(&query, &stacks).await?;
                    return Ok(SelectMergeStacktracesResponse {
                        dot: dot(&flamegraph, max_nodes(r.max_nodes)?),
                        ..Default::default()
                    });
                }
                // Unknown formats (the Drilldown app's FUNCTIONS and SANDWICH) get the flame graph,
                // which the app falls back to.
                _ => {}
            }
            let query = FlamegraphQuery {
                scope,
                group_by: Vec::new(),
                max_nodes: max_nodes(r.max_nodes)?,
            };
            let stacks = stack_filter(r.stack_trace_selector.as_ref())?;
            let flamegraph = engine.filtered_flamegraph(&query, &stacks).await?;
            if r.format == ProfileFormat::Tree as i32 {
                return Ok(SelectMergeStacktracesResponse {
                    tree: tree_bytes(&flamegraph.root),
                    ..Default::default()
                });
            }
            Ok(SelectMergeStacktracesResponse {
                flamegraph: Some(flame_graph(&flamegraph)),
                ..Default::default()
            })
        })
        .await
}

pub async fn select_merge_span_profile(
    engine: &QueryEngine,
    call: &Caller,
    r: SelectMergeSpanProfileRequest,
) -> Result<SelectMergeSpanProfileResponse, QueryError> {
    engine
        .bounded("flamegraph", async move {
            let mut scope = select_scope(
                engine,
                call,
                &r.profile_type_id,
                &r.label_selector,
                r.start,
                r.end,
            )
            .await?;
            scope.span_ids = ids::<8>("span id", &r.span_selector)?;
            let query = FlamegraphQuery {
                scope,
                group_by: Vec::new(),
                max_nodes: max_nodes(r.max_nodes)?,
            };
            let flamegraph = engine.flamegraph(&query).await?;
            Ok(SelectMergeSpanProfileResponse {
                flamegraph: Some(flame_graph(&flamegraph)),
                ..Default::default()
            })
        })
        .await
}

/// The selection as one pprof profile, under Pyroscope's package name, cut to the stacks
/// `stacks` keeps and to `max_nodes` call-tree nodes (0: uncut).
async fn merged_profile(
    engine: &QueryEngine,
    scope: Scope,
    stacks: &StackFilter,
    max_nodes: usize,
) -> Result<Profile, QueryError> {
    let mut profile = engine.pprof(&PprofQuery::Scope(scope)).await?;
    pprof_cut::cut(&mut profile, stacks, max_nodes);
    Ok(pprof::to_pyroscope(profile))
}

pub async fn select_merge_profile(
    engine: &QueryEngine,
    call: &Caller,
    r: SelectMergeProfileRequest,
) -> Result<Profile, QueryError> {
    engine
        .bounded("pprof", async move {
            let mut scope = select_scope(
                engine,
                call,
                &r.profile_type_id,
                &r.label_selector,
                r.start,
                r.end,
            )
            .await?;
            scope.profile_ids = ids::<16>("profile id", &r.profile_id_selector)?;
            scope.trace_ids = ids::<16>("trace id", &r.trace_id_selector)?;
            let stacks = stack_filter(r.stack_trace_selector.as_ref())?;
            merged_profile(engine, scope, &stacks, explicit_max_nodes(engine, r.max_nodes)?).await
        })
        .await
}

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
            exemplars::attach(engine, call, &r, &query, &stacks, &timeseries.series, &mut series).await?;
            Ok(SelectSeriesResponse { series })
        })
        .await
}

pub async fn diff(engine: &QueryEngine, call: &Caller, r: DiffRequest) -> Result<DiffResponse, QueryError> {
    engine
        .bounded("diff", async move {
            let (Some(left), Some(right)) = (&r.left, &r.right) else {
                return Err(QueryError::bad_request("diff needs both left and right"));
            };
            let (baseline, comparison) = futures::try_join!(
                stacktraces_scope(engine, call, left),
                stacktraces_scope(engine, call, right)
            )?;
            let query = DiffQuery {
                baseline,
                comparison,
                max_nodes: max_nodes(left.max_nodes)?.max(max_nodes(right.max_nodes)?),
                baseline_stacks: stack_filter(left.stack_trace_selector.as_ref())?,
                comparison_stacks: stack_filter(right.stack_trace_selector.as_ref())?,
            };
            let diff = engine.diff(&query).await?;
            let laid_out = diff_levels(&diff.root);
            Ok(DiffResponse {
                flamegraph: Some(FlameGraphDiff {
                    names: laid_out.names,
                    levels: laid_out
                        .levels
                        .into_iter()
                        .map(|values| Level { values })
                        .collect(),
                    total: diff.baseline_total + diff.comparison_total,
                    max_self: laid_out.max_self,
                    left_ticks: diff.baseline_total,
                    right_ticks: diff.comparison_total,
                }),
            })
        })
        .await
}

pub async fn get_profile_stats(
    engine: &QueryEngine,
    call: &Caller,
    _: GetProfileStatsRequest,
) -> Result<GetProfileStatsResponse, QueryError> {
    engine
        .bounded("data_range", async move {
            Ok(match engine.data_range(&call.tenant).await? {
                Some((oldest, newest)) => GetProfileStatsResponse {
                    data_ingested: true,
                    oldest_profile_time: oldest / NANOS_PER_MILLI,
                    newest_profile_time: newest / NANOS_PER_MILLI,
                },
                None => GetProfileStatsResponse::default(),
            })
        })
        .await
}

/// Pyroscope's own answer is empty too; the Drilldown app only shows what is there.
pub async fn analyze_query(
    _: &QueryEngine,
    _: &Caller,
    _: AnalyzeQueryRequest,
) -> Result<AnalyzeQueryResponse, QueryError> {
    Ok(AnalyzeQueryResponse::default())
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
