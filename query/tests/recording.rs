//! Recording rules' points, computed by the engine, against sums computed here from the
//! samples written: rules that share one read (selectors and groups on labels every series
//! carries, a function filter) and rules read on their own (a label some series lack, a
//! sample attribute), several at once, in the order given; ranges that are not whole
//! minutes within an hour are refused.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use stackhouse_query::recording::{Recorded, RuleDefinition, Step};
use stackhouse_query::{QueryConfig, QueryEngine, QueryError};
use stackhouse_storage::catalog::{Catalog, open_catalog};
use stackhouse_storage::model::{
    AttributeSet, Batch, Function, Labels, Line, Location, ProfileType, SampleRow, Series, SymbolId,
    TimeRange,
};
use stackhouse_storage::store::Store;
use stackhouse_storage::symbols::SymbolCache;
use stackhouse_storage::writer::{Writer, WriterConfig};

const TENANT: &str = "acme";
const SEC: i64 = 1_000_000_000;
const MIN: i64 = 60 * SEC;
/// 2025-06-15T10:00:00Z.
const T0: i64 = 1_749_981_600 * SEC;
const TYPE_ID: &str = "memory:alloc_space:bytes:space:bytes";

/// One sample as written.
struct Written {
    time: i64,
    /// Index into the series: (service, region or none).
    series: usize,
    thread: &'static str,
    /// Whether its stack runs through `work` (twice, in one of them).
    work: bool,
    value: i64,
}

const SERIES: [(&str, Option<&str>); 3] = [("api", Some("eu")), ("api", Some("us")), ("web", None)];

async fn store() -> (tempfile::TempDir, QueryEngine, Vec<Written>) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&format!("file://{}", dir.path().join("objects").display())).unwrap();
    let catalog: Arc<dyn Catalog> = open_catalog(&format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("catalog.db").display()
    ))
    .await
    .unwrap();
    let mut b = Batch::new(TENANT);
    let series: Vec<i64> = SERIES
        .iter()
        .map(|(service, region)| {
            let mut labels = Labels::from([("service.name".to_string(), service.to_string())]);
            if let Some(region) = region {
                labels.insert("region".into(), region.to_string());
            }
            b.add_series(Series::new(
                ProfileType::parse("alloc_space:bytes:space:bytes").unwrap(),
                labels,
                524_288,
            ))
        })
        .collect();
    let mut location = |name: &str| {
        let function_id = b.add_function(Function {
            name: name.into(),
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
    let (main, work, leaf) = (location("main"), location("work"), location("leaf"));
    let stacks = [
        (b.add_stack(&[main, leaf]), false),
        (b.add_stack(&[main, work, work]), true),
        (b.add_stack(&[main, work, leaf]), true),
    ];
    let threads = ["t1", "t2"].map(|t| {
        (
            t,
            b.add_attr_set(AttributeSet::new(vec![("thread.name".into(), t.to_string())])),
        )
    });
    let mut written = Vec::new();
    for i in 0..400i64 {
        let time = T0 + i * 17 * SEC + i % 3;
        let (stack_id, work) = stacks[(i % 3) as usize];
        let (thread, attr_set_id) = threads[(i / 3 % 2) as usize];
        let s = (i % 3 + i / 7) as usize % SERIES.len();
        let value = 1 + (i * 7_919) % 500;
        b.samples.push(SampleRow {
            time_nanos: time,
            series_id: series[s],
            stack_id,
            value,
            attr_set_id,
            trace_id: None,
            span_id: None,
            profile_id: None,
        });
        written.push(Written {
            time,
            series: s,
            thread,
            work,
            value,
        });
    }
    let symbols = Arc::new(SymbolCache::new(store.clone(), catalog.clone()));
    let writer = Writer::start(
        store.clone(),
        catalog.clone(),
        symbols.clone(),
        WriterConfig {
            flush_interval: Duration::from_millis(5),
            ..WriterConfig::default()
        },
    );
    writer.write(b).await.unwrap();
    writer.shutdown().await;
    let engine = QueryEngine::new(store, catalog, symbols, QueryConfig::default());
    (dir, engine, written)
}

fn rule(matcher: &str, group_by: &[&str], function: Option<&str>) -> RuleDefinition {
    RuleDefinition {
        metric_name: "profiles_recorded_test".into(),
        matchers: vec![format!("{{__profile_type__=\"{TYPE_ID}\"{matcher}}}")],
        group_by: group_by.iter().map(|g| g.to_string()).collect(),
        external_labels: [("team".to_string(), "core".to_string())].into(),
        function_name: function.map(str::to_string),
    }
}

/// What the rule must hold: per label set (the rule's own), per minute end in ms.
type Want = BTreeMap<Vec<(String, String)>, BTreeMap<i64, f64>>;

fn want<'a>(
    id: &str,
    written: impl Iterator<Item = &'a Written>,
    group: impl Fn(&Written) -> Vec<(String, String)>,
) -> Want {
    let mut out = Want::new();
    for w in written {
        let mut labels = vec![
            ("__name__".to_string(), "profiles_recorded_test".to_string()),
            ("profiles_rule_id".to_string(), id.to_string()),
            ("team".to_string(), "core".to_string()),
        ];
        labels.extend(group(w));
        labels.sort();
        let end = (w.time.div_euclid(MIN) + 1) * MIN / 1_000_000;
        *out.entry(labels).or_default().entry(end).or_default() += w.value as f64;
    }
    out
}

fn got(recorded: &Recorded) -> Want {
    assert_eq!(recorded.step, Step::Minute);
    recorded
        .series
        .iter()
        .map(|s| (s.labels.clone(), s.points.iter().copied().collect()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_record_the_sums_of_what_they_select() {
    let (_dir, engine, written) = store().await;
    let rules: Vec<(String, RuleDefinition)> = vec![
        ("plain".into(), rule(", service_name=\"api\"", &[], None)),
        ("byservice".into(), rule("", &["service_name"], None)),
        ("work".into(), rule("", &[], Some("work"))),
        // `region` is missing from the web series: read on its own.
        ("byregion".into(), rule("", &["region"], None)),
        ("euonly".into(), rule(", region=\"eu\"", &[], None)),
        // A sample attribute.
        ("bythread".into(), rule("", &["thread_name"], None)),
        (
            "workapi".into(),
            rule(", service_name=~\"a.*\"", &[], Some("work")),
        ),
    ];
    let label = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
    let api = |w: &&Written| SERIES[w.series].0 == "api";
    let expected: Vec<Want> = vec![
        want("plain", written.iter().filter(api), |_| vec![]),
        want("byservice", written.iter(), |w| {
            label("service_name", SERIES[w.series].0)
        }),
        want("work", written.iter().filter(|w| w.work), |_| vec![]),
        want("byregion", written.iter(), |w| match SERIES[w.series].1 {
            Some(r) => label("region", r),
            None => vec![],
        }),
        want(
            "euonly",
            written.iter().filter(|w| SERIES[w.series].1 == Some("eu")),
            |_| vec![],
        ),
        want("bythread", written.iter(), |w| label("thread_name", w.thread)),
        want(
            "workapi",
            written.iter().filter(api).filter(|w| w.work),
            |_| vec![],
        ),
    ];
    // Every minute of the data, each an hour's part at most, as the evaluator asks.
    let mut minute = T0;
    let end = written.iter().map(|w| w.time).max().unwrap();
    let mut recorded: Vec<Want> = vec![Want::new(); rules.len()];
    while minute <= end {
        let range = TimeRange {
            start: minute,
            end: minute + 3 * MIN,
        };
        for (i, r) in engine
            .record(TENANT, &rules, range)
            .await
            .unwrap()
            .iter()
            .enumerate()
        {
            for (labels, points) in got(r) {
                recorded[i].entry(labels).or_default().extend(points);
            }
        }
        minute += 3 * MIN;
    }
    for ((id, _), (got, want)) in rules.iter().zip(recorded.iter().zip(&expected)) {
        assert_eq!(got, want, "rule {id}");
    }
    // The minutes with data of the plain rule, counted from the input.
    assert!(expected[0].values().next().unwrap().len() > 50);

    // Whole minutes within one hour only.
    for bad in [
        TimeRange {
            start: T0 + 1,
            end: T0 + MIN,
        },
        TimeRange {
            start: T0 + 50 * MIN,
            end: T0 + 70 * MIN,
        },
    ] {
        let err = engine.record(TENANT, &rules, bad).await.unwrap_err();
        assert!(matches!(err, QueryError::InvalidArgument(_)), "{err:?}");
    }
}
