//! pprof exports: the selected samples grouped by stack, series and attribute set, so each
//! pprof sample carries its labels. The query API's tree reads answer with one when asked
//! for pprof; Pyroscope reads it as `SelectMergeProfile` (and `SelectMergeStacktraces` in
//! pprof format), under its own package name.

use std::collections::BTreeMap;

use stackhouse_proto::pprof::Profile;
use stackhouse_proto::pyroscope_profile;
use stackhouse_proto::pyroscope_querier::SelectMergeProfileRequest;
use stackhouse_storage::model::{Series, SymbolId};
use stackhouse_storage::symbols::SymbolIndex;

use crate::engine::QueryEngine;
use crate::engine::aggregate::{Dim, Row};
use crate::engine::plan::{Needs, Plan};
use crate::engine::scope::Scope;
use crate::error::QueryError;
use crate::pyroscope::scope::{explicit_max_nodes, merge_scope, stack_filter};
use crate::pyroscope::{Caller, pprof};
use crate::render::pprof::{PprofInput, PprofSample, build};
use crate::render::pprof_cut;
use crate::stack_filter::StackFilter;

/// What a pprof export holds.
// Built once per request and never stored, so the size difference costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum PprofQuery {
    /// The selected samples, each with its labels (series labels and sample attributes).
    Scope(Scope),
    /// Both sides of a diff, as two sample types `baseline` and `comparison`.
    Diff { baseline: Scope, comparison: Scope },
}

impl QueryEngine {
    /// A pprof profile of the selection; [`crate::render::pprof::gzip`] makes it a file.
    pub async fn pprof(&self, q: &PprofQuery) -> Result<Profile, QueryError> {
        self.bounded("pprof", async {
            let sides: Vec<&Scope> = match q {
                PprofQuery::Scope(scope) => vec![scope],
                PprofQuery::Diff { baseline, comparison } => {
                    if baseline.profile_type != comparison.profile_type {
                        return Err(QueryError::InvalidArgument(
                            "baseline and comparison must have the same profile type".into(),
                        ));
                    }
                    vec![baseline, comparison]
                }
            };
            // Per (stack, series, attribute set): one value per side.
            let mut values: BTreeMap<SampleKey, Vec<i64>> = BTreeMap::new();
            let mut series: BTreeMap<i64, Series> = BTreeMap::new();
            let mut period = 0;
            for (side, scope) in sides.iter().enumerate() {
                let Some(plan) = self.plan(scope, Needs::grouped(DIMS.to_vec(), &[])).await? else {
                    continue;
                };
                let (mut rows, _) = self.aggregate(&plan).await?;
                self.retain_focused(scope, &mut rows).await?;
                add_side(&mut values, &rows, side, sides.len());
                let Plan {
                    series: s, period: p, ..
                } = plan;
                series.extend(s);
                period = period.max(p);
            }
            let first = sides[0];
            let pt = &first.profile_type;
            let sample_types = match q {
                PprofQuery::Scope(_) => vec![(pt.sample_type.clone(), pt.sample_unit.clone())],
                PprofQuery::Diff { .. } => vec![
                    ("baseline".to_string(), pt.sample_unit.clone()),
                    ("comparison".to_string(), pt.sample_unit.clone()),
                ],
            };
            let symbols = self.symbols.read(&first.tenant).await?;
            let native = self.debuginfo.files_for(&first.tenant, &symbols).await?;
            let samples = values
                .into_iter()
                .map(|((stack_id, series_id, attr_set_id), values)| PprofSample {
                    stack_id,
                    values,
                    labels: labels(series.get(&series_id), attr_set_id, &symbols),
                })
                .collect();
            let range = first.range;
            // A profile lookup spans all time; its duration would be meaningless.
            let bounded = range.start != i64::MIN && range.end != i64::MAX;
            let input = PprofInput {
                sample_types,
                period_type: (pt.period_type.clone(), pt.period_unit.clone()),
                period,
                time_nanos: if bounded { range.start } else { 0 },
                duration_nanos: if bounded {
                    range.end.saturating_sub(range.start)
                } else {
                    0
                },
                samples,
                symbols: &symbols,
                native: &native,
                view: &first.frames,
            };
            Ok(build(&input))
        })
        .await
    }
}

type SampleKey = (SymbolId, i64, SymbolId);

const DIMS: [Dim; 3] = [Dim::Stack, Dim::Series, Dim::AttrSet];

fn add_side(values: &mut BTreeMap<SampleKey, Vec<i64>>, rows: &[Row], side: usize, sides: usize) {
    for row in rows {
        values
            .entry((row.stack_id, row.series_id, row.attr_set_id))
            .or_insert_with(|| vec![0; sides])[side] += row.value;
    }
}

/// Series labels, then sample attributes (a sample attribute does not repeat a key the
/// series carries, as for selectors).
fn labels(series: Option<&Series>, attr_set_id: SymbolId, symbols: &SymbolIndex) -> Vec<(String, String)> {
    let mut labels: Vec<(String, String)> = series
        .map(|s| s.labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    if let Some(set) = symbols.attr_sets.get(&attr_set_id) {
        for (k, v) in &set.attrs {
            if series.is_none_or(|s| !s.labels.contains_key(k)) {
                labels.push((k.clone(), v.clone()));
            }
        }
    }
    labels
}

/// Pyroscope's `SelectMergeProfile`.
pub async fn select_merge_profile(
    engine: &QueryEngine,
    call: &Caller,
    r: SelectMergeProfileRequest,
) -> Result<pyroscope_profile::Profile, QueryError> {
    engine
        .bounded("pprof", async move {
            let scope = merge_scope(engine, call, (&r).into()).await?;
            let stacks = stack_filter(r.stack_trace_selector.as_ref())?;
            merged_profile(engine, scope, &stacks, explicit_max_nodes(engine, r.max_nodes)?).await
        })
        .await
}

/// The selection as one pprof profile, under Pyroscope's package name, cut to the stacks
/// `stacks` keeps and to `max_nodes` call-tree nodes (0: uncut).
pub(crate) async fn merged_profile(
    engine: &QueryEngine,
    scope: Scope,
    stacks: &StackFilter,
    max_nodes: usize,
) -> Result<pyroscope_profile::Profile, QueryError> {
    let mut profile = engine.pprof(&PprofQuery::Scope(scope)).await?;
    pprof_cut::cut(&mut profile, stacks, max_nodes);
    Ok(pprof::to_pyroscope(profile))
}
