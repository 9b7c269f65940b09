//! End to end through real storage: segments written with the segment writer, committed to
//! a SQLite catalog, queried with the engine. Expected values are computed here from the
//! hand-made samples, independently of the engine's planning.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use stackhouse_query::parse_selector;
use stackhouse_query::tree::OTHER_NAME;

use common::paths;
use stackhouse_query::{
    FlamegraphQuery, FrameMatch, QueryConfig, QueryEngine, QueryError, QueryLimits, Scope, StackFilter,
    folded,
};
use stackhouse_storage::catalog::{Catalog, SegmentCommit, open_catalog};
use stackhouse_storage::clock::system_now_nanos;
use stackhouse_storage::model::{
    AttributeSet, Batch, Function, Labels, Line, Location, Mapping, ProfileType, SampleRow, Series, SymbolId,
    TimeRange,
};
use stackhouse_storage::segment::{WrittenSegment, write_segment};
use stackhouse_storage::store::Store;
use stackhouse_storage::symbols::SymbolCache;

const TENANT: &str = "acme";

fn cpu() -> ProfileType {
    ProfileType::parse("samples:count:cpu:nanoseconds").unwrap()
}

fn alloc() -> ProfileType {
    ProfileType::parse("alloc_space:bytes::").unwrap()
}

/// One sample as the test sees it: the path it expects, root-first.
#[derive(Clone, Debug)]
struct Expected {
    time: i64,
    labels: Labels,
    profile_type: ProfileType,
    attrs: Vec<(String, String)>,
    path: Vec<&'static str>,
    value: i64,
}

struct Fixture {
    _dir: tempfile::TempDir,
    store: Store,
    catalog: Arc<dyn Catalog>,
    engine: QueryEngine,
    samples: Vec<Expected>,
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Symbols every segment may reference, and the root-first path of each stack.
struct Symbols {
    batch: Batch,
    stacks: Vec<(SymbolId, Vec<&'static str>)>,
}

fn symbols() -> Symbols {
    let mut b = Batch::new(TENANT);
    let func = |b: &mut Batch, name: &str| Line {
        function_id: b.add_function(Function {
            name: name.into(),
            filename: "app.rs".into(),
            ..Default::default()
        }),
        line: 7,
        column: 0,
    };
    let loc = |b: &mut Batch, lines: Vec<Line>| {
        b.add_location(Location {
            mapping_id: SymbolId::ZERO,
            address: 0x100,
            lines,
        })
    };
    let main = {
        let l = func(&mut b, "main");
        loc(&mut b, vec![l])
    };
    let work = {
        let l = func(&mut b, "work");
        loc(&mut b, vec![l])
    };
    let leaf = {
        let l = func(&mut b, "leaf");
        loc(&mut b, vec![l])
    };
    let gc = {
        let l = func(&mut b, "gc");
        loc(&mut b, vec![l])
    };
    // `parse` inlined into `handle`: the last line is the caller.
    let inlined = {
        let lines = vec![func(&mut b, "parse"), func(&mut b, "handle")];
        loc(&mut b, lines)
    };
    let libc = b.add_mapping(Mapping {
        filename: "libc.so.6".into(),
        memory_limit: 1 << 20,
        ..Default::default()
    });
    let native = b.add_location(Location {
        mapping_id: libc,
        address: 0xBEEF,
        lines: vec![],
    });
    let stacks = vec![
        (b.add_stack(&[leaf, work, main]), vec!["main", "work", "leaf"]),
        (b.add_stack(&[work, main]), vec!["main", "work"]),
        (b.add_stack(&[gc]), vec!["gc"]),
        (b.add_stack(&[inlined, main]), vec!["main", "handle", "parse"]),
        (
            b.add_stack(&[native, work, main]),
            vec!["main", "work", "libc.so.6+0xbeef"],
        ),
        (SymbolId::ZERO, vec![]),
    ];
    Symbols { batch: b, stacks }
}

/// Deterministic pseudo-random samples over three series, two profile types, two threads
/// (and no thread), times 1000..4000.
fn make_samples(stacks: &[(SymbolId, Vec<&'static str>)]) -> Vec<(Expected, SymbolId)> {
    let api = labels(&[("service.name", "api"), ("host", "h1")]);
    // `web` carries thread.name as a series label, so matchers on it apply to the label.
    let web = labels(&[("service.name", "web"), ("thread.name", "web-main")]);
    let threads: [&[(&str, &str)]; 3] = [
        &[("thread.name", "main")],
        &[("thread.name", "worker"), ("tid", "7")],
        &[],
    ];
    let mut out = Vec::new();
    let mut seed = 17u64;
    for i in 0..120i64 {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let r = (seed >> 33) as usize;
        let (series_labels, profile_type) = match r % 5 {
            0 | 1 => (api.clone(), cpu()),
            2 | 3 => (web.clone(), cpu()),
            _ => (api.clone(), alloc()),
        };
        let (stack_id, path) = &stacks[(r / 5) % stacks.len()];
        let attrs = threads[(r / 31) % threads.len()]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let e = Expected {
            time: 1000 + i * 25,
            labels: series_labels,
            profile_type,
            attrs,
            path: path.clone(),
            value: 1 + (r % 97) as i64,
        };
        out.push((e, *stack_id));
    }
    out
}

/// The fixture with limits that let the tests query all of time.
async fn fixture() -> Fixture {
    fixture_with(QueryLimits {
        max_range: std::time::Duration::MAX,
        ..QueryLimits::default()
    })
    .await
}

async fn fixture_with(limits: QueryLimits) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("objects").to_str().unwrap()).unwrap();
    let catalog: Arc<dyn Catalog> = open_catalog(&format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("catalog.db").display()
    ))
    .await
    .unwrap();
    let Symbols {
        batch: symbol_batch,
        stacks,
    } = symbols();
    let samples = make_samples(&stacks);

    // Two segments split in time; only the first carries the symbols, as the writer
    // stores each symbol once.
    for (n, part) in samples.chunks(samples.len() / 2 + 7).enumerate() {
        let mut batch = if n == 0 {
            symbol_batch.clone()
        } else {
            Batch::new(TENANT)
        };
        for (e, stack_id) in part {
            let period = if e.labels["service.name"] == "api" {
                10_000_000
            } else {
                20_000_000
            };
            let series_id = batch.add_series(Series::new(e.profile_type.clone(), e.labels.clone(), period));
            let attr_set_id = batch.add_attr_set(AttributeSet::new(e.attrs.clone()));
            batch.samples.push(SampleRow {
                time_nanos: e.time,
                series_id,
                stack_id: *stack_id,
                value: e.value,
                attr_set_id,
                trace_id: None,
                span_id: None,
                profile_id: None,
            });
        }
        commit(&store, catalog.as_ref(), &batch, &format!("0000000{n}-test")).await;
    }

    let symbols = Arc::new(SymbolCache::new(store.clone(), catalog.clone()));
    let config = QueryConfig {
        target_partitions: 2,
        batch_size: 16,
        memory_limit_bytes: Some(64 << 20),
        limits,
        ..QueryConfig::default()
    };
    let engine = QueryEngine::new(store.clone(), catalog.clone(), symbols, config);
    Fixture {
        _dir: dir,
        store,
        catalog,
        engine,
        samples: samples.into_iter().map(|(e, _)| e).collect(),
    }
}

/// Writes `batch` as segment `segment_id` and commits it.
async fn commit(store: &Store, catalog: &dyn Catalog, batch: &Batch, segment_id: &str) {
    let WrittenSegment { segment, symbols } = write_segment(store, batch, segment_id, 0, system_now_nanos())
        .await
        .unwrap();
    let mut sample_labels: Vec<(String, String)> = batch
        .attr_sets
        .values()
        .flat_map(|s| s.attrs.iter().cloned())
        .collect();
    sample_labels.sort();
    sample_labels.dedup();
    let commit = SegmentCommit {
        segment,
        symbols,
        series: batch.series.values().cloned().collect(),
        sample_labels,
        profiles: vec![],
        symbol_epoch: 0,
    };
    catalog.commit_segment(&commit).await.unwrap();
}

/// The selector's meaning, written out: a matcher looks at the series label when the
/// series has the key, else at the sample attribute, a missing one being "".
fn expected(
    f: &Fixture,
    profile_type: &ProfileType,
    selector: &str,
    range: TimeRange,
) -> BTreeMap<String, i64> {
    let sel = parse_selector(selector).unwrap();
    let mut out: BTreeMap<String, i64> = BTreeMap::new();
    for s in &f.samples {
        let attr = |k: &str| {
            s.attrs
                .iter()
                .find(|(name, _)| name == k)
                .map(|(_, v)| v.as_str())
        };
        let selected = &s.profile_type == profile_type
            && range.contains(s.time)
            && sel.matchers.iter().all(|m| match s.labels.get(&m.name) {
                Some(v) => m.matches(Some(v)),
                None => m.matches(attr(&m.name)),
            });
        if selected {
            *out.entry(s.path.join(";")).or_default() += s.value;
        }
    }
    out.retain(|_, v| *v != 0);
    out
}

async fn check(
    f: &Fixture,
    profile_type: ProfileType,
    selector: &str,
    range: TimeRange,
) -> BTreeMap<String, i64> {
    let q = FlamegraphQuery {
        scope: scope(profile_type.clone(), selector, range),
        group_by: vec![],
        max_nodes: 0,
    };
    let fg = f.engine.flamegraph(&q).await.unwrap();
    let want = expected(f, &profile_type, selector, range);
    let got = paths(&fg.root);
    assert_eq!(got, want, "{selector} in {range:?}");
    assert_eq!(fg.total, want.values().sum::<i64>(), "{selector}");
    assert_eq!(fg.root.total, fg.total);
    assert_eq!(fg.unit, profile_type.sample_unit);
    got
}

const ALL: TimeRange = TimeRange::ALL;

fn scope(profile_type: ProfileType, selector: &str, range: TimeRange) -> Scope {
    let mut scope = Scope::new(TENANT, profile_type, range);
    scope.selector = parse_selector(selector).unwrap();
    scope
}

#[tokio::test]
async fn flamegraphs_sum_exactly_what_the_selector_selects() {
    let f = fixture().await;

    let all = check(&f, cpu(), "{}", ALL).await;
    assert!(all.contains_key("main;work;leaf"));
    assert!(
        all.contains_key("main;handle;parse"),
        "inline frames, caller first"
    );
    assert!(
        all.contains_key("main;work;libc.so.6+0xbeef"),
        "unsymbolized frame"
    );
    assert!(all.contains_key(""), "empty stacks count at the root");
    check(&f, alloc(), "", ALL).await;

    // Series labels.
    let api = check(&f, cpu(), r#"{service.name="api"}"#, ALL).await;
    let web = check(&f, cpu(), r#"{service.name!="api"}"#, ALL).await;
    assert!(!api.is_empty() && !web.is_empty());
    assert_eq!(
        api.values().chain(web.values()).sum::<i64>(),
        all.values().sum::<i64>(),
        "the two services partition the samples"
    );
    check(&f, cpu(), r#"{service.name=~"ap|we", host="h1"}"#, ALL).await;
    check(&f, cpu(), r#"{host=""}"#, ALL).await;

    // Sample attributes, and a key that is a label on one series and an attribute on another.
    check(&f, cpu(), r#"{thread.name="main"}"#, ALL).await;
    check(&f, cpu(), r#"{thread.name!="main"}"#, ALL).await;
    check(&f, cpu(), r#"{thread.name=~".*main"}"#, ALL).await;
    check(&f, cpu(), r#"{thread.name=""}"#, ALL).await;
    check(
        &f,
        cpu(),
        r#"{service.name="api", thread.name=~"work.*", tid="7"}"#,
        ALL,
    )
    .await;
    check(&f, cpu(), r#"{tid!~"7"}"#, ALL).await;

    // Nothing selected: an empty tree, not an error.
    for selector in [r#"{service.name="nope"}"#, r#"{thread.name="nope"}"#] {
        assert!(check(&f, cpu(), selector, ALL).await.is_empty());
    }
    let unknown = ProfileType::parse("wall:nanoseconds::").unwrap();
    assert!(check(&f, unknown, "{}", ALL).await.is_empty());
}

#[tokio::test]
async fn time_ranges_cut_through_samples_and_segments() {
    let f = fixture().await;
    for (start, end) in [
        (1000, 1001),
        (1010, 2510),
        (2000, 2025),
        (2024, 2026),
        (1500, 4000),
        (3975, 9000),
        (0, 1000),
    ] {
        let range = TimeRange { start, end };
        check(&f, cpu(), "{}", range).await;
        check(&f, cpu(), r#"{thread.name="worker"}"#, range).await;
    }
    assert!(
        check(
            &f,
            cpu(),
            "{}",
            TimeRange {
                start: 5000,
                end: 6000
            }
        )
        .await
        .is_empty()
    );
}

#[tokio::test]
async fn results_carry_unit_period_and_stay_exact_when_truncated() {
    let f = fixture().await;
    let q = |selector: &str, max_nodes| FlamegraphQuery {
        scope: scope(cpu(), selector, ALL),
        group_by: vec![],
        max_nodes,
    };
    let full = f.engine.flamegraph(&q("{}", 0)).await.unwrap();
    assert_eq!(
        full.period, 20_000_000,
        "the largest period of the selected series"
    );
    assert_eq!(full.unit, "count");
    let api = f
        .engine
        .flamegraph(&q(r#"{service.name="api"}"#, 0))
        .await
        .unwrap();
    assert_eq!(api.period, 10_000_000);

    let small = f.engine.flamegraph(&q("{}", 3)).await.unwrap();
    assert_eq!(small.total, full.total);
    assert_eq!(small.root.total, full.total);
    assert!(
        small.root.child(OTHER_NAME).is_some()
            || small.root.child("main").unwrap().child(OTHER_NAME).is_some()
    );

    let text = folded(&full);
    let folded_sum: i64 = text
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<i64>().unwrap())
        .sum();
    assert_eq!(
        folded_sum,
        full.total - full.root.self_value,
        "folded omits only empty stacks"
    );
    let json = serde_json::to_value(&full).unwrap();
    assert_eq!(json["total"], full.total);
    assert_eq!(json["profile_type"], "samples:count:cpu:nanoseconds");
}

#[tokio::test]
async fn bad_requests_are_client_errors_and_tenants_are_separate() {
    let f = fixture().await;
    let mut q = FlamegraphQuery {
        scope: scope(cpu(), "{}", TimeRange { start: 10, end: 10 }),
        group_by: vec![],
        max_nodes: 0,
    };
    let err = f.engine.flamegraph(&q).await.unwrap_err();
    assert!(matches!(err, QueryError::InvalidArgument(_)), "{err}");
    assert!(err.is_client_error());

    q.scope.range = ALL;
    q.scope.tenant = "someone-else".into();
    let other = f.engine.flamegraph(&q).await.unwrap();
    assert_eq!((other.total, other.root.children.len()), (0, 0));
}

/// The values each stack got, as the test wrote them, per series label set, to make sure
/// the fixture exercises what the tests above claim.
#[tokio::test]
async fn fixture_covers_every_case() {
    let f = fixture().await;
    let mut seen: HashMap<(String, String, String), i64> = HashMap::new();
    for s in &f.samples {
        let thread = s
            .attrs
            .iter()
            .find(|(k, _)| k == "thread.name")
            .map_or("", |(_, v)| v.as_str());
        *seen
            .entry((
                s.profile_type.id(),
                s.labels["service.name"].clone(),
                thread.to_string(),
            ))
            .or_default() += 1;
    }
    for service in ["api", "web"] {
        for thread in ["main", "worker", ""] {
            let key = (cpu().id(), service.to_string(), thread.to_string());
            assert!(seen.contains_key(&key), "no sample for {key:?}");
        }
    }
    assert!(f.samples.iter().any(|s| s.path.is_empty()));
}

/// A time series bucket as the test sees it: the sum, and the (series, time) points.
type Bucket = (i64, std::collections::BTreeSet<(String, i64)>);

/// The group a sample falls in for `thread.name`: the series label when the series has
/// one, else the sample attribute, else "".
fn thread_of(s: &Expected) -> String {
    s.labels
        .get("thread.name")
        .cloned()
        .or_else(|| {
            s.attrs
                .iter()
                .find(|(k, _)| k == "thread.name")
                .map(|(_, v)| v.clone())
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn call_sites_keep_exactly_the_stacks_that_begin_with_them() {
    let f = fixture().await;
    let want_all = expected(&f, &cpu(), "{}", ALL);
    let q = |max_nodes| FlamegraphQuery {
        scope: scope(cpu(), "{}", ALL),
        group_by: vec![],
        max_nodes,
    };
    // Every prefix of every stored path, and one that no stack has.
    let mut sites: Vec<Vec<String>> = want_all
        .keys()
        .filter(|p| !p.is_empty())
        .flat_map(|p| {
            let frames: Vec<String> = p.split(';').map(str::to_string).collect();
            (1..=frames.len()).map(move |n| frames[..n].to_vec())
        })
        .collect();
    sites.sort();
    sites.dedup();
    assert!(sites.iter().any(|s| s.len() >= 2), "the fixture has deep stacks");
    sites.push(vec!["main".into(), "no-such-frame".into()]);
    for site in &sites {
        let joined = site.join(";");
        let want: BTreeMap<String, i64> = want_all
            .iter()
            .filter(|(p, _)| *p == &joined || p.starts_with(&format!("{joined};")))
            .map(|(p, v)| (p.clone(), *v))
            .collect();
        let filter = StackFilter {
            call_site: site.clone(),
            ..StackFilter::default()
        };
        let fg = f.engine.filtered_flamegraph(&q(0), &filter).await.unwrap();
        assert_eq!(paths(&fg.root), want, "call site {joined}");
        assert_eq!(fg.total, want.values().sum::<i64>(), "call site {joined}");
        // Cut to a budget, the subtree keeps its total.
        let small = f.engine.filtered_flamegraph(&q(2), &filter).await.unwrap();
        assert_eq!(small.total, fg.total, "call site {joined} in 2 nodes");
        assert!(
            small.root.count() <= 4,
            "call site {joined}: 2 nodes and their `other`s"
        );
        // With a frame rule too, the tree is built whole and cut afterwards: the same answer.
        let with_rule = StackFilter {
            exclude: FrameMatch::new(vec!["no-such-frame".into()], &[], "exclude").unwrap(),
            ..filter.clone()
        };
        let ruled = f.engine.filtered_flamegraph(&q(0), &with_rule).await.unwrap();
        assert_eq!(ruled.root, fg.root, "call site {joined} with a rule");
    }
}

#[tokio::test]
async fn group_by_puts_one_level_of_key_value_nodes_under_the_root() {
    let f = fixture().await;
    let q = FlamegraphQuery {
        scope: scope(cpu(), "{}", ALL),
        group_by: stackhouse_query::parse_group_by("thread.name").unwrap(),
        max_nodes: 0,
    };
    let fg = f.engine.flamegraph(&q).await.unwrap();
    assert_eq!(fg.group_by, vec!["thread.name".to_string()]);
    let mut want: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    for s in f.samples.iter().filter(|s| s.profile_type == cpu()) {
        let group = format!("thread.name={}", thread_of(s));
        let path = std::iter::once(group.as_str())
            .chain(s.path.iter().copied())
            .collect::<Vec<_>>()
            .join(";");
        *want.entry(group).or_default().entry(path).or_default() += s.value;
    }
    let names: Vec<&str> = fg.root.children.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names.len(), want.len(), "{names:?}");
    assert!(want.contains_key("thread.name="), "samples without the key");
    let got = paths(&fg.root);
    let all: BTreeMap<String, i64> = want.values().flat_map(|m| m.clone()).collect();
    assert_eq!(got, all);
}

#[tokio::test]
async fn top_timeseries_and_events_follow_the_samples() {
    use stackhouse_query::{Aggregation, EventsQuery, TimeseriesQuery, TopQuery};
    let f = fixture().await;
    let cpu_samples: Vec<&Expected> = f.samples.iter().filter(|s| s.profile_type == cpu()).collect();

    // Top: self by leaf frame, total by any frame on the path.
    let top = f
        .engine
        .top(&TopQuery {
            scope: scope(cpu(), "{}", ALL),
            limit: 100,
        })
        .await
        .unwrap();
    let mut want: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for s in &cpu_samples {
        if let Some(leaf) = s.path.last() {
            want.entry(leaf.to_string()).or_default().0 += s.value;
        }
        let mut seen: Vec<&str> = s.path.clone();
        seen.sort();
        seen.dedup();
        for name in seen {
            want.entry(name.to_string()).or_default().1 += s.value;
        }
    }
    let got: BTreeMap<String, (i64, i64)> = top
        .functions
        .iter()
        .map(|f| (f.name.clone(), (f.self_value, f.total)))
        .collect();
    assert_eq!(got, want);
    assert!(
        top.functions
            .windows(2)
            .all(|w| w[0].self_value >= w[1].self_value)
    );

    // Time series: a step of 300 from 1000, so buckets cut the samples every 12.
    let range = TimeRange {
        start: 1000,
        end: 4000,
    };
    for aggregation in [Aggregation::Sum, Aggregation::Avg] {
        let ts = f
            .engine
            .timeseries(&TimeseriesQuery {
                scope: scope(cpu(), "{}", range),
                step_nanos: 300,
                group_by: stackhouse_query::parse_group_by("service.name").unwrap(),
                aggregation,
            })
            .await
            .unwrap();
        let mut want: BTreeMap<String, BTreeMap<i64, Bucket>> = BTreeMap::new();
        for s in &cpu_samples {
            // Buckets lie on the step's grid; every sample is at or after `from` (1000).
            let bucket = s.time.div_euclid(300) * 300;
            let e = want
                .entry(s.labels["service.name"].clone())
                .or_default()
                .entry(bucket)
                .or_default();
            e.0 += s.value;
            e.1.insert((format!("{:?}", s.labels), s.time));
        }
        assert_eq!(ts.series.len(), want.len());
        for series in &ts.series {
            let buckets = &want[&series.group["service.name"]];
            let expect: Vec<(i64, f64)> = buckets
                .iter()
                .map(|(&t, (sum, points))| {
                    let v = match aggregation {
                        Aggregation::Sum => *sum as f64,
                        Aggregation::Avg => *sum as f64 / points.len() as f64,
                    };
                    (t, v)
                })
                .collect();
            assert_eq!(series.points, expect, "{aggregation:?} {:?}", series.group);
        }
    }
    let too_fine = f
        .engine
        .timeseries(&TimeseriesQuery {
            scope: scope(
                cpu(),
                "{}",
                TimeRange {
                    start: 0,
                    end: 1 << 40,
                },
            ),
            step_nanos: 1,
            group_by: vec![],
            aggregation: Aggregation::Sum,
        })
        .await
        .unwrap_err();
    assert!(
        matches!(
            too_fine,
            QueryError::LimitExceeded {
                limit: "max_points",
                ..
            }
        ),
        "{too_fine}"
    );

    // Events: pages of 7 in time order, together exactly the samples.
    let mut cursor = None;
    let mut events = Vec::new();
    let mut pages = 0;
    loop {
        let page = f
            .engine
            .events(&EventsQuery {
                scope: scope(cpu(), "{}", ALL),
                limit: 7,
                cursor: cursor.clone(),
            })
            .await
            .unwrap();
        pages += 1;
        assert!(page.events.len() <= 7);
        for e in &page.events {
            events.push((
                e.timestamp,
                e.value,
                page.stacks[&e.stack_id].join(";"),
                e.thread.clone(),
            ));
        }
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    let mut want: Vec<(i64, i64, String, Option<String>)> = cpu_samples
        .iter()
        .map(|s| {
            let thread = s
                .attrs
                .iter()
                .find(|(k, _)| k == "thread.name")
                .map(|(_, v)| v.clone());
            (s.time, s.value, s.path.join(";"), thread)
        })
        .collect();
    want.sort_by_key(|e| e.0);
    assert!(events.windows(2).all(|w| w[0].0 <= w[1].0), "time order");
    assert_eq!(events, want);
    assert_eq!(pages, want.len().div_ceil(7).max(1));
}

#[tokio::test]
async fn limits_are_enforced_and_named() {
    use std::time::Duration;
    let query = |range| FlamegraphQuery {
        scope: scope(cpu(), "{}", range),
        group_by: vec![],
        max_nodes: 0,
    };
    let hour = TimeRange {
        start: 0,
        end: 3_600_000_000_000,
    };

    let f = fixture_with(QueryLimits::default()).await;
    // All of time over a store holding microseconds: the span that counts is the data's.
    let all = f.engine.flamegraph(&query(ALL)).await.unwrap();
    assert_eq!(all.total, f.engine.flamegraph(&query(hour)).await.unwrap().total);
    let tight = fixture_with(QueryLimits {
        max_range: Duration::from_nanos(1000),
        ..QueryLimits::default()
    })
    .await;
    for range in [ALL, hour] {
        let err = tight.engine.flamegraph(&query(range)).await.unwrap_err();
        assert!(
            matches!(
                err,
                QueryError::LimitExceeded {
                    limit: "max_range",
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.is_client_error() && err.is_limit());
        assert!(err.to_string().contains("of stored data"), "{err}");
    }
    // Within the limit by itself: no need to ask where the data is.
    let short = TimeRange {
        start: 1000,
        end: 2000,
    };
    assert!(tight.engine.flamegraph(&query(short)).await.is_ok());
    let mut too_many = query(hour);
    too_many.max_nodes = QueryLimits::default().max_nodes + 1;
    let err = f.engine.flamegraph(&too_many).await.unwrap_err();
    assert!(
        matches!(
            err,
            QueryError::LimitExceeded {
                limit: "max_nodes",
                ..
            }
        ),
        "{err}"
    );

    // The cpu samples come from two series (api, web).
    let f = fixture_with(QueryLimits {
        max_series: 1,
        max_groups: 1,
        ..QueryLimits::default()
    })
    .await;
    let err = f.engine.flamegraph(&query(hour)).await.unwrap_err();
    assert!(
        matches!(
            err,
            QueryError::LimitExceeded {
                limit: "max_series",
                ..
            }
        ),
        "{err}"
    );
    let mut api_only = query(hour);
    api_only.scope.selector = parse_selector(r#"{service.name="api"}"#).unwrap();
    api_only.group_by = stackhouse_query::parse_group_by("thread.name").unwrap();
    let err = f.engine.flamegraph(&api_only).await.unwrap_err();
    assert!(
        matches!(
            err,
            QueryError::LimitExceeded {
                limit: "max_groups",
                ..
            }
        ),
        "{err}"
    );

    // A query that cannot finish in time is cancelled, not left running.
    let f = fixture_with(QueryLimits {
        timeout: Duration::ZERO,
        ..QueryLimits::default()
    })
    .await;
    let err = f.engine.flamegraph(&query(hour)).await.unwrap_err();
    assert!(matches!(err, QueryError::Timeout(_)), "{err}");
    assert!(err.to_string().contains("limit timeout"), "{err}");
}

/// Listings (label names and values, series, profile types) run under the same limits as
/// the flamegraph above: the same `max_range` refusal and the same timeout.
#[tokio::test]
async fn listings_are_held_to_the_query_limits() {
    use std::time::Duration;
    let hour = TimeRange {
        start: 0,
        end: 3_600_000_000_000,
    };
    let f = fixture().await;
    assert!(
        f.engine
            .label_names(TENANT, hour)
            .await
            .unwrap()
            .contains(&"thread.name".to_string())
    );
    assert_eq!(
        f.engine.label_values(TENANT, "service.name", hour).await.unwrap(),
        ["api", "web"]
    );

    let tight = fixture_with(QueryLimits {
        max_range: Duration::from_nanos(1000),
        ..QueryLimits::default()
    })
    .await;
    let flamegraph = FlamegraphQuery {
        scope: scope(cpu(), "{}", hour),
        group_by: vec![],
        max_nodes: 0,
    };
    let data_query = tight.engine.flamegraph(&flamegraph).await.unwrap_err();
    let listings = [
        tight.engine.label_names(TENANT, hour).await.map(|_| ()),
        tight
            .engine
            .label_values(TENANT, "service.name", hour)
            .await
            .map(|_| ()),
        tight.engine.series(TENANT, hour).await.map(|_| ()),
        tight.engine.profile_types(TENANT, hour).await.map(|_| ()),
    ];
    assert!(
        data_query.to_string().contains("(limit max_range)"),
        "{data_query}"
    );
    for listing in listings {
        let err = listing.unwrap_err();
        assert!(err.is_limit(), "{err}");
        assert_eq!(err.to_string(), data_query.to_string());
    }
    // Within the limit by itself, as for the flamegraph.
    let short = TimeRange {
        start: 1000,
        end: 2000,
    };
    assert!(
        tight
            .engine
            .label_values(TENANT, "service.name", short)
            .await
            .is_ok()
    );
    // Resolving a query's profile type is not a ranged listing: the query holds the range.
    assert_eq!(tight.engine.stored_profile_types(TENANT).await.unwrap().len(), 2);

    let slow = fixture_with(QueryLimits {
        timeout: Duration::ZERO,
        ..QueryLimits::default()
    })
    .await;
    let data_query = slow.engine.flamegraph(&flamegraph).await.unwrap_err();
    let err = slow
        .engine
        .label_values(TENANT, "service.name", hour)
        .await
        .unwrap_err();
    assert!(matches!(err, QueryError::Timeout(_)), "{err}");
    assert_eq!(err.to_string(), data_query.to_string());
}

/// Counted CPU samples read as CPU time: each sample worth its series' period (10 ms for
/// `api`, 20 ms for `web` in the fixture), summed exactly, in flame graphs and series.
#[tokio::test]
async fn a_profile_type_is_found_once_stored_and_an_unknown_one_lists_the_stored() {
    let f = fixture().await;
    let wall = ProfileType::parse("wall:nanoseconds:wall:nanoseconds").unwrap();
    for _ in 0..2 {
        assert_eq!(
            f.engine.stored_profile_type(TENANT, &cpu()).await.unwrap(),
            Ok(())
        );
        let mut stored = f
            .engine
            .stored_profile_type(TENANT, &wall)
            .await
            .unwrap()
            .unwrap_err();
        stored.sort();
        let mut expected = vec![cpu(), alloc()];
        expected.sort();
        assert_eq!(stored, expected);
    }
    // An answer of "not stored" is not remembered: the type is found once a segment holds it.
    let mut batch = Batch::new(TENANT);
    let series_id = batch.add_series(Series::new(wall.clone(), labels(&[("service.name", "api")]), 1));
    let attr_set_id = batch.add_attr_set(AttributeSet::new(Vec::new()));
    batch.samples.push(SampleRow {
        time_nanos: 1_000,
        series_id,
        stack_id: SymbolId::ZERO,
        value: 1,
        attr_set_id,
        trace_id: None,
        span_id: None,
        profile_id: None,
    });
    commit(&f.store, f.catalog.as_ref(), &batch, "00000009-wall").await;
    assert_eq!(f.engine.stored_profile_type(TENANT, &wall).await.unwrap(), Ok(()));
}

#[tokio::test]
async fn counted_cpu_reads_as_time_with_each_series_period() {
    let f = fixture().await;
    let time = cpu().in_time().unwrap();
    assert_eq!(time.id(), "cpu:nanoseconds:cpu:nanoseconds");
    assert_eq!(time.counted(), Some(cpu()));
    let period = |e: &Expected| {
        if e.labels["service.name"] == "api" {
            10_000_000
        } else {
            20_000_000
        }
    };
    for selector in ["{}", r#"{service.name="web"}"#, r#"{thread.name="main"}"#] {
        let sel = parse_selector(selector).unwrap();
        let mut want: BTreeMap<String, i64> = BTreeMap::new();
        for e in f.samples.iter().filter(|e| e.profile_type == cpu()) {
            let attr = |k: &str| e.attrs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
            let selected = sel.matchers.iter().all(|m| match e.labels.get(&m.name) {
                Some(v) => m.matches(Some(v)),
                None => m.matches(attr(&m.name)),
            });
            if selected {
                *want.entry(e.path.join(";")).or_default() += e.value * period(e);
            }
        }
        want.retain(|_, v| *v != 0);
        let mut s = scope(time.clone(), selector, ALL);
        s.in_time = true;
        let fg = f
            .engine
            .flamegraph(&FlamegraphQuery {
                scope: s.clone(),
                group_by: vec![],
                max_nodes: 0,
            })
            .await
            .unwrap();
        assert_eq!(paths(&fg.root), want, "{selector}");
        assert_eq!(fg.unit, "nanoseconds");
        let ts = f
            .engine
            .timeseries(&stackhouse_query::TimeseriesQuery {
                scope: Scope {
                    range: TimeRange { start: 0, end: 5_000 },
                    ..s.clone()
                },
                step_nanos: 500,
                group_by: vec![],
                aggregation: stackhouse_query::Aggregation::Sum,
            })
            .await
            .unwrap();
        let points: f64 = ts.series.iter().flat_map(|g| &g.points).map(|(_, v)| v).sum();
        let total: i64 = want.values().sum();
        assert_eq!((fg.total, points as i64), (total, total), "{selector}");
        // Without `in_time` the time type selects nothing stored.
        s.in_time = false;
        let none = f
            .engine
            .flamegraph(&FlamegraphQuery {
                scope: s,
                group_by: vec![],
                max_nodes: 0,
            })
            .await
            .unwrap();
        assert_eq!(none.total, 0);
    }
}
