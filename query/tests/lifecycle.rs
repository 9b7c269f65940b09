//! The storage lifecycle seen through queries: compaction never changes an answer,
//! retention removes exactly what expired, cleanup removes exactly what nothing refers to,
//! and compactors racing on one Postgres catalog never merge a segment twice.
//!
//! Data goes in through the real group-commit writer, so segments and symbol objects are
//! laid out as ingest lays them out. Expected values are summed from the generated samples.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

mod common;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use common::paths;
use futures::TryStreamExt;
use object_store::ObjectStoreExt;
use sqlx::{AssertSqlSafe, Connection, Executor, PgConnection};
use stackhouse_query::{
    Aggregation, EventsQuery, FlamegraphQuery, QueryConfig, QueryEngine, Scope, TimeseriesQuery,
    parse_selector,
};
use stackhouse_storage::catalog::{Catalog, open_catalog};
use stackhouse_storage::cleanup;
use stackhouse_storage::clock::{self, SystemClock};
use stackhouse_storage::compaction::{CompactMode, CompactionConfig, Compactor, Policy};
use stackhouse_storage::model::{
    AttributeSet, Batch, Function, Labels, Line, Location, ProfileType, SampleRow, Series, SymbolId,
    TimeRange,
};
use stackhouse_storage::retention;
use stackhouse_storage::store::Store;
use stackhouse_storage::symbols::SymbolCache;
use stackhouse_storage::writer::{Writer, WriterConfig};

const TENANT: &str = "acme";
const SEC: i64 = 1_000_000_000;
/// The start of an hour, so a test's data lies in one hour window.
const T0: i64 = 1_749_999_600 * SEC;

fn cpu() -> ProfileType {
    ProfileType::parse("samples:count:cpu:nanoseconds").unwrap()
}

/// One generated sample: time, root-first path, value, service, trace.
type Generated = (i64, String, i64, String, Option<[u8; 16]>);

/// What the test knows about the samples it generated.
#[derive(Default, Clone)]
struct Expected {
    samples: Vec<Generated>,
}

impl Expected {
    fn paths(&self, keep: impl Fn(i64, &str) -> bool) -> BTreeMap<String, i64> {
        let mut out = BTreeMap::new();
        for (t, path, v, service, _) in &self.samples {
            if keep(*t, service) {
                *out.entry(path.clone()).or_default() += v;
            }
        }
        out
    }

    fn trace(&self, id: [u8; 16]) -> BTreeMap<String, i64> {
        let mut out = BTreeMap::new();
        for (_, path, v, _, trace) in &self.samples {
            if *trace == Some(id) {
                *out.entry(path.clone()).or_default() += v;
            }
        }
        out
    }
}

fn series(service: &str) -> Series {
    let labels: Labels = [("service.name".to_string(), service.to_string())].into();
    Series::new(cpu(), labels, 10_000_000)
}

fn trace_id(n: u64) -> [u8; 16] {
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&(n + 1).to_be_bytes());
    id[8..].copy_from_slice(&(n * 7 + 3).to_be_bytes());
    id
}

/// A batch of `count` samples between `from` and `from + span`, on stacks below `root`
/// built from a small vocabulary, on three services and two threads; every fifth sample
/// belongs to one of eight traces.
fn batch(
    rng: &mut SmallRng,
    root: &str,
    from: i64,
    span: i64,
    count: usize,
    expected: &mut Expected,
) -> Batch {
    let names = [
        "main", "serve", "parse", "query", "encode", "hash", "alloc", "read", "write",
    ];
    let mut b = Batch::new(TENANT);
    let services: Vec<(String, i64)> = (0..3)
        .map(|i| {
            let name = format!("svc-{i}");
            let id = b.add_series(series(&name));
            (name, id)
        })
        .collect();
    let location = |b: &mut Batch, name: &str| {
        let function_id = b.add_function(Function {
            name: name.to_string(),
            filename: "app.rs".into(),
            ..Default::default()
        });
        b.add_location(Location {
            mapping_id: SymbolId::ZERO,
            address: 0,
            lines: vec![Line {
                function_id,
                line: 1,
                column: 0,
            }],
        })
    };
    let threads: Vec<SymbolId> = ["worker-1", "worker-2"]
        .iter()
        .map(|t| {
            b.add_attr_set(AttributeSet::new(vec![(
                "thread.name".to_string(),
                t.to_string(),
            )]))
        })
        .collect();
    for _ in 0..count {
        let depth = 1 + rng.random_range(0..5) as usize;
        let mut frames = vec![root.to_string()];
        frames
            .extend((0..depth).map(|_| names[rng.random_range(0..names.len() as u64) as usize].to_string()));
        let leaf_first: Vec<SymbolId> = frames.iter().rev().map(|f| location(&mut b, f)).collect();
        let stack_id = b.add_stack(&leaf_first);
        let (service, series_id) = services[rng.random_range(0..3) as usize].clone();
        let time = from + rng.random_range(0..span as u64) as i64;
        let value = 1 + rng.random_range(0..100) as i64;
        let trace = (rng.random_range(0..5) == 0).then(|| trace_id(rng.random_range(0..8)));
        b.samples.push(SampleRow {
            time_nanos: time,
            series_id,
            stack_id,
            value,
            attr_set_id: threads[rng.random_range(0..2) as usize],
            trace_id: trace,
            span_id: trace.map(|_| [7; 8]),
            profile_id: None,
        });
        expected
            .samples
            .push((time, frames.join(";"), value, service, trace));
    }
    b
}

struct World {
    _dir: tempfile::TempDir,
    store: Store,
    catalog: Arc<dyn Catalog>,
    writer: Writer,
    engine: QueryEngine,
}

async fn world(catalog_url: Option<String>) -> World {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("objects").to_str().unwrap()).unwrap();
    let url = catalog_url.unwrap_or_else(|| format!("sqlite://{}", dir.path().join("catalog.db").display()));
    let catalog = open_catalog(&url).await.unwrap();
    let symbols = Arc::new(SymbolCache::new(store.clone(), catalog.clone()));
    let writer = Writer::start(
        store.clone(),
        catalog.clone(),
        symbols,
        WriterConfig {
            flush_interval: Duration::from_millis(20),
            ..WriterConfig::default()
        },
    );
    let engine = engine(&store, &catalog);
    World {
        _dir: dir,
        store,
        catalog,
        writer,
        engine,
    }
}

/// A query engine with its own symbol cache, as a query-role process has.
fn engine(store: &Store, catalog: &Arc<dyn Catalog>) -> QueryEngine {
    let symbols = Arc::new(SymbolCache::new(store.clone(), catalog.clone()));
    QueryEngine::new(store.clone(), catalog.clone(), symbols, QueryConfig::default())
}

fn compactor(w: &World, grace: Duration) -> Compactor {
    Compactor::new(
        w.store.clone(),
        w.catalog.clone(),
        CompactionConfig {
            policy: Policy {
                l0_max_age: Duration::ZERO,
                max_segments: 4,
                ..CompactionConfig::default().policy
            },
            deletion_grace: grace,
            ..CompactionConfig::default()
        },
        clock::system(),
    )
}

fn hour() -> TimeRange {
    TimeRange {
        start: T0,
        end: T0 + 3600 * SEC,
    }
}

fn scope(selector: &str, range: TimeRange) -> Scope {
    Scope {
        selector: parse_selector(selector).unwrap(),
        ..Scope::new(TENANT, cpu(), range)
    }
}

async fn flamegraph(engine: &QueryEngine, scope: Scope) -> BTreeMap<String, i64> {
    let q = FlamegraphQuery {
        scope,
        group_by: vec![],
        max_nodes: 65_536,
    };
    paths(&engine.flamegraph(&q).await.unwrap().root)
}

/// Every answer the test compares before and after compaction, as text.
async fn answers(engine: &QueryEngine) -> Vec<String> {
    let mut out = vec![
        format!("{:?}", flamegraph(engine, scope("{}", hour())).await),
        format!(
            "{:?}",
            flamegraph(engine, scope(r#"{service.name="svc-1"}"#, hour())).await
        ),
        format!(
            "{:?}",
            flamegraph(engine, scope(r#"{thread.name="worker-2"}"#, hour())).await
        ),
    ];
    for n in [0, 3, 7] {
        let scope = Scope {
            trace_ids: vec![trace_id(n)],
            ..scope("{}", hour())
        };
        out.push(format!("{:?}", flamegraph(engine, scope).await));
    }
    let ts = engine
        .timeseries(&TimeseriesQuery {
            scope: scope("{}", hour()),
            step_nanos: 10 * SEC,
            group_by: stackhouse_query::parse_group_by("service.name").unwrap(),
            aggregation: Aggregation::Sum,
        })
        .await
        .unwrap();
    out.push(format!("{:?}", ts.series));
    let events = engine
        .events(&EventsQuery {
            scope: scope(r#"{service.name="svc-2"}"#, hour()),
            limit: 200,
            cursor: None,
        })
        .await
        .unwrap();
    let rows: Vec<_> = events
        .events
        .iter()
        .map(|e| {
            (
                e.timestamp,
                e.value,
                events.stacks[&e.stack_id].join(";"),
                e.thread.clone(),
            )
        })
        .collect();
    out.push(format!("{rows:?}"));
    out
}

/// Keys of every object in the store.
async fn listed(store: &Store) -> BTreeSet<String> {
    let root = store.path("");
    store
        .object_store()
        .list(Some(&store.path("tenants")))
        .map_ok(|m| {
            m.location
                .prefix_match(&root)
                .unwrap()
                .map(|p| p.as_ref().to_string())
                .collect::<Vec<_>>()
                .join("/")
        })
        .try_collect()
        .await
        .unwrap()
}

/// Objects and bytes of every table; the bytes without the rollup tiers, which compaction
/// adds beside the samples it merges.
async fn stored_bytes(catalog: &Arc<dyn Catalog>) -> (u64, u64) {
    let stats = catalog.stats(TENANT).await.unwrap();
    let objects = stats.tables.values().map(|t| t.objects).sum();
    let bytes = stats
        .tables
        .iter()
        .filter(|(kind, _)| !kind.starts_with("rollup_"))
        .map(|(_, t)| t.bytes)
        .sum();
    (objects, bytes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_to_one_block_keeps_every_answer() {
    let w = world(None).await;
    let mut rng = SmallRng::seed_from_u64(1);
    let mut expected = Expected::default();
    // Sequential writes with a short flush interval: one segment per batch.
    for i in 0..40 {
        let b = batch(
            &mut rng,
            &format!("root-{}", i % 5),
            T0 + i * 60 * SEC,
            60 * SEC,
            500,
            &mut expected,
        );
        w.writer.write(b).await.unwrap();
    }
    let segments_before = w.catalog.segments(TENANT, TimeRange::ALL).await.unwrap().len();
    assert!(segments_before >= 20, "{segments_before} segments");
    assert_eq!(
        flamegraph(&w.engine, scope("{}", hour())).await,
        expected.paths(|_, _| true),
        "the store answers what was written"
    );
    assert_eq!(
        flamegraph(&w.engine, scope(r#"{service.name="svc-1"}"#, hour())).await,
        expected.paths(|_, s| s == "svc-1")
    );
    let traced = expected.trace(trace_id(3));
    assert!(!traced.is_empty());
    let before = answers(&w.engine).await;
    let (objects_before, bytes_before) = stored_bytes(&w.catalog).await;
    let files_before = listed(&w.store).await;

    let report = compactor(&w, Duration::ZERO)
        .compact_tenant(TENANT, CompactMode::Full)
        .await
        .unwrap();
    assert_eq!(report.segments_removed, segments_before);
    assert_eq!(report.segments_added, 1);
    let after_segments = w.catalog.segments(TENANT, TimeRange::ALL).await.unwrap();
    assert_eq!(after_segments.len(), 1, "one block");
    assert_eq!(after_segments[0].level, 2);
    let samples: u64 = after_segments[0].series.iter().map(|s| s.samples).sum();
    assert_eq!(samples, expected.samples.len() as u64);

    // Replaced objects are readable until cleanup deletes them.
    assert_eq!(answers(&w.engine).await, before, "answers right after the swap");
    let deleted = cleanup::delete_due(&w.store, &*w.catalog, &SystemClock)
        .await
        .unwrap();
    assert!(deleted >= segments_before, "{deleted} objects deleted");

    assert_eq!(
        answers(&w.engine).await,
        before,
        "answers after compaction and cleanup"
    );
    // A process that never saw the small objects loads the merged symbols.
    assert_eq!(
        answers(&engine(&w.store, &w.catalog)).await,
        before,
        "a fresh engine"
    );

    let (objects_after, bytes_after) = stored_bytes(&w.catalog).await;
    let files_after = listed(&w.store).await;
    println!(
        "objects {objects_before} -> {objects_after}, bytes {bytes_before} -> {bytes_after}, files {} -> {}",
        files_before.len(),
        files_after.len()
    );
    assert!(
        objects_after < objects_before / 5,
        "{objects_before} -> {objects_after}"
    );
    assert!(bytes_after < bytes_before, "{bytes_before} -> {bytes_after}");
    assert_eq!(
        files_after.len() as u64,
        objects_after,
        "the store holds exactly the catalog's objects"
    );
    w.writer.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingest_queries_and_compaction_at_once_never_lose_or_double_count() {
    let w = Arc::new(world(None).await);
    let batches = 120;
    // Each batch under its own root frame, so a flamegraph tells batches apart.
    let mut rng = SmallRng::seed_from_u64(2);
    let mut generated = Vec::new();
    for i in 0..batches {
        let mut e = Expected::default();
        let b = batch(
            &mut rng,
            &format!("batch-{i:03}"),
            T0 + i as i64 * SEC,
            SEC,
            200,
            &mut e,
        );
        let total: i64 = e.samples.iter().map(|s| s.2).sum();
        generated.push((b, total));
    }
    let totals: Vec<i64> = generated.iter().map(|(_, t)| *t).collect();
    let acked = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicBool::new(false));

    let ingest = {
        let (w, acked) = (w.clone(), acked.clone());
        tokio::spawn(async move {
            for (i, (b, _)) in generated.into_iter().enumerate() {
                w.writer.write(b).await.unwrap();
                acked.store(i + 1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };
    let compaction = {
        let (w, done) = (w.clone(), done.clone());
        tokio::spawn(async move {
            let compactor = compactor(&w, Duration::from_secs(2));
            let mut merges = 0;
            while !done.load(Ordering::SeqCst) {
                merges += compactor.run_once().await.unwrap().merges;
                cleanup::delete_due(&w.store, &*w.catalog, &SystemClock)
                    .await
                    .unwrap();
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            merges
        })
    };
    let mut checks = 0;
    let query_engine = engine(&w.store, &w.catalog);
    while !ingest.is_finished() {
        let durable = acked.load(Ordering::SeqCst);
        let roots = root_totals(&query_engine).await;
        for (i, total) in totals.iter().enumerate() {
            let got = roots.get(&format!("batch-{i:03}")).copied();
            if i < durable {
                assert_eq!(
                    got,
                    Some(*total),
                    "acknowledged batch {i} (of {durable}) in check {checks}"
                );
            } else {
                assert!(
                    got.is_none() || got == Some(*total),
                    "batch {i} partly or twice: {got:?}"
                );
            }
        }
        assert!(roots.len() <= totals.len(), "unknown roots: {roots:?}");
        checks += 1;
    }
    ingest.await.unwrap();
    // Let compaction catch up with the last writes, then stop it.
    tokio::time::sleep(Duration::from_millis(500)).await;
    done.store(true, Ordering::SeqCst);
    let merges = compaction.await.unwrap();
    let roots = root_totals(&query_engine).await;
    let want: BTreeMap<String, i64> = totals
        .iter()
        .enumerate()
        .map(|(i, t)| (format!("batch-{i:03}"), *t))
        .collect();
    assert_eq!(roots, want, "everything, once");
    println!("{checks} consistent queries while {merges} merges ran");
    assert!(merges >= 5, "compaction ran alongside ({merges} merges)");
    assert!(checks >= 5, "queries ran alongside ({checks})");
    w.writer.shutdown().await;
}

/// Total per root frame over everything.
async fn root_totals(engine: &QueryEngine) -> BTreeMap<String, i64> {
    let q = FlamegraphQuery {
        scope: scope("{}", hour()),
        group_by: vec![],
        max_nodes: 65_536,
    };
    let fg = engine.flamegraph(&q).await.unwrap();
    fg.root
        .children
        .iter()
        .map(|c| (c.name.clone(), c.total))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_removes_exactly_the_expired_samples() {
    let w = world(None).await;
    let mut rng = SmallRng::seed_from_u64(3);
    let mut expected = Expected::default();
    for i in 0..10 {
        let b = batch(&mut rng, "app", T0 + i * 60 * SEC, 60 * SEC, 300, &mut expected);
        w.writer.write(b).await.unwrap();
    }
    // Inside the fifth minute: that minute's segment straddles the cutoff.
    let cutoff = T0 + 4 * 60 * SEC + 30 * SEC;
    let c = compactor(&w, Duration::ZERO);
    let report = retention::expire(&c, TENANT, cutoff).await.unwrap();
    assert!(report.segments_removed >= 4, "{report:?}");

    let kept = expected.paths(|t, _| t >= cutoff);
    assert_eq!(flamegraph(&w.engine, scope("{}", hour())).await, kept);
    let early = TimeRange {
        start: T0,
        end: cutoff,
    };
    assert!(
        flamegraph(&w.engine, scope("{}", early)).await.is_empty(),
        "nothing before the cutoff"
    );
    for s in w.catalog.segments(TENANT, TimeRange::ALL).await.unwrap() {
        assert!(s.min_time >= cutoff, "segment {} starts at {}", s.id, s.min_time);
    }
    cleanup::delete_due(&w.store, &*w.catalog, &SystemClock)
        .await
        .unwrap();
    assert_eq!(
        flamegraph(&engine(&w.store, &w.catalog), scope("{}", hour())).await,
        kept
    );
    assert_eq!(
        listed(&w.store).await.len() as u64,
        stored_bytes(&w.catalog).await.0
    );

    // The default of 30 days keeps data from 2025 only if run in 2025: use a config whose
    // retention covers everything, and one that covers nothing.
    let keep_all = retention::RetentionConfig::uniform(Duration::from_secs(100 * 365 * 86400));
    retention::run_once(&c, &keep_all).await.unwrap();
    assert_eq!(flamegraph(&w.engine, scope("{}", hour())).await, kept);
    let drop_all = retention::RetentionConfig::new(
        Duration::from_secs(100 * 365 * 86400),
        &[(TENANT.to_string(), Duration::from_secs(1))],
    );
    retention::run_once(&c, &drop_all).await.unwrap();
    assert!(flamegraph(&w.engine, scope("{}", hour())).await.is_empty());
    assert!(
        w.catalog
            .segments(TENANT, TimeRange::ALL)
            .await
            .unwrap()
            .is_empty()
    );
    w.writer.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphaned_objects_are_removed_and_committed_ones_kept() {
    let w = world(None).await;
    let mut rng = SmallRng::seed_from_u64(4);
    let mut expected = Expected::default();
    for i in 0..3 {
        let b = batch(&mut rng, "app", T0 + i * 60 * SEC, 60 * SEC, 100, &mut expected);
        w.writer.write(b).await.unwrap();
    }
    let committed = listed(&w.store).await;
    // A crash between writing objects and committing them leaves these behind.
    let orphans = [
        "tenants/acme/segments/0190-crashed/samples.parquet",
        "tenants/acme/symbols/0190-crashed/stacks.parquet",
    ];
    for key in orphans {
        w.store
            .object_store()
            .put(&w.store.path(key), vec![1u8, 2, 3].into())
            .await
            .unwrap();
    }
    // Younger than the grace period: kept, a writer may be about to commit them.
    let removed = cleanup::delete_orphans(&w.store, &*w.catalog, Duration::from_secs(3600), &SystemClock)
        .await
        .unwrap();
    assert!(removed.is_empty(), "{removed:?}");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let mut removed = cleanup::delete_orphans(&w.store, &*w.catalog, Duration::from_secs(1), &SystemClock)
        .await
        .unwrap();
    removed.sort();
    assert_eq!(removed, orphans.map(String::from).to_vec());
    assert_eq!(listed(&w.store).await, committed, "committed objects untouched");
    assert_eq!(
        flamegraph(&w.engine, scope("{}", hour())).await,
        expected.paths(|_, _| true)
    );
    w.writer.shutdown().await;
}

const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_compactors_on_one_postgres_catalog_never_merge_a_segment_twice() {
    let admin_url =
        std::env::var("STACKHOUSE_TEST_POSTGRES_URL").unwrap_or_else(|_| DEFAULT_POSTGRES_URL.to_string());
    let mut admin = PgConnection::connect(&admin_url)
        .await
        .unwrap_or_else(|e| panic!("postgres is unreachable at {admin_url}: {e}; this test needs it"));
    let db = format!("stackhouse_lifecycle_{}", uuid::Uuid::now_v7().simple());
    admin
        .execute(AssertSqlSafe(format!("CREATE DATABASE {db}")))
        .await
        .unwrap();
    let mut url = url::Url::parse(&admin_url).unwrap();
    url.set_path(&db);

    let outcome = tokio::spawn(async move {
        let w = world(Some(url.to_string())).await;
        let mut rng = SmallRng::seed_from_u64(5);
        let mut expected = Expected::default();
        for i in 0..24 {
            let b = batch(&mut rng, "app", T0 + i * 60 * SEC, 60 * SEC, 100, &mut expected);
            w.writer.write(b).await.unwrap();
        }
        let original: BTreeSet<String> = w
            .catalog
            .segments(TENANT, TimeRange::ALL)
            .await
            .unwrap()
            .into_iter()
            .map(|s| s.id)
            .collect();
        let (a, b) = (compactor(&w, Duration::ZERO), compactor(&w, Duration::ZERO));
        let mut removed: Vec<String> = Vec::new();
        let mut busy = 0;
        for _ in 0..6 {
            let (ra, rb) = tokio::join!(
                a.compact_tenant(TENANT, CompactMode::Due),
                b.compact_tenant(TENANT, CompactMode::Due)
            );
            for r in [ra, rb] {
                match r {
                    Ok(report) => removed.extend(report.removed_ids),
                    Err(stackhouse_storage::compaction::CompactionError::Busy(_)) => busy += 1,
                    Err(e) => panic!("{e}"),
                }
            }
        }
        let (ra, rb) = tokio::join!(
            a.compact_tenant(TENANT, CompactMode::Full),
            b.compact_tenant(TENANT, CompactMode::Full)
        );
        for report in [ra, rb].into_iter().flatten() {
            removed.extend(report.removed_ids);
        }
        let unique: BTreeSet<&String> = removed.iter().collect();
        assert_eq!(
            unique.len(),
            removed.len(),
            "a segment was merged twice: {removed:?}"
        );
        assert!(
            original.iter().all(|id| unique.contains(id)),
            "every original segment merged once"
        );
        println!(
            "{} segments merged, {busy} passes found the tenant leased",
            removed.len()
        );
        assert_eq!(
            flamegraph(&w.engine, scope("{}", hour())).await,
            expected.paths(|_, _| true)
        );
        assert_eq!(w.catalog.segments(TENANT, TimeRange::ALL).await.unwrap().len(), 1);
        w.writer.shutdown().await;
    })
    .await;
    admin
        .execute(AssertSqlSafe(format!("DROP DATABASE {db} WITH (FORCE)")))
        .await
        .unwrap();
    if let Err(e) = outcome {
        std::panic::resume_unwind(e.into_panic());
    }
}
