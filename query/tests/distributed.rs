//! Queries across query workers answer exactly what one process answers: three worker
//! engines serve on loopback ports over one file store and one SQLite catalog, and
//! coordinators with 1, 2 and 3 of them (and a one-byte task size, so that every scan is
//! shipped) run every endpoint. Workers refuse a coordinator without the cluster secret,
//! and a query whose workers are all gone runs in the coordinator.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::sync::Arc;
use std::time::Duration;

use prost::Message;
use serde_json::Value;
use stackhouse_query::cluster::{ClusterConfig, WorkerSource};
use stackhouse_query::{
    Aggregation, DiffQuery, EventsQuery, FlamegraphQuery, GroupKey, PprofQuery, QueryConfig, QueryEngine,
    QueryError, Scope, StackFilter, TimeseriesQuery, TopQuery, parse_selector,
};
use stackhouse_storage::catalog::{Catalog, open_catalog};
use stackhouse_storage::clock::ManualClock;
use stackhouse_storage::compaction::{CompactMode, CompactionConfig, Compactor};
use stackhouse_storage::model::{
    Batch, Function, Labels, Line, Location, ProfileType, SampleRow, Series, SymbolId, TimeRange,
};
use stackhouse_storage::store::Store;
use stackhouse_storage::symbols::SymbolCache;
use stackhouse_storage::writer::{Writer, WriterConfig};
use tokio::net::TcpListener;

const TENANT: &str = "acme";
const SECRET: &str = "cluster-secret-for-tests";
const T0: i64 = 1_750_000_000_000_000_000;
const SEGMENTS: i64 = 4;
const FUNCTIONS: usize = 40;

fn cpu() -> ProfileType {
    ProfileType::parse("samples:count:cpu:nanoseconds").unwrap()
}

/// One segment's samples: two services, stacks of two to four frames, some with a trace
/// and a profile id. Returns the batch and the sum of its values.
fn batch(segment: i64) -> (Batch, i64) {
    let mut b = Batch::new(TENANT);
    let series: Vec<i64> = ["api", "web"]
        .iter()
        .map(|service| {
            b.add_series(Series::new(
                cpu(),
                Labels::from([("service.name".to_string(), service.to_string())]),
                10_000_000,
            ))
        })
        .collect();
    let locations: Vec<SymbolId> = (0..FUNCTIONS)
        .map(|i| {
            let function_id = b.add_function(Function {
                name: format!("fn_{i}"),
                filename: "app.rs".into(),
                ..Default::default()
            });
            b.add_location(Location {
                mapping_id: SymbolId::ZERO,
                address: 0x1000 + i as u64,
                lines: vec![Line {
                    function_id,
                    line: i as i64,
                    column: 0,
                }],
            })
        })
        .collect();
    let mut total = 0;
    for n in 0..2_000i64 {
        let i = (n as usize * 7 + segment as usize) % FUNCTIONS;
        let depth = 2 + (n as usize % 3);
        let frames: Vec<SymbolId> = (0..depth).map(|d| locations[(i + d * 3) % FUNCTIONS]).collect();
        let value = 1 + (n * 13 + segment) % 97;
        total += value;
        let stack_id = b.add_stack(&frames);
        let mut trace = [0u8; 16];
        trace[0] = (n % 5) as u8 + 1;
        let mut profile = [0u8; 16];
        profile[0] = segment as u8 + 1;
        profile[1] = (n % 2) as u8;
        b.samples.push(SampleRow {
            time_nanos: T0 + segment * 60_000_000_000 + n * 10_000_000,
            series_id: series[(n % 2) as usize],
            stack_id,
            value,
            attr_set_id: SymbolId::ZERO,
            trace_id: (n % 4 == 0).then_some(trace),
            span_id: None,
            profile_id: Some(profile),
        });
    }
    (b, total)
}

struct Fixture {
    _dir: tempfile::TempDir,
    store: Store,
    catalog: Arc<dyn Catalog>,
    total: i64,
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&format!("file://{}", dir.path().join("objects").display())).unwrap();
    let catalog: Arc<dyn Catalog> = open_catalog(&format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("catalog.db").display()
    ))
    .await
    .unwrap();
    let writer = Writer::start(
        store.clone(),
        catalog.clone(),
        Arc::new(SymbolCache::new(store.clone(), catalog.clone())),
        WriterConfig {
            flush_interval: Duration::from_millis(5),
            ..WriterConfig::default()
        },
    );
    let mut total = 0;
    // One write per segment: each waits for its flush, so each is its own object.
    for segment in 0..SEGMENTS {
        let (b, sum) = batch(segment);
        total += sum;
        writer.write(b).await.unwrap();
    }
    writer.shutdown().await;
    Fixture {
        _dir: dir,
        store,
        catalog,
        total,
    }
}

fn engine(f: &Fixture, cluster: Option<ClusterConfig>) -> QueryEngine {
    engine_with_budget(f, cluster, QueryConfig::default().memory_limit_bytes)
}

fn engine_with_budget(
    f: &Fixture,
    cluster: Option<ClusterConfig>,
    memory_limit_bytes: Option<usize>,
) -> QueryEngine {
    let symbols = Arc::new(SymbolCache::new(f.store.clone(), f.catalog.clone()));
    QueryEngine::new(
        f.store.clone(),
        f.catalog.clone(),
        symbols,
        QueryConfig {
            target_partitions: 2,
            memory_limit_bytes,
            cluster,
            ..QueryConfig::default()
        },
    )
}

/// A worker engine serving on a loopback port until the returned sender is dropped.
async fn worker(f: &Fixture, secret: &str) -> (String, tokio::sync::oneshot::Sender<()>) {
    serve(Arc::new(engine(f, None)), secret).await
}

async fn serve(engine: Arc<QueryEngine>, secret: &str) -> (String, tokio::sync::oneshot::Sender<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let secret = secret.to_string();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        engine
            .serve_worker(listener, secret, async {
                let _ = stopped.await;
            })
            .await
            .expect("worker server failed");
    });
    (addr, stop)
}

async fn coordinator(f: &Fixture, workers: &[String], secret: &str, distribute_bytes: u64) -> QueryEngine {
    let cluster = ClusterConfig::start(WorkerSource::Fixed(workers.to_vec()), distribute_bytes, secret)
        .await
        .unwrap();
    // A loaded machine may miss the first probe's one-second timeout; the next rounds catch up.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while cluster.live_workers().len() < workers.len() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "workers never answered their probes"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    engine(f, Some(cluster))
}

fn range() -> TimeRange {
    TimeRange {
        start: T0,
        end: T0 + SEGMENTS * 60_000_000_000,
    }
}

fn scope() -> Scope {
    Scope::new(TENANT, cpu(), range())
}

/// Every endpoint's answer as JSON (pprof as its bytes), with the scan statistics left
/// out: they tell how the query ran, which is what differs; and the fewest bytes any of
/// the flamegraph, the grouped flamegraph and the time series shipped from workers.
async fn answers(engine: &QueryEngine) -> Result<(Vec<(String, Value)>, u64), QueryError> {
    answers_over(engine, range()).await
}

/// [`answers`] over `range`.
async fn answers_over(
    engine: &QueryEngine,
    range: TimeRange,
) -> Result<(Vec<(String, Value)>, u64), QueryError> {
    let scope = || Scope::new(TENANT, cpu(), range);
    let mut out = Vec::new();
    let mut shipped = 0;
    let mut api = scope();
    api.selector = parse_selector(r#"{service.name="api"}"#).unwrap();
    let flamegraph = |group_by: Vec<GroupKey>| FlamegraphQuery {
        scope: scope(),
        group_by,
        max_nodes: 0,
    };
    let ungrouped = engine.flamegraph(&flamegraph(vec![])).await?;
    shipped += ungrouped.stats.as_ref().map_or(0, |s| s.bytes_shipped);
    out.push(("flamegraph".into(), json(&ungrouped)));
    let grouped = engine
        .flamegraph(&flamegraph(vec![GroupKey::Label("service.name".into())]))
        .await?;
    shipped = shipped.min(grouped.stats.as_ref().map_or(0, |s| s.bytes_shipped));
    out.push(("flamegraph by service".into(), json(&grouped)));
    let truncated = engine
        .flamegraph(&FlamegraphQuery {
            max_nodes: 10,
            ..flamegraph(vec![])
        })
        .await?;
    out.push(("flamegraph max_nodes=10".into(), json(&truncated)));
    let by_trace = engine.flamegraph(&flamegraph(vec![GroupKey::TraceId])).await?;
    out.push(("flamegraph by trace".into(), json(&by_trace)));
    for aggregation in [Aggregation::Sum, Aggregation::Avg] {
        let series = engine
            .timeseries(&TimeseriesQuery {
                scope: scope(),
                step_nanos: 15_000_000_000,
                group_by: vec![GroupKey::Label("service.name".into())],
                aggregation,
            })
            .await?;
        // Summed in a partial step per task and gathered, like the flamegraph's stacks.
        shipped = shipped.min(series.stats.as_ref().map_or(0, |s| s.bytes_shipped));
        out.push((format!("timeseries {aggregation:?}"), json(&series)));
    }
    let top = engine
        .top(&TopQuery {
            scope: scope(),
            limit: 15,
        })
        .await?;
    out.push(("top".into(), json(&top)));
    let diff = engine
        .diff(&DiffQuery {
            baseline: api.clone(),
            comparison: scope(),
            max_nodes: 0,
            baseline_stacks: StackFilter::default(),
            comparison_stacks: StackFilter::default(),
        })
        .await?;
    out.push(("diff".into(), json(&diff)));
    let events = engine
        .events(&EventsQuery {
            scope: api.clone(),
            limit: 50,
            cursor: None,
        })
        .await?;
    let next = events.next_cursor.clone();
    out.push(("events".into(), json(&events)));
    if let Some(cursor) = next {
        let page = engine
            .events(&EventsQuery {
                scope: api.clone(),
                limit: 50,
                cursor: Some(cursor),
            })
            .await?;
        out.push(("events page 2".into(), json(&page)));
    }
    let pprof = engine.pprof(&PprofQuery::Scope(scope())).await?;
    out.push(("pprof".into(), Value::String(hex(&pprof.encode_to_vec()))));
    let pprof_diff = engine
        .pprof(&PprofQuery::Diff {
            baseline: api,
            comparison: scope(),
        })
        .await?;
    out.push((
        "pprof diff".into(),
        Value::String(hex(&pprof_diff.encode_to_vec())),
    ));
    Ok((out, shipped))
}

fn json(value: &impl serde::Serialize) -> Value {
    let mut value = serde_json::to_value(value).unwrap();
    strip_stats(&mut value);
    value
}

fn strip_stats(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|key, _| !key.ends_with("stats"));
            map.values_mut().for_each(strip_stats);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_stats),
        _ => {}
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_endpoint_answers_the_same_on_one_two_and_three_workers() {
    let f = fixture().await;
    let local = engine(&f, None);
    let (expected, shipped) = answers(&local).await.unwrap();
    assert_eq!(shipped, 0, "a local query ships nothing");
    // The data is what was written: the ungrouped total is the sum of the inputs.
    assert_eq!(expected[0].1["total"], Value::from(f.total), "{}", expected[0].1);

    let mut workers = Vec::new();
    for _ in 0..3 {
        workers.push(worker(&f, SECRET).await);
    }
    let addrs: Vec<String> = workers.iter().map(|(a, _)| a.clone()).collect();
    for n in 1..=3 {
        let coordinator = coordinator(&f, &addrs[..n], SECRET, 1).await;
        let (got, shipped) = answers(&coordinator).await.unwrap();
        if n == 1 {
            // One task is never worth a network hop: the planner keeps it in the coordinator.
            assert_eq!(shipped, 0, "one worker: the query stays in the coordinator");
        } else {
            assert!(
                shipped > 0,
                "{n} workers: the flamegraph, grouped or not, and the time series ran on the workers"
            );
        }
        assert_eq!(got.len(), expected.len());
        for ((name, want), (_, have)) in expected.iter().zip(&got) {
            assert_eq!(have, want, "{name} with {n} workers differs from one process");
        }
    }

    // Above the task size the query stays in the coordinator: nothing is shipped.
    let large = coordinator(&f, &addrs, SECRET, 1 << 40).await;
    let (got, shipped) = answers(&large).await.unwrap();
    assert_eq!(shipped, 0, "a query smaller than one task stays local");
    assert_eq!(got, expected);
    drop(workers);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rollup_tiers_answer_the_same_through_workers() {
    let f = fixture().await;
    // One hour block with its rollups; the range's edges are not on the minute and it ends
    // at the last sample, leaving that one out, so the block is cut by the range and a query
    // reads raw samples and the 1m tier in one plan (a block wholly inside the range would
    // be read from its hour tier alone).
    let last = SEGMENTS - 1;
    let cut = TimeRange {
        start: T0,
        end: T0 + last * 60_000_000_000 + 1_999 * 10_000_000,
    };
    let last_value = 1 + (1_999 * 13 + last) % 97;
    let compactor = Compactor::new(
        f.store.clone(),
        f.catalog.clone(),
        CompactionConfig::default(),
        ManualClock::at(T0 + 10 * 3_600_000_000_000),
    );
    compactor.compact_tenant(TENANT, CompactMode::Full).await.unwrap();
    let local = engine(&f, None);
    let read = local
        .flamegraph(&FlamegraphQuery {
            scope: Scope::new(TENANT, cpu(), cut),
            group_by: vec![],
            max_nodes: 0,
        })
        .await
        .unwrap();
    assert_eq!(read.total, f.total - last_value);
    let tiers = read.stats.unwrap().rows_by_tier;
    assert!(tiers.contains_key("1m") && tiers.contains_key("raw"), "{tiers:?}");
    let (expected, _) = answers_over(&local, cut).await.unwrap();
    let mut workers = Vec::new();
    for _ in 0..2 {
        workers.push(worker(&f, SECRET).await);
    }
    let addrs: Vec<String> = workers.iter().map(|(a, _)| a.clone()).collect();
    let coordinator = coordinator(&f, &addrs, SECRET, 1).await;
    let (got, _) = answers_over(&coordinator, cut).await.unwrap();
    for ((name, want), (_, have)) in expected.iter().zip(&got) {
        assert_eq!(
            have, want,
            "{name} over the tiers with 2 workers differs from one process"
        );
    }
    drop(workers);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn workers_refuse_a_coordinator_without_the_secret() {
    let f = fixture().await;
    let (addr, task) = worker(&f, SECRET).await;
    // The probe is refused too, so a coordinator with the wrong secret sees no live worker
    // and answers from its own process.
    let wrong = ClusterConfig::start(WorkerSource::Fixed(vec![addr.clone()]), 1, "not-the-secret")
        .await
        .unwrap();
    assert!(wrong.live_workers().is_empty(), "{:?}", wrong.live_workers());

    // A raw call without the secret is refused by the worker itself.
    let mut client = tonic::client::Grpc::new(
        tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap(),
    );
    client.ready().await.unwrap();
    let refused = client
        .unary::<(), (), _>(
            tonic::Request::new(()),
            http::uri::PathAndQuery::from_static("/worker.WorkerService/GetWorkerInfo"),
            tonic_prost::ProstCodec::<(), ()>::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused:?}");
    assert!(
        refused.message().contains("missing cluster secret"),
        "{refused:?}"
    );
    drop(task);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_every_worker_gone_queries_run_in_the_coordinator() {
    let f = fixture().await;
    let (addr, task) = worker(&f, SECRET).await;
    let coordinator = coordinator(&f, std::slice::from_ref(&addr), SECRET, 1).await;
    drop(task);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while tokio::net::TcpStream::connect(&addr).await.is_ok() {
        assert!(tokio::time::Instant::now() < deadline, "the worker never stopped");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The coordinator may still list the worker (its probe runs every second): the first
    // run fails on it, the probe asked at once finds none, and the second run is local.
    let flamegraph = coordinator
        .flamegraph(&FlamegraphQuery {
            scope: scope(),
            group_by: vec![],
            max_nodes: 0,
        })
        .await
        .expect("a query with its only worker gone runs in the coordinator");
    assert_eq!(flamegraph.total, f.total);
    assert_eq!(flamegraph.stats.unwrap().bytes_shipped, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_out_of_memory_refuses_as_the_budget_does_in_one_process() {
    let f = fixture().await;
    // Far below what the partial sums of a few hundred stacks take.
    let tiny = Some(1 << 10);
    let mut workers = Vec::new();
    for _ in 0..2 {
        workers.push(serve(Arc::new(engine_with_budget(&f, None, tiny)), SECRET).await);
    }
    let addrs: Vec<String> = workers.iter().map(|(a, _)| a.clone()).collect();
    let coordinator = coordinator(&f, &addrs, SECRET, 1).await;
    let err = coordinator
        .flamegraph(&FlamegraphQuery {
            scope: scope(),
            group_by: vec![],
            max_nodes: 0,
        })
        .await
        .expect_err("the workers' budget is too small");
    // The worker's DataFusion error crosses the network typed, so it is the memory refusal
    // (503 with its own message), not a worker failure.
    assert!(matches!(err, QueryError::ResourcesExhausted { .. }), "{err:?}");
    assert!(err.to_string().contains("memory"), "{err}");
    // The coordinator's own budget still answers the same query in-process.
    let local = engine(&f, None);
    let answer = local
        .flamegraph(&FlamegraphQuery {
            scope: scope(),
            group_by: vec![],
            max_nodes: 0,
        })
        .await
        .unwrap();
    assert_eq!(answer.total, f.total);
    drop(workers);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn workers_read_footers_once_through_the_shared_cache() {
    let f = fixture().await;
    let engines: Vec<Arc<QueryEngine>> = (0..2).map(|_| Arc::new(engine(&f, None))).collect();
    let mut workers = Vec::new();
    for e in &engines {
        workers.push(serve(e.clone(), SECRET).await);
    }
    let addrs: Vec<String> = workers.iter().map(|(a, _)| a.clone()).collect();
    let coordinator = coordinator(&f, &addrs, SECRET, 1).await;
    let query = FlamegraphQuery {
        scope: scope(),
        group_by: vec![],
        max_nodes: 0,
    };
    assert_eq!(coordinator.flamegraph(&query).await.unwrap().total, f.total);
    let cached: Vec<usize> = engines.iter().map(|e| e.cached_footers()).collect();
    // Both workers had a task, and DataFusion's default reader of a decoded scan caches
    // nothing: footers in both caches mean the shipped scans read through them.
    assert!(cached.iter().all(|&n| n > 0), "{cached:?}");
    // Asked again, each worker finds what it read before; a footer is cached at most once
    // per worker, whichever tasks the routing gives it.
    assert_eq!(coordinator.flamegraph(&query).await.unwrap().total, f.total);
    for e in &engines {
        assert!(e.cached_footers() <= SEGMENTS as usize, "{}", e.cached_footers());
    }
    drop(workers);
}
