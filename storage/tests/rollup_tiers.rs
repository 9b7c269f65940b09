//! Rollup tiers end to end on a local store and a SQLite catalog: compaction writes them
//! with every hour block, raw retention keeps them (splitting a straddling segment to the
//! nanosecond), and the rollup tiers expire in turn. Every expectation is computed from the
//! rows written, never from what storage returns.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::Int64Type;
use common::{local_store, series, sqlite_catalog};
use futures::TryStreamExt;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use stackhouse_storage::catalog::{
    Catalog, DAY_LEVEL, DeleteRequest, DeleteState, ObjectMeta, STALE_DAY_LEVEL, SegmentCommit, SegmentMeta,
    TableKind,
};
use stackhouse_storage::cleanup;
use stackhouse_storage::clock::{Clock, ManualClock};
use stackhouse_storage::compaction::{CompactMode, CompactionConfig, Compactor, TOP_LEVEL};
use stackhouse_storage::model::{Batch, SampleRow, SymbolId, TimeRange};
use stackhouse_storage::per_tenant::PerTenant;
use stackhouse_storage::purge;
use stackhouse_storage::retention::{self, Cutoffs, RetentionConfig};
use stackhouse_storage::rollup::Resolution;
use stackhouse_storage::schema;
use stackhouse_storage::segment::{read_table, write_segment};
use stackhouse_storage::store::Store;

const TENANT: &str = "acme";
const SEC: i64 = 1_000_000_000;
const MINUTE: i64 = 60 * SEC;
const HOUR: i64 = 3600 * SEC;
const DAY: i64 = 24 * HOUR;
/// An hour boundary in 2024.
const T0: i64 = 475_000 * HOUR;

/// (time, series, stack, value) of every sample written.
type Row = (i64, i64, [u8; 16], i64);
type Sums = BTreeMap<(i64, i64, [u8; 16]), i64>;

struct World {
    _dir: tempfile::TempDir,
    store: Store,
    catalog: Arc<dyn Catalog>,
    clock: Arc<ManualClock>,
    compactor: Compactor,
    rows: Vec<Row>,
}

async fn world() -> World {
    let (dir, store) = local_store();
    let catalog = sqlite_catalog(&dir).await;
    let clock = ManualClock::at(T0 + 24 * HOUR);
    let config = CompactionConfig {
        deletion_grace: Duration::ZERO,
        ..CompactionConfig::default()
    };
    let compactor = Compactor::new(store.clone(), catalog.clone(), config, clock.clone());
    World {
        _dir: dir,
        store,
        catalog,
        clock,
        compactor,
        rows: Vec::new(),
    }
}

impl World {
    /// Writes and commits one level-0 segment of `n` random samples in `[start, end)`.
    async fn write(&mut self, rng: &mut SmallRng, start: i64, end: i64, n: usize) {
        let mut batch = Batch::new(TENANT);
        let ids: Vec<i64> = ["web", "api", "db"]
            .into_iter()
            .map(|s| batch.add_series(series(s)))
            .collect();
        for _ in 0..n {
            let row: Row = (
                rng.random_range(start..end),
                ids[rng.random_range(0..ids.len())],
                [rng.random_range(0..8u8); 16],
                // Large values, so wrapping sums are exercised as well.
                if rng.random_range(0..50) == 0 {
                    i64::MAX - 3
                } else {
                    rng.random_range(-10..1_000)
                },
            );
            batch.samples.push(SampleRow {
                time_nanos: row.0,
                series_id: row.1,
                stack_id: SymbolId(row.2),
                value: row.3,
                attr_set_id: SymbolId::ZERO,
                trace_id: None,
                span_id: None,
                profile_id: None,
            });
            self.rows.push(row);
        }
        let id = uuid::Uuid::now_v7().to_string();
        let written = write_segment(&self.store, &batch, &id, 0, self.clock.now_nanos())
            .await
            .unwrap();
        let commit = SegmentCommit {
            series: batch.series.values().cloned().collect(),
            segment: written.segment,
            symbols: written.symbols,
            sample_labels: vec![("thread.name".into(), "main".into())],
            profiles: vec![],
            symbol_epoch: 0,
        };
        self.catalog.commit_segment(&commit).await.unwrap();
    }

    /// Every segment, day segments included.
    async fn all_segments(&self) -> Vec<SegmentMeta> {
        self.catalog.segments(TENANT, TimeRange::ALL).await.unwrap()
    }

    /// The segments holding samples: day segments only sum them.
    async fn segments(&self) -> Vec<SegmentMeta> {
        let mut segments = self.all_segments().await;
        segments.retain(|s| !s.is_day());
        segments
    }

    /// The rows of every object of `resolution`, over all segments.
    async fn rows_at(&self, resolution: Resolution) -> Vec<Row> {
        let mut out = Vec::new();
        for segment in self.all_segments().await {
            let Some(object) = segment.object(resolution.kind()) else {
                continue;
            };
            for table in read_table(&self.store, resolution.kind(), object).await.unwrap() {
                out.extend(rows_of(&table));
            }
        }
        out
    }
}

fn rows_of(table: &RecordBatch) -> Vec<Row> {
    let column = |name: &str| table.column(table.schema().index_of(name).unwrap()).clone();
    let (t, s, st, v) = (
        column(schema::samples::TIME),
        column(schema::samples::SERIES_ID),
        column(schema::samples::STACK_ID),
        column(schema::samples::VALUE),
    );
    let (t, s, v) = (
        t.as_primitive::<Int64Type>(),
        s.as_primitive::<Int64Type>(),
        v.as_primitive::<Int64Type>(),
    );
    let st = st.as_fixed_size_binary();
    (0..table.num_rows())
        .map(|i| {
            (
                t.value(i),
                s.value(i),
                st.value(i).try_into().unwrap(),
                v.value(i),
            )
        })
        .collect()
}

/// Wrapping sums of `rows` per (series, bucket of `step`, stack), of times in `[from, to)`
/// only. Rollup rows sum the same way: their times are bucket starts already, and several
/// segments may hold rows of one bucket.
fn sums(rows: &[Row], step: i64, from: i64, to: i64) -> Sums {
    let mut out = Sums::new();
    for &(t, s, stack, v) in rows.iter().filter(|r| (from..to).contains(&r.0)) {
        let sum = out.entry((s, t.div_euclid(step) * step, stack)).or_default();
        *sum = sum.wrapping_add(v);
    }
    out
}

/// Every object the catalog lists exists in the store, and nothing else is stored.
async fn store_matches_catalog(w: &World) {
    let mut listed: BTreeSet<String> = BTreeSet::new();
    let root = w.store.path("");
    let mut stream = w.store.object_store().list(Some(&w.store.path("tenants")));
    while let Some(meta) = stream.try_next().await.unwrap() {
        let key: Vec<String> = meta
            .location
            .prefix_match(&root)
            .unwrap()
            .map(|p| p.as_ref().to_string())
            .collect();
        listed.insert(key.join("/"));
    }
    let mut referenced: BTreeSet<String> = w
        .all_segments()
        .await
        .iter()
        .flat_map(|s| s.objects.iter().map(|o| o.key.clone()))
        .collect();
    referenced.extend(
        w.catalog
            .symbol_objects(TENANT)
            .await
            .unwrap()
            .into_iter()
            .map(|o| o.key),
    );
    assert_eq!(listed, referenced);
}

/// Every segment holding a rollup holds its totals, and they are the rollup's rows summed
/// over stacks (summed here, row by row).
async fn totals_match_rollups(w: &World) {
    for segment in w.all_segments().await {
        for r in [Resolution::Minute, Resolution::Hour, Resolution::Day] {
            let (Some(rollup), totals) = (segment.object(r.kind()), segment.object(r.totals_kind().unwrap()))
            else {
                continue;
            };
            let totals = totals.unwrap_or_else(|| panic!("{} has {r:?} but not its totals", segment.id));
            let mut want: BTreeMap<(i64, i64), i64> = BTreeMap::new();
            for table in read_table(&w.store, r.kind(), rollup).await.unwrap() {
                for (t, s, _, v) in rows_of(&table) {
                    let sum = want.entry((s, t)).or_default();
                    *sum = sum.wrapping_add(v);
                }
            }
            let got = totals_rows(w, totals).await;
            assert_eq!(got, want.into_iter().collect::<Vec<_>>(), "{} {r:?}", segment.id);
        }
    }
}

/// The ((series, bucket), sum) rows of a totals object, in stored order.
async fn totals_rows(w: &World, totals: &ObjectMeta) -> Vec<((i64, i64), i64)> {
    let mut out = Vec::new();
    for table in read_table(&w.store, totals.kind, totals).await.unwrap() {
        let column = |name: &str| {
            table
                .column(table.schema().index_of(name).unwrap())
                .as_primitive::<Int64Type>()
                .clone()
        };
        let (t, s, v) = (
            column(schema::samples::TIME),
            column(schema::samples::SERIES_ID),
            column(schema::samples::VALUE),
        );
        out.extend((0..table.num_rows()).map(|i| ((s.value(i), t.value(i)), v.value(i))));
    }
    out
}

/// Three hours of data, the second in many segments, then compacted completely.
async fn compacted_world(rng: &mut SmallRng) -> World {
    let mut w = world().await;
    w.write(rng, T0, T0 + HOUR, 3_000).await;
    for m in 0..6 {
        let start = T0 + HOUR + m * 10 * MINUTE;
        w.write(rng, start, start + 10 * MINUTE, 2_000).await;
    }
    w.write(rng, T0 + 2 * HOUR, T0 + 3 * HOUR, 3_000).await;
    w.compactor
        .compact_tenant(TENANT, CompactMode::Full)
        .await
        .unwrap();
    w
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_hour_block_carries_its_rollups() {
    let mut rng = SmallRng::seed_from_u64(1);
    let w = compacted_world(&mut rng).await;
    let segments = w.segments().await;
    assert_eq!(segments.len(), 3, "one block per hour, the lone ones too");
    for s in &segments {
        assert_eq!(s.level, TOP_LEVEL);
        let kinds: Vec<TableKind> = s.objects.iter().map(|o| o.kind).collect();
        assert_eq!(
            kinds,
            [
                TableKind::Samples,
                TableKind::Rollup1m,
                TableKind::Totals1m,
                TableKind::Rollup1h,
                TableKind::Totals1h
            ]
        );
        for r in Resolution::ROLLUPS {
            let key = &s.object(r.kind()).unwrap().key;
            assert!(
                key.ends_with(&format!("{}/{}.parquet", s.id, r.kind().as_str())),
                "{key}"
            );
        }
    }
    totals_match_rollups(&w).await;
    let (all, hours) = (w.rows.clone(), (T0, T0 + 3 * HOUR));
    let minute = w.rows_at(Resolution::Minute).await;
    assert_eq!(
        minute.len(),
        sums(&all, MINUTE, hours.0, hours.1).len(),
        "one row per series, minute and stack"
    );
    assert_eq!(
        sums(&minute, MINUTE, hours.0, hours.1),
        sums(&all, MINUTE, hours.0, hours.1)
    );
    let hour = w.rows_at(Resolution::Hour).await;
    assert_eq!(
        sums(&hour, HOUR, hours.0, hours.1),
        sums(&all, HOUR, hours.0, hours.1)
    );
    assert!(hour.iter().all(|r| r.0 % HOUR == 0));
    let mut raw = w.rows_at(Resolution::Raw).await;
    let mut written = all.clone();
    raw.sort_unstable();
    written.sort_unstable();
    assert_eq!(raw, written);

    // Compacting again changes nothing: the blocks are finished.
    let again = w
        .compactor
        .compact_tenant(TENANT, CompactMode::Full)
        .await
        .unwrap();
    assert_eq!(again.segments_removed, 0, "{again:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_retention_keeps_the_rollups_and_cuts_samples_to_the_nanosecond() {
    let mut rng = SmallRng::seed_from_u64(2);
    let mut w = compacted_world(&mut rng).await;
    // A late segment of the first hour, never compacted: it has no rollups yet.
    w.write(&mut rng, T0 + 10 * MINUTE, T0 + 20 * MINUTE, 500).await;
    let lone = w.segments().await.into_iter().find(|s| s.level == 0).unwrap();
    assert!(!lone.has(Resolution::Minute));

    let cutoff = T0 + HOUR + 25 * MINUTE + 17;
    let report = retention::expire_tiers(
        &w.compactor,
        TENANT,
        Cutoffs {
            raw: Some(cutoff),
            ..Cutoffs::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(report.segments_removed, 3, "{report:?}");
    assert_eq!(report.segments_added, 4, "{report:?}");
    cleanup::delete_due(&w.store, &*w.catalog, &*w.clock)
        .await
        .unwrap();
    store_matches_catalog(&w).await;
    totals_match_rollups(&w).await;

    // Exactly the samples at or after the cutoff are left.
    let mut raw = w.rows_at(Resolution::Raw).await;
    let mut kept: Vec<Row> = w.rows.iter().copied().filter(|r| r.0 >= cutoff).collect();
    raw.sort_unstable();
    kept.sort_unstable();
    assert_eq!(raw, kept);
    for s in w.segments().await {
        if s.has(Resolution::Raw) {
            assert!(s.min_time >= cutoff, "{s:?}");
        } else {
            assert!(s.max_time < cutoff, "{s:?}");
            assert!(s.has(Resolution::Minute) && s.has(Resolution::Hour), "{s:?}");
        }
    }
    // And nothing of the rollups is lost: every whole hour and minute sums as written.
    let all = &w.rows;
    let (from, to) = (T0, T0 + 3 * HOUR);
    assert_eq!(
        sums(&w.rows_at(Resolution::Hour).await, HOUR, from, to),
        sums(all, HOUR, from, to)
    );
    assert_eq!(
        sums(&w.rows_at(Resolution::Minute).await, MINUTE, from, to),
        sums(all, MINUTE, from, to)
    );
    // Label values of the expired range are still answered from the rollup segments.
    let labels = w
        .catalog
        .label_values(
            TENANT,
            "thread.name",
            TimeRange {
                start: T0,
                end: T0 + HOUR,
            },
        )
        .await
        .unwrap();
    assert_eq!(labels, ["main"]);

    // Compaction leaves segments without samples alone, and finishes the split's raw part.
    w.compactor
        .compact_tenant(TENANT, CompactMode::Full)
        .await
        .unwrap();
    let rollup_only = w
        .segments()
        .await
        .iter()
        .filter(|s| !s.has(Resolution::Raw))
        .count();
    assert_eq!(rollup_only, 3);
    assert_eq!(
        sums(&w.rows_at(Resolution::Hour).await, HOUR, from, to),
        sums(all, HOUR, from, to)
    );
    // A second pass at the same cutoff has nothing left to do.
    let again = retention::expire_tiers(
        &w.compactor,
        TENANT,
        Cutoffs {
            raw: Some(cutoff),
            ..Cutoffs::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(again.segments_removed, 0, "{again:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollup_tiers_expire_in_turn() {
    let mut rng = SmallRng::seed_from_u64(3);
    let w = compacted_world(&mut rng).await;
    let all = w.rows.clone();
    let day = Duration::from_secs(86_400);
    let config = RetentionConfig {
        raw: PerTenant::uniform(day),
        minute: PerTenant::uniform(2 * day),
        hour: PerTenant::uniform(3 * day),
    };
    // Each block's last sample is within its hour: a day past the third hour's end, all
    // samples are gone and the rollups of every hour remain.
    w.clock.set(T0 + 3 * HOUR + 24 * HOUR);
    retention::run_once(&w.compactor, &config).await.unwrap();
    let segments = w.segments().await;
    assert_eq!(segments.len(), 3);
    assert!(
        segments
            .iter()
            .all(|s| !s.has(Resolution::Raw) && s.has(Resolution::Minute))
    );
    assert_eq!(
        sums(&w.rows_at(Resolution::Hour).await, HOUR, T0, T0 + 3 * HOUR),
        sums(&all, HOUR, T0, T0 + 3 * HOUR)
    );

    // Two days after the second hour: the first two hours keep their hour rollups only.
    w.clock.set(T0 + 2 * HOUR + 48 * HOUR);
    retention::run_once(&w.compactor, &config).await.unwrap();
    let tiers = |s: &SegmentMeta| {
        Resolution::ALL
            .into_iter()
            .filter(|&r| s.has(r))
            .collect::<Vec<_>>()
    };
    let mut by_hour: Vec<(i64, Vec<Resolution>)> = w
        .segments()
        .await
        .iter()
        .map(|s| (s.min_time.div_euclid(HOUR) * HOUR - T0, tiers(s)))
        .collect();
    by_hour.sort();
    let (m, h) = (Resolution::Minute, Resolution::Hour);
    assert_eq!(by_hour, [(0, vec![h]), (HOUR, vec![h]), (2 * HOUR, vec![m, h])]);
    assert_eq!(
        sums(&w.rows_at(Resolution::Hour).await, HOUR, T0, T0 + 3 * HOUR),
        sums(&all, HOUR, T0, T0 + 3 * HOUR)
    );
    assert_eq!(
        sums(&w.rows_at(Resolution::Minute).await, MINUTE, T0, T0 + 3 * HOUR),
        sums(&all, MINUTE, T0 + 2 * HOUR, T0 + 3 * HOUR)
    );

    // Three days after the first hour: it is gone whole; the others stay.
    w.clock.set(T0 + HOUR + 72 * HOUR);
    retention::run_once(&w.compactor, &config).await.unwrap();
    let left: Vec<i64> = w.segments().await.iter().map(|s| s.min_time - T0).collect();
    assert!(left.iter().all(|&t| t >= HOUR), "{left:?}");
    assert_eq!(left.len(), 2);
    assert_eq!(
        sums(&w.rows_at(Resolution::Hour).await, HOUR, T0, T0 + 3 * HOUR),
        sums(&all, HOUR, T0 + HOUR, T0 + 3 * HOUR)
    );
    cleanup::delete_due(&w.store, &*w.catalog, &*w.clock)
        .await
        .unwrap();
    store_matches_catalog(&w).await;
    totals_match_rollups(&w).await;

    // One cutoff for every tier removes everything before it.
    retention::expire(&w.compactor, TENANT, T0 + 3 * HOUR)
        .await
        .unwrap();
    assert!(w.segments().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cutoff_crossing_an_hour_pass_by_pass_leaves_one_rollup_segment() {
    let mut rng = SmallRng::seed_from_u64(4);
    let w = compacted_world(&mut rng).await;
    let all = w.rows.clone();
    // The raw cutoff moves through the second hour as retention passes would.
    let cutoff_at = |step: i64| T0 + HOUR + step * 7 * MINUTE + step;
    for step in 1..=7 {
        let cutoff = cutoff_at(step);
        let cutoffs = Cutoffs {
            raw: Some(cutoff),
            ..Cutoffs::default()
        };
        retention::expire_tiers(&w.compactor, TENANT, cutoffs)
            .await
            .unwrap();
        let segments = w.segments().await;
        let second_hour = |s: &&SegmentMeta| (T0 + HOUR..T0 + 2 * HOUR).contains(&s.min_time);
        let rollups: Vec<&SegmentMeta> = segments
            .iter()
            .filter(second_hour)
            .filter(|s| !s.has(Resolution::Raw))
            .collect();
        assert_eq!(rollups.len(), 1, "pass {step}: {rollups:?}");
        assert_eq!(rollups[0].resolutions(), [Resolution::Minute, Resolution::Hour]);
        assert!(rollups[0].max_time < cutoff);
        let samples: u64 = rollups[0].series.iter().map(|s| s.samples).sum();
        let before = all.iter().filter(|r| (T0 + HOUR..cutoff).contains(&r.0)).count();
        assert_eq!(samples as usize, before, "pass {step}");
        let (from, to) = (T0, T0 + 3 * HOUR);
        assert_eq!(
            sums(&w.rows_at(Resolution::Minute).await, MINUTE, from, to),
            sums(&all, MINUTE, from, to),
            "pass {step}"
        );
        assert_eq!(
            sums(&w.rows_at(Resolution::Hour).await, HOUR, from, to),
            sums(&all, HOUR, from, to),
            "pass {step}"
        );
    }
    let mut raw = w.rows_at(Resolution::Raw).await;
    let mut kept: Vec<Row> = all.iter().copied().filter(|r| r.0 >= cutoff_at(7)).collect();
    raw.sort_unstable();
    kept.sort_unstable();
    assert_eq!(raw, kept);
    cleanup::delete_due(&w.store, &*w.catalog, &*w.clock)
        .await
        .unwrap();
    store_matches_catalog(&w).await;
    totals_match_rollups(&w).await;
}

/// A deletion request past its cancel period is purged from every tier: samples where they
/// remain, both rollups everywhere, the hour retention left as rollups only included. A
/// request still in its period and a cancelled one are left alone, and a second pass finds
/// nothing to rewrite.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_removes_the_matched_rows_from_every_tier_and_nothing_else() {
    let mut rng = SmallRng::seed_from_u64(5);
    let w = compacted_world(&mut rng).await;
    // The first hour keeps only its rollups.
    retention::expire_tiers(
        &w.compactor,
        TENANT,
        Cutoffs {
            raw: Some(T0 + HOUR),
            ..Cutoffs::default()
        },
    )
    .await
    .unwrap();
    let now_millis = w.clock.now_nanos() / 1_000_000;
    let request = |id: &str, service: &str, from: i64, to: i64, state, cancel_until_millis| DeleteRequest {
        id: id.into(),
        selector: format!("{{service.name=\"{service}\"}}"),
        from_nanos: from,
        to_nanos: to,
        created_at_millis: now_millis - 1,
        cancel_until_millis,
        state,
        matched_series: 1,
        matched_samples: 0,
    };
    // web from the first hour's 40th minute (rollups only) into the third hour (samples).
    let (from, to) = (T0 + 40 * MINUTE, T0 + 2 * HOUR + 30 * MINUTE + 7);
    let requests = [
        request("web", "web", from, to, DeleteState::Pending, now_millis),
        request(
            "api",
            "api",
            T0,
            T0 + 3 * HOUR,
            DeleteState::Pending,
            now_millis + 1,
        ),
        request("db", "db", T0, T0 + 3 * HOUR, DeleteState::Cancelled, now_millis),
    ];
    for r in &requests {
        w.catalog.add_delete_request(TENANT, r).await.unwrap();
    }
    let web = series("web").id;
    let mut states = [0; 4];
    let report = purge::purge_tenant(&w.compactor, TENANT, &mut states)
        .await
        .unwrap();
    assert_eq!(
        report.segments_removed, 3,
        "every hour holds web rows: {report:?}"
    );
    // Pending (api), purging (web, moved by this pass), purged, cancelled (db).
    assert_eq!(states, [1, 1, 0, 1]);
    let state_of = |id: &str, listed: &[DeleteRequest]| listed.iter().find(|r| r.id == id).unwrap().state;
    let listed = w.catalog.delete_requests(TENANT).await.unwrap();
    assert_eq!(
        ["web", "api", "db"].map(|id| state_of(id, &listed)),
        [DeleteState::Purged, DeleteState::Pending, DeleteState::Cancelled]
    );
    cleanup::delete_due(&w.store, &*w.catalog, &*w.clock)
        .await
        .unwrap();
    store_matches_catalog(&w).await;
    totals_match_rollups(&w).await;

    let kept: Vec<Row> = w
        .rows
        .iter()
        .copied()
        .filter(|r| !(r.1 == web && (from..to).contains(&r.0)))
        .collect();
    assert!(kept.len() < w.rows.len() && kept.iter().any(|r| r.1 == web));
    let mut raw = w.rows_at(Resolution::Raw).await;
    let mut want: Vec<Row> = kept.iter().copied().filter(|r| r.0 >= T0 + HOUR).collect();
    raw.sort_unstable();
    want.sort_unstable();
    assert_eq!(raw, want, "samples");
    let (all_from, all_to) = (T0, T0 + 3 * HOUR);
    for (resolution, step) in [(Resolution::Minute, MINUTE), (Resolution::Hour, HOUR)] {
        let stored = w.rows_at(resolution).await;
        // A cut off the hour grid leaves the first hour's hour cell of web as the sum of
        // its first 40 minutes, which is what the remaining samples sum to.
        assert_eq!(
            sums(&stored, step, all_from, all_to),
            sums(&kept, step, all_from, all_to),
            "{resolution:?} rollups"
        );
    }

    // Nothing left to rewrite; then the api request's period ends and it goes too.
    let again = purge::purge_tenant(&w.compactor, TENANT, &mut states)
        .await
        .unwrap();
    assert_eq!(again.segments_removed, 0, "{again:?}");
    w.clock.advance(Duration::from_millis(2));
    purge::purge_tenant(&w.compactor, TENANT, &mut states)
        .await
        .unwrap();
    let api = series("api").id;
    let raw = w.rows_at(Resolution::Raw).await;
    assert!(!raw.iter().any(|r| r.1 == api), "api's samples purged");
    let hour = w.rows_at(Resolution::Hour).await;
    assert!(!hour.iter().any(|r| r.1 == api), "api's rollups purged");
    assert!(
        hour.iter().any(|r| r.1 == series("db").id),
        "the cancelled request purged nothing"
    );
}

/// The day segments of `segments` by level: (fresh, stale).
fn day_segments(segments: &[SegmentMeta]) -> (Vec<&SegmentMeta>, Vec<&SegmentMeta>) {
    (
        segments.iter().filter(|s| s.level == DAY_LEVEL).collect(),
        segments.iter().filter(|s| s.level == STALE_DAY_LEVEL).collect(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_day_is_summed_once_and_goes_stale_with_its_blocks() {
    let mut rng = SmallRng::seed_from_u64(9);
    let mut w = world().await;
    let day = Resolution::Day.bucket(T0);
    // Three hours of one day, one of them across midnight into the next, and a lone hour
    // of the day before: a day of one block is not worth summing.
    w.write(&mut rng, T0, T0 + HOUR, 2_000).await;
    w.write(&mut rng, T0 + 2 * HOUR, T0 + 3 * HOUR, 2_000).await;
    w.write(&mut rng, day + DAY - 30 * MINUTE, day + DAY + 10 * MINUTE, 2_000)
        .await;
    w.write(&mut rng, day - 3 * HOUR, day - 2 * HOUR, 500).await;
    // The clock is in the next day: the first has closed, the second has not.
    assert!(w.clock.now_nanos() < day + 2 * DAY);
    let report = w
        .compactor
        .compact_tenant(TENANT, CompactMode::Due)
        .await
        .unwrap();
    assert_eq!(report.days_summed, 1, "{report:?}");
    let segments = w.all_segments().await;
    let (fresh, stale) = day_segments(&segments);
    assert!(stale.is_empty());
    let [summed] = fresh.as_slice() else {
        panic!("one day segment: {fresh:?}")
    };
    assert_eq!(
        summed.day(),
        TimeRange {
            start: day,
            end: day + DAY
        }
    );
    assert!(summed.series.is_empty(), "a day segment owns no samples");
    let kinds: Vec<TableKind> = summed.objects.iter().map(|o| o.kind).collect();
    assert_eq!(
        kinds,
        [TableKind::Rollup1d, TableKind::Totals1d, TableKind::Totals1h]
    );
    // Its hour totals are the day's rows summed per (series, hour), for time series by the
    // hour.
    let mut hourly: BTreeMap<(i64, i64), i64> = BTreeMap::new();
    for ((s, t, _), v) in sums(&w.rows, HOUR, day, day + DAY) {
        let sum = hourly.entry((s, t)).or_default();
        *sum = sum.wrapping_add(v);
    }
    assert_eq!(
        totals_rows(&w, summed.object(TableKind::Totals1h).unwrap()).await,
        hourly.into_iter().collect::<Vec<_>>()
    );
    // The day rollup is the day's rows summed per (series, stack), the part of the
    // straddling block after midnight left out.
    let want = sums(&w.rows, DAY, day, day + DAY);
    assert_eq!(sums(&w.rows_at(Resolution::Day).await, DAY, day, day + DAY), want);
    assert_eq!(
        w.rows_at(Resolution::Day).await.len(),
        want.len(),
        "one row per (series, stack)"
    );
    totals_match_rollups(&w).await;
    let again = w
        .compactor
        .compact_tenant(TENANT, CompactMode::Due)
        .await
        .unwrap();
    assert_eq!((again.days_summed, again.segments_removed), (0, 0), "{again:?}");

    // A late segment in the day makes its day segment stale in the commit itself.
    w.write(&mut rng, T0 + 10 * MINUTE, T0 + 20 * MINUTE, 300).await;
    let segments = w.all_segments().await;
    let (fresh, stale) = day_segments(&segments);
    assert!(fresh.is_empty(), "{fresh:?}");
    assert_eq!(stale.len(), 1);
    // The next pass merges the late segment into its hour block, removes the stale day
    // segment and sums the day again, the late rows included.
    let report = w
        .compactor
        .compact_tenant(TENANT, CompactMode::Due)
        .await
        .unwrap();
    assert_eq!(report.days_summed, 1, "{report:?}");
    let segments = w.all_segments().await;
    let (fresh, stale) = day_segments(&segments);
    assert!(stale.is_empty(), "{stale:?}");
    assert_eq!(fresh.len(), 1);
    let want = sums(&w.rows, DAY, day, day + DAY);
    assert_eq!(sums(&w.rows_at(Resolution::Day).await, DAY, day, day + DAY), want);
    totals_match_rollups(&w).await;

    // Raw retention rewriting a block of the day makes it stale too; the rollups left are
    // what the day is summed from once its blocks agree again.
    retention::expire_tiers(
        &w.compactor,
        TENANT,
        Cutoffs {
            raw: Some(T0 + 30 * MINUTE),
            minute: None,
            hour: None,
        },
    )
    .await
    .unwrap();
    let segments = w.all_segments().await;
    let (fresh, stale) = day_segments(&segments);
    assert!(fresh.is_empty() && stale.len() == 1, "{segments:?}");
    w.compactor
        .compact_tenant(TENANT, CompactMode::Due)
        .await
        .unwrap();
    // The blocks of the day now hold different tiers (the split hour kept rollups only):
    // no day segment until they agree, and no stale one left.
    let segments = w.all_segments().await;
    let (fresh, stale) = day_segments(&segments);
    assert!(fresh.is_empty() && stale.is_empty(), "{segments:?}");
    w.clock.advance(Duration::from_secs(600));
    cleanup::delete_due(&w.store, &*w.catalog, &*w.clock)
        .await
        .unwrap();
    store_matches_catalog(&w).await;
}
