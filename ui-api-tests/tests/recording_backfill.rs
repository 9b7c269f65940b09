//! A recording rule created after three days of compacted data is backfilled from the
//! tiers that hold each hour: where retention left only the hour rollup, one point per
//! hour, as the rule's `hourly` stretches say; elsewhere one point per minute. The store is
//! built in process on a manual clock (compaction and tier retention run as the compactor
//! runs them), the evaluator pushes to a real Prometheus, and what Prometheus holds is
//! compared with sums computed here from the samples written.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use stackhouse_api::config::ServeArgs;
use stackhouse_api::recording::RecordingRules;
use stackhouse_api::recording::evaluator::Evaluator;
use stackhouse_query::recording::RuleDefinition;
use stackhouse_query::{QueryConfig, QueryEngine};
use stackhouse_storage::catalog::{Catalog, open_catalog};
use stackhouse_storage::clock::ManualClock;
use stackhouse_storage::compaction::{CompactMode, CompactionConfig, Compactor};
use stackhouse_storage::model::{
    Batch, Function, Labels, Line, Location, ProfileType, SampleRow, Series, SymbolId,
};
use stackhouse_storage::retention::{self, Cutoffs};
use stackhouse_storage::store::Store;
use stackhouse_storage::symbols::SymbolCache;
use stackhouse_storage::writer::{Writer, WriterConfig};
use ui_api_tests::prometheus::Prometheus;

const TENANT: &str = "acme";
const SEC: i64 = 1_000_000_000;
const MIN: i64 = 60 * SEC;
const HOUR: i64 = 60 * MIN;
const MS: i64 = 1_000_000;
const SERVICES: [&str; 2] = ["api", "web"];

/// `(time, service, value)` of every sample written.
type Written = Vec<(i64, usize, i64)>;

/// Samples every 4 minutes and a bit over `[from, to)`, services in turn.
fn batch(from: i64, to: i64, written: &mut Written) -> Batch {
    let mut b = Batch::new(TENANT);
    let series: Vec<i64> = SERVICES
        .iter()
        .map(|service| {
            b.add_series(Series::new(
                ProfileType::parse("alloc_space:bytes:space:bytes").unwrap(),
                Labels::from([("service.name".to_string(), service.to_string())]),
                524_288,
            ))
        })
        .collect();
    let function_id = b.add_function(Function {
        name: "main".into(),
        ..Default::default()
    });
    let location = b.add_location(Location {
        mapping_id: SymbolId::ZERO,
        address: 0x1000,
        lines: vec![Line {
            function_id,
            line: 1,
            column: 0,
        }],
    });
    let stack_id = b.add_stack(&[location]);
    let mut i = 0i64;
    let mut time = from;
    while time < to {
        let service = (i % 2) as usize;
        let value = 10 + (i * 7_919) % 1_000;
        b.samples.push(SampleRow {
            time_nanos: time,
            series_id: series[service],
            stack_id,
            value,
            attr_set_id: SymbolId::ZERO,
            trace_id: None,
            span_id: None,
            profile_id: None,
        });
        written.push((time, service, value));
        i += 1;
        time += 4 * MIN + 13 * SEC;
    }
    b
}

#[tokio::test(flavor = "multi_thread")]
async fn a_late_rule_is_backfilled_from_the_tiers_that_remain() {
    let prometheus = Prometheus::start();
    prometheus.ready().await;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&format!("file://{}", dir.path().join("objects").display())).unwrap();
    let catalog: Arc<dyn Catalog> = open_catalog(&format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("catalog.db").display()
    ))
    .await
    .unwrap();

    // Now is half past the hour; three days of data end an hour ago.
    let real_now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as i64;
    let now = real_now.div_euclid(HOUR) * HOUR + 30 * MIN;
    let first = now - 72 * HOUR - 30 * MIN + 7 * SEC;
    let mut written = Written::new();
    let writer = Writer::start(
        store.clone(),
        catalog.clone(),
        Arc::new(SymbolCache::new(store.clone(), catalog.clone())),
        WriterConfig {
            flush_interval: Duration::from_millis(5),
            ..WriterConfig::default()
        },
    );
    let mut from = first;
    while from < now - HOUR {
        let to = (from + 12 * HOUR).min(now - HOUR);
        writer.write(batch(from, to, &mut written)).await.unwrap();
        from = to;
    }
    writer.shutdown().await;
    let clock = ManualClock::at(now);
    let compactor = Compactor::new(
        store.clone(),
        catalog.clone(),
        CompactionConfig::default(),
        clock.clone(),
    );
    compactor.compact_tenant(TENANT, CompactMode::Full).await.unwrap();
    // Raw samples kept for a day, minute rollups for two: the first day keeps only hours.
    let raw_cutoff = now.div_euclid(HOUR) * HOUR - 24 * HOUR;
    let minute_cutoff = raw_cutoff - 24 * HOUR;
    retention::expire_tiers(
        &compactor,
        TENANT,
        Cutoffs {
            raw: Some(raw_cutoff),
            minute: Some(minute_cutoff),
            hour: None,
        },
    )
    .await
    .unwrap();

    let engine = Arc::new(QueryEngine::new(
        store.clone(),
        catalog.clone(),
        Arc::new(SymbolCache::new(store.clone(), catalog.clone())),
        QueryConfig {
            clock: clock.clone(),
            ..QueryConfig::default()
        },
    ));
    let args = ServeArgs::from_flags([format!(
        "--recording-rules-remote-write-url={}",
        prometheus.write_url()
    )])
    .unwrap();
    let rules = Arc::new(RecordingRules::new(
        catalog.clone(),
        args.recording_rules.config(),
    ));
    let rule = RuleDefinition {
        metric_name: "profiles_recorded_api".into(),
        matchers: vec![
            r#"{__profile_type__="memory:alloc_space:bytes:space:bytes", service_name="api"}"#.into(),
        ],
        ..RuleDefinition::default()
    };
    let id = rules.upsert(TENANT, None, 0, rule).await.unwrap().id;
    // Grouped by a name no series carries: read as a sample attribute, which only raw
    // samples hold. Where raw retention emptied the hours it has no point, and it holds up
    // neither itself nor the other rule.
    let by_thread = RuleDefinition {
        metric_name: "profiles_recorded_by_thread".into(),
        matchers: vec![r#"{__profile_type__="memory:alloc_space:bytes:space:bytes"}"#.into()],
        group_by: vec!["thread_name".into()],
        ..RuleDefinition::default()
    };
    let thread_id = rules.upsert(TENANT, None, 0, by_thread).await.unwrap().id;
    let mut evaluator = Evaluator::new(rules, engine, catalog.clone(), clock.clone());
    // Each pass moves a rule at most a day; the data spans a little over three.
    for _ in 0..6 {
        evaluator.pass().await;
    }
    let progress = catalog.rule_progress(TENANT).await.unwrap();
    assert_eq!(progress.len(), 2);
    let target = (now - 2 * MIN).div_euclid(MIN) * MIN;
    for p in &progress {
        assert_eq!(
            p.evaluated_until, target,
            "caught up to now less the delay: {p:?}"
        );
    }
    let first_hour = first.div_euclid(HOUR) * HOUR;
    let mine = progress.iter().find(|p| p.rule_id == id).unwrap();
    let hourly: Vec<(i64, i64)> = serde_json::from_str(&mine.coarse).unwrap();
    assert_eq!(
        hourly,
        vec![(first_hour, minute_cutoff)],
        "hours before the minute tier's cutoff were sent one point each"
    );

    // Expected: one point per hour before the cutoff, one per minute after, each stamped
    // with its bucket's end.
    let mut want: BTreeMap<i64, f64> = BTreeMap::new();
    for &(time, service, value) in &written {
        if service != 0 {
            continue;
        }
        let step = if time < minute_cutoff { HOUR } else { MIN };
        let end = (time.div_euclid(step) + 1) * step / MS;
        *want.entry(end).or_insert(0.0) += value as f64;
    }
    let got = prometheus.points("profiles_recorded_api", "5d").await;
    let labels = BTreeMap::from([("profiles_rule_id".to_string(), id)]);
    assert_eq!(got.keys().collect::<Vec<_>>(), vec![&labels]);
    let points = &got[&labels];
    assert_eq!(points.len(), want.len());
    assert_eq!(points, &want);
    // The three tiers were all read: hourly points, minute points from the minute rollup
    // and from raw samples.
    let hours = points.keys().filter(|&&t| t * MS <= minute_cutoff).count();
    assert!(hours >= 23, "{hours} hourly points");
    assert!(
        points
            .keys()
            .any(|&t| t * MS > minute_cutoff && t * MS <= raw_cutoff)
    );
    assert!(points.keys().any(|&t| t * MS > raw_cutoff));

    // The attribute rule: every service, one point per minute where raw samples remain.
    let mut want: BTreeMap<i64, f64> = BTreeMap::new();
    for &(time, _, value) in written.iter().filter(|w| w.0 >= raw_cutoff) {
        *want.entry((time.div_euclid(MIN) + 1) * MIN / MS).or_insert(0.0) += value as f64;
    }
    let got = prometheus.points("profiles_recorded_by_thread", "5d").await;
    let labels = BTreeMap::from([("profiles_rule_id".to_string(), thread_id)]);
    assert_eq!(got.keys().collect::<Vec<_>>(), vec![&labels]);
    assert_eq!(got[&labels], want);
}
