//! `group_by`: which columns a grouping needs and the group a row belongs to.

use stackhouse_storage::model::{Series, SymbolId};
use stackhouse_storage::symbols::SymbolIndex;

use super::aggregate::{Dim, Row};
use super::plan::Plan;
use super::scope::GroupKey;
use crate::error::QueryError;
use crate::limits::exceeded;

pub(crate) fn too_many_groups(max_groups: usize) -> QueryError {
    exceeded(
        "max_groups",
        format!("group_by yields more than {max_groups} groups; group by fewer or coarser keys"),
    )
}

/// The columns a `group_by` needs next to what the caller groups by.
pub(crate) fn group_dims(group_by: &[GroupKey]) -> Vec<Dim> {
    let mut dims = Vec::new();
    let mut push = |d| {
        if !dims.contains(&d) {
            dims.push(d);
        }
    };
    for key in group_by {
        match key {
            // The plan adds `AttrSet` when a selected series lacks the label.
            GroupKey::Label(_) => push(Dim::Series),
            GroupKey::TraceId => push(Dim::Trace),
            GroupKey::SpanId => push(Dim::Span),
            GroupKey::ProfileId => push(Dim::Profile),
        }
    }
    dims
}

/// The value of each key for one row: the series label when the series carries the key,
/// else the sample attribute, else `""` (the selector's rule).
pub(crate) fn group_values(keys: &[GroupKey], row: &Row, plan: &Plan, symbols: &SymbolIndex) -> Vec<String> {
    keys.iter()
        .map(|key| match key {
            GroupKey::Label(name) => {
                label_value(name, plan.series.get(&row.series_id), row.attr_set_id, symbols)
            }
            GroupKey::TraceId => row.trace_id.map(hex::encode).unwrap_or_default(),
            GroupKey::SpanId => row.span_id.map(hex::encode).unwrap_or_default(),
            GroupKey::ProfileId => row.profile_id.map(hex::encode).unwrap_or_default(),
        })
        .collect()
}

fn label_value(name: &str, series: Option<&Series>, attr_set_id: SymbolId, symbols: &SymbolIndex) -> String {
    if let Some(value) = series.and_then(|s| s.labels.get(name)) {
        return value.clone();
    }
    symbols
        .attr_sets
        .get(&attr_set_id)
        .and_then(|set| set.get(name))
        .unwrap_or_default()
        .to_string()
}
