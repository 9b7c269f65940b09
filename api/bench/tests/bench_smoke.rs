//! `stackhouse-bench --scale tiny`: every measurement row with positive numbers, and a
//! workload generator that is deterministic and counts its samples right. The query pods
//! phase runs the stackhouse binary in CPU cgroups, so it needs root, and fails saying so
//! without.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use prost::Message;
use stackhouse_bench::{self as bench, Plan, Scale, Workload, load_capture};
use stackhouse_proto::otlp_collector::ExportProfilesServiceRequest;

/// Rows a sample becomes, counted from the request itself: one per timestamp (or per
/// value when there are no timestamps).
fn rows(request: &ExportProfilesServiceRequest) -> usize {
    request
        .resource_profiles
        .iter()
        .flat_map(|r| &r.scope_profiles)
        .flat_map(|s| &s.profiles)
        .flat_map(|p| &p.samples)
        .map(|s| s.timestamps_unix_nano.len().max(s.values.len()))
        .sum()
}

#[test]
fn generator_is_deterministic_and_counts_its_samples() {
    let capture = load_capture().unwrap();
    let fleet = Plan::new(Scale::Tiny, 7).fleet;
    let a = Workload::new(fleet.clone(), &capture);
    let b = Workload::new(fleet.clone(), &capture);
    let (ea, eb) = (a.encoded(), b.encoded());
    assert!(!ea.is_empty());
    assert_eq!(ea, eb, "same seed, same bytes");
    let other = Workload::new(bench::FleetConfig { seed: 8, ..fleet }, &capture);
    assert_ne!(ea, other.encoded(), "another seed, other bytes");

    let mut counted = 0;
    let mut depths = Vec::new();
    let mut linked = 0;
    for (bytes, reported) in &ea {
        let request = ExportProfilesServiceRequest::decode(bytes.as_slice()).unwrap();
        let n = rows(&request);
        assert_eq!(n, *reported, "the generator's count of one request");
        counted += n;
        let dict = request.dictionary.as_ref().unwrap();
        depths.extend(dict.stack_table.iter().skip(1).map(|s| s.location_indices.len()));
        linked += request.resource_profiles[0].scope_profiles[0].profiles[0]
            .samples
            .iter()
            .filter(|s| s.link_index != 0)
            .count();
    }
    // hosts × processes × 20 Hz × cores × seconds, minus idle ticks (about 20%).
    let c = a.config();
    let most = c.hosts * c.processes_per_host * c.cores * c.hz as usize * c.seconds as usize;
    assert!(
        counted > most / 2 && counted <= most,
        "{counted} of at most {most}"
    );
    assert!(
        depths.iter().all(|&d| (10..=120).contains(&d)),
        "stack depths 10..=120"
    );
    assert!(depths.iter().any(|&d| d > 40), "some deep stacks");
    assert!(linked > 0, "some samples carry trace links");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiny_bench_produces_every_measurement() {
    let report = bench::run(Scale::Tiny, 42).await.unwrap();
    println!("{}", report.markdown());

    let capture = load_capture().unwrap();
    let workload = Workload::new(Plan::new(Scale::Tiny, 42).fleet, &capture);
    let counted: usize = workload.requests().map(|g| rows(&g.request)).sum();
    assert_eq!(report.ingest_samples, counted, "samples reported by the bench");

    let expected = [
        "ingest CPU per sample",
        "ingest CPU per sample with 20 relabel rules and 10 usage groups",
        "stored bytes per sample",
        "flamegraph latency",
        "flamegraph over the HTTP API (JSON, default max_nodes)",
        "flamegraph over the HTTP API, a range holding",
        "flamegraph with a focus filter over the HTTP API",
        "tenant with a debug file no frame needs",
        "1-hour flamegraph in a store holding",
        "-day flamegraph through the HTTP API",
        "-day flamegraph through the Grafana API",
        "ack latency p50",
        "ack latency p99",
        "peak memory sustained ingest adds",
        "peak memory the",
        "flamegraph on 1 query worker(s)",
        "flamegraph on 2 query worker(s)",
        "flamegraph on 3 query worker(s)",
        "bytes shipped from 3 workers",
        "stays local with 3 workers configured",
        "-day flamegraph from the rollup tiers",
        "-day series (step 1h) from the rollup tiers",
        "stored bytes per sample-day: raw",
        "stored bytes per sample-day: 1m tier",
        "stored bytes per sample-day: 1h tier",
        "compaction CPU the rollups add per ingested sample",
        "flamegraph on 2 query pods",
        "flamegraph on 3 query pods",
        "flamegraph on 4 query pods",
        "time series on 2 query pods",
        "time series on 3 query pods",
        "time series on 4 query pods",
        "top functions on 2 query pods",
        "top functions on 3 query pods",
        "top functions on 4 query pods",
        "flamegraph: the coordinator's CPU per query",
        "time series: the coordinator's CPU per query",
        "top functions: the coordinator's CPU per query",
        "whole-range flamegraph from the rollup tiers",
        "whole-range flamegraph against its last hour",
        "whole-range series (step 1h) from the rollup tiers",
        "whole-range series (step 1h) against its last hour",
        "label names over the whole range",
        "label values of service.name",
        "stored bytes per sample, every table",
        "stored bytes per sample, rollup_1m",
        "stored bytes per sample, rollup_1h",
        "build CPU per sample",
        "ingest CPU per export of",
        "labels, SQLite: values of service.name over the whole month",
        "labels, SQLite: values of service.name over a past day and a half",
        "labels, SQLite: values of service.name over a past hour",
        "labels, SQLite: label names over the whole month",
        "labels, Postgres: values of service.name over the whole month",
        "labels, Postgres: values of service.name over a past day and a half",
        "labels, Postgres: values of service.name over a past hour",
        "labels, Postgres: label names over the whole month",
        "CPU per sample, ingest with compaction, rollups and retention running",
        "acknowledgement latency p50",
        "acknowledgement latency p99",
        "resident memory, peak of the last quarter",
        "level-0 segments waiting",
        "closed hours without their hour block",
        "compaction CPU per sample with 25 recording rules",
    ];
    for measurement in expected {
        let row = report
            .rows
            .iter()
            .find(|r| r.measurement.contains(measurement))
            .unwrap_or_else(|| panic!("no row for {measurement:?}"));
        // Memory rows are growth over the phase's start, which a tiny phase may not cause;
        // CPU counted in clock ticks (10 ms) may round to none for a tiny query.
        // Level-0 segments may all be merged whenever a tiny run looks, and a tiny run may
        // close no hour.
        let least = if measurement.starts_with("peak memory")
            || measurement.contains("coordinator's CPU")
            || measurement.contains("level-0 segments")
            || measurement.contains("closed hours")
        {
            0.0
        } else {
            f64::MIN_POSITIVE
        };
        assert!(
            row.ours >= least && row.ours.is_finite() && row.baseline >= least && row.baseline.is_finite(),
            "{row:?}"
        );
    }
    assert_eq!(report.rows.len(), expected.len());
    let table = report.markdown();
    assert!(table.starts_with("| measurement | ours | baseline (same run) | ratio | target | result |"));
}
