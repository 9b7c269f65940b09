//! One trace out of 10 million samples: the engine must find exactly its samples and, thanks
//! to the trace_id bloom filters, read only a small part of the store to do so.
//!
//! The store is built with the storage crate directly (segment by segment, so memory stays
//! near one segment's rows): 10 segments of 1 000 000 samples over six services, 100 000
//! traces of 40 to 140 samples each whose samples lie within two seconds of one another,
//! and 10% of the samples without a trace, as real profilers send. Expected values are
//! summed here while generating.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

mod common;

use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::paths;
use stackhouse_query::{FlamegraphQuery, QueryConfig, QueryEngine, QueryLimits, ScanStats, Scope};
use stackhouse_storage::catalog::{Catalog, SegmentCommit, open_catalog};
use stackhouse_storage::clock::system_now_nanos;
use stackhouse_storage::model::{
    Batch, Function, Labels, Line, Location, ProfileType, SampleRow, Series, SymbolId, TimeRange,
};
use stackhouse_storage::segment::{WrittenSegment, write_segment};
use stackhouse_storage::store::Store;
use stackhouse_storage::symbols::SymbolCache;

const TENANT: &str = "acme";
const SEGMENTS: usize = 10;
const SAMPLES_PER_SEGMENT: usize = 1_000_000;
const TRACES_PER_SEGMENT: usize = 10_000;
const SERVICES: usize = 6;
/// Each segment holds one minute of data.
const SEGMENT_SPAN: i64 = 60_000_000_000;
/// The samples of one trace lie within this much of its start.
const TRACE_SPAN: i64 = 2_000_000_000;
const T0: i64 = 1_750_000_000_000_000_000;

/// The traces the test looks up: one in the middle of the store, and the first and the
/// last one generated (at the edges of their segments' row groups).
const LOOKUPS: [usize; 3] = [54_321, 0, SEGMENTS * TRACES_PER_SEGMENT - 1];

fn cpu() -> ProfileType {
    ProfileType::parse("samples:count:cpu:nanoseconds").unwrap()
}

/// Random-looking, distinct per trace number, as a W3C trace id would be.
fn trace_id(n: usize) -> [u8; 16] {
    let mut rng = SmallRng::seed_from_u64(n as u64 ^ 0x7472_6163_6500_0000);
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&rng.next_u64().to_le_bytes());
    id[8..].copy_from_slice(&rng.next_u64().to_le_bytes());
    id
}

/// Function names of every stack, root first, and the symbols they need.
fn symbols() -> (Batch, Vec<(SymbolId, Vec<String>)>) {
    let mut b = Batch::new(TENANT);
    let names = [
        "main", "serve", "handle", "parse", "query", "encode", "compress", "hash", "alloc", "gc", "read",
        "write",
    ];
    let locations: Vec<SymbolId> = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let function_id = b.add_function(Function {
                name: name.to_string(),
                filename: "app.rs".into(),
                ..Default::default()
            });
            b.add_location(Location {
                mapping_id: SymbolId::ZERO,
                address: 0x1000 + i as u64 * 0x10,
                lines: vec![Line {
                    function_id,
                    line: 1 + i as i64,
                    column: 0,
                }],
            })
        })
        .collect();
    // 40 call paths below main, up to five frames deep.
    let mut rng = SmallRng::seed_from_u64(99);
    let mut stacks = Vec::new();
    for _ in 0..40 {
        let depth = 1 + rng.random_range(0..4) as usize;
        let mut root_first = vec![0usize];
        root_first.extend((0..depth).map(|_| 1 + rng.random_range(0..names.len() as u64 - 1) as usize));
        let leaf_first: Vec<SymbolId> = root_first.iter().rev().map(|&i| locations[i]).collect();
        let path = root_first.iter().map(|&i| names[i].to_string()).collect();
        stacks.push((b.add_stack(&leaf_first), path));
    }
    (b, stacks)
}

/// What the test knows about the traces it looks up.
#[derive(Default)]
struct Expected {
    total: i64,
    /// Self value per root-first path `a;b;c`.
    paths: BTreeMap<String, i64>,
    samples: usize,
}

struct Fixture {
    _dir: tempfile::TempDir,
    engine: QueryEngine,
    expected: BTreeMap<usize, Expected>,
    samples_total: usize,
}

/// Samples of segment `s`: its traces (each of 40 to 140 samples on one to three services
/// and one to four spans, within [`TRACE_SPAN`] of the trace's start) and untraced samples
/// filling it up to [`SAMPLES_PER_SEGMENT`].
fn segment_batch(
    s: usize,
    series: &[Series],
    stacks: &[(SymbolId, Vec<String>)],
    expected: &mut BTreeMap<usize, Expected>,
) -> Batch {
    let mut batch = Batch::new(TENANT);
    for se in series {
        batch.add_series(se.clone());
    }
    batch.samples.reserve(SAMPLES_PER_SEGMENT);
    let mut rng = SmallRng::seed_from_u64(0x5e6_0000 + s as u64);
    let start = T0 + s as i64 * SEGMENT_SPAN;
    let row = |time_nanos, series: &Series, stack_id, value, trace_id, span_id| SampleRow {
        time_nanos,
        series_id: series.id,
        stack_id,
        value,
        attr_set_id: SymbolId::ZERO,
        trace_id,
        span_id,
        profile_id: None,
    };
    for t in 0..TRACES_PER_SEGMENT {
        let n = s * TRACES_PER_SEGMENT + t;
        let id = trace_id(n);
        let count = rng.random_range(40..141);
        let begin = rng.random_range(start..start + SEGMENT_SPAN - TRACE_SPAN);
        let services: Vec<&Series> = (0..1 + rng.random_range(0..3))
            .map(|_| &series[rng.random_range(0..SERVICES as u64) as usize])
            .collect();
        let spans: Vec<[u8; 8]> = (0..1 + rng.random_range(0..4))
            .map(|_| rng.next_u64().to_le_bytes())
            .collect();
        let mut watched = expected.get_mut(&n);
        for _ in 0..count {
            let (stack_id, path) = &stacks[rng.random_range(0..stacks.len() as u64) as usize];
            let value = rng.random_range(1..1000);
            let service = services[rng.random_range(0..services.len() as u64) as usize];
            let span = spans[rng.random_range(0..spans.len() as u64) as usize];
            let time = begin + rng.random_range(0..TRACE_SPAN);
            batch
                .samples
                .push(row(time, service, *stack_id, value, Some(id), Some(span)));
            if let Some(e) = watched.as_deref_mut() {
                e.total += value;
                e.samples += 1;
                *e.paths.entry(path.join(";")).or_default() += value;
            }
        }
    }
    // About 10% of the segment (traces average 90 samples).
    let untraced = SAMPLES_PER_SEGMENT - batch.samples.len();
    for _ in 0..untraced {
        let (stack_id, _) = &stacks[rng.random_range(0..stacks.len() as u64) as usize];
        let service = &series[rng.random_range(0..SERVICES as u64) as usize];
        let time = rng.random_range(start..start + SEGMENT_SPAN);
        batch.samples.push(row(
            time,
            service,
            *stack_id,
            rng.random_range(1..1000),
            None,
            None,
        ));
    }
    batch
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("objects").to_str().unwrap()).unwrap();
    let catalog: Arc<dyn Catalog> = open_catalog(&format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("catalog.db").display()
    ))
    .await
    .unwrap();
    let series: Vec<Series> = (0..SERVICES)
        .map(|i| {
            let labels = Labels::from([("service.name".to_string(), format!("svc-{i}"))]);
            Series::new(cpu(), labels, 10_000_000)
        })
        .collect();
    let (symbol_batch, stacks) = symbols();
    let mut expected: BTreeMap<usize, Expected> = LOOKUPS.iter().map(|&n| (n, Expected::default())).collect();

    let started = Instant::now();
    let mut samples_total = 0;
    for s in 0..SEGMENTS {
        let mut batch = segment_batch(s, &series, &stacks, &mut expected);
        // Symbols are stored once, with the first segment, as the writer does.
        if s == 0 {
            let samples = std::mem::take(&mut batch.samples);
            batch = Batch {
                samples,
                series: batch.series,
                ..symbol_batch.clone()
            };
        }
        samples_total += batch.samples.len();
        let segment_id = format!("{s:08}-trace-lookup");
        let WrittenSegment { segment, symbols } =
            write_segment(&store, &batch, &segment_id, 0, system_now_nanos())
                .await
                .unwrap();
        let commit = SegmentCommit {
            segment,
            symbols,
            series: series.clone(),
            sample_labels: vec![],
            profiles: vec![],
            symbol_epoch: 0,
        };
        catalog.commit_segment(&commit).await.unwrap();
    }
    println!(
        "wrote {samples_total} samples in {SEGMENTS} segments in {:.1?}",
        started.elapsed()
    );

    let symbols = Arc::new(SymbolCache::new(store.clone(), catalog.clone()));
    let config = QueryConfig {
        target_partitions: 2,
        limits: QueryLimits {
            max_range: Duration::MAX,
            // A debug build scans slowly; the limit is not what this test is about.
            timeout: Duration::from_secs(600),
            ..QueryLimits::default()
        },
        ..QueryConfig::default()
    };
    Fixture {
        _dir: dir,
        engine: QueryEngine::new(store, catalog, symbols, config),
        expected,
        samples_total,
    }
}

fn everything() -> TimeRange {
    TimeRange {
        start: T0,
        end: T0 + SEGMENTS as i64 * SEGMENT_SPAN,
    }
}

async fn lookup(engine: &QueryEngine, id: [u8; 16]) -> (i64, BTreeMap<String, i64>, ScanStats) {
    let q = FlamegraphQuery {
        scope: Scope {
            trace_ids: vec![id],
            ..Scope::new(TENANT, cpu(), everything())
        },
        group_by: vec![],
        max_nodes: 0,
    };
    let started = Instant::now();
    let flamegraph = engine.flamegraph(&q).await.unwrap();
    let stats = flamegraph.stats.clone().expect("a scan reports what it read");
    println!(
        "trace {}: total {} in {:.1?}; read {} of {} bytes ({:.2}%), pruned {} of {} row groups, \
         decoded {} rows, {} segments",
        hex(&id),
        flamegraph.total,
        started.elapsed(),
        stats.bytes_scanned,
        stats.bytes_total,
        100.0 * stats.bytes_scanned as f64 / stats.bytes_total.max(1) as f64,
        stats.row_groups_pruned,
        stats.row_groups_total,
        stats.rows_scanned,
        stats.segments,
    );
    (flamegraph.total, paths(&flamegraph.root), stats)
}

fn hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

fn assert_small_read(stats: &ScanStats) {
    assert_eq!(stats.segments, SEGMENTS as u64, "the range covers every segment");
    assert!(stats.bytes_total > 0);
    assert!(
        stats.bytes_scanned * 10 < stats.bytes_total,
        "read {} of {} bytes: more than 10%",
        stats.bytes_scanned,
        stats.bytes_total
    );
    // Every row group was considered, and most were skipped unread.
    let row_groups = (SEGMENTS * SAMPLES_PER_SEGMENT).div_ceil(stackhouse_storage::segment::ROW_GROUP_ROWS);
    assert!(
        stats.row_groups_total as usize >= row_groups,
        "{} row groups counted, at least {row_groups} written",
        stats.row_groups_total
    );
    assert!(
        stats.row_groups_pruned * 10 >= stats.row_groups_total * 9,
        "only {} of {} row groups pruned",
        stats.row_groups_pruned,
        stats.row_groups_total
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_trace_out_of_ten_million_samples() {
    let f = fixture().await;
    assert_eq!(f.samples_total, SEGMENTS * SAMPLES_PER_SEGMENT);
    assert!(f.samples_total >= 10_000_000, "{} samples", f.samples_total);

    for (&n, expected) in &f.expected {
        assert!(expected.samples > 0, "trace {n} was generated");
        let (total, paths, stats) = lookup(&f.engine, trace_id(n)).await;
        println!(
            "  expected total {} over {} samples; {} rows decoded for them",
            expected.total, expected.samples, stats.rows_scanned
        );
        assert_eq!(total, expected.total, "total of trace {n}");
        assert_eq!(paths, expected.paths, "call paths of trace {n}");
        assert_small_read(&stats);
        assert!(
            (stats.rows_scanned as usize) < SAMPLES_PER_SEGMENT,
            "decoded {} rows for a trace of {} samples",
            stats.rows_scanned,
            expected.samples
        );
    }

    // An id no sample carries: nothing found, and bloom filters rule out (nearly) all.
    let (total, paths, stats) = lookup(&f.engine, [0x42; 16]).await;
    assert_eq!(total, 0);
    assert!(paths.is_empty());
    assert_small_read(&stats);
}
