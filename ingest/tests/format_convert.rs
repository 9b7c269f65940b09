//! pprof, folded and speedscope inputs through the public API: convert into one OTLP
//! request, then the shared normalization, checking what would be stored. Expected values
//! come from the inputs (hand-written here, or the test data files read by a minimal
//! reader below).

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::collections::BTreeMap;

use stackhouse_ingest::convert::{RequestBuilder, Source};
use stackhouse_ingest::otlp::normalize;
use stackhouse_ingest::pprof::PprofOptions;
use stackhouse_ingest::{folded, pprof, speedscope};
use stackhouse_storage::model::{Batch, SymbolId};

fn testdata(path: &str) -> Vec<u8> {
    let dir = std::env::var("STACKHOUSE_TESTDATA").unwrap_or_else(|_| "/work/shared/testdata".into());
    let path = format!("{dir}/{path}");
    std::fs::read(&path).unwrap_or_else(|e| panic!("test data {path} missing: {e}"))
}

fn source() -> Source {
    Source {
        resource: vec![("service.name".into(), "svc".into())],
        time_nanos: Some(1_700_000_000_000_000_000),
        ..Default::default()
    }
}

fn stored(b: RequestBuilder) -> Batch {
    let n = normalize("t", &b.finish(), 1).unwrap();
    assert_eq!(n.rejected_profiles, 0, "{:?}", n.errors);
    n.batch
}

/// Function names of a stored stack, root first.
fn path(batch: &Batch, mut stack: SymbolId) -> String {
    let mut names = Vec::new();
    while !stack.is_zero() {
        let node = batch.stacks[&stack];
        for line in &batch.locations[&node.location_id].lines {
            names.push(batch.functions[&line.function_id].name.clone());
        }
        stack = node.parent_id;
    }
    names.reverse();
    names.join(";")
}

/// Value per root-first path per profile type id.
fn by_type(batch: &Batch) -> BTreeMap<String, BTreeMap<String, i64>> {
    let mut out: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    for row in &batch.samples {
        let id = batch.series[&row.series_id].profile_type.id();
        *out.entry(id)
            .or_default()
            .entry(path(batch, row.stack_id))
            .or_default() += row.value;
    }
    out
}

#[test]
fn folded_is_stored_with_its_values_and_series() {
    let mut b = RequestBuilder::new();
    let mut s = source();
    s.sample_rate = Some(100);
    folded::convert(b"main;a b;leaf 5\nmain;a b 2\nmain;a b;leaf 1\n", &s, &mut b).unwrap();
    let batch = stored(b);
    let want = BTreeMap::from([("main;a b;leaf".to_string(), 6), ("main;a b".to_string(), 2)]);
    assert_eq!(
        by_type(&batch),
        BTreeMap::from([("cpu:count:cpu:nanoseconds".to_string(), want)])
    );
    let series = batch.series.values().next().unwrap();
    assert_eq!(series.period, 10_000_000);
    assert_eq!(series.labels.get("service.name").map(String::as_str), Some("svc"));
    assert!(
        batch
            .samples
            .iter()
            .all(|r| r.time_nanos == 1_700_000_000_000_000_000)
    );
}

#[test]
fn speedscope_profiles_are_series_named_by_profile() {
    let mut b = RequestBuilder::new();
    speedscope::convert(
        &testdata("speedscope/two-sampled.speedscope.json"),
        &source(),
        &mut b,
    )
    .unwrap();
    let batch = stored(b);
    let mut names: Vec<&str> = batch
        .series
        .values()
        .map(|s| s.labels.get("profile.name").unwrap().as_str())
        .collect();
    names.sort();
    assert_eq!(names, ["one", "two"]);
    // From the file: weights 1 + 1 + 3 on a;b;c, 4 on a;b;d, 5 on a;b, in each profile.
    let want = BTreeMap::from([
        ("a;b;c".to_string(), 10),
        ("a;b;d".to_string(), 8),
        ("a;b".to_string(), 10),
    ]);
    assert_eq!(
        by_type(&batch),
        BTreeMap::from([("wall:seconds::".to_string(), want)])
    );
}

#[test]
fn pprof_labels_links_and_replacement_characters_are_stored() {
    // cpu-exemplars: 16-hex-digit `profile_id` labels (Go exemplars) become span ids.
    let mut b = RequestBuilder::new();
    let data = testdata("pprof/cpu-exemplars.pb.gz");
    pprof::convert(&data, &PprofOptions::default(), &source(), 64 << 20, &mut b).unwrap();
    let batch = stored(b);
    let with_span = batch.samples.iter().filter(|r| r.span_id.is_some()).count();
    assert!(with_span > 400, "{with_span}");
    assert!(
        batch
            .samples
            .iter()
            .all(|r| r.trace_id.is_none() && r.profile_id.is_none())
    );
    assert!(
        batch
            .attr_sets
            .values()
            .all(|a| !format!("{a:?}").contains("profile_id"))
    );

    let mut b = RequestBuilder::new();
    let data = testdata("pprof/invalid_utf8.pb.gz");
    pprof::convert(&data, &PprofOptions::default(), &source(), 64 << 20, &mut b).unwrap();
    let batch = stored(b);
    let replaced: Vec<&str> = batch
        .functions
        .values()
        .map(|f| f.name.as_str())
        .filter(|n| n.contains('\u{fffd}'))
        .collect();
    assert_eq!(replaced.len(), 1, "{:?}", batch.functions);
    // The file's name is every byte 0..=255: ASCII kept, each byte of 0x80..=0xff replaced.
    let ascii: String = (0u8..0x80).map(char::from).collect();
    assert!(replaced[0].starts_with(&ascii));
    assert_eq!(replaced[0].chars().filter(|&c| c == '\u{fffd}').count(), 128);
}
