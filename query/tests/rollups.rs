//! The rollup tiers answer exactly what the raw samples answer. One store holds 30 hours
//! of samples, compacted into hour blocks with their 1m and 1h rollups, plus fresh
//! segments that have no rollups yet. Random ranges (aligned to the hour, the minute or
//! nothing), selectors, group-bys and steps are asked of an engine that reads the tiers
//! and of one that reads raw samples only: flamegraph (as JSON, folded and flamebearer),
//! time series, top and diff answers must be the same bytes, and flamegraph totals must
//! be the sums of the generated values. Then raw retention removes the older raw samples:
//! hour-aligned answers from the tiers still equal the raw answers kept from before, a
//! ragged edge says which wider range it covers, and a query that needs raw samples there
//! is refused.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::sync::Arc;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;
use stackhouse_query::render::flamebearer::flamebearer;
use stackhouse_query::{
    Aggregation, DiffQuery, FlamegraphQuery, GroupKey, QueryConfig, QueryEngine, QueryError, Scope,
    StackFilter, TimeseriesQuery, TopQuery, folded, parse_selector,
};
use stackhouse_storage::catalog::{Catalog, DeleteRequest, DeleteState, TableKind, open_catalog};
use stackhouse_storage::clock::ManualClock;
use stackhouse_storage::compaction::{CompactMode, CompactionConfig, Compactor};
use stackhouse_storage::model::{
    AttributeSet, Batch, Function, Labels, Line, Location, ProfileType, SampleRow, Series, SymbolId,
    TimeRange,
};
use stackhouse_storage::retention::{self, Cutoffs};
use stackhouse_storage::store::Store;
use stackhouse_storage::symbols::SymbolCache;
use stackhouse_storage::writer::{Writer, WriterConfig};

const TENANT: &str = "acme";
const SEC: i64 = 1_000_000_000;
const MIN: i64 = 60 * SEC;
const HOUR: i64 = 60 * MIN;
/// 2025-06-15T00:00:00Z.
const T0: i64 = 1_749_945_600 * SEC;
/// Hours of data compacted into blocks; two more hours stay fresh segments.
const HOURS: i64 = 30;
const FRESH_HOURS: i64 = 2;
const SERVICES: [&str; 3] = ["api", "web", "db"];
const FUNCTIONS: usize = 12;

fn cpu() -> ProfileType {
    ProfileType::parse("samples:count:cpu:nanoseconds").unwrap()
}

/// One generated sample, as the test remembers it to compute expected totals.
#[derive(Clone, Debug)]
struct Sample {
    time: i64,
    service: usize,
    value: i64,
}

/// Samples of hours `[from, to)`: every few seconds, of one of three services, with stacks
/// of one to five of twelve functions, some with a `thread.name` attribute and a trace id.
fn batch(rng: &mut SmallRng, from: i64, to: i64, remember: &mut Vec<Sample>) -> Batch {
    let mut b = Batch::new(TENANT);
    let series: Vec<i64> = SERVICES
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
    let threads: Vec<SymbolId> = ["main", "gc"]
        .iter()
        .map(|t| b.add_attr_set(AttributeSet::new(vec![("thread.name".into(), t.to_string())])))
        .collect();
    let mut time = T0 + from * HOUR + rng.random_range(0..5 * SEC);
    while time < T0 + to * HOUR {
        let service = rng.random_range(0..SERVICES.len());
        let depth = rng.random_range(1..=5);
        let frames: Vec<SymbolId> = (0..depth)
            .map(|_| locations[rng.random_range(0..FUNCTIONS)])
            .collect();
        let value = rng.random_range(1..1_000);
        let stack_id = b.add_stack(&frames);
        let mut trace = [0u8; 16];
        trace[0] = rng.random_range(1..4);
        b.samples.push(SampleRow {
            time_nanos: time,
            series_id: series[service],
            stack_id,
            value,
            attr_set_id: match rng.random_range(0..3) {
                0 => SymbolId::ZERO,
                i => threads[i - 1],
            },
            trace_id: rng.random_bool(0.3).then_some(trace),
            span_id: None,
            profile_id: None,
        });
        remember.push(Sample { time, service, value });
        // Several samples may share a timestamp, as those of one profile do.
        time += rng.random_range(0..20 * SEC);
    }
    b
}

struct Store1 {
    _dir: tempfile::TempDir,
    store: Store,
    catalog: Arc<dyn Catalog>,
    samples: Vec<Sample>,
    clock: Arc<ManualClock>,
}

async fn store() -> Store1 {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&format!("file://{}", dir.path().join("objects").display())).unwrap();
    let catalog: Arc<dyn Catalog> = open_catalog(&format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("catalog.db").display()
    ))
    .await
    .unwrap();
    let writer = || {
        Writer::start(
            store.clone(),
            catalog.clone(),
            Arc::new(SymbolCache::new(store.clone(), catalog.clone())),
            WriterConfig {
                flush_interval: Duration::from_millis(5),
                ..WriterConfig::default()
            },
        )
    };
    let mut rng = SmallRng::seed_from_u64(33);
    let mut samples = Vec::new();
    // Segments that span several hours, as a flush of late and current data does.
    let w = writer();
    for from in (0..HOURS).step_by(5) {
        w.write(batch(&mut rng, from, from + 5, &mut samples))
            .await
            .unwrap();
    }
    w.shutdown().await;
    let clock = ManualClock::at(T0 + (HOURS + FRESH_HOURS + 2) * HOUR);
    let compactor = Compactor::new(
        store.clone(),
        catalog.clone(),
        CompactionConfig::default(),
        clock.clone(),
    );
    compactor.compact_tenant(TENANT, CompactMode::Full).await.unwrap();
    let blocks = catalog.segments(TENANT, TimeRange::ALL).await.unwrap();
    assert!(!blocks.is_empty());
    // The first day has closed: its blocks are summed into a day segment too.
    let days: Vec<_> = blocks
        .iter()
        .filter(|s| s.is_day())
        .map(|s| s.day().start)
        .collect();
    assert!(days.contains(&T0), "{days:?}");
    for block in blocks.iter().filter(|s| !s.is_day()) {
        let kinds: Vec<&str> = block.objects.iter().map(|o| o.kind.as_str()).collect();
        assert!(
            kinds.contains(&"rollup_1m") && kinds.contains(&"rollup_1h") && kinds.contains(&"samples"),
            "a compacted block holds samples and both rollups: {kinds:?}"
        );
    }
    // Fresh segments, raw only.
    let w = writer();
    w.write(batch(&mut rng, HOURS, HOURS + FRESH_HOURS, &mut samples))
        .await
        .unwrap();
    w.shutdown().await;
    Store1 {
        _dir: dir,
        store,
        catalog,
        samples,
        clock,
    }
}

/// Raw retention at `cutoff`; the rollup tiers are kept.
async fn expire_raw(s: &Store1, cutoff: i64) {
    let compactor = Compactor::new(
        s.store.clone(),
        s.catalog.clone(),
        CompactionConfig::default(),
        s.clock.clone(),
    );
    let cutoffs = Cutoffs {
        raw: Some(cutoff),
        minute: None,
        hour: None,
    };
    retention::expire_tiers(&compactor, TENANT, cutoffs)
        .await
        .unwrap();
    let segments = s.catalog.segments(TENANT, TimeRange::ALL).await.unwrap();
    assert!(
        segments
            .iter()
            .any(|seg| seg.max_time < cutoff && seg.object(TableKind::Samples).is_none()),
        "raw retention left rollup-only segments"
    );
    assert!(
        segments
            .iter()
            .filter(|seg| seg.object(TableKind::Samples).is_some())
            .all(|seg| seg.min_time >= cutoff),
        "no segment keeps raw samples before the cutoff"
    );
}

fn engine(s: &Store1, rollups: bool) -> QueryEngine {
    let symbols = Arc::new(SymbolCache::new(s.store.clone(), s.catalog.clone()));
    QueryEngine::new(
        s.store.clone(),
        s.catalog.clone(),
        symbols,
        QueryConfig {
            target_partitions: 2,
            rollups,
            ..QueryConfig::default()
        },
    )
}

/// The generated values of `services` (indices) in `range`.
fn expected_total(samples: &[Sample], range: TimeRange, services: &[usize]) -> i64 {
    samples
        .iter()
        .filter(|s| range.start <= s.time && s.time < range.end && services.contains(&s.service))
        .map(|s| s.value)
        .sum()
}

/// A range edge: on the hour, on the minute, or anywhere.
fn edge(rng: &mut SmallRng, lo: i64, hi: i64) -> i64 {
    let t = rng.random_range(lo..hi);
    match rng.random_range(0..3) {
        0 => t.div_euclid(HOUR) * HOUR,
        1 => t.div_euclid(MIN) * MIN,
        _ => t,
    }
}

fn random_range(rng: &mut SmallRng, lo: i64, hi: i64) -> TimeRange {
    loop {
        let (a, b) = (edge(rng, lo, hi), edge(rng, lo, hi));
        if a < b {
            return TimeRange { start: a, end: b };
        }
    }
}

/// A JSON value without its `stats` (a diff's `baseline_stats`, `comparison_stats`), which
/// tell how it was read, not what it is.
fn strip_stats(mut v: Value) -> Value {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(map) => {
                map.retain(|key, _| key != "stats" && !key.ends_with("_stats"));
                map.values_mut().for_each(strip);
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut v);
    v
}

fn json<T: serde::Serialize>(value: &T) -> String {
    strip_stats(serde_json::to_value(value).unwrap()).to_string()
}

/// Asserts two answers are the same bytes, showing where they part rather than both.
fn same(got: &str, want: &str, what: &str) {
    if got == want {
        return;
    }
    let at = got.bytes().zip(want.bytes()).take_while(|(a, b)| a == b).count();
    let around = |s: &str| {
        s.get(at.saturating_sub(80)..(at + 80).min(s.len()))
            .unwrap_or("")
            .to_string()
    };
    panic!(
        "{what}: the tiers answer differently from raw samples at byte {at}:\n tiers: …{}…\n   raw: …{}…",
        around(got),
        around(want)
    );
}

/// Rows read per tier, summed over answers.
#[derive(Debug, Default)]
struct TierRows(std::collections::BTreeMap<String, u64>);

impl TierRows {
    fn add(&mut self, stats: Option<&stackhouse_query::ScanStats>) {
        for (tier, rows) in stats.map(|s| s.rows_by_tier.clone()).unwrap_or_default() {
            *self.0.entry(tier).or_default() += rows;
        }
    }
}

/// Every answer of one random query, as bytes; the tiers read are added to `tiers`.
async fn answers(
    engine: &QueryEngine,
    scope: &Scope,
    group_by: &[GroupKey],
    step: i64,
    tiers: &mut TierRows,
) -> Result<Vec<(String, String)>, QueryError> {
    let mut out = Vec::new();
    let flamegraph = engine
        .flamegraph(&FlamegraphQuery {
            scope: scope.clone(),
            group_by: group_by.to_vec(),
            max_nodes: 0,
        })
        .await?;
    tiers.add(flamegraph.stats.as_ref());
    out.push(("flamegraph".into(), json(&flamegraph)));
    out.push(("folded".into(), folded(&flamegraph)));
    out.push(("flamebearer".into(), json(&flamebearer(&flamegraph))));
    let truncated = engine
        .flamegraph(&FlamegraphQuery {
            scope: scope.clone(),
            group_by: group_by.to_vec(),
            max_nodes: 8,
        })
        .await?;
    out.push(("flamegraph max_nodes=8".into(), json(&truncated)));
    let series = engine
        .timeseries(&TimeseriesQuery {
            scope: scope.clone(),
            step_nanos: step,
            group_by: group_by.to_vec(),
            aggregation: Aggregation::Sum,
        })
        .await?;
    tiers.add(series.stats.as_ref());
    out.push((format!("timeseries step {step}"), json(&series)));
    let top = engine
        .top(&TopQuery {
            scope: scope.clone(),
            limit: 10,
        })
        .await?;
    out.push(("top".into(), json(&top)));
    let mut web = scope.clone();
    web.selector = parse_selector(r#"{service.name="web"}"#).unwrap();
    let diff = engine
        .diff(&DiffQuery {
            baseline: web,
            comparison: scope.clone(),
            max_nodes: 0,
            baseline_stacks: StackFilter::default(),
            comparison_stacks: StackFilter::default(),
        })
        .await?;
    out.push(("diff".into(), json(&diff)));
    Ok(out)
}

const SELECTORS: [(&str, &[usize]); 4] = [
    ("{}", &[0, 1, 2]),
    (r#"{service.name="api"}"#, &[0]),
    (r#"{service.name=~"api|db"}"#, &[0, 2]),
    (r#"{service.name!="web"}"#, &[0, 2]),
];
const STEPS: [i64; 6] = [MIN, HOUR, 2 * HOUR, 15 * SEC, 90 * SEC, 10 * MIN];

/// The total of the ungrouped flamegraph of `scope`.
async fn flamegraph_total(engine: &QueryEngine, scope: Scope) -> i64 {
    engine
        .flamegraph(&FlamegraphQuery {
            scope,
            group_by: vec![],
            max_nodes: 0,
        })
        .await
        .unwrap()
        .total
}

fn scope_of(selector: &str, range: TimeRange) -> Scope {
    Scope {
        selector: parse_selector(selector).unwrap(),
        ..Scope::new(TENANT, cpu(), range)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiers_answer_what_raw_samples_answer_until_raw_retention_and_after() {
    let s = store().await;
    let tiered = engine(&s, true);
    let raw = engine(&s, false);
    let mut rng = SmallRng::seed_from_u64(7);
    let mut tiers = TierRows::default();
    let lo = T0 - HOUR;
    let hi = T0 + (HOURS + FRESH_HOURS + 1) * HOUR;
    for round in 0..40 {
        // A few whole-store ranges (one starting after midnight, before the first
        // sample: its first day is still read from the day segment), the rest random.
        let range = if round < 3 {
            TimeRange {
                start: [T0, T0 - 17 * SEC, T0 + 1][round as usize],
                end: T0 + (HOURS + FRESH_HOURS) * HOUR,
            }
        } else {
            random_range(&mut rng, lo, hi)
        };
        let (selector, services) = SELECTORS[rng.random_range(0..SELECTORS.len())];
        let group_by = if rng.random_bool(0.5) {
            vec![GroupKey::Label("service.name".into())]
        } else {
            vec![]
        };
        let step = STEPS[rng.random_range(0..STEPS.len())];
        let scope = scope_of(selector, range);
        let want = answers(&raw, &scope, &group_by, step, &mut TierRows::default())
            .await
            .unwrap();
        let got = answers(&tiered, &scope, &group_by, step, &mut tiers)
            .await
            .unwrap();
        for ((name, want), (_, got)) in want.iter().zip(&got) {
            same(
                got,
                want,
                &format!("{name} of {selector} over {range:?} by {group_by:?} (step {step})"),
            );
        }
        assert_eq!(
            flamegraph_total(&tiered, scope).await,
            expected_total(&s.samples, range, services),
            "total of {selector} over {range:?}"
        );
    }
    // The tiers were read, not only raw samples.
    for tier in ["1d", "1h", "1m", "raw"] {
        assert!(
            tiers.0.get(tier).copied().unwrap_or(0) > 0,
            "{tier} never read: {tiers:?}"
        );
    }

    // A time series needs no stack: over the compacted hours it reads the 1h tier's
    // totals, one row per (series, hour) that holds samples, not one per stack. The
    // flame graph of the same range reads a row per stack, more than that.
    let compacted = TimeRange {
        start: T0,
        end: T0 + HOURS * HOUR,
    };
    let cells: std::collections::BTreeSet<(usize, i64)> = s
        .samples
        .iter()
        .filter(|x| compacted.contains(x.time))
        .map(|x| (x.service, x.time.div_euclid(HOUR)))
        .collect();
    let day_end = T0 + 24 * HOUR;
    let after_t0: Vec<_> = s
        .catalog
        .segments(TENANT, compacted)
        .await
        .unwrap()
        .into_iter()
        .filter(|b| !b.is_day() && b.max_time >= day_end)
        .collect();
    let blocks_after_t0 = after_t0.len();
    // A block reaching back into day T0 still holds those hours' rows: they are decoded
    // and left out by the time filter.
    let reaching_back = after_t0.iter().map(|b| b.min_time).min().unwrap_or(day_end);
    let decoded = cells.len()
        + cells
            .iter()
            .filter(|&&(_, hour)| reaching_back.div_euclid(HOUR) <= hour && hour * HOUR < day_end)
            .count();
    for group_by in [vec![], vec![GroupKey::Label("service.name".into())]] {
        let series = tiered
            .timeseries(&TimeseriesQuery {
                scope: scope_of("{}", compacted),
                step_nanos: HOUR,
                group_by,
                aggregation: Aggregation::Sum,
            })
            .await
            .unwrap();
        let stats = series.stats.unwrap();
        // Day T0 is summed: its hours are read from the day segment's hour totals, one
        // object in place of its blocks'.
        assert_eq!(
            stats.segments as usize,
            1 + blocks_after_t0,
            "the day segment and the blocks with samples after day T0"
        );
        let read = stats.rows_by_tier;
        assert_eq!(
            read.get("1h").copied(),
            Some(decoded as u64),
            "the time series reads one row per (series, hour) of each object: {read:?}"
        );
        assert_eq!(read.len(), 1, "the 1h tier alone: {read:?}");
        let total: i64 = series.series.iter().map(|g| g.total).sum();
        assert_eq!(total, expected_total(&s.samples, compacted, &[0, 1, 2]));
    }
    let flamegraph = tiered
        .flamegraph(&FlamegraphQuery {
            scope: scope_of("{}", compacted),
            group_by: vec![],
            max_nodes: 0,
        })
        .await
        .unwrap();
    let stack_rows = flamegraph.stats.unwrap().rows_by_tier["1h"];
    assert!(
        stack_rows > 2 * cells.len() as u64,
        "the flame graph reads a row per stack: {stack_rows} rows, {} cells",
        cells.len()
    );

    // What rollups cannot answer reads raw samples, and answers as raw does.
    let day = TimeRange {
        start: T0,
        end: T0 + 24 * HOUR,
    };
    let mut by_thread = scope_of("{}", day);
    by_thread.selector = parse_selector(r#"{thread.name="main"}"#).unwrap();
    let mut by_trace = scope_of("{}", day);
    let mut trace = [0u8; 16];
    trace[0] = 2;
    by_trace.trace_ids = vec![trace];
    for (name, scope, group_by) in [
        ("sample attribute selector", by_thread, vec![]),
        ("trace filter", by_trace.clone(), vec![]),
        (
            "group by a sample attribute",
            scope_of("{}", day),
            vec![GroupKey::Label("thread.name".into())],
        ),
    ] {
        let mut read = TierRows::default();
        let got = answers(&tiered, &scope, &group_by, HOUR, &mut read)
            .await
            .unwrap();
        let want = answers(&raw, &scope, &group_by, HOUR, &mut TierRows::default())
            .await
            .unwrap();
        for ((answer, want), (_, got)) in want.iter().zip(&got) {
            same(got, want, &format!("{answer} with {name}"));
        }
        assert_eq!(
            read.0.keys().collect::<Vec<_>>(),
            ["raw"],
            "{name} reads raw samples only"
        );
    }

    // Raw retention: the first 20 hours keep only their rollups.
    let month = TimeRange {
        start: T0 - 24 * HOUR,
        end: T0 + 20 * HOUR,
    };
    let aligned: Vec<(TimeRange, i64)> = vec![
        (month, HOUR),
        (
            TimeRange {
                start: T0 + 3 * HOUR,
                end: T0 + 11 * HOUR,
            },
            HOUR,
        ),
        (
            TimeRange {
                start: T0 + 2 * HOUR + 7 * MIN,
                end: T0 + 13 * HOUR + 59 * MIN,
            },
            MIN,
        ),
    ];
    let mut before = Vec::new();
    for &(range, step) in &aligned {
        for group_by in [vec![], vec![GroupKey::Label("service.name".into())]] {
            let scope = scope_of("{}", range);
            let answer = answers(&raw, &scope, &group_by, step, &mut TierRows::default())
                .await
                .unwrap();
            before.push(((range, step, group_by), answer));
        }
    }
    let cutoff = T0 + 20 * HOUR;
    expire_raw(&s, cutoff).await;
    for ((range, step, group_by), want) in &before {
        let scope = scope_of("{}", *range);
        let mut read = TierRows::default();
        let got = answers(&tiered, &scope, group_by, *step, &mut read)
            .await
            .unwrap();
        for ((name, want), (_, got)) in want.iter().zip(&got) {
            same(got, want, &format!("{name} over {range:?} after raw retention"));
        }
        assert!(
            !read.0.contains_key("raw"),
            "{range:?} read raw samples after raw retention: {read:?}"
        );
    }
    // A ragged edge where only rollups are left: the answer says what it covers.
    let ragged = TimeRange {
        start: T0 + 5 * HOUR + 17 * MIN + 3 * SEC,
        end: T0 + 9 * HOUR + 30 * MIN + 10 * SEC,
    };
    let flamegraph = tiered
        .flamegraph(&FlamegraphQuery {
            scope: scope_of("{}", ragged),
            group_by: vec![],
            max_nodes: 0,
        })
        .await
        .unwrap();
    let covered = TimeRange {
        start: T0 + 5 * HOUR + 17 * MIN,
        end: T0 + 9 * HOUR + 31 * MIN,
    };
    assert_eq!(
        flamegraph.stats.as_ref().and_then(|s| s.answered),
        Some((covered.start, covered.end))
    );
    assert_eq!(flamegraph.total, expected_total(&s.samples, covered, &[0, 1, 2]));
    // Raw samples are needed and gone: refused, naming why.
    by_trace.range = month;
    let refused = tiered
        .flamegraph(&FlamegraphQuery {
            scope: by_trace,
            group_by: vec![],
            max_nodes: 0,
        })
        .await
        .unwrap_err();
    assert!(matches!(refused, QueryError::RawGone(_)), "{refused:?}");
    assert!(refused.to_string().contains("trace id"), "{refused}");
    // Exemplars name profiles, which rollups do not keep: refused the same way (the
    // Connect layer then answers the series without exemplars).
    let refused = tiered
        .exemplars(
            &stackhouse_query::ExemplarsQuery {
                scope: scope_of("{}", month),
                step_nanos: HOUR,
                group_by: vec![],
                kind: stackhouse_query::ExemplarKind::Profile,
            },
            &Default::default(),
        )
        .await
        .unwrap_err();
    assert!(matches!(refused, QueryError::RawGone(_)), "{refused:?}");
}

/// A deletion's edge may lie between a cell's start and the first sample in it (or after
/// the last one and before the cell's end): the samples then all lie on one side of it,
/// but a rollup row, stamped with its cell's start, would be masked by where the cell
/// starts. Blocks read whole from a tier must not be read from such a tier.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_edges_inside_a_blocks_cells_hide_exactly_what_they_match() {
    let s = store().await;
    let blocks = s.catalog.segments(TENANT, TimeRange::ALL).await.unwrap();
    // Compaction leaves blocks of five hours here, as the writer's segments span.
    let block = |hours: std::ops::Range<i64>| {
        blocks
            .iter()
            .find(|b| {
                !b.is_day() && b.min_time >= T0 + hours.start * HOUR && b.max_time < T0 + hours.end * HOUR
            })
            .unwrap_or_else(|| panic!("no block inside hours {hours:?}: {blocks:?}"))
    };
    // api from the first sample of the block of hours 5 to 10 (after 05:00) to its end;
    // db from the start of the block of hours 15 to 20 to just after its last sample.
    let (first, last) = (block(5..10).min_time, block(15..20).max_time);
    assert!(
        first > T0 + 5 * HOUR && last < T0 + 20 * HOUR - 1,
        "{first} {last}"
    );
    let requests = [
        ("api", r#"{service.name="api"}"#, first, T0 + 10 * HOUR),
        ("db", r#"{service.name="db"}"#, T0 + 15 * HOUR, last + 1),
    ];
    for (i, &(_, selector, from, to)) in requests.iter().enumerate() {
        s.catalog
            .add_delete_request(
                TENANT,
                &DeleteRequest {
                    id: format!("d{i}"),
                    selector: selector.into(),
                    from_nanos: from,
                    to_nanos: to,
                    created_at_millis: 0,
                    cancel_until_millis: i64::MAX,
                    state: DeleteState::Pending,
                    matched_series: 1,
                    matched_samples: 0,
                },
            )
            .await
            .unwrap();
    }
    let hidden = |x: &Sample| {
        requests
            .iter()
            .any(|&(service, _, from, to)| SERVICES[x.service] == service && from <= x.time && x.time < to)
    };
    let visible: Vec<Sample> = s.samples.iter().filter(|x| !hidden(x)).cloned().collect();
    assert!(visible.len() < s.samples.len());
    let tiered = engine(&s, true);
    let raw = engine(&s, false);
    let whole = TimeRange {
        start: T0 - 17 * SEC,
        end: T0 + (HOURS + FRESH_HOURS) * HOUR,
    };
    let ragged = TimeRange {
        start: T0 + 4 * HOUR + 7 * SEC,
        end: T0 + 21 * HOUR + 3 * SEC,
    };
    for range in [whole, ragged] {
        for (selector, services) in SELECTORS {
            let scope = scope_of(selector, range);
            assert_eq!(
                flamegraph_total(&tiered, scope.clone()).await,
                expected_total(&visible, range, services),
                "total of {selector} over {range:?}"
            );
            let want = answers(&raw, &scope, &[], HOUR, &mut TierRows::default())
                .await
                .unwrap();
            let got = answers(&tiered, &scope, &[], HOUR, &mut TierRows::default())
                .await
                .unwrap();
            for ((name, want), (_, got)) in want.iter().zip(&got) {
                same(got, want, &format!("{name} of {selector} over {range:?}"));
            }
        }
    }
}
