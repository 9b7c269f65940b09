//! Series, profile types and labels in a time range.

use stackhouse_storage::catalog::{CommitOutcome, CommitRefusal, SegmentReplacement, TableKind};
use stackhouse_storage::model::{Series, TimeRange};

use crate::fixtures::{commit, cpu, ids, object, off_cpu, open, range, record, replacement, series, strings};

suite!(
    series_extent_not_segment_extent,
    labels_include_sample_labels,
    series_limit_is_counted_at_commit,
    concurrent_commits_share_the_series_limit,
    expired_raw_samples_free_a_series_place,
    only_series_without_data_are_forgotten,
);

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

/// `n` series of tenant "t", sorted by id.
fn sorted_series(n: usize) -> Vec<Series> {
    let mut all: Vec<Series> = (0..n)
        .map(|i| series(cpu(), &[("service.name", &format!("s{i}"))]))
        .collect();
    all.sort_by_key(|s| s.id);
    all
}

/// Limit 2, one series stored, a commit with three new ones: the lowest new id is admitted,
/// the two others are refused and nothing of the commit is visible until the writer
/// commits again without them.
async fn series_limit_is_counted_at_commit(url: String) {
    let cat = open(&url).await;
    let all = sorted_series(4);
    // The stored one is the highest id: admission goes by id, not by what was first.
    let stored = &all[3];
    cat.commit_segment(&commit("t", "seg-0", &[(stored, 1, 2)]))
        .await
        .unwrap();
    let mut c = commit(
        "t",
        "seg-1",
        &[(&all[2], 1, 2), (&all[0], 1, 2), (&all[1], 1, 2), (stored, 1, 2)],
    );
    c.profiles = vec![record(1, all[0].id, 1, 2)];
    assert_eq!(
        cat.commit_segment_within(&c, 2).await.unwrap(),
        CommitOutcome::Refused(CommitRefusal {
            repeated: vec![],
            refused_series: vec![all[1].id, all[2].id],
            stale_symbols: false,
        })
    );
    assert_eq!(ids(&cat.segments("t", TimeRange::ALL).await.unwrap()), ["seg-0"]);
    assert_eq!(
        cat.series("t", TimeRange::ALL).await.unwrap(),
        vec![stored.clone()]
    );
    // The refused commit claimed no profile key.
    assert!(cat.profile("t", [1; 16]).await.unwrap().is_empty());

    let mut admitted = commit("t", "seg-2", &[(&all[0], 1, 2), (stored, 1, 2)]);
    admitted.profiles = vec![record(1, all[0].id, 1, 2)];
    assert_eq!(
        cat.commit_segment_within(&admitted, 2).await.unwrap(),
        CommitOutcome::Committed
    );
    assert_eq!(cat.stats("t").await.unwrap().series, 2);
    // At the limit, known series stay welcome; no limit (0) admits anything.
    assert_eq!(
        cat.commit_segment_within(&commit("t", "seg-3", &[(&all[0], 3, 4)]), 2)
            .await
            .unwrap(),
        CommitOutcome::Committed
    );
    assert_eq!(
        cat.commit_segment_within(&commit("t", "seg-4", &[(&all[2], 3, 4)]), 2)
            .await
            .unwrap(),
        CommitOutcome::Refused(CommitRefusal {
            repeated: vec![],
            refused_series: vec![all[2].id],
            stale_symbols: false,
        })
    );
    assert_eq!(
        cat.commit_segment_within(&commit("t", "seg-5", &[(&all[2], 3, 4)]), 0)
            .await
            .unwrap(),
        CommitOutcome::Committed
    );
    // Other tenants count their own series.
    assert_eq!(
        cat.commit_segment_within(&commit("u", "seg-u", &[(&all[1], 3, 4)]), 1)
            .await
            .unwrap(),
        CommitOutcome::Committed
    );
}

/// Two ingesters each bring a new series for the last free place at once: one is admitted.
async fn concurrent_commits_share_the_series_limit(url: String) {
    let cat = open(&url).await;
    let all = sorted_series(3);
    cat.commit_segment(&commit("t", "seg-0", &[(&all[0], 1, 2)]))
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for (i, s) in all[1..].iter().enumerate() {
        let c = commit("t", &format!("seg-{}", i + 1), &[(s, 1, 2)]);
        let cat = cat.clone();
        tasks.push(tokio::spawn(
            async move { cat.commit_segment_within(&c, 2).await },
        ));
    }
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.push(task.await.unwrap().unwrap());
    }
    let committed = outcomes
        .iter()
        .filter(|o| **o == CommitOutcome::Committed)
        .count();
    assert_eq!(committed, 1, "{outcomes:?}");
    assert_eq!(cat.stats("t").await.unwrap().series, 2);
    assert_eq!(cat.series("t", TimeRange::ALL).await.unwrap().len(), 2);
}

/// Limit 1: a series whose raw samples retention removed (its segment keeps only rollups)
/// frees its place, and stays listed for queries of its range.
async fn expired_raw_samples_free_a_series_place(url: String) {
    let cat = open(&url).await;
    let all = sorted_series(2);
    let old = commit("t", "seg-0", &[(&all[0], 1, 2)]);
    cat.commit_segment(&old).await.unwrap();
    assert_eq!(cat.live_series("t").await.unwrap(), vec![all[0].id]);
    assert!(matches!(
        cat.commit_segment_within(&commit("t", "seg-1", &[(&all[1], 3, 4)]), 1)
            .await
            .unwrap(),
        CommitOutcome::Refused(_)
    ));
    // Raw retention: the segment keeps only its rollups.
    let mut rollups = old.segment.clone();
    rollups.id = "seg-0-rollups".into();
    rollups.objects = vec![object("seg-0-rollups", TableKind::Rollup1h, 100, 1)];
    cat.replace_segments(&SegmentReplacement {
        tenant: "t".into(),
        removed: vec!["seg-0".into()],
        added: vec![rollups],
        drop_profiles_before: Some(3),
        delete_after_nanos: 0,
    })
    .await
    .unwrap();
    assert!(cat.live_series("t").await.unwrap().is_empty());
    assert_eq!(
        cat.series("t", TimeRange::ALL).await.unwrap(),
        vec![all[0].clone()],
        "the rolled-up series is still listed"
    );
    assert_eq!(
        cat.commit_segment_within(&commit("t", "seg-1", &[(&all[1], 3, 4)]), 1)
            .await
            .unwrap(),
        CommitOutcome::Committed
    );
    assert_eq!(cat.live_series("t").await.unwrap(), vec![all[1].id]);
}

async fn only_series_without_data_are_forgotten(url: String) {
    let cat = open(&url).await;
    let gone = series(cpu(), &[("service.name", "gone")]);
    let profiled = series(cpu(), &[("service.name", "profiled")]);
    let kept = series(cpu(), &[("service.name", "kept")]);
    let mut c = commit("t", "seg-1", &[(&gone, 100, 200), (&profiled, 100, 200)]);
    c.profiles = vec![record(1, profiled.id, 100, 150)];
    cat.commit_segment(&c).await.unwrap();
    cat.commit_segment(&commit("t", "seg-2", &[(&kept, 100, 200)]))
        .await
        .unwrap();
    // The purge's swap: seg-1 without its rows; the profile moved nowhere and was kept by
    // a segment that still lists `profiled`.
    let mut without = commit("t", "seg-3", &[(&profiled, 100, 200)]).segment;
    without.level = 1;
    cat.replace_segments(&replacement("t", &["seg-1"], Some(without), 0))
        .await
        .unwrap();
    let all = [gone.id, profiled.id, kept.id];
    assert_eq!(cat.forget_empty_series("t", &all).await.unwrap(), 1);
    assert_eq!(cat.stats("t").await.unwrap().series, 2);
    assert_eq!(cat.forget_empty_series("t", &all).await.unwrap(), 0);
    assert_eq!(cat.forget_empty_series("t", &[]).await.unwrap(), 0);
    // Sent again, the series is back with its labels.
    cat.commit_segment(&commit("t", "seg-4", &[(&gone, 300, 400)]))
        .await
        .unwrap();
    assert!(
        cat.label_values("t", "service.name", TimeRange::ALL)
            .await
            .unwrap()
            .contains(&"gone".to_string())
    );
}
