//! The group-commit writer against a real SQLite catalog and a local object store.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use common::*;
use stackhouse_storage::catalog::prelude::*;
use stackhouse_storage::catalog::{
    CatalogError, CatalogResult, CatalogStats, CommitOutcome, DayCommit, ObjectMeta, SegmentCommit,
    SegmentMeta, SegmentReplacement, TableKind,
};
use stackhouse_storage::clock::{Clock, ManualClock};
use stackhouse_storage::compaction::{CompactMode, CompactionConfig, Compactor};
use stackhouse_storage::model::{Batch, ProfileKey, ProfileRecord, TimeRange};
use stackhouse_storage::segment::symbols_key;
use stackhouse_storage::store::Store;
use stackhouse_storage::symbols::SymbolCache;
use stackhouse_storage::writer::{WriteError, Writer, WriterCatalog, WriterConfig};

struct Env {
    _dir: tempfile::TempDir,
    store: Store,
    catalog: Arc<dyn Catalog>,
}

async fn env() -> Env {
    let (dir, store) = local_store();
    let catalog = sqlite_catalog(&dir).await;
    Env {
        _dir: dir,
        store,
        catalog,
    }
}

fn config(flush_ms: u64) -> WriterConfig {
    WriterConfig {
        flush_interval: Duration::from_millis(flush_ms),
        max_pending_samples: 1_000_000,
        ..WriterConfig::default()
    }
}

/// A writer committing to `catalog`, with its symbols read from the environment's.
fn writer_on(env: &Env, catalog: Arc<dyn WriterCatalog>, config: WriterConfig) -> Writer {
    let symbols = Arc::new(SymbolCache::new(env.store.clone(), env.catalog.clone()));
    Writer::start(env.store.clone(), catalog, symbols, config)
}

async fn segments(catalog: &dyn Catalog, tenant: &str) -> Vec<SegmentMeta> {
    catalog.segments(tenant, TimeRange::ALL).await.unwrap()
}

/// The tenant's symbol objects written with segment `id` (the writer keys them by the
/// segment that first stored them).
async fn symbols_of(catalog: &dyn Catalog, tenant: &str, id: &str) -> Vec<ObjectMeta> {
    let objects = catalog.symbol_objects(tenant).await.unwrap();
    objects
        .into_iter()
        .filter(|o| o.key == symbols_key(tenant, id, o.kind))
        .collect()
}

fn rows(stats: &CatalogStats, kind: TableKind) -> u64 {
    stats.tables.get(kind.as_str()).map_or(0, |t| t.rows)
}

#[tokio::test]
async fn symbols_are_stored_once() {
    let env = env().await;
    let writer = writer_on(&env, env.catalog.clone(), config(20));
    let first = writer.write(sample_batch("acme")).await.unwrap();
    let second = writer.write(sample_batch("acme")).await.unwrap();
    assert_ne!(first.segment_id, second.segment_id);

    let segs = segments(env.catalog.as_ref(), "acme").await;
    let seg = |id: &str| segs.iter().find(|s| s.id == id).unwrap().clone();
    for id in [&first.segment_id, &second.segment_id] {
        let kinds: Vec<_> = seg(id).objects.iter().map(|o| o.kind).collect();
        assert_eq!(
            kinds,
            vec![TableKind::Samples],
            "a segment holds its samples only"
        );
    }
    let mut kinds: Vec<_> = symbols_of(env.catalog.as_ref(), "acme", &first.segment_id)
        .await
        .iter()
        .map(|o| o.kind.as_str())
        .collect();
    kinds.sort();
    assert_eq!(
        kinds,
        ["attribute_sets", "functions", "locations", "mappings", "stacks"],
        "five symbol tables written with the first segment"
    );
    assert!(
        symbols_of(env.catalog.as_ref(), "acme", &second.segment_id)
            .await
            .is_empty(),
        "the second segment repeats no symbol"
    );
    assert_eq!(env.catalog.symbol_objects("acme").await.unwrap().len(), 5);

    let stats = env.catalog.stats("acme").await.unwrap();
    assert_eq!(stats.segments, 2);
    assert_eq!(
        rows(&stats, TableKind::Samples),
        4 + 3,
        "samples are not deduplicated, but the one of profile PROFILE is stored once"
    );
    assert_eq!(rows(&stats, TableKind::Stacks), STACK_NODES as u64);
    assert_eq!(rows(&stats, TableKind::Locations), LOCATIONS as u64);
    assert_eq!(rows(&stats, TableKind::Functions), FUNCTIONS as u64);
    assert_eq!(rows(&stats, TableKind::Mappings), MAPPINGS as u64);
    assert_eq!(rows(&stats, TableKind::AttributeSets), ATTR_ROWS as u64);
    writer.shutdown().await;
}

#[tokio::test]
async fn a_new_process_loads_stored_symbols() {
    let env = env().await;
    let writer = writer_on(&env, env.catalog.clone(), config(20));
    writer.write(sample_batch("acme")).await.unwrap();
    writer.shutdown().await;

    // A second writer with an empty cache, as after a restart or on another replica.
    let restarted = writer_on(&env, env.catalog.clone(), config(20));
    let receipt = restarted.write(sample_batch("acme")).await.unwrap();
    let segs = segments(env.catalog.as_ref(), "acme").await;
    assert!(segs.iter().any(|s| s.id == receipt.segment_id));
    assert!(
        symbols_of(env.catalog.as_ref(), "acme", &receipt.segment_id)
            .await
            .is_empty(),
        "symbols were read back from the first segment"
    );
    assert_eq!(env.catalog.symbol_objects("acme").await.unwrap().len(), 5);

    // Another tenant never sees them.
    let other = restarted.write(sample_batch("other")).await.unwrap();
    let segs = segments(env.catalog.as_ref(), "other").await;
    assert!(segs.iter().any(|s| s.id == other.segment_id));
    assert_eq!(
        symbols_of(env.catalog.as_ref(), "other", &other.segment_id)
            .await
            .len(),
        5
    );
    restarted.shutdown().await;
}

#[tokio::test]
async fn acknowledged_only_once_visible() {
    let env = env().await;
    let writer = Arc::new(writer_on(&env, env.catalog.clone(), config(1000)));
    let pending = tokio::spawn({
        let writer = writer.clone();
        async move { writer.write(sample_batch("acme")).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!pending.is_finished(), "waits for the flush");
    assert!(segments(env.catalog.as_ref(), "acme").await.is_empty());

    let receipt = pending.await.unwrap().unwrap();
    let segs = segments(env.catalog.as_ref(), "acme").await;
    assert_eq!(segs.len(), 1);
    assert_eq!(segs[0].id, receipt.segment_id);
    assert_eq!((segs[0].min_time, segs[0].max_time), (50, 300));

    // What the commit carried: series, sample attributes and the profile record.
    let names = env.catalog.label_names("acme", TimeRange::ALL).await.unwrap();
    for name in ["service.name", "thread.id", "thread.name"] {
        assert!(names.iter().any(|n| n == name), "{name} in {names:?}");
    }
    let threads = env
        .catalog
        .label_values("acme", "thread.name", TimeRange::ALL)
        .await
        .unwrap();
    assert_eq!(threads, ["main", "worker"]);
    let profile = env.catalog.profile("acme", PROFILE).await.unwrap();
    assert_eq!(profile.len(), 1);
    assert_eq!(profile[0].0, receipt.segment_id);
    writer.shutdown().await;
}

#[tokio::test]
async fn concurrent_writers_share_a_segment() {
    let env = env().await;
    let writer = Arc::new(writer_on(&env, env.catalog.clone(), config(300)));
    let tasks: Vec<_> = (0..40)
        .map(|_| {
            let writer = writer.clone();
            tokio::spawn(async move { writer.write(sample_batch("acme")).await })
        })
        .collect();
    let mut ids = Vec::new();
    for task in tasks {
        ids.push(task.await.unwrap().unwrap().segment_id);
    }
    ids.sort();
    ids.dedup();
    assert!(ids.len() <= 3, "40 requests went into {} segments", ids.len());

    let stats = env.catalog.stats("acme").await.unwrap();
    assert_eq!(stats.segments, ids.len() as u64);
    // Each batch has one sample of profile PROFILE: a repeat of one profile, stored once.
    assert_eq!(rows(&stats, TableKind::Samples), 40 * 3 + 1);
    assert_eq!(rows(&stats, TableKind::Stacks), STACK_NODES as u64);
    writer.shutdown().await;
}

#[tokio::test]
async fn a_retried_profile_is_stored_once() {
    let env = env().await;
    let writer = writer_on(&env, env.catalog.clone(), config(20));
    writer.write(sample_batch("acme")).await.unwrap();
    // The same export again, as a sender retries when the answer was lost.
    writer.write(sample_batch("acme")).await.unwrap();
    let stats = env.catalog.stats("acme").await.unwrap();
    // Samples without a profile id cannot be told from new ones and are stored again.
    assert_eq!(rows(&stats, TableKind::Samples), 4 + 3);
    assert_eq!(env.catalog.profile("acme", PROFILE).await.unwrap().len(), 1);

    // Only the profile-tagged part: nothing left to store, no segment.
    let mut only_profile = sample_batch("acme");
    only_profile.samples.retain(|s| s.profile_id.is_some());
    let receipt = writer.write(only_profile).await.unwrap();
    assert!(receipt.segment_id.is_empty());
    assert_eq!(env.catalog.stats("acme").await.unwrap().segments, 2);

    // The same profile id at another time is another profile.
    let mut later = sample_batch("acme");
    later.samples.retain(|s| s.profile_id.is_some());
    later.samples[0].time_nanos = 70;
    later.profiles[0].start_nanos = 70;
    writer.write(later).await.unwrap();
    assert_eq!(env.catalog.profile("acme", PROFILE).await.unwrap().len(), 2);
    writer.shutdown().await;
}

/// Another ingester stored the profile between this one's look-up and its commit: the
/// commit refuses it, and the writer stores the rest of the batch without it.
#[tokio::test]
async fn a_profile_stored_since_the_look_up_is_left_out_at_commit() {
    let env = env().await;
    let blind = Arc::new(FailingCatalog {
        blind: true,
        ..FailingCatalog::over(env.catalog.clone())
    });
    let elsewhere = writer_on(&env, env.catalog.clone(), config(20));
    let this = writer_on(&env, blind.clone(), config(20));
    elsewhere.write(sample_batch("acme")).await.unwrap();
    let receipt = this.write(sample_batch("acme")).await.unwrap();
    assert_eq!(
        blind.refused.load(Ordering::SeqCst),
        1,
        "the first commit was refused"
    );
    assert!(
        segments(env.catalog.as_ref(), "acme")
            .await
            .iter()
            .any(|s| s.id == receipt.segment_id),
        "the rest was committed again"
    );
    assert_eq!(env.catalog.profile("acme", PROFILE).await.unwrap().len(), 1);
    // The three samples without a profile id twice, the one of PROFILE once.
    assert_eq!(
        rows(&env.catalog.stats("acme").await.unwrap(), TableKind::Samples),
        4 + 3
    );
    // The profile-tagged part alone: refused at commit, nothing left, no segment.
    let mut only_profile = sample_batch("acme");
    only_profile.samples.retain(|s| s.profile_id.is_some());
    let receipt = this.write(only_profile).await.unwrap();
    assert!(receipt.segment_id.is_empty());
    assert_eq!(env.catalog.stats("acme").await.unwrap().segments, 2);
    elsewhere.shutdown().await;
    this.shutdown().await;
}

#[tokio::test]
async fn the_size_bound_flushes_early() {
    let env = env().await;
    let config = WriterConfig {
        flush_interval: Duration::from_secs(3600),
        max_pending_samples: 4,
        ..WriterConfig::default()
    };
    let writer = writer_on(&env, env.catalog.clone(), config);
    let receipt = tokio::time::timeout(Duration::from_secs(20), writer.write(sample_batch("acme")))
        .await
        .expect("four samples reach the bound without waiting for the interval")
        .unwrap();
    assert_eq!(
        segments(env.catalog.as_ref(), "acme").await[0].id,
        receipt.segment_id
    );
    writer.shutdown().await;
}

/// `batch` with its samples and profiles moved `by` nanoseconds later.
fn shifted(mut batch: Batch, by: i64) -> Batch {
    for sample in &mut batch.samples {
        sample.time_nanos += by;
    }
    for profile in &mut batch.profiles {
        profile.start_nanos += by;
        profile.end_nanos += by;
    }
    batch
}

/// The writer stamps segments by the clock it is given, the one compaction ages level-0
/// segments by: a minute that is still open is merged once its segments are `l0_max_age`
/// old on that clock, without waiting for it.
#[tokio::test]
async fn level_0_segments_age_by_the_clock_the_writer_and_compactor_share() {
    const SEC: i64 = 1_000_000_000;
    // Half a minute into a minute of 2024: the minute stays open (it closes a settle period
    // after its end) for the whole test.
    let minute = 475_000 * 3_600 * SEC;
    let clock = ManualClock::at(minute + 30 * SEC);
    let env = env().await;
    let config = WriterConfig {
        clock: clock.clone(),
        ..config(20)
    };
    let writer = writer_on(&env, env.catalog.clone(), config);
    for n in 1..=2 {
        writer
            .write(shifted(numbered_batch("acme", n), minute + 20 * SEC))
            .await
            .unwrap();
    }
    writer.shutdown().await;
    let written = segments(env.catalog.as_ref(), "acme").await;
    assert_eq!(written.len(), 2, "one flush per write: {written:?}");
    assert!(written.iter().all(|s| s.created_at_nanos == clock.now_nanos()));

    let compaction = CompactionConfig::default();
    let l0_max_age = compaction.policy.l0_max_age;
    let compactor = Compactor::new(env.store.clone(), env.catalog.clone(), compaction, clock.clone());
    let report = compactor.compact_tenant("acme", CompactMode::Due).await.unwrap();
    assert_eq!(
        report.segments_removed, 0,
        "young segments of an open minute wait: {report:?}"
    );
    clock.advance(l0_max_age);
    let report = compactor.compact_tenant("acme", CompactMode::Due).await.unwrap();
    assert_eq!(report.segments_removed, 2, "{report:?}");
    let merged = segments(env.catalog.as_ref(), "acme").await;
    assert_eq!(merged.len(), 1, "{merged:?}");
    assert_eq!(merged[0].level, 1);
    assert_eq!(
        merged[0].created_at_nanos,
        clock.now_nanos(),
        "stamped by the compactor's clock"
    );
}

#[tokio::test]
async fn empty_batches_are_acknowledged_without_a_segment() {
    let env = env().await;
    let writer = writer_on(&env, env.catalog.clone(), config(20));
    let receipt = writer.write(Batch::new("acme")).await.unwrap();
    assert!(receipt.segment_id.is_empty());
    writer.shutdown().await;
    assert!(segments(env.catalog.as_ref(), "acme").await.is_empty());
}

#[tokio::test]
async fn shutdown_flushes_pending_then_refuses() {
    let env = env().await;
    let writer = Arc::new(writer_on(&env, env.catalog.clone(), config(3_600_000)));
    let pending: Vec<_> = ["acme", "other"]
        .map(|tenant| {
            let writer = writer.clone();
            tokio::spawn(async move { writer.write(sample_batch(tenant)).await })
        })
        .into();
    tokio::time::sleep(Duration::from_millis(100)).await;
    writer.shutdown().await;
    for task in pending {
        let receipt = task
            .await
            .unwrap()
            .expect("pending requests are flushed, not dropped");
        assert!(!receipt.segment_id.is_empty());
    }
    assert_eq!(segments(env.catalog.as_ref(), "acme").await.len(), 1);
    assert_eq!(segments(env.catalog.as_ref(), "other").await.len(), 1);
    assert!(matches!(
        writer.write(sample_batch("acme")).await,
        Err(WriteError::ShuttingDown)
    ));
    writer.shutdown().await; // a second call returns too
}

#[tokio::test]
async fn a_dropped_request_does_not_break_the_writer() {
    let env = env().await;
    let writer = writer_on(&env, env.catalog.clone(), config(500));
    let gave_up = tokio::time::timeout(Duration::from_millis(20), writer.write(sample_batch("acme"))).await;
    assert!(gave_up.is_err(), "the flush interval is longer than the timeout");
    let receipt = writer.write(sample_batch("acme")).await.unwrap();
    // The abandoned request was already queued, so it may share the segment; either way
    // the writer keeps serving.
    assert!(
        segments(env.catalog.as_ref(), "acme")
            .await
            .iter()
            .any(|s| s.id == receipt.segment_id)
    );
    writer.shutdown().await;
}

/// Delegates to a real catalog but refuses commits for one tenant and never answers
/// commits of another; `blind` finds no profile stored before, as when another ingester
/// commits it between this one's look-up and its commit. Only what the writer uses.
struct FailingCatalog {
    inner: Arc<dyn Catalog>,
    failing_tenant: &'static str,
    hanging_tenant: &'static str,
    refused: AtomicUsize,
    blind: bool,
    /// Runs one compaction pass of the committing tenant before the next commit goes on,
    /// as when another process's compactor gets there between the writer's symbol listing
    /// and its commit.
    compact_first: tokio::sync::Mutex<Option<Compactor>>,
}

impl FailingCatalog {
    fn over(inner: Arc<dyn Catalog>) -> FailingCatalog {
        FailingCatalog {
            inner,
            failing_tenant: "",
            hanging_tenant: "",
            refused: AtomicUsize::new(0),
            blind: false,
            compact_first: tokio::sync::Mutex::new(None),
        }
    }
}

#[async_trait]
impl SegmentCatalog for FailingCatalog {
    async fn commit_segment_within(
        &self,
        commit: &SegmentCommit,
        max_series: usize,
    ) -> CatalogResult<CommitOutcome> {
        if commit.segment.tenant == self.failing_tenant {
            self.refused.fetch_add(1, Ordering::SeqCst);
            return Err(CatalogError::Corrupt("injected failure".into()));
        }
        if commit.segment.tenant == self.hanging_tenant {
            std::future::pending::<()>().await;
        }
        if let Some(compactor) = self.compact_first.lock().await.take() {
            compactor
                .compact_tenant(&commit.segment.tenant, CompactMode::Due)
                .await
                .unwrap();
        }
        let outcome = self.inner.commit_segment_within(commit, max_series).await?;
        if outcome != CommitOutcome::Committed {
            self.refused.fetch_add(1, Ordering::SeqCst);
        }
        Ok(outcome)
    }
    async fn segments(&self, tenant: &str, range: TimeRange) -> CatalogResult<Vec<SegmentMeta>> {
        self.inner.segments(tenant, range).await
    }
    async fn segments_holding(
        &self,
        tenant: &str,
        range: TimeRange,
        series_ids: &[i64],
    ) -> CatalogResult<Vec<SegmentMeta>> {
        self.inner.segments_holding(tenant, range, series_ids).await
    }
    async fn tenants(&self) -> CatalogResult<Vec<String>> {
        self.inner.tenants().await
    }
    async fn replace_segments(&self, replacement: &SegmentReplacement) -> CatalogResult<()> {
        self.inner.replace_segments(replacement).await
    }
    async fn commit_day(&self, day: &DayCommit) -> CatalogResult<()> {
        self.inner.commit_day(day).await
    }
    async fn stats(&self, tenant: &str) -> CatalogResult<CatalogStats> {
        self.inner.stats(tenant).await
    }
    async fn ping(&self) -> CatalogResult<()> {
        self.inner.ping().await
    }
    async fn data_range(&self, tenant: &str) -> CatalogResult<Option<(i64, i64)>> {
        self.inner.data_range(tenant).await
    }
}

#[async_trait]
impl ProfileCatalog for FailingCatalog {
    async fn stored_profiles(&self, tenant: &str, keys: &[ProfileKey]) -> CatalogResult<Vec<ProfileKey>> {
        if self.blind {
            return Ok(Vec::new());
        }
        self.inner.stored_profiles(tenant, keys).await
    }
    async fn profile(&self, tenant: &str, id: [u8; 16]) -> CatalogResult<Vec<(String, ProfileRecord)>> {
        self.inner.profile(tenant, id).await
    }
    async fn drop_profiles(&self, tenant: &str, series_ids: &[i64], range: TimeRange) -> CatalogResult<u64> {
        self.inner.drop_profiles(tenant, series_ids, range).await
    }
}

#[tokio::test]
async fn a_failing_commit_fails_only_its_tenant() {
    let env = env().await;
    let failing = Arc::new(FailingCatalog {
        failing_tenant: "bad",
        ..FailingCatalog::over(env.catalog.clone())
    });
    let writer = Arc::new(writer_on(&env, failing.clone(), config(200)));
    let tasks: Vec<_> = ["bad", "bad", "bad", "good", "good"]
        .into_iter()
        .map(|tenant| {
            let writer = writer.clone();
            tokio::spawn(async move { (tenant, writer.write(sample_batch(tenant)).await) })
        })
        .collect();
    for task in tasks {
        match task.await.unwrap() {
            ("bad", result) => assert!(matches!(result, Err(WriteError::Unavailable(_))), "{result:?}"),
            (_, result) => assert!(result.is_ok(), "{result:?}"),
        }
    }
    assert!(failing.refused.load(Ordering::SeqCst) >= 1);
    assert!(
        segments(env.catalog.as_ref(), "bad").await.is_empty(),
        "nothing of a failed flush is visible"
    );
    assert_eq!(env.catalog.stats("bad").await.unwrap().segments, 0);
    assert!(env.catalog.symbol_objects("bad").await.unwrap().is_empty());
    // Two batches; the sample of profile PROFILE, repeated, is stored once.
    assert_eq!(
        rows(&env.catalog.stats("good").await.unwrap(), TableKind::Samples),
        4 + 3
    );

    // The failed symbols were never recorded: once commits work, they are written again.
    let healthy = writer_on(&env, env.catalog.clone(), config(20));
    let receipt = healthy.write(sample_batch("bad")).await.unwrap();
    assert_eq!(
        segments(env.catalog.as_ref(), "bad").await[0].id,
        receipt.segment_id
    );
    assert_eq!(
        symbols_of(env.catalog.as_ref(), "bad", &receipt.segment_id)
            .await
            .len(),
        5
    );
    writer.shutdown().await;
    healthy.shutdown().await;
}

#[tokio::test]
async fn a_flush_that_hangs_fails_at_the_flush_timeout() {
    let env = env().await;
    let hanging = Arc::new(FailingCatalog {
        hanging_tenant: "stuck",
        ..FailingCatalog::over(env.catalog.clone())
    });
    let config = WriterConfig {
        flush_timeout: Duration::from_millis(300),
        ..config(20)
    };
    let writer = writer_on(&env, hanging, config);
    let started = std::time::Instant::now();
    let stuck = writer.write(sample_batch("stuck")).await;
    match stuck {
        Err(WriteError::Unavailable(message)) => assert!(message.contains("flush timeout"), "{message}"),
        other => panic!("expected a retryable error, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(segments(env.catalog.as_ref(), "stuck").await.is_empty());
    // Other tenants flush as usual.
    writer.write(sample_batch("fine")).await.unwrap();
    assert_eq!(segments(env.catalog.as_ref(), "fine").await.len(), 1);
    writer.shutdown().await;
}

#[tokio::test]
async fn samples_of_undefined_series_are_refused_per_request() {
    let env = env().await;
    let writer = writer_on(&env, env.catalog.clone(), config(20));
    let mut batch = sample_batch("acme");
    batch.series.clear();
    assert!(matches!(
        writer.write(batch).await,
        Err(WriteError::Unavailable(_))
    ));
    writer.shutdown().await;
}

/// The writer looks a batch's series up once per run of rows: a run of an undefined series
/// between defined ones is still refused, named, and nothing of the batch is stored.
#[tokio::test]
async fn a_run_of_an_undefined_series_between_defined_ones_is_refused() {
    let env = env().await;
    let writer = writer_on(&env, env.catalog.clone(), config(20));
    let mut batch = sample_batch("acme");
    let defined = batch.samples[0].clone();
    let undefined = stackhouse_storage::model::SampleRow {
        series_id: 4242,
        ..defined.clone()
    };
    assert!(!batch.series.contains_key(&4242));
    batch.samples.extend([undefined.clone(), undefined, defined]);
    let err = writer.write(batch).await.unwrap_err();
    assert!(
        matches!(&err, WriteError::Unavailable(m) if m.contains("series 4242 but not its definition")),
        "{err}"
    );
    assert!(segments(env.catalog.as_ref(), "acme").await.is_empty());
    writer.shutdown().await;
}

/// [`numbered_batch`] with one more function of its own, called from `main`.
fn batch_calling(tenant: &str, n: u8, function: &str) -> Batch {
    let mut b = numbered_batch(tenant, n);
    let f = b.add_function(stackhouse_storage::model::Function {
        name: function.into(),
        ..Default::default()
    });
    let location = b.add_location(stackhouse_storage::model::Location {
        mapping_id: stackhouse_storage::model::SymbolId::ZERO,
        address: 0x4000 + u64::from(n),
        lines: vec![stackhouse_storage::model::Line {
            function_id: f,
            line: 1,
            column: 0,
        }],
    });
    let stack = b.add_stack(&[location]);
    let mut row = b.samples[0].clone();
    row.stack_id = stack;
    b.samples.push(row);
    b
}

#[tokio::test]
async fn a_union_of_tenants_names_every_members_symbols_as_they_grow_and_merge() {
    let env = env().await;
    let writer = writer_on(&env, env.catalog.clone(), config(20));
    writer.write(batch_calling("a", 1, "only_a")).await.unwrap();
    writer.write(batch_calling("b", 2, "only_b")).await.unwrap();
    let reader = SymbolCache::new(env.store.clone(), env.catalog.clone());
    let names = |index: &stackhouse_storage::symbols::SymbolIndex| {
        let mut names: Vec<String> = index.functions.values().map(|f| f.name.clone()).collect();
        names.sort();
        names
    };
    assert_eq!(
        names(&reader.read("a|b").await.unwrap()),
        ["main", "only_a", "only_b", "work"]
    );
    // A member grows: the union takes in what it lacks.
    writer.write(batch_calling("a", 3, "later_a")).await.unwrap();
    assert_eq!(
        names(&reader.read("a|b").await.unwrap()),
        ["later_a", "main", "only_a", "only_b", "work"]
    );
    // A member's symbol objects merged: its index is rebuilt, and the union after it.
    writer.shutdown().await;
    let compactor = Compactor::new(
        env.store.clone(),
        env.catalog.clone(),
        CompactionConfig::default(),
        stackhouse_storage::clock::system(),
    );
    let report = compactor.compact_tenant("a", CompactMode::Full).await.unwrap();
    assert!(report.symbol_objects_removed > 0, "{report:?}");
    assert_eq!(
        names(&reader.read("b|a").await.unwrap()),
        ["later_a", "main", "only_a", "only_b", "work"]
    );
    assert_eq!(
        names(&reader.read("a|b").await.unwrap()),
        ["later_a", "main", "only_a", "only_b", "work"]
    );
    assert_eq!(
        names(&reader.read("b").await.unwrap()),
        ["main", "only_b", "work"]
    );
}

/// One sample of service `service` in stack `function` <- `main`, with its own thread name.
fn one_stack(service: &str, function: &str, time_nanos: i64) -> Batch {
    use stackhouse_storage::model::{AttributeSet, Function, Line, Location, SampleRow, SymbolId};
    let mut b = Batch::new("acme");
    let frame = |b: &mut Batch, name: &str, address| {
        let function_id = b.add_function(Function {
            name: name.into(),
            ..Default::default()
        });
        b.add_location(Location {
            mapping_id: SymbolId::ZERO,
            address,
            lines: vec![Line {
                function_id,
                line: 1,
                column: 0,
            }],
        })
    };
    let leaf = frame(&mut b, function, 0x2000 + function.len() as u64);
    let root = frame(&mut b, "main", 0x1000);
    let stack_id = b.add_stack(&[leaf, root]);
    let attr_set_id = b.add_attr_set(AttributeSet::new(vec![(
        "thread.name".into(),
        format!("{service}-thread"),
    )]));
    let series_id = b.add_series(series(service));
    b.samples.push(SampleRow {
        time_nanos,
        series_id,
        stack_id,
        value: 1,
        attr_set_id,
        trace_id: None,
        span_id: None,
        profile_id: None,
    });
    b
}

/// Every symbol object of `tenant` read back: function names and thread names, sorted.
async fn stored_names(env: &Env, tenant: &str) -> (Vec<String>, Vec<String>) {
    let mut functions = Vec::new();
    let mut threads = Vec::new();
    for object in env.catalog.symbol_objects(tenant).await.unwrap() {
        let index = stackhouse_storage::segment::read_symbols(&env.store, &object)
            .await
            .unwrap();
        functions.extend(index.functions.values().map(|f| f.name.clone()));
        threads.extend(
            index
                .attr_sets
                .values()
                .flat_map(|s| s.attrs.iter().map(|(_, v)| v.clone())),
        );
    }
    for names in [&mut functions, &mut threads] {
        names.sort();
        names.dedup();
    }
    (functions, threads)
}

/// Whether every stack and attribute set the tenant's segments use is in its symbol objects.
async fn every_used_symbol_is_stored(env: &Env, tenant: &str) -> bool {
    use stackhouse_storage::segment::{SymbolTables, read_samples, read_symbols};
    use stackhouse_storage::symbols::{Reach, SymbolIndex};
    let mut all = SymbolIndex::default();
    for object in env.catalog.symbol_objects(tenant).await.unwrap() {
        all.merge(read_symbols(&env.store, &object).await.unwrap());
    }
    let sources = [SymbolTables::from(&all)];
    let mut reach = Reach::new(&sources);
    for segment in segments(env.catalog.as_ref(), tenant).await {
        let object = segment.object(TableKind::Samples).unwrap();
        for batch in read_samples(&env.store, object).await.unwrap() {
            let ids = |name: &str| {
                use arrow::array::{Array, AsArray};
                let column = batch
                    .column(batch.schema().index_of(name).unwrap())
                    .as_fixed_size_binary();
                (0..column.len())
                    .map(|i| stackhouse_storage::model::SymbolId::from_slice(column.value(i)).unwrap())
                    .collect::<Vec<_>>()
            };
            for id in ids("stack_id") {
                if reach.stack(id).is_err() {
                    return false;
                }
            }
            for id in ids("attr_set_id") {
                if reach.attr_set(id).is_err() {
                    return false;
                }
            }
        }
    }
    true
}

/// Deletes service `gone`'s samples through a request past its cancel period and purges it.
async fn purge_service(env: &Env, compactor: &Compactor, service: &str) {
    use stackhouse_storage::catalog::{DeleteRequest, DeleteState};
    let request = DeleteRequest {
        id: format!("delete-{service}"),
        selector: format!("{{service.name=\"{service}\"}}"),
        from_nanos: 0,
        to_nanos: i64::MAX,
        created_at_millis: 0,
        cancel_until_millis: 0,
        state: DeleteState::Pending,
        matched_series: 1,
        matched_samples: 1,
    };
    env.catalog.add_delete_request("acme", &request).await.unwrap();
    let mut states = [0; 4];
    stackhouse_storage::purge::purge_tenant(compactor, "acme", &mut states)
        .await
        .unwrap();
    let state = env
        .catalog
        .delete_request("acme", &request.id)
        .await
        .unwrap()
        .unwrap()
        .state;
    assert_eq!(state, DeleteState::Purged);
}

fn compactor(env: &Env) -> Compactor {
    Compactor::new(
        env.store.clone(),
        env.catalog.clone(),
        CompactionConfig::default(),
        stackhouse_storage::clock::system(),
    )
}

/// After a purge the next symbol merge keeps only what the remaining segments use: the
/// deleted service's own function and thread name are gone, the shared `main` stays. A
/// writer whose index still lists them brings them again when they are sent again.
#[tokio::test]
async fn symbols_only_purged_samples_used_go_at_the_next_symbol_merge() {
    let env = env().await;
    let writer = writer_on(&env, env.catalog.clone(), config(20));
    writer.write(one_stack("kept", "kept_fn", 10)).await.unwrap();
    writer.write(one_stack("gone", "gone_fn", 20)).await.unwrap();
    assert_eq!(
        stored_names(&env, "acme").await,
        (
            strings(&["gone_fn", "kept_fn", "main"]),
            strings(&["gone-thread", "kept-thread"])
        )
    );
    let compactor = compactor(&env);
    purge_service(&env, &compactor, "gone").await;
    assert!(env.catalog.symbol_epoch("acme").await.unwrap().collect);
    // The purge removed the rows; their symbols stay until the next symbol merge.
    assert_eq!(
        stored_names(&env, "acme").await.0,
        strings(&["gone_fn", "kept_fn", "main"])
    );

    let report = compactor.compact_tenant("acme", CompactMode::Due).await.unwrap();
    // gone_fn's function, location and stack node, and gone's attribute set.
    assert_eq!(report.symbols_collected, 4, "{report:?}");
    assert_eq!(
        stored_names(&env, "acme").await,
        (strings(&["kept_fn", "main"]), strings(&["kept-thread"]))
    );
    let epoch = env.catalog.symbol_epoch("acme").await.unwrap();
    assert!(!epoch.collect && !epoch.collecting(), "{epoch:?}");
    assert!(every_used_symbol_is_stored(&env, "acme").await);
    // Nothing left to collect: the next merge is an ordinary one.
    let again = compactor.compact_tenant("acme", CompactMode::Due).await.unwrap();
    assert_eq!(again.symbols_collected, 0);

    // This writer's index listed gone_fn as stored: sent again, it is written again.
    writer.write(one_stack("back", "gone_fn", 30)).await.unwrap();
    assert_eq!(
        stored_names(&env, "acme").await,
        (
            strings(&["gone_fn", "kept_fn", "main"]),
            strings(&["back-thread", "kept-thread"])
        )
    );
    assert!(every_used_symbol_is_stored(&env, "acme").await);
    writer.shutdown().await;
}

/// The race the symbol epoch exists for: a writer leaves out symbols its index lists as
/// stored, then a collection drops them before the writer commits. The commit is refused
/// and the writer brings them again.
#[tokio::test]
async fn a_collection_between_a_writers_listing_and_its_commit_refuses_the_commit() {
    let env = env().await;
    let racing = Arc::new(FailingCatalog::over(env.catalog.clone()));
    let writer = writer_on(&env, racing.clone(), config(20));
    writer.write(one_stack("kept", "kept_fn", 10)).await.unwrap();
    writer.write(one_stack("gone", "gone_fn", 20)).await.unwrap();
    let compactor = compactor(&env);
    purge_service(&env, &compactor, "gone").await;
    *racing.compact_first.lock().await = Some(compactor);

    let receipt = writer.write(one_stack("back", "gone_fn", 30)).await.unwrap();
    assert_eq!(
        racing.refused.load(Ordering::SeqCst),
        1,
        "the commit listed before the collection was refused"
    );
    assert!(racing.compact_first.lock().await.is_none(), "the collection ran");
    assert!(
        segments(env.catalog.as_ref(), "acme")
            .await
            .iter()
            .any(|s| s.id == receipt.segment_id)
    );
    assert!(
        every_used_symbol_is_stored(&env, "acme").await,
        "a segment uses symbols the collection dropped"
    );
    assert_eq!(
        stored_names(&env, "acme").await,
        (
            strings(&["gone_fn", "kept_fn", "main"]),
            strings(&["back-thread", "kept-thread"])
        )
    );
    writer.shutdown().await;
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}
