//! Segments: commits, listing by time range, stats, data range and tenants.

use std::collections::BTreeMap;

use stackhouse_storage::catalog::{CatalogError, TableKind, TableStats};
use stackhouse_storage::model::{Labels, ProfileRecord, Series, TimeRange};

use crate::fixtures::{
    commit, cpu, ids, object, off_cpu, open, range, replacement, series, stacks_key, strings,
};

suite!(
    commit_round_trips,
    tenants_are_isolated,
    time_range_edges,
    series_collision_rolls_back_everything,
    collision_inside_one_commit,
    same_series_updates_period,
    duplicate_segment_is_rejected,
    unknown_series_is_rejected,
    stats_sum_per_table,
    data_survives_reopening,
    concurrent_commits_share_new_series,
    data_range_spans_every_segment,
    tenants_with_segments_or_symbols,
    segments_holding_lists_only_the_selected_series,
);

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
        ("rollup_1m", TableStats::default()),
        ("rollup_1h", TableStats::default()),
        ("totals_1m", TableStats::default()),
        ("totals_1h", TableStats::default()),
        ("rollup_1d", TableStats::default()),
        ("totals_1d", TableStats::default()),
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

/// (series id, first time, last time).
type Extent = (i64, i64, i64);

async fn segments_holding_lists_only_the_selected_series(url: String) {
    let cat = open(&url).await;
    let web = series(cpu(), &[("service.name", "web")]);
    let api = series(cpu(), &[("service.name", "api")]);
    let db = series(off_cpu(), &[("service.name", "db")]);
    let c1 = commit("t", "seg-1", &[(&web, 100, 200), (&api, 150, 160)]);
    let c2 = commit("t", "seg-2", &[(&api, 300, 400), (&db, 300, 350)]);
    let c3 = commit("t", "seg-3", &[(&db, 500, 600)]);
    let other = commit("u", "seg-u", &[(&api, 100, 600)]);
    for c in [&c1, &c2, &c3, &other] {
        cat.commit_segment(c).await.unwrap();
    }
    let extents = |segments: Vec<stackhouse_storage::catalog::SegmentMeta>| -> Vec<(String, Vec<Extent>)> {
        segments
            .into_iter()
            .map(|s| {
                let mut series: Vec<_> = s
                    .series
                    .iter()
                    .map(|x| (x.series_id, x.min_time, x.max_time))
                    .collect();
                series.sort();
                (s.id, series)
            })
            .collect()
    };
    let mut both = extents(
        cat.segments_holding("t", TimeRange::ALL, &[api.id])
            .await
            .unwrap(),
    );
    both.sort();
    assert_eq!(
        both,
        vec![
            ("seg-1".to_string(), vec![(api.id, 150, 160)]),
            ("seg-2".to_string(), vec![(api.id, 300, 400)]),
        ]
    );
    // An extent outside the range is not listed, nor is a segment left without one, nor
    // another tenant's.
    assert_eq!(
        extents(
            cat.segments_holding("t", range(170, 450), &[api.id, web.id])
                .await
                .unwrap()
        ),
        vec![
            ("seg-1".to_string(), vec![(web.id, 100, 200)]),
            ("seg-2".to_string(), vec![(api.id, 300, 400)]),
        ]
    );
    assert!(
        cat.segments_holding("t", range(450, 700), &[api.id])
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        cat.segments_holding("t", TimeRange::ALL, &[])
            .await
            .unwrap()
            .is_empty()
    );
    // The objects come along as `segments` lists them.
    let all = cat.segments("t", TimeRange::ALL).await.unwrap();
    let held = cat.segments_holding("t", TimeRange::ALL, &[db.id]).await.unwrap();
    for s in &held {
        let listed = all.iter().find(|a| a.id == s.id).unwrap();
        assert_eq!(s.objects, listed.objects);
        assert_eq!(
            (s.min_time, s.max_time, s.level),
            (listed.min_time, listed.max_time, listed.level)
        );
    }
    assert_eq!(ids(&held), ["seg-2", "seg-3"]);
}
