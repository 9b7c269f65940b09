//! The writer's memory budget: writes that do not fit are refused at once with a retry
//! delay and leave nothing behind, those that fit are stored and acknowledged, and the
//! room comes back once their flush is acknowledged.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use stackhouse_storage::catalog::{Catalog, TableKind};
use stackhouse_storage::store::Store;
use stackhouse_storage::symbols::SymbolCache;
use stackhouse_storage::writer::{WriteError, Writer, WriterConfig};
use tokio::task::JoinSet;

/// Long enough that every refusal below happens before the first flush.
const FLUSH: Duration = Duration::from_secs(3);
/// Batches that fit in the budget at once.
const FIT: usize = 3;
const WRITERS: usize = 10;

fn start(store: &Store, catalog: &Arc<dyn Catalog>, max_buffered_bytes: usize) -> Arc<Writer> {
    let symbols = Arc::new(SymbolCache::new(store.clone(), catalog.clone()));
    let config = WriterConfig {
        flush_interval: FLUSH,
        max_buffered_bytes,
        ..WriterConfig::default()
    };
    Arc::new(Writer::start(store.clone(), catalog.clone(), symbols, config))
}

async fn stored_samples(catalog: &dyn Catalog) -> u64 {
    let stats = catalog.stats("acme").await.unwrap();
    stats
        .tables
        .get(TableKind::Samples.as_str())
        .map_or(0, |t| t.rows)
}

#[tokio::test]
async fn writes_over_the_budget_are_refused_until_a_flush_frees_room() {
    let (dir, store) = local_store();
    let catalog = sqlite_catalog(&dir).await;
    let bytes = sample_batch("acme").estimated_bytes();
    let samples_per_batch = sample_batch("acme").samples.len() as u64;
    assert!(bytes > 0 && samples_per_batch > 0);
    // Room for FIT batches and half of another.
    let writer = start(&store, &catalog, FIT * bytes + bytes / 2);

    let started = Instant::now();
    let mut writes = JoinSet::new();
    for n in 0..WRITERS as u8 {
        let writer = writer.clone();
        writes.spawn(async move {
            let result = writer.write(numbered_batch("acme", n)).await;
            (result, started.elapsed())
        });
    }

    // Before the first flush: the accepted batches hold their bytes, nothing is stored.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(writer.buffered_bytes(), FIT * bytes);
    assert_eq!(stored_samples(catalog.as_ref()).await, 0);

    let (mut acked, mut refused) = (0, 0);
    while let Some(joined) = writes.join_next().await {
        match joined.unwrap() {
            (Ok(receipt), _) => {
                assert!(!receipt.segment_id.is_empty());
                acked += 1;
            }
            (Err(WriteError::Overloaded { retry_after, budget }), elapsed) => {
                assert_eq!(retry_after, FLUSH, "the retry delay is the flush interval");
                assert_eq!(budget, FIT * bytes + bytes / 2);
                assert!(
                    elapsed < FLUSH,
                    "refused at once, not after waiting for a flush: {elapsed:?}"
                );
                refused += 1;
            }
            (Err(e), _) => panic!("unexpected error: {e}"),
        }
    }
    assert_eq!((acked, refused), (FIT, WRITERS - FIT));
    assert_eq!(
        writer.buffered_bytes(),
        0,
        "acknowledged writes free their budget"
    );
    assert_eq!(
        stored_samples(catalog.as_ref()).await,
        FIT as u64 * samples_per_batch,
        "every acknowledged write is stored, nothing of a refused one"
    );

    // With the room back, writes are accepted again.
    writer.write(numbered_batch("acme", 99)).await.unwrap();
    assert_eq!(
        stored_samples(catalog.as_ref()).await,
        (FIT as u64 + 1) * samples_per_batch
    );
    writer.shutdown().await;
}

#[tokio::test]
async fn a_batch_larger_than_the_whole_budget_is_refused_for_good() {
    let (dir, store) = local_store();
    let catalog = sqlite_catalog(&dir).await;
    let bytes = sample_batch("acme").estimated_bytes();
    let writer = start(&store, &catalog, bytes - 1);

    let started = Instant::now();
    let err = writer.write(sample_batch("acme")).await.unwrap_err();
    assert!(started.elapsed() < FLUSH);
    let WriteError::TooLarge {
        bytes: needed,
        budget,
    } = err
    else {
        panic!("expected TooLarge, got {err}");
    };
    assert_eq!((needed, budget), (bytes, bytes - 1));
    assert!(
        err.to_string().contains(&format!("budget of {}", bytes - 1)),
        "{err}"
    );
    assert_eq!(writer.buffered_bytes(), 0);
    writer.shutdown().await;
    assert_eq!(stored_samples(catalog.as_ref()).await, 0);
}
