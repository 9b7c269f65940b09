//! Exemplars as Grafana reads them (`types.v1.Exemplar`), on `SelectSeries` points and
//! heatmap slots: a profile's or span's id, value, time and the labels its series has
//! beyond the group.
//!
//! As Pyroscope: one exemplar per point, the largest profile (INDIVIDUAL) or span (SPAN)
//! of the bucket; profile ids in UUID form (which `profile_id_selector` takes back),
//! span ids in 16 and trace ids in 32 lower-case hex digits (what `span_selector` and
//! `trace_id_selector` take); the exemplar's time is its earliest sample in the bucket.
//! Labels are every label of its series (intersected when a profile spans several)
//! without the `group_by` names, which the series itself carries.
//!
//! Exemplars are read from raw samples. When raw retention removed them, points come
//! without exemplars rather than failing the series, whose values the tiers still hold.

use std::collections::BTreeSet;

use stackhouse_proto::pyroscope_types::{self, ExemplarType, LabelPair};

use super::NANOS_PER_MILLI;
use super::names;
use crate::endpoints::exemplars::{Exemplar, ExemplarId, ExemplarKind, Exemplars};
use crate::error::QueryError;

const NANOS_PER_SECOND: f64 = 1e9;

/// A Connect `step` (seconds, a double) in nanoseconds; Pyroscope refuses less than 1 ms.
pub(crate) fn step_nanos(step: f64) -> Result<i64, QueryError> {
    if step.is_nan() || step < 0.001 {
        return Err(QueryError::bad_request(format!(
            "step must be at least 0.001 s, got {step}"
        )));
    }
    Ok((step * NANOS_PER_SECOND).round() as i64)
}

/// What an `exemplar_type` asks for; NONE and UNSPECIFIED ask for nothing, and cost no
/// scan.
pub(crate) fn kind(exemplar_type: i32) -> Option<ExemplarKind> {
    match ExemplarType::try_from(exemplar_type) {
        Ok(ExemplarType::Individual) => Some(ExemplarKind::Profile),
        Ok(ExemplarType::Span) => Some(ExemplarKind::Span),
        _ => None,
    }
}

/// One exemplar as Grafana reads it.
pub(crate) fn to_wire(
    e: &Exemplar,
    found: &Exemplars,
    wire_group_by: &[String],
    utf8: bool,
) -> pyroscope_types::Exemplar {
    let (profile_id, span_id, trace_id) = match e.id {
        ExemplarId::Profile(id) => (uuid(&id), String::new(), String::new()),
        ExemplarId::Span { span, trace } => (
            String::new(),
            hex::encode(span),
            trace.map(hex::encode).unwrap_or_default(),
        ),
    };
    pyroscope_types::Exemplar {
        timestamp: e.time.div_euclid(NANOS_PER_MILLI),
        profile_id,
        span_id,
        value: e.value,
        labels: exemplar_labels(e, found, wire_group_by, utf8),
        trace_id,
    }
}

/// The labels every series of `e` has, without those grouped by.
fn exemplar_labels(e: &Exemplar, found: &Exemplars, wire_group_by: &[String], utf8: bool) -> Vec<LabelPair> {
    let mut common: Option<BTreeSet<(String, String)>> = None;
    for s in e.series_ids.iter().filter_map(|id| found.series.get(id)) {
        let set: BTreeSet<(String, String)> = names::series_labels(s, utf8).into_iter().collect();
        common = Some(match common {
            None => set,
            Some(c) => c.intersection(&set).cloned().collect(),
        });
    }
    common
        .unwrap_or_default()
        .into_iter()
        .filter(|(name, _)| !wire_group_by.contains(name))
        .map(|(name, value)| LabelPair { name, value })
        .collect()
}

/// A profile id as Pyroscope shows it: a UUID, `8-4-4-4-12` lower-case hex digits.
fn uuid(id: &[u8; 16]) -> String {
    let h = hex::encode(id);
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_as_pyroscope_shows_them() {
        let id: [u8; 16] = hex::decode("0b1e57a85d2c4f6e9a1b2c3d4e5f6a7b")
            .unwrap()
            .try_into()
            .unwrap();
        assert_eq!(uuid(&id), "0b1e57a8-5d2c-4f6e-9a1b-2c3d4e5f6a7b");
    }

    #[test]
    fn exemplar_types() {
        assert_eq!(kind(0), None);
        assert_eq!(kind(1), None);
        assert_eq!(kind(2), Some(ExemplarKind::Profile));
        assert_eq!(kind(3), Some(ExemplarKind::Span));
        assert_eq!(kind(9), None);
    }

    #[test]
    fn steps_below_a_millisecond_are_refused() {
        assert_eq!(step_nanos(15.0).unwrap(), 15_000_000_000);
        assert!(step_nanos(0.0001).is_err());
        assert!(step_nanos(f64::NAN).is_err());
    }
}
