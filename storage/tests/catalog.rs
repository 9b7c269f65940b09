//! One behaviour suite for every catalog implementation: each behaviour below runs once
//! against a fresh SQLite file and once against a fresh Postgres database.
//!
//! Postgres comes from `STACKHOUSE_TEST_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`); each test creates and drops its own
//! database so tests run in parallel. An unreachable server fails the tests: CI provides
//! one, and a silently skipped suite would hide a broken implementation.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use sqlx::{AssertSqlSafe, Connection, Executor, PgConnection};
use stackhouse_storage::catalog::{
    Catalog, CatalogError, DebugFile, ObjectMeta, SegmentCommit, SegmentMeta, SegmentReplacement,
    SegmentSeries, Setting, TableKind, TableStats, TenantToken, open_catalog,
};
use stackhouse_storage::model::{Labels, ProfileRecord, ProfileType, Series, TimeRange};

const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

async fn with_sqlite<F, Fut>(test: F)
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = ()>,
{
    let dir = tempfile::tempdir().unwrap();
    // A directory that does not exist yet: opening must create it.
    let path = dir.path().join("data").join("catalog.db");
    test(format!("sqlite://{}", path.display())).await;
}

async fn with_postgres<F, Fut>(test: F)
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let admin_url =
        std::env::var("STACKHOUSE_TEST_POSTGRES_URL").unwrap_or_else(|_| DEFAULT_POSTGRES_URL.to_string());
    let mut admin = PgConnection::connect(&admin_url).await.unwrap_or_else(|e| {
        panic!(
            "postgres is unreachable at {admin_url}: {e}\n\
             the catalog suite needs a postgres server (trust auth is enough); start one or point \
             STACKHOUSE_TEST_POSTGRES_URL at it"
        )
    });
    let db = format!("stackhouse_test_{}", uuid::Uuid::now_v7().simple());
    admin
        .execute(AssertSqlSafe(format!("CREATE DATABASE {db}")))
        .await
        .unwrap();
    let mut url = url::Url::parse(&admin_url).unwrap();
    url.set_path(&db);
    // Run on its own task so a failing assertion still reaches the cleanup below.
    let outcome = tokio::spawn(test(url.to_string())).await;
    admin
        .execute(AssertSqlSafe(format!("DROP DATABASE {db} WITH (FORCE)")))
        .await
        .unwrap();
    if let Err(e) = outcome {
        std::panic::resume_unwind(e.into_panic());
    }
}

/// Declares every behaviour once per backend.
macro_rules! suite {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    crate::with_sqlite(crate::$name).await
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    crate::with_postgres(crate::$name).await
                }
            )*
        }
    };
}

suite!(
    commit_round_trips,
    tenants_are_isolated,
    time_range_edges,
    series_extent_not_segment_extent,
    series_collision_rolls_back_everything,
    collision_inside_one_commit,
    same_series_updates_period,
    duplicate_segment_is_rejected,
    unknown_series_is_rejected,
    labels_include_sample_labels,
    stats_sum_per_table,
    data_survives_reopening,
    profile_lookup,
    stored_profiles_by_key,
    profile_metadata_round_trips,
    symbol_objects_are_the_tenants,
    concurrent_commits_share_new_series,
    tenants_with_segments_or_symbols,
    replacement_moves_profiles_and_labels,
    replacement_of_a_gone_segment_conflicts,
    concurrent_replacements_one_wins,
    retention_drops_segments_and_profiles,
    retention_keeps_recent_profiles_of_a_merge,
    symbol_replacement,
    concurrent_symbol_replacements_one_wins,
    leases_exclude_other_holders,
    deletion_queue,
    unreferenced_keys,
    migration_moves_symbol_objects,
    settings_per_tenant_latest_wins,
    tokens_by_hash_list_and_revoke,
    data_range_spans_every_segment,
    debug_files_per_tenant_by_build_id,
);

// ---- fixtures ----

fn cpu() -> ProfileType {
    ProfileType::parse("samples:count:cpu:nanoseconds").unwrap()
}

fn off_cpu() -> ProfileType {
    ProfileType::parse("off_cpu:nanoseconds::").unwrap()
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn series(profile_type: ProfileType, pairs: &[(&str, &str)]) -> Series {
    Series::new(profile_type, labels(pairs), 10_000_000)
}

fn object(segment: &str, kind: TableKind, size_bytes: u64, rows: u64) -> ObjectMeta {
    ObjectMeta {
        kind,
        key: format!("t/{segment}/{}.parquet", kind.as_str()),
        size_bytes,
        rows,
    }
}

/// A segment spanning its series' extents with its samples object, written with a stacks
/// symbol object.
fn commit(tenant: &str, id: &str, extents: &[(&Series, i64, i64)]) -> SegmentCommit {
    let min_time = extents.iter().map(|e| e.1).min().unwrap();
    let max_time = extents.iter().map(|e| e.2).max().unwrap();
    SegmentCommit {
        segment: SegmentMeta {
            id: id.to_string(),
            tenant: tenant.to_string(),
            min_time,
            max_time,
            level: 0,
            created_at_nanos: 1_700_000_000_000_000_000,
            objects: vec![object(id, TableKind::Samples, 1000, 10)],
            series: extents
                .iter()
                .map(|(s, min, max)| SegmentSeries {
                    series_id: s.id,
                    min_time: *min,
                    max_time: *max,
                    samples: 5,
                })
                .collect(),
        },
        symbols: vec![object(id, TableKind::Stacks, 300, 3)],
        series: extents.iter().map(|e| e.0.clone()).collect(),
        sample_labels: vec![],
        profiles: vec![],
    }
}

fn range(start: i64, end: i64) -> TimeRange {
    TimeRange { start, end }
}

fn ids(segments: &[SegmentMeta]) -> Vec<&str> {
    segments.iter().map(|s| s.id.as_str()).collect()
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

async fn open(url: &str) -> Arc<dyn Catalog> {
    open_catalog(url).await.unwrap()
}

// ---- behaviours ----

async fn commit_round_trips(url: String) {
    let cat = open(&url).await;
    cat.ping().await.unwrap();
    let web = series(cpu(), &[("service.name", "web"), ("host.name", "a")]);
    let db = series(off_cpu(), &[("service.name", "db")]);
    let mut c = commit("acme", "seg-1", &[(&web, 100, 200), (&db, 150, 300)]);
    c.symbols.insert(0, object("seg-1", TableKind::Mappings, 50, 1));
    c.segment.level = 2;
    cat.commit_segment(&c).await.unwrap();

    let segments = cat.segments("acme", TimeRange::ALL).await.unwrap();
    assert_eq!(segments, vec![c.segment.clone()]);
    assert_eq!(segments[0].object(TableKind::Samples).unwrap().rows, 10);
    assert_eq!(cat.symbol_objects("acme").await.unwrap(), c.symbols);

    let mut expected = vec![web.clone(), db.clone()];
    expected.sort_by_key(|s| s.id);
    assert_eq!(cat.series("acme", TimeRange::ALL).await.unwrap(), expected);
    assert_eq!(
        cat.profile_types("acme", TimeRange::ALL).await.unwrap(),
        vec![off_cpu(), cpu()]
    );
    // Only the cpu series has samples before 150.
    assert_eq!(
        cat.profile_types("acme", range(0, 150)).await.unwrap(),
        vec![cpu()]
    );
}

async fn tenants_are_isolated(url: String) {
    let cat = open(&url).await;
    // The very same series (same id) in two tenants, and a tenant-specific one.
    let shared = series(cpu(), &[("service.name", "web")]);
    let only_b = series(cpu(), &[("service.name", "secret")]);
    let mut a = commit("a", "seg-a", &[(&shared, 100, 200)]);
    a.sample_labels = vec![("thread.name".into(), "main".into())];
    a.profiles = vec![ProfileRecord {
        profile_id: [7; 16],
        series_id: shared.id,
        start_nanos: 100,
        end_nanos: 200,
        sample_count: 3,
        resource: Labels::new(),
        attributes: Labels::new(),
    }];
    let mut b = commit("b", "seg-b", &[(&shared, 100, 200), (&only_b, 100, 200)]);
    b.sample_labels = vec![("thread.name".into(), "worker".into())];
    // Objects written together come back in key order: functions before stacks.
    b.symbols.insert(0, object("seg-b", TableKind::Functions, 77, 7));
    cat.commit_segment(&a).await.unwrap();
    cat.commit_segment(&b).await.unwrap();

    assert_eq!(ids(&cat.segments("a", TimeRange::ALL).await.unwrap()), ["seg-a"]);
    assert_eq!(ids(&cat.segments("b", TimeRange::ALL).await.unwrap()), ["seg-b"]);
    assert_eq!(cat.symbol_objects("a").await.unwrap(), a.symbols);
    assert_eq!(cat.symbol_objects("b").await.unwrap(), b.symbols);
    assert!(cat.symbol_objects("nobody").await.unwrap().is_empty());
    assert_eq!(
        cat.series("a", TimeRange::ALL).await.unwrap(),
        vec![shared.clone()]
    );
    assert_eq!(cat.series("b", TimeRange::ALL).await.unwrap().len(), 2);
    assert_eq!(
        cat.label_values("a", "service.name", TimeRange::ALL)
            .await
            .unwrap(),
        strings(&["web"])
    );
    assert_eq!(
        cat.label_values("a", "thread.name", TimeRange::ALL)
            .await
            .unwrap(),
        strings(&["main"])
    );
    assert_eq!(
        cat.label_values("b", "thread.name", TimeRange::ALL)
            .await
            .unwrap(),
        strings(&["worker"])
    );
    assert_eq!(cat.profile("a", [7; 16]).await.unwrap().len(), 1);
    assert!(cat.profile("b", [7; 16]).await.unwrap().is_empty());

    let stats_a = cat.stats("a").await.unwrap();
    assert_eq!((stats_a.segments, stats_a.series), (1, 1));
    assert_eq!(stats_a.tables["functions"], TableStats::default());
    let stats_b = cat.stats("b").await.unwrap();
    assert_eq!((stats_b.segments, stats_b.series), (1, 2));
    assert_eq!(stats_b.tables["functions"].rows, 7);

    assert!(cat.segments("nobody", TimeRange::ALL).await.unwrap().is_empty());
    assert!(
        cat.label_names("nobody", TimeRange::ALL)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(cat.stats("nobody").await.unwrap().segments, 0);
}

async fn time_range_edges(url: String) {
    let cat = open(&url).await;
    let s = series(cpu(), &[("service.name", "web")]);
    cat.commit_segment(&commit("t", "seg-mid", &[(&s, 100, 200)]))
        .await
        .unwrap();
    // Segments at the very ends of the representable range.
    cat.commit_segment(&commit("t", "seg-min", &[(&s, i64::MIN, i64::MIN)]))
        .await
        .unwrap();
    cat.commit_segment(&commit("t", "seg-max", &[(&s, i64::MAX - 1, i64::MAX - 1)]))
        .await
        .unwrap();

    let mid = |start, end| {
        let cat = cat.clone();
        async move { ids(&cat.segments("t", range(start, end)).await.unwrap()).contains(&"seg-mid") }
    };
    // The segment is the closed interval [100, 200]; ranges are half-open [start, end).
    assert!(
        mid(200, 300).await,
        "a range starting at max_time includes the last sample"
    );
    assert!(!mid(201, 300).await, "a range starting after max_time misses it");
    assert!(!mid(0, 100).await, "a range ending at min_time excludes it");
    assert!(
        mid(0, 101).await,
        "a range ending just after min_time includes it"
    );
    assert!(mid(120, 130).await, "a range inside the segment");
    assert!(mid(0, 1000).await, "a range around the segment");

    let all = cat.segments("t", TimeRange::ALL).await.unwrap();
    assert_eq!(
        ids(&all),
        ["seg-max", "seg-mid", "seg-min"],
        "ordered by id, extremes included"
    );
    assert_eq!(
        ids(&cat.segments("t", range(i64::MIN, i64::MIN + 1)).await.unwrap()),
        ["seg-min"]
    );
    assert_eq!(
        ids(&cat.segments("t", range(i64::MAX - 1, i64::MAX)).await.unwrap()),
        ["seg-max"]
    );
    assert_eq!(
        cat.series("t", range(i64::MIN, i64::MIN + 1))
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(cat.series("t", range(300, 400)).await.unwrap().is_empty());
    assert!(cat.label_names("t", range(300, 400)).await.unwrap().is_empty());
}

async fn series_extent_not_segment_extent(url: String) {
    let cat = open(&url).await;
    let early = series(cpu(), &[("service.name", "early")]);
    let late = series(off_cpu(), &[("service.name", "late"), ("region", "eu")]);
    let mut c = commit("t", "seg", &[(&early, 100, 150), (&late, 180, 200)]);
    c.sample_labels = vec![("thread.name".into(), "main".into())];
    cat.commit_segment(&c).await.unwrap();

    // The segment [100, 200] overlaps [160, 170), but neither series has samples there.
    assert_eq!(ids(&cat.segments("t", range(160, 170)).await.unwrap()), ["seg"]);
    assert!(cat.series("t", range(160, 170)).await.unwrap().is_empty());
    assert!(cat.profile_types("t", range(160, 170)).await.unwrap().is_empty());
    // Sample labels are only known per segment, so they still show.
    assert_eq!(
        cat.label_names("t", range(160, 170)).await.unwrap(),
        strings(&["thread.name"])
    );

    assert_eq!(
        cat.series("t", range(190, 191)).await.unwrap(),
        vec![late.clone()]
    );
    assert_eq!(
        cat.profile_types("t", range(190, 191)).await.unwrap(),
        vec![off_cpu()]
    );
    assert_eq!(
        cat.label_names("t", range(190, 191)).await.unwrap(),
        strings(&["region", "service.name", "thread.name"])
    );
    assert_eq!(
        cat.label_values("t", "service.name", range(190, 191))
            .await
            .unwrap(),
        strings(&["late"])
    );
    assert_eq!(
        cat.label_values("t", "service.name", range(0, 151))
            .await
            .unwrap(),
        strings(&["early"])
    );
}

async fn series_collision_rolls_back_everything(url: String) {
    let cat = open(&url).await;
    let web = series(cpu(), &[("service.name", "web")]);
    cat.commit_segment(&commit("t", "seg-1", &[(&web, 100, 200)]))
        .await
        .unwrap();
    let before = cat.stats("t").await.unwrap();

    // A new series first, so that a partial commit would leave it behind.
    let fresh = series(cpu(), &[("service.name", "fresh")]);
    let impostor = Series {
        id: web.id,
        ..series(cpu(), &[("service.name", "not-web")])
    };
    let mut c = commit("t", "seg-2", &[(&fresh, 300, 400), (&impostor, 300, 400)]);
    c.sample_labels = vec![("thread.name".into(), "main".into())];
    c.profiles = vec![ProfileRecord {
        profile_id: [1; 16],
        series_id: fresh.id,
        start_nanos: 300,
        end_nanos: 400,
        sample_count: 1,
        resource: Labels::new(),
        attributes: Labels::new(),
    }];
    let err = cat.commit_segment(&c).await.unwrap_err();
    assert!(
        matches!(err, CatalogError::SeriesCollision { id } if id == web.id),
        "got {err:?}"
    );

    // The same id under a different profile type collides too.
    let other_type = Series {
        id: web.id,
        ..series(off_cpu(), &[("service.name", "web")])
    };
    let err = cat
        .commit_segment(&commit("t", "seg-3", &[(&other_type, 300, 400)]))
        .await
        .unwrap_err();
    assert!(matches!(err, CatalogError::SeriesCollision { .. }), "got {err:?}");

    assert_eq!(cat.stats("t").await.unwrap(), before);
    assert_eq!(ids(&cat.segments("t", TimeRange::ALL).await.unwrap()), ["seg-1"]);
    assert_eq!(cat.series("t", TimeRange::ALL).await.unwrap(), vec![web.clone()]);
    assert_eq!(
        cat.label_values("t", "service.name", TimeRange::ALL)
            .await
            .unwrap(),
        strings(&["web"])
    );
    assert!(
        cat.label_values("t", "thread.name", TimeRange::ALL)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(cat.profile("t", [1; 16]).await.unwrap().is_empty());

    // The rolled-back segment id is still free, and the fresh series can still be added.
    cat.commit_segment(&commit("t", "seg-2", &[(&fresh, 300, 400)]))
        .await
        .unwrap();
    assert_eq!(cat.stats("t").await.unwrap().series, 2);
}

async fn collision_inside_one_commit(url: String) {
    let cat = open(&url).await;
    let a = series(cpu(), &[("service.name", "a")]);
    let twin = Series {
        id: a.id,
        ..series(cpu(), &[("service.name", "b")])
    };
    let mut c = commit("t", "seg", &[(&a, 1, 2)]);
    c.series.push(twin);
    let err = cat.commit_segment(&c).await.unwrap_err();
    assert!(matches!(err, CatalogError::SeriesCollision { .. }), "got {err:?}");
    assert_eq!(cat.stats("t").await.unwrap().series, 0);
}

async fn same_series_updates_period(url: String) {
    let cat = open(&url).await;
    let web = series(cpu(), &[("service.name", "web")]);
    cat.commit_segment(&commit("t", "seg-1", &[(&web, 1, 2)]))
        .await
        .unwrap();
    let faster = Series {
        period: 1_000_000,
        ..web.clone()
    };
    cat.commit_segment(&commit("t", "seg-2", &[(&faster, 3, 4)]))
        .await
        .unwrap();
    assert_eq!(cat.series("t", TimeRange::ALL).await.unwrap(), vec![faster]);
    assert_eq!(cat.stats("t").await.unwrap().series, 1);
}

async fn duplicate_segment_is_rejected(url: String) {
    let cat = open(&url).await;
    let web = series(cpu(), &[("service.name", "web")]);
    let first = commit("t", "seg", &[(&web, 1, 2)]);
    cat.commit_segment(&first).await.unwrap();
    let mut again = commit("t", "seg", &[(&web, 50, 60)]);
    again.sample_labels = vec![("thread.name".into(), "main".into())];
    assert!(cat.commit_segment(&again).await.is_err());
    // Not even under another tenant: ids name objects and are global.
    assert!(
        cat.commit_segment(&commit("u", "seg", &[(&web, 1, 2)]))
            .await
            .is_err()
    );

    assert_eq!(
        cat.segments("t", TimeRange::ALL).await.unwrap(),
        vec![first.segment]
    );
    assert!(
        cat.label_names("t", TimeRange::ALL)
            .await
            .unwrap()
            .iter()
            .all(|n| n != "thread.name")
    );
    assert_eq!(cat.stats("u").await.unwrap().series, 0);
}

async fn unknown_series_is_rejected(url: String) {
    let cat = open(&url).await;
    let web = series(cpu(), &[("service.name", "web")]);
    let mut c = commit("t", "seg", &[(&web, 1, 2)]);
    // The segment references a series that is neither in the commit nor in the catalog.
    c.series.clear();
    assert!(
        cat.commit_segment(&c).await.is_err(),
        "foreign keys must be enforced"
    );
    assert_eq!(cat.stats("t").await.unwrap().segments, 0);
}

async fn labels_include_sample_labels(url: String) {
    let cat = open(&url).await;
    let web = series(cpu(), &[("service.name", "web"), ("host.name", "h1")]);
    let api = series(cpu(), &[("service.name", "api")]);
    let mut c1 = commit("t", "seg-1", &[(&web, 100, 200)]);
    c1.sample_labels = vec![
        ("thread.name".into(), "main".into()),
        ("thread.name".into(), "gc".into()),
        ("thread.name".into(), "main".into()),
        ("thread.id".into(), "1".into()),
    ];
    let mut c2 = commit("t", "seg-2", &[(&api, 1000, 2000)]);
    c2.sample_labels = vec![
        ("thread.name".into(), "io".into()),
        ("service.name".into(), "from-sample".into()),
    ];
    cat.commit_segment(&c1).await.unwrap();
    cat.commit_segment(&c2).await.unwrap();

    assert_eq!(
        cat.label_names("t", TimeRange::ALL).await.unwrap(),
        strings(&["host.name", "service.name", "thread.id", "thread.name"])
    );
    assert_eq!(
        cat.label_values("t", "thread.name", TimeRange::ALL)
            .await
            .unwrap(),
        strings(&["gc", "io", "main"])
    );
    assert_eq!(
        cat.label_values("t", "service.name", TimeRange::ALL)
            .await
            .unwrap(),
        strings(&["api", "from-sample", "web"])
    );
    assert_eq!(
        cat.label_values("t", "thread.name", range(0, 500)).await.unwrap(),
        strings(&["gc", "main"])
    );
    assert_eq!(
        cat.label_names("t", range(1500, 1600)).await.unwrap(),
        strings(&["service.name", "thread.name"])
    );
    assert!(
        cat.label_values("t", "nope", TimeRange::ALL)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn stats_sum_per_table(url: String) {
    let cat = open(&url).await;
    let web = series(cpu(), &[("service.name", "web")]);
    let api = series(cpu(), &[("service.name", "api")]);
    cat.commit_segment(&commit("t", "seg-1", &[(&web, 1, 2)]))
        .await
        .unwrap();
    let mut c2 = commit("t", "seg-2", &[(&web, 3, 4), (&api, 3, 4)]);
    c2.segment.objects = vec![object("seg-2", TableKind::Samples, 5_000_000_000, 40)];
    // Symbol objects count towards their kind like segment objects do.
    c2.symbols = vec![object("seg-2", TableKind::Locations, 20, 2)];
    cat.commit_segment(&c2).await.unwrap();
    cat.commit_segment(&commit("other", "seg-3", &[(&web, 1, 2)]))
        .await
        .unwrap();

    let stats = cat.stats("t").await.unwrap();
    assert_eq!(stats.segments, 2);
    assert_eq!(stats.series, 2);
    let expected: BTreeMap<String, TableStats> = [
        (
            "samples",
            TableStats {
                objects: 2,
                rows: 50,
                bytes: 5_000_001_000,
            },
        ),
        (
            "stacks",
            TableStats {
                objects: 1,
                rows: 3,
                bytes: 300,
            },
        ),
        (
            "locations",
            TableStats {
                objects: 1,
                rows: 2,
                bytes: 20,
            },
        ),
        ("functions", TableStats::default()),
        ("mappings", TableStats::default()),
        ("attribute_sets", TableStats::default()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(stats.tables, expected);
}

async fn data_survives_reopening(url: String) {
    let web = series(cpu(), &[("service.name", "web")]);
    let mut c = commit("t", "seg", &[(&web, 1, 2)]);
    c.sample_labels = vec![("thread.name".into(), "main".into())];
    c.profiles = vec![ProfileRecord {
        profile_id: [9; 16],
        series_id: web.id,
        start_nanos: 1,
        end_nanos: 2,
        sample_count: 4,
        resource: Labels::new(),
        attributes: Labels::new(),
    }];
    {
        let cat = open(&url).await;
        cat.commit_segment(&c).await.unwrap();
    }
    // Opening again also re-runs the (already applied) migrations.
    let cat = open(&url).await;
    assert_eq!(
        cat.segments("t", TimeRange::ALL).await.unwrap(),
        vec![c.segment.clone()]
    );
    assert_eq!(cat.series("t", TimeRange::ALL).await.unwrap(), vec![web]);
    assert_eq!(cat.symbol_objects("t").await.unwrap(), c.symbols);
    assert_eq!(
        cat.label_values("t", "thread.name", TimeRange::ALL)
            .await
            .unwrap(),
        strings(&["main"])
    );
    assert_eq!(
        cat.profile("t", [9; 16]).await.unwrap(),
        vec![("seg".to_string(), c.profiles[0].clone())]
    );
}

async fn settings_per_tenant_latest_wins(url: String) {
    let setting = |name: &str, value: &str, at: i64| Setting {
        name: name.into(),
        value: value.into(),
        modified_at_millis: at,
    };
    {
        let cat = open(&url).await;
        assert_eq!(cat.settings("a").await.unwrap(), vec![]);
        let stored = cat
            .put_setting("a", &setting("plugin", "{\"v\":1}", 10))
            .await
            .unwrap();
        assert_eq!(stored, setting("plugin", "{\"v\":1}", 10));
        cat.put_setting("a", &setting("alpha", "x", 5)).await.unwrap();
        cat.put_setting("b", &setting("plugin", "other tenant", 99))
            .await
            .unwrap();
        // A write older than the stored one loses and is told what is stored.
        let kept = cat
            .put_setting("a", &setting("plugin", "stale", 9))
            .await
            .unwrap();
        assert_eq!(kept, setting("plugin", "{\"v\":1}", 10));
        let newer = cat
            .put_setting("a", &setting("plugin", "{\"v\":2}", 11))
            .await
            .unwrap();
        assert_eq!(newer.value, "{\"v\":2}");
    }
    // Settings survive reopening the catalog.
    let cat = open(&url).await;
    assert_eq!(
        cat.settings("a").await.unwrap(),
        vec![setting("alpha", "x", 5), setting("plugin", "{\"v\":2}", 11)]
    );
    cat.delete_setting("a", "alpha").await.unwrap();
    cat.delete_setting("a", "never there").await.unwrap();
    assert_eq!(
        cat.settings("a").await.unwrap(),
        vec![setting("plugin", "{\"v\":2}", 11)]
    );
    assert_eq!(
        cat.settings("b").await.unwrap(),
        vec![setting("plugin", "other tenant", 99)]
    );
}

async fn tokens_by_hash_list_and_revoke(url: String) {
    let token = |id: &str, tenant: &str, at: i64| TenantToken {
        id: id.into(),
        tenant: tenant.into(),
        name: format!("{id} of {tenant}"),
        created_at_millis: at,
        revoked_at_millis: None,
    };
    {
        let cat = open(&url).await;
        assert_eq!(cat.tokens(None).await.unwrap(), vec![]);
        cat.create_token(&token("t2", "a", 20), "hash-2").await.unwrap();
        cat.create_token(&token("t1", "a", 10), "hash-1").await.unwrap();
        cat.create_token(&token("t3", "b", 15), "hash-3").await.unwrap();
        // One secret is one token: a second row with the same hash is refused.
        assert!(cat.create_token(&token("t4", "b", 30), "hash-1").await.is_err());
    }
    // Tokens survive reopening the catalog.
    let cat = open(&url).await;
    assert_eq!(
        cat.tokens(Some("a")).await.unwrap(),
        vec![token("t1", "a", 10), token("t2", "a", 20)]
    );
    assert_eq!(
        cat.tokens(None).await.unwrap(),
        vec![token("t1", "a", 10), token("t3", "b", 15), token("t2", "a", 20)]
    );
    assert_eq!(
        cat.token_by_hash("hash-3").await.unwrap(),
        Some(token("t3", "b", 15))
    );
    assert_eq!(cat.token_by_hash("nope").await.unwrap(), None);

    assert!(cat.revoke_token("t3", 100).await.unwrap());
    assert!(
        cat.revoke_token("t3", 200).await.unwrap(),
        "revoking again succeeds"
    );
    assert!(!cat.revoke_token("missing", 100).await.unwrap());
    let revoked = TenantToken {
        revoked_at_millis: Some(100),
        ..token("t3", "b", 15)
    };
    assert_eq!(
        cat.token_by_hash("hash-3").await.unwrap(),
        Some(revoked.clone()),
        "the first revocation time"
    );
    assert_eq!(cat.tokens(Some("b")).await.unwrap(), vec![revoked]);
    assert_eq!(
        cat.token_by_hash("hash-1").await.unwrap(),
        Some(token("t1", "a", 10))
    );
}

async fn data_range_spans_every_segment(url: String) {
    let cat = open(&url).await;
    assert_eq!(cat.data_range("t").await.unwrap(), None);
    let web = series(cpu(), &[("service.name", "web")]);
    cat.commit_segment(&commit("t", "s1", &[(&web, 50, 70)]))
        .await
        .unwrap();
    cat.commit_segment(&commit("t", "s2", &[(&web, 20, 30)]))
        .await
        .unwrap();
    cat.commit_segment(&commit("u", "s3", &[(&web, 1, 1000)]))
        .await
        .unwrap();
    assert_eq!(cat.data_range("t").await.unwrap(), Some((20, 70)));
}

async fn profile_lookup(url: String) {
    let cat = open(&url).await;
    let cpu_s = series(cpu(), &[("service.name", "web")]);
    let off_s = series(off_cpu(), &[("service.name", "web")]);
    let id = [0xab; 16];
    let record = |series_id, start_nanos, sample_count| ProfileRecord {
        profile_id: id,
        series_id,
        start_nanos,
        end_nanos: start_nanos + 10,
        sample_count,
        resource: Labels::new(),
        attributes: Labels::new(),
    };
    let mut c1 = commit("t", "seg-1", &[(&cpu_s, 100, 110), (&off_s, 100, 110)]);
    c1.profiles = vec![record(cpu_s.id, 100, 5), record(off_s.id, 100, 6)];
    let mut c2 = commit("t", "seg-2", &[(&cpu_s, 200, 210)]);
    c2.profiles = vec![
        record(cpu_s.id, 200, 7),
        ProfileRecord {
            profile_id: [0xcd; 16],
            ..record(cpu_s.id, 200, 1)
        },
    ];
    cat.commit_segment(&c1).await.unwrap();
    cat.commit_segment(&c2).await.unwrap();

    let found = cat.profile("t", id).await.unwrap();
    let mut expected = vec![
        ("seg-1".to_string(), record(cpu_s.id, 100, 5)),
        ("seg-1".to_string(), record(off_s.id, 100, 6)),
        ("seg-2".to_string(), record(cpu_s.id, 200, 7)),
    ];
    let mut found_sorted = found.clone();
    found_sorted.sort_by_key(|(seg, r)| (seg.clone(), r.series_id));
    expected.sort_by_key(|(seg, r)| (seg.clone(), r.series_id));
    assert_eq!(found_sorted, expected);
    assert_eq!(cat.profile("t", [0xcd; 16]).await.unwrap().len(), 1);
    assert!(cat.profile("t", [0xef; 16]).await.unwrap().is_empty());
}

async fn stored_profiles_by_key(url: String) {
    let cat = open(&url).await;
    let cpu_s = series(cpu(), &[("service.name", "web")]);
    let off_s = series(off_cpu(), &[("service.name", "web")]);
    let record = |profile_id, series_id, start_nanos| ProfileRecord {
        profile_id,
        series_id,
        start_nanos,
        end_nanos: start_nanos + 10,
        sample_count: 1,
        resource: Labels::new(),
        attributes: Labels::new(),
    };
    let mut c = commit("t", "seg-1", &[(&cpu_s, 100, 110), (&off_s, 100, 110)]);
    c.profiles = vec![record([1; 16], cpu_s.id, 100), record([2; 16], off_s.id, 100)];
    cat.commit_segment(&c).await.unwrap();
    let asked = [
        ([1; 16], cpu_s.id, 100),
        ([1; 16], cpu_s.id, 101), // another start
        ([1; 16], off_s.id, 100), // another series
        ([2; 16], off_s.id, 100),
        ([3; 16], cpu_s.id, 100), // never stored
    ];
    let mut found = cat.stored_profiles("t", &asked).await.unwrap();
    found.sort();
    assert_eq!(found, vec![([1; 16], cpu_s.id, 100), ([2; 16], off_s.id, 100)]);
    assert!(cat.stored_profiles("other", &asked).await.unwrap().is_empty());
    assert!(cat.stored_profiles("t", &[]).await.unwrap().is_empty());
    // More keys than SQLite binds parameters.
    let many: Vec<_> = (0..40_000i64)
        .map(|i| ([9; 16], i, i))
        .chain([asked[0]])
        .collect();
    assert_eq!(cat.stored_profiles("t", &many).await.unwrap(), vec![asked[0]]);
}

async fn profile_metadata_round_trips(url: String) {
    let cat = open(&url).await;
    let web = series(
        cpu(),
        &[("service.name", "web"), ("host.name", "a"), ("profile.kind", "x")],
    );
    // Keys and values that need escaping in JSON, and a resource key the attributes share.
    let with_metadata = ProfileRecord {
        profile_id: [0x11; 16],
        series_id: web.id,
        start_nanos: 100,
        end_nanos: 150,
        sample_count: 2,
        resource: labels(&[("service.name", "web"), ("host.name", "a"), ("k\"q", "v\\\n é")]),
        attributes: labels(&[("profile.kind", "x"), ("service.name", "override")]),
    };
    let bare = ProfileRecord {
        profile_id: [0x22; 16],
        resource: Labels::new(),
        attributes: Labels::new(),
        ..with_metadata.clone()
    };
    let mut c = commit("t", "seg", &[(&web, 100, 150)]);
    c.profiles = vec![with_metadata.clone(), bare.clone()];
    cat.commit_segment(&c).await.unwrap();

    assert_eq!(
        cat.profile("t", [0x11; 16]).await.unwrap(),
        vec![("seg".to_string(), with_metadata)]
    );
    assert_eq!(
        cat.profile("t", [0x22; 16]).await.unwrap(),
        vec![("seg".to_string(), bare)]
    );
}

async fn symbol_objects_are_the_tenants(url: String) {
    let cat = open(&url).await;
    let web = series(cpu(), &[("service.name", "web")]);
    // Committed newest first: the listing follows creation time, then key.
    let mut late = commit("t", "seg-late", &[(&web, 1, 2)]);
    late.segment.created_at_nanos = 3_000;
    late.symbols = vec![
        object("seg-late", TableKind::Stacks, 1, 1),
        object("seg-late", TableKind::Functions, 2, 2),
    ];
    let mut samples_only = commit("t", "seg-none", &[(&web, 3, 4)]);
    samples_only.segment.created_at_nanos = 2_000;
    samples_only.symbols.clear();
    let mut early = commit("t", "seg-early", &[(&web, 1_000_000, 2_000_000)]);
    early.segment.created_at_nanos = 1_000;
    early.symbols = vec![object("seg-early", TableKind::Mappings, 3, 3)];
    for c in [&late, &samples_only, &early] {
        cat.commit_segment(c).await.unwrap();
    }
    let expected = vec![
        early.symbols[0].clone(),
        late.symbols[1].clone(),
        late.symbols[0].clone(),
    ];
    assert_eq!(cat.symbol_objects("t").await.unwrap(), expected);
    for segment in cat.segments("t", TimeRange::ALL).await.unwrap() {
        let kinds: Vec<_> = segment.objects.iter().map(|o| o.kind).collect();
        assert_eq!(
            kinds,
            [TableKind::Samples],
            "segment {} lists symbols",
            segment.id
        );
    }

    // A key the tenant already lists is refused, and the whole commit with it.
    let mut dup = commit("t", "seg-dup", &[(&web, 5, 6)]);
    dup.symbols = early.symbols.clone();
    assert!(cat.commit_segment(&dup).await.is_err());
    assert_eq!(cat.segments("t", TimeRange::ALL).await.unwrap().len(), 3);
    assert_eq!(cat.symbol_objects("t").await.unwrap(), expected);
}

async fn concurrent_commits_share_new_series(url: String) {
    let cat = open(&url).await;
    let shared = series(cpu(), &[("service.name", "shared")]);
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let cat = cat.clone();
            let own = series(cpu(), &[("service.name", "own"), ("n", &i.to_string())]);
            let c = commit("t", &format!("seg-{i}"), &[(&shared, i, i + 1), (&own, i, i + 1)]);
            tokio::spawn(async move { cat.commit_segment(&c).await })
        })
        .collect();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    let stats = cat.stats("t").await.unwrap();
    assert_eq!((stats.segments, stats.series), (8, 9));
    assert_eq!(cat.label_values("t", "n", TimeRange::ALL).await.unwrap().len(), 8);
}

// ---- compaction, retention and cleanup ----

fn record(id: u8, series_id: i64, start_nanos: i64, end_nanos: i64) -> ProfileRecord {
    ProfileRecord {
        profile_id: [id; 16],
        series_id,
        start_nanos,
        end_nanos,
        sample_count: i64::from(id),
        resource: Labels::new(),
        attributes: Labels::new(),
    }
}

/// What a compactor writes for the given extents: one level-1 segment with a samples object.
fn merged(tenant: &str, id: &str, extents: &[(&Series, i64, i64)]) -> SegmentMeta {
    let mut segment = commit(tenant, id, extents).segment;
    segment.level = 1;
    segment.created_at_nanos += 1;
    segment.objects = vec![object(id, TableKind::Samples, 900, 20)];
    segment
}

fn replacement(
    tenant: &str,
    removed: &[&str],
    added: Option<SegmentMeta>,
    delete_after: i64,
) -> SegmentReplacement {
    SegmentReplacement {
        tenant: tenant.to_string(),
        removed: strings(removed),
        added,
        drop_profiles_before: None,
        delete_after_nanos: delete_after,
    }
}

fn samples_key(segment: &str) -> String {
    object(segment, TableKind::Samples, 0, 0).key
}

fn stacks_key(segment: &str) -> String {
    object(segment, TableKind::Stacks, 0, 0).key
}

fn is_conflict<T: std::fmt::Debug>(result: &Result<T, CatalogError>) -> bool {
    matches!(result, Err(CatalogError::Conflict(_)))
}

/// Two segments of tenant "t" with profiles and sample labels, and a third one to the side.
struct Fixture {
    web: Series,
    api: Series,
    c1: SegmentCommit,
    c2: SegmentCommit,
    c3: SegmentCommit,
}

async fn fixture(cat: &Arc<dyn Catalog>) -> Fixture {
    let web = series(cpu(), &[("service.name", "web")]);
    let api = series(off_cpu(), &[("service.name", "api")]);
    let mut c1 = commit("t", "seg-1", &[(&web, 100, 200)]);
    c1.sample_labels = vec![("thread.name".into(), "main".into())];
    c1.profiles = vec![record(1, web.id, 100, 150), record(2, web.id, 160, 180)];
    let mut c2 = commit("t", "seg-2", &[(&api, 300, 400), (&web, 300, 350)]);
    c2.sample_labels = vec![
        ("thread.name".into(), "gc".into()),
        ("thread.name".into(), "main".into()),
    ];
    c2.profiles = vec![record(3, api.id, 300, 400)];
    let mut c3 = commit("t", "seg-3", &[(&web, 1000, 2000)]);
    c3.sample_labels = vec![("thread.name".into(), "io".into())];
    c3.profiles = vec![record(4, web.id, 1000, 2000)];
    for c in [&c1, &c2, &c3] {
        cat.commit_segment(c).await.unwrap();
    }
    Fixture { web, api, c1, c2, c3 }
}

impl Fixture {
    /// The merge of seg-1 and seg-2.
    fn merged(&self, id: &str) -> SegmentMeta {
        merged("t", id, &[(&self.web, 100, 350), (&self.api, 300, 400)])
    }
}

async fn tenants_with_segments_or_symbols(url: String) {
    let cat = open(&url).await;
    assert!(cat.tenants().await.unwrap().is_empty());
    let web = series(cpu(), &[("service.name", "web")]);
    for (tenant, id) in [("b", "seg-b"), ("a", "seg-a"), ("a", "seg-a2")] {
        cat.commit_segment(&commit(tenant, id, &[(&web, 1, 2)]))
            .await
            .unwrap();
    }
    assert_eq!(cat.tenants().await.unwrap(), strings(&["a", "b"]));
    // Without segments the tenant still owns symbols, which cleanup must reach.
    cat.replace_segments(&replacement("b", &["seg-b"], None, 0))
        .await
        .unwrap();
    assert!(cat.segments("b", TimeRange::ALL).await.unwrap().is_empty());
    assert_eq!(cat.tenants().await.unwrap(), strings(&["a", "b"]));
    cat.replace_symbols("b", &[stacks_key("seg-b")], &[], 0)
        .await
        .unwrap();
    assert_eq!(cat.tenants().await.unwrap(), strings(&["a"]));
}

async fn replacement_moves_profiles_and_labels(url: String) {
    let cat = open(&url).await;
    let f = fixture(&cat).await;
    let symbols = cat.symbol_objects("t").await.unwrap();
    let merged = f.merged("seg-m");
    cat.replace_segments(&replacement(
        "t",
        &["seg-1", "seg-2"],
        Some(merged.clone()),
        5_000,
    ))
    .await
    .unwrap();

    assert_eq!(
        cat.segments("t", TimeRange::ALL).await.unwrap(),
        vec![f.c3.segment.clone(), merged.clone()]
    );
    assert_eq!(ids(&cat.segments("t", range(0, 500)).await.unwrap()), ["seg-m"]);
    let mut both = vec![f.web.clone(), f.api.clone()];
    both.sort_by_key(|s| s.id);
    assert_eq!(cat.series("t", range(0, 500)).await.unwrap(), both);
    assert_eq!(
        cat.series("t", range(360, 500)).await.unwrap(),
        vec![f.api.clone()]
    );
    assert_eq!(
        cat.label_values("t", "thread.name", range(0, 500)).await.unwrap(),
        strings(&["gc", "main"])
    );
    assert_eq!(
        cat.label_values("t", "thread.name", TimeRange::ALL)
            .await
            .unwrap(),
        strings(&["gc", "io", "main"])
    );
    for p in f.c1.profiles.iter().chain(&f.c2.profiles) {
        assert_eq!(
            cat.profile("t", p.profile_id).await.unwrap(),
            vec![("seg-m".to_string(), p.clone())]
        );
    }
    assert_eq!(
        cat.profile("t", f.c3.profiles[0].profile_id).await.unwrap(),
        vec![("seg-3".to_string(), f.c3.profiles[0].clone())]
    );
    // Symbols belong to the tenant: a segment merge leaves them alone.
    assert_eq!(cat.symbol_objects("t").await.unwrap(), symbols);
    assert!(cat.due_deletions(4_999, 100).await.unwrap().is_empty());
    let mut queued = vec![samples_key("seg-1"), samples_key("seg-2")];
    queued.sort();
    assert_eq!(cat.due_deletions(5_000, 100).await.unwrap(), queued);

    let stats = cat.stats("t").await.unwrap();
    assert_eq!((stats.segments, stats.series), (2, 2));
    let samples_rows = f.c3.segment.objects[0].rows + merged.objects[0].rows;
    assert_eq!(stats.tables["samples"].rows, samples_rows);
    assert_eq!(stats.tables["stacks"].objects, 3);
}

async fn replacement_of_a_gone_segment_conflicts(url: String) {
    let cat = open(&url).await;
    let f = fixture(&cat).await;
    let before = cat.segments("t", TimeRange::ALL).await.unwrap();
    let result = cat
        .replace_segments(&replacement(
            "t",
            &["seg-1", "seg-gone"],
            Some(f.merged("seg-m")),
            0,
        ))
        .await;
    assert!(is_conflict(&result), "expected a conflict, got {result:?}");
    // Another tenant's segment is as good as gone.
    let result = cat
        .replace_segments(&replacement("other", &["seg-1"], None, 0))
        .await;
    assert!(is_conflict(&result), "expected a conflict, got {result:?}");

    assert_eq!(cat.segments("t", TimeRange::ALL).await.unwrap(), before);
    assert_eq!(
        cat.profile("t", f.c1.profiles[0].profile_id).await.unwrap(),
        vec![("seg-1".to_string(), f.c1.profiles[0].clone())]
    );
    assert_eq!(
        cat.label_values("t", "thread.name", range(0, 250)).await.unwrap(),
        strings(&["main"])
    );
    assert!(cat.due_deletions(i64::MAX, 100).await.unwrap().is_empty());

    // The replacement goes through once; replaying it conflicts and changes nothing.
    cat.replace_segments(&replacement("t", &["seg-1", "seg-2"], Some(f.merged("seg-m")), 0))
        .await
        .unwrap();
    let after = cat.segments("t", TimeRange::ALL).await.unwrap();
    let result = cat
        .replace_segments(&replacement(
            "t",
            &["seg-1", "seg-2"],
            Some(f.merged("seg-m2")),
            0,
        ))
        .await;
    assert!(is_conflict(&result), "expected a conflict, got {result:?}");
    assert_eq!(cat.segments("t", TimeRange::ALL).await.unwrap(), after);
    assert_eq!(cat.due_deletions(i64::MAX, 100).await.unwrap().len(), 2);
}

async fn concurrent_replacements_one_wins(url: String) {
    const RACERS: usize = 4;
    let cat = open(&url).await;
    let f = fixture(&cat).await;
    let barrier = Arc::new(tokio::sync::Barrier::new(RACERS));
    let tasks: Vec<_> = (0..RACERS)
        .map(|i| {
            let cat = cat.clone();
            let barrier = barrier.clone();
            let r = replacement("t", &["seg-1", "seg-2"], Some(f.merged(&format!("seg-m{i}"))), 0);
            tokio::spawn(async move {
                barrier.wait().await;
                cat.replace_segments(&r).await
            })
        })
        .collect();
    let mut winners = Vec::new();
    for (i, task) in tasks.into_iter().enumerate() {
        match task.await.unwrap() {
            Ok(()) => winners.push(format!("seg-m{i}")),
            Err(CatalogError::Conflict(_)) => {}
            Err(e) => panic!("racer {i} failed with something other than a conflict: {e}"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one replacement must win: {winners:?}");
    let winner = &winners[0];
    assert_eq!(
        ids(&cat.segments("t", TimeRange::ALL).await.unwrap()),
        ["seg-3", winner.as_str()]
    );
    for p in f.c1.profiles.iter().chain(&f.c2.profiles) {
        assert_eq!(
            cat.profile("t", p.profile_id).await.unwrap(),
            vec![(winner.clone(), p.clone())]
        );
    }
    assert_eq!(cat.due_deletions(i64::MAX, 100).await.unwrap().len(), 2);
}

async fn retention_drops_segments_and_profiles(url: String) {
    let cat = open(&url).await;
    let f = fixture(&cat).await;
    let symbols = cat.symbol_objects("t").await.unwrap();
    let mut r = replacement("t", &["seg-1", "seg-2"], None, 77);
    r.drop_profiles_before = Some(500);
    cat.replace_segments(&r).await.unwrap();

    assert_eq!(ids(&cat.segments("t", TimeRange::ALL).await.unwrap()), ["seg-3"]);
    for p in f.c1.profiles.iter().chain(&f.c2.profiles) {
        assert!(cat.profile("t", p.profile_id).await.unwrap().is_empty());
    }
    assert_eq!(
        cat.profile("t", f.c3.profiles[0].profile_id).await.unwrap().len(),
        1
    );
    assert!(cat.series("t", range(0, 500)).await.unwrap().is_empty());
    assert_eq!(
        cat.label_values("t", "thread.name", TimeRange::ALL)
            .await
            .unwrap(),
        strings(&["io"])
    );
    // Series definitions stay: ids are hashes and may come back with new data.
    assert_eq!(cat.stats("t").await.unwrap().series, 2);
    assert_eq!(cat.symbol_objects("t").await.unwrap(), symbols);
    let mut queued = vec![samples_key("seg-1"), samples_key("seg-2")];
    queued.sort();
    assert_eq!(cat.due_deletions(77, 100).await.unwrap(), queued);
}

async fn retention_keeps_recent_profiles_of_a_merge(url: String) {
    let cat = open(&url).await;
    let f = fixture(&cat).await;
    let mut r = replacement("t", &["seg-1", "seg-2"], Some(f.merged("seg-m")), 0);
    // Profile 1 ended at 150, before the cut; profile 2 ended exactly at it and stays.
    r.drop_profiles_before = Some(180);
    cat.replace_segments(&r).await.unwrap();
    assert!(cat.profile("t", [1; 16]).await.unwrap().is_empty());
    assert_eq!(
        cat.profile("t", [2; 16]).await.unwrap(),
        vec![("seg-m".to_string(), f.c1.profiles[1].clone())]
    );
    assert_eq!(
        cat.profile("t", [3; 16]).await.unwrap(),
        vec![("seg-m".to_string(), f.c2.profiles[0].clone())]
    );
}

async fn symbol_replacement(url: String) {
    let cat = open(&url).await;
    let web = series(cpu(), &[("service.name", "web")]);
    let mut c1 = commit("t", "seg-1", &[(&web, 1, 2)]);
    c1.segment.created_at_nanos = 1_000;
    c1.symbols.push(object("seg-1", TableKind::Functions, 40, 4));
    let mut c2 = commit("t", "seg-2", &[(&web, 3, 4)]);
    c2.segment.created_at_nanos = 2_000;
    let mut c3 = commit("t", "seg-3", &[(&web, 5, 6)]);
    c3.segment.created_at_nanos = 3_000;
    c3.symbols = vec![object("seg-3", TableKind::Locations, 50, 5)];
    for c in [&c1, &c2, &c3] {
        cat.commit_segment(c).await.unwrap();
    }
    let (s1, f1, s2, l3) = (&c1.symbols[0], &c1.symbols[1], &c2.symbols[0], &c3.symbols[0]);
    let merged_stacks = ObjectMeta {
        kind: TableKind::Stacks,
        key: "t/merged/stacks.parquet".to_string(),
        size_bytes: s1.size_bytes + s2.size_bytes - 10,
        rows: s1.rows + s2.rows,
    };
    cat.replace_symbols(
        "t",
        &[s1.key.clone(), s2.key.clone()],
        std::slice::from_ref(&merged_stacks),
        7_000,
    )
    .await
    .unwrap();
    // The merged object takes the place of the oldest one it replaces.
    assert_eq!(
        cat.symbol_objects("t").await.unwrap(),
        vec![merged_stacks.clone(), f1.clone(), l3.clone()]
    );
    let stats = cat.stats("t").await.unwrap();
    assert_eq!(
        stats.tables["stacks"],
        TableStats {
            objects: 1,
            rows: merged_stacks.rows,
            bytes: merged_stacks.size_bytes
        }
    );
    assert!(cat.due_deletions(6_999, 10).await.unwrap().is_empty());
    let mut queued = vec![s1.key.clone(), s2.key.clone()];
    queued.sort();
    assert_eq!(cat.due_deletions(7_000, 10).await.unwrap(), queued);
    // Segments keep their samples objects.
    assert_eq!(cat.segments("t", TimeRange::ALL).await.unwrap().len(), 3);

    // A key that is gone already, or listed by another tenant only, is a conflict.
    let other = object("other", TableKind::Functions, 1, 1);
    let result = cat
        .replace_symbols(
            "t",
            &[s1.key.clone(), f1.key.clone()],
            std::slice::from_ref(&other),
            8_000,
        )
        .await;
    assert!(is_conflict(&result), "expected a conflict, got {result:?}");
    let result = cat
        .replace_symbols("u", std::slice::from_ref(&f1.key), &[], 8_000)
        .await;
    assert!(is_conflict(&result), "expected a conflict, got {result:?}");
    assert_eq!(
        cat.symbol_objects("t").await.unwrap(),
        vec![merged_stacks, f1.clone(), l3.clone()]
    );
    assert_eq!(cat.due_deletions(i64::MAX, 10).await.unwrap(), queued);
}

async fn concurrent_symbol_replacements_one_wins(url: String) {
    const RACERS: usize = 4;
    let cat = open(&url).await;
    let web = series(cpu(), &[("service.name", "web")]);
    for id in ["seg-1", "seg-2"] {
        cat.commit_segment(&commit("t", id, &[(&web, 1, 2)]))
            .await
            .unwrap();
    }
    let removed = vec![stacks_key("seg-1"), stacks_key("seg-2")];
    let barrier = Arc::new(tokio::sync::Barrier::new(RACERS));
    let tasks: Vec<_> = (0..RACERS)
        .map(|i| {
            let (cat, barrier, removed) = (cat.clone(), barrier.clone(), removed.clone());
            let added = object(&format!("merged-{i}"), TableKind::Stacks, 600, 6);
            tokio::spawn(async move {
                barrier.wait().await;
                cat.replace_symbols("t", &removed, std::slice::from_ref(&added), 0)
                    .await
                    .map(|()| added)
            })
        })
        .collect();
    let mut winners = Vec::new();
    for (i, task) in tasks.into_iter().enumerate() {
        match task.await.unwrap() {
            Ok(added) => winners.push(added),
            Err(CatalogError::Conflict(_)) => {}
            Err(e) => panic!("racer {i} failed with something other than a conflict: {e}"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one replacement must win: {winners:?}");
    assert_eq!(cat.symbol_objects("t").await.unwrap(), winners);
    assert_eq!(cat.due_deletions(i64::MAX, 10).await.unwrap(), removed);
}

async fn leases_exclude_other_holders(url: String) {
    let cat = open(&url).await;
    let ttl = std::time::Duration::from_secs(2);
    let step = std::time::Duration::from_millis(1_200);
    assert!(cat.acquire_lease("compact", "h1", ttl).await.unwrap());
    assert!(!cat.acquire_lease("compact", "h2", ttl).await.unwrap());
    // Leases are per name.
    assert!(cat.acquire_lease("retention", "h2", ttl).await.unwrap());
    // Releasing someone else's lease does nothing.
    cat.release_lease("compact", "h2").await.unwrap();
    assert!(!cat.acquire_lease("compact", "h2", ttl).await.unwrap());

    tokio::time::sleep(step).await;
    assert!(
        cat.acquire_lease("compact", "h1", ttl).await.unwrap(),
        "the holder renews"
    );
    tokio::time::sleep(step).await;
    // Past the first expiry but not the renewed one.
    assert!(!cat.acquire_lease("compact", "h2", ttl).await.unwrap());
    tokio::time::sleep(step).await;
    assert!(
        cat.acquire_lease("compact", "h2", ttl).await.unwrap(),
        "an expired lease goes to the next asker"
    );
    assert!(!cat.acquire_lease("compact", "h1", ttl).await.unwrap());
    cat.release_lease("compact", "h2").await.unwrap();
    assert!(cat.acquire_lease("compact", "h1", ttl).await.unwrap());
}

async fn deletion_queue(url: String) {
    let cat = open(&url).await;
    let web = series(cpu(), &[("service.name", "web")]);
    for id in ["seg-1", "seg-2", "seg-3"] {
        cat.commit_segment(&commit("t", id, &[(&web, 1, 2)]))
            .await
            .unwrap();
    }
    cat.replace_segments(&replacement("t", &["seg-2"], None, 300))
        .await
        .unwrap();
    cat.replace_segments(&replacement("t", &["seg-1"], None, 100))
        .await
        .unwrap();
    cat.replace_symbols("t", &[stacks_key("seg-3")], &[], 200)
        .await
        .unwrap();

    assert!(cat.due_deletions(99, 10).await.unwrap().is_empty());
    assert_eq!(cat.due_deletions(100, 10).await.unwrap(), [samples_key("seg-1")]);
    let oldest_first = vec![samples_key("seg-1"), stacks_key("seg-3"), samples_key("seg-2")];
    assert_eq!(cat.due_deletions(1_000, 10).await.unwrap(), oldest_first);
    assert_eq!(cat.due_deletions(1_000, 2).await.unwrap(), oldest_first[..2]);
    assert!(cat.due_deletions(1_000, 0).await.unwrap().is_empty());

    cat.forget_deletions(&[samples_key("seg-1"), "never/queued".to_string()])
        .await
        .unwrap();
    cat.forget_deletions(&[]).await.unwrap();
    assert_eq!(cat.due_deletions(1_000, 10).await.unwrap(), oldest_first[1..]);
}

async fn unreferenced_keys(url: String) {
    let cat = open(&url).await;
    let web = series(cpu(), &[("service.name", "web")]);
    for id in ["seg-1", "seg-2"] {
        cat.commit_segment(&commit("t", id, &[(&web, 1, 2)]))
            .await
            .unwrap();
    }
    cat.replace_segments(&replacement("t", &["seg-2"], None, 100))
        .await
        .unwrap();
    // A segment's object, symbol objects of a live and of a removed segment, a queued key.
    let referenced = [
        samples_key("seg-1"),
        stacks_key("seg-1"),
        stacks_key("seg-2"),
        samples_key("seg-2"),
    ];
    let orphans: Vec<String> = (0..5_000).map(|i| format!("t/orphan/{i:05}.parquet")).collect();
    let mut keys = orphans.clone();
    for (i, key) in referenced.iter().enumerate() {
        keys.insert(i * 1_000, key.clone());
    }
    keys.push(orphans[42].clone());
    assert_eq!(cat.unreferenced(&keys).await.unwrap(), orphans);
    assert!(cat.unreferenced(&[]).await.unwrap().is_empty());

    // Once cleanup deleted the object and forgot it, nothing refers to the key.
    cat.forget_deletions(&[samples_key("seg-2")]).await.unwrap();
    assert_eq!(
        cat.unreferenced(&referenced).await.unwrap(),
        [samples_key("seg-2")]
    );
}

/// A catalog written before migration 0003 listed symbol objects under their segment.
async fn migration_moves_symbol_objects(url: String) {
    let backend = if url.starts_with("sqlite") {
        "sqlite"
    } else {
        "postgres"
    };
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../migrations")
        .join(backend);
    let migrator = sqlx::migrate::Migrator::new(dir).await.unwrap();
    let old_rows = [
        "INSERT INTO segments (id, tenant, min_time, max_time, level, created_at_nanos)
         VALUES ('seg-1', 't', 1, 2, 0, 1000), ('seg-2', 'u', 1, 2, 0, 500)",
        "INSERT INTO segment_objects (segment_id, position, kind, key, size_bytes, rows)
         VALUES ('seg-1', 0, 'samples', 'k/1/samples', 10, 1), ('seg-1', 1, 'stacks', 'k/1/stacks', 20, 2),
                ('seg-1', 2, 'functions', 'k/1/functions', 30, 3), ('seg-2', 0, 'samples', 'k/2/samples', 1, 1),
                ('seg-2', 1, 'mappings', 'k/2/mappings', 4, 4)",
    ];
    if backend == "sqlite" {
        let options = url
            .parse::<sqlx::sqlite::SqliteConnectOptions>()
            .unwrap()
            .create_if_missing(true);
        std::fs::create_dir_all(options.get_filename().parent().unwrap()).unwrap();
        let pool = sqlx::SqlitePool::connect_with(options).await.unwrap();
        migrator.run_to(2, &pool).await.unwrap();
        for sql in old_rows {
            sqlx::query(sql).execute(&pool).await.unwrap();
        }
        pool.close().await;
    } else {
        let pool = sqlx::PgPool::connect(&url).await.unwrap();
        migrator.run_to(2, &pool).await.unwrap();
        for sql in old_rows {
            sqlx::query(sql).execute(&pool).await.unwrap();
        }
        pool.close().await;
    }

    let cat = open(&url).await;
    let meta = |kind, key: &str, size_bytes, rows| ObjectMeta {
        kind,
        key: key.to_string(),
        size_bytes,
        rows,
    };
    assert_eq!(
        cat.symbol_objects("t").await.unwrap(),
        vec![
            meta(TableKind::Functions, "k/1/functions", 30, 3),
            meta(TableKind::Stacks, "k/1/stacks", 20, 2),
        ]
    );
    assert_eq!(
        cat.symbol_objects("u").await.unwrap(),
        vec![meta(TableKind::Mappings, "k/2/mappings", 4, 4)]
    );
    let segments = cat.segments("t", TimeRange::ALL).await.unwrap();
    assert_eq!(
        segments[0].objects,
        vec![meta(TableKind::Samples, "k/1/samples", 10, 1)]
    );
    assert_eq!(
        cat.stats("t").await.unwrap().tables["stacks"],
        TableStats {
            objects: 1,
            rows: 2,
            bytes: 20
        }
    );
    assert_eq!(cat.tenants().await.unwrap(), strings(&["t", "u"]));
}

// ---- url handling, independent of the backend ----

#[tokio::test]
async fn unknown_scheme_is_invalid_url() {
    for url in ["mysql://root:hunter2@localhost/db", "catalog.db", ""] {
        match open_catalog(url).await {
            Err(CatalogError::InvalidUrl { url: shown, .. }) => {
                assert!(!shown.contains("hunter2"), "the password leaked into {shown:?}")
            }
            Err(other) => panic!("{url:?}: expected an invalid url error, got {other:?}"),
            Ok(_) => panic!("{url:?}: expected an invalid url error, got a catalog"),
        }
    }
}

#[tokio::test]
async fn in_memory_sqlite_works() {
    let cat = open("sqlite::memory:").await;
    let web = series(cpu(), &[("service.name", "web")]);
    cat.commit_segment(&commit("t", "seg", &[(&web, 1, 2)]))
        .await
        .unwrap();
    assert_eq!(cat.series("t", TimeRange::ALL).await.unwrap(), vec![web]);
}

async fn debug_files_per_tenant_by_build_id(url: String) {
    let file = |build_id: &str, name: &str, size: i64, at: i64| DebugFile {
        build_id: build_id.into(),
        object_key: format!("tenants/a/debuginfo/{build_id}"),
        file_name: name.into(),
        size_bytes: size,
        uploaded_at_millis: at,
    };
    {
        let cat = open(&url).await;
        assert_eq!(cat.debug_files("a").await.unwrap(), vec![]);
        assert_eq!(cat.debug_file("a", "ff02").await.unwrap(), None);
        cat.put_debug_file("a", &file("ff02", "libc.so.6.debug", 900, 10))
            .await
            .unwrap();
        cat.put_debug_file("a", &file("0a1b", "prog.debug", 50, 11))
            .await
            .unwrap();
        cat.put_debug_file("b", &file("ff02", "other tenant", 1, 12))
            .await
            .unwrap();
        // A second upload of a build id replaces the first.
        cat.put_debug_file("a", &file("ff02", "libc.debug", 1000, 20))
            .await
            .unwrap();
    }
    // Rows survive reopening the catalog.
    let cat = open(&url).await;
    assert_eq!(
        cat.debug_files("a").await.unwrap(),
        vec![
            file("0a1b", "prog.debug", 50, 11),
            file("ff02", "libc.debug", 1000, 20)
        ]
    );
    assert_eq!(
        cat.debug_file("b", "ff02").await.unwrap(),
        Some(file("ff02", "other tenant", 1, 12))
    );
    assert!(cat.delete_debug_file("a", "ff02").await.unwrap());
    assert!(!cat.delete_debug_file("a", "ff02").await.unwrap());
    assert_eq!(cat.debug_file("a", "ff02").await.unwrap(), None);
    assert_eq!(
        cat.debug_files("a").await.unwrap(),
        vec![file("0a1b", "prog.debug", 50, 11)]
    );
    // The other tenant's file of the same build id is untouched.
    assert_eq!(cat.debug_files("b").await.unwrap().len(), 1);
}
