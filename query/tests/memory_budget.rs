//! The query memory budget: a flamegraph over many distinct stacks fails cleanly, with an
//! error naming the budget, when DataFusion's memory pool is too small for its
//! aggregation, and the same query succeeds with the default budget.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::sync::Arc;
use std::time::Duration;

use stackhouse_query::DEFAULT_MEMORY_BUDGET;
use stackhouse_query::{FlamegraphQuery, QueryConfig, QueryEngine, QueryError, Scope};
use stackhouse_storage::catalog::{Catalog, open_catalog};
use stackhouse_storage::model::{
    Batch, Function, Labels, Line, Location, ProfileType, SampleRow, Series, SymbolId, TimeRange,
};
use stackhouse_storage::store::Store;
use stackhouse_storage::symbols::SymbolCache;
use stackhouse_storage::writer::{Writer, WriterConfig};

const TENANT: &str = "acme";
/// Functions; every (caller, callee) pair of them is a distinct two-frame stack.
const FUNCTIONS: usize = 300;
const T0: i64 = 1_750_000_000_000_000_000;
/// A budget far below what grouping [`FUNCTIONS`]² stacks takes.
const TINY: usize = 64 << 10;

fn cpu() -> ProfileType {
    ProfileType::parse("samples:count:cpu:nanoseconds").unwrap()
}

/// One sample per distinct stack; returns the batch and the sum of its values.
fn batch() -> (Batch, i64) {
    let mut b = Batch::new(TENANT);
    let series = b.add_series(Series::new(
        cpu(),
        Labels::from([("service.name".to_string(), "api".to_string())]),
        10_000_000,
    ));
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
    for (i, &caller) in locations.iter().enumerate() {
        for (j, &callee) in locations.iter().enumerate() {
            let n = (i * FUNCTIONS + j) as i64;
            let value = 1 + n % 7;
            total += value;
            let stack_id = b.add_stack(&[callee, caller]);
            b.samples.push(SampleRow {
                time_nanos: T0 + n * 1_000,
                series_id: series,
                stack_id,
                value,
                attr_set_id: SymbolId::ZERO,
                trace_id: None,
                span_id: None,
                profile_id: None,
            });
        }
    }
    (b, total)
}

fn engine(store: &Store, catalog: &Arc<dyn Catalog>, memory_limit_bytes: Option<usize>) -> QueryEngine {
    let symbols = Arc::new(SymbolCache::new(store.clone(), catalog.clone()));
    let mut config = QueryConfig {
        target_partitions: 2,
        ..QueryConfig::default()
    };
    config.limits.timeout = Duration::from_secs(300);
    if memory_limit_bytes.is_some() {
        config.memory_limit_bytes = memory_limit_bytes;
    }
    QueryEngine::new(store.clone(), catalog.clone(), symbols, config)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_over_the_memory_budget_fails_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&format!("file://{}", dir.path().join("objects").display())).unwrap();
    let catalog: Arc<dyn Catalog> = open_catalog(&format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("catalog.db").display()
    ))
    .await
    .unwrap();
    let (batch, total) = batch();
    let stacks = batch.samples.len();
    assert_eq!(stacks, FUNCTIONS * FUNCTIONS);
    let writer = Writer::start(
        store.clone(),
        catalog.clone(),
        Arc::new(SymbolCache::new(store.clone(), catalog.clone())),
        WriterConfig {
            flush_interval: Duration::from_millis(10),
            ..WriterConfig::default()
        },
    );
    writer.write(batch).await.unwrap();
    writer.shutdown().await;

    let query = FlamegraphQuery {
        scope: Scope::new(
            TENANT,
            cpu(),
            TimeRange {
                start: T0,
                end: T0 + 3_600_000_000_000,
            },
        ),
        group_by: vec![],
        max_nodes: 0,
    };

    let err = engine(&store, &catalog, Some(TINY))
        .flamegraph(&query)
        .await
        .expect_err("grouping 90 000 stacks fits in 64 KiB");
    assert!(
        matches!(
            err,
            QueryError::ResourcesExhausted {
                budget: Some(TINY),
                ..
            }
        ),
        "{err:?}"
    );
    let message = err.to_string();
    println!("{message}");
    assert!(
        message.starts_with(&format!(
            "query exceeded the memory budget of {TINY} bytes; narrow the time range or selector"
        )),
        "{message}"
    );

    // The default budget: the flamegraph holds every sample.
    let default = engine(&store, &catalog, None);
    assert_eq!(
        QueryConfig::default().memory_limit_bytes,
        Some(DEFAULT_MEMORY_BUDGET)
    );
    let flamegraph = default.flamegraph(&query).await.unwrap();
    assert_eq!(flamegraph.total, total);
}
