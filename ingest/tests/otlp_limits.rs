//! A tenant's bounds applied while normalizing: stack depth (cut, not refused), label names
//! per series and series admission (the profile alone refused).

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use stackhouse_ingest::convert::{RequestBuilder, Source};
use stackhouse_ingest::folded;
use stackhouse_ingest::otlp::{
    Dictionary, Limits, Normalized, RequestError, SeriesAdmission, TRUNCATED_FRAME, Tenant, normalize_within,
};
use stackhouse_proto::otlp_collector::ExportProfilesServiceRequest;
use stackhouse_storage::model::{Batch, Series, SymbolId};
use stackhouse_storage::symbols::KnownSymbols;

/// One folded profile per `(service, text)`; `labels` extra resource labels on each.
fn request(profiles: &[(&str, &str)], labels: usize) -> ExportProfilesServiceRequest {
    let mut builder = RequestBuilder::new();
    for (service, text) in profiles {
        let mut resource = vec![("service.name".to_string(), service.to_string())];
        resource.extend((0..labels).map(|i| (format!("label.{i}"), "v".to_string())));
        let source = Source {
            resource,
            time_nanos: Some(1_000),
            ..Source::default()
        };
        folded::convert(text.as_bytes(), &source, &mut builder).unwrap();
    }
    builder.finish()
}

/// The function names of a stored stack, root first.
fn frames(batch: &Batch, mut node: SymbolId) -> Vec<String> {
    let mut out = Vec::new();
    while !node.is_zero() {
        let stack = &batch.stacks[&node];
        let location = &batch.locations[&stack.location_id];
        out.push(batch.functions[&location.lines[0].function_id].name.clone());
        node = stack.parent_id;
    }
    out.reverse();
    out
}

fn limits(max_stack_depth: usize, max_label_names: usize) -> Limits {
    Limits {
        max_stack_depth,
        max_label_names,
        ..Limits::NONE
    }
}

struct Admit(usize);

impl SeriesAdmission for Admit {
    fn admit(&mut self, _: &Series) -> Result<(), String> {
        if self.0 == 0 {
            return Err("no more series".into());
        }
        self.0 -= 1;
        Ok(())
    }
}

/// Nothing stored before: every stack and location brings its symbols.
static NOTHING_STORED: std::sync::LazyLock<KnownSymbols> = std::sync::LazyLock::new(KnownSymbols::default);

fn tenant<'t>(limits: &'t Limits, series: &'t mut Admit) -> Tenant<'t> {
    Tenant {
        limits,
        series,
        relabel: &stackhouse_ingest::relabel::NO_RULES,
        usage: &stackhouse_ingest::usage::NO_GROUPS,
        known: &NOTHING_STORED,
    }
}

fn within(
    request: &ExportProfilesServiceRequest,
    at: i64,
    tenant: Tenant<'_>,
) -> Result<Normalized, RequestError> {
    normalize_within("t", request, &Dictionary::of(request), at, tenant)
}

#[test]
fn deep_stacks_keep_their_root_frames_below_a_marker_and_their_values() {
    let deep: Vec<String> = (0..10).map(|i| format!("f{i}")).collect();
    let text = format!("{} 7\nf0;f1 3\n{};g 2\n", deep.join(";"), deep.join(";"));
    let n = within(
        &request(&[("app", &text)], 0),
        1,
        tenant(&limits(4, 0), &mut Admit(9)),
    )
    .unwrap();
    assert_eq!(n.rejected_profiles, 0, "{:?}", n.errors);
    assert_eq!(n.truncated_stacks, 2);
    let mut stored: Vec<(Vec<String>, i64)> = n
        .batch
        .samples
        .iter()
        .map(|s| (frames(&n.batch, s.stack_id), s.value))
        .collect();
    stored.sort();
    let cut = vec!["f0".to_string(), "f1".into(), "f2".into(), TRUNCATED_FRAME.into()];
    // Both deep stacks become the same cut stack; no value is lost.
    assert_eq!(
        stored,
        [
            (vec!["f0".to_string(), "f1".into()], 3),
            (cut.clone(), 2),
            (cut, 7)
        ]
    );
    // Exactly at the limit: untouched.
    let n = within(
        &request(&[("app", "a;b;c;d 1\n")], 0),
        1,
        tenant(&limits(4, 0), &mut Admit(9)),
    )
    .unwrap();
    assert_eq!(n.truncated_stacks, 0);
    assert_eq!(
        frames(&n.batch, n.batch.samples[0].stack_id),
        ["a", "b", "c", "d"]
    );
}

#[test]
fn a_series_with_too_many_labels_is_refused_alone() {
    // service.name plus 3 labels: 4 labels.
    let n = within(
        &request(&[("app", "a 1\n")], 3),
        1,
        tenant(&limits(0, 3), &mut Admit(9)),
    )
    .unwrap();
    assert_eq!((n.accepted_profiles, n.rejected_profiles), (0, 1));
    assert!(
        n.errors[0].contains("series has 4 labels, more than the tenant's limit of 3 label names per series"),
        "{:?}",
        n.errors
    );
    assert!(n.batch.samples.is_empty() && n.batch.series.is_empty());
    let n = within(
        &request(&[("app", "a 1\n")], 2),
        1,
        tenant(&limits(0, 3), &mut Admit(9)),
    )
    .unwrap();
    assert_eq!((n.accepted_profiles, n.rejected_profiles), (1, 0));
}

#[test]
fn a_refused_series_takes_only_its_profile() {
    let profiles = [("one", "a 1\n"), ("two", "b 2\n"), ("three", "c 4\n")];
    let n = within(&request(&profiles, 0), 1, tenant(&Limits::NONE, &mut Admit(2))).unwrap();
    assert_eq!((n.accepted_profiles, n.rejected_profiles), (2, 1));
    assert!(n.errors[0].ends_with("no more series"), "{:?}", n.errors);
    let values: i64 = n.batch.samples.iter().map(|s| s.value).sum();
    assert_eq!(values, 1 + 2);
    assert_eq!(n.batch.series.len(), 2);
}
