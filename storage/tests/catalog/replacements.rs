//! Segment replacements: compaction swaps segments for a merged one, retention for nothing.

use std::sync::Arc;

use stackhouse_storage::catalog::CatalogError;
use stackhouse_storage::model::TimeRange;

use crate::fixtures::{fixture, ids, is_conflict, open, range, replacement, samples_key, strings};

suite!(
    replacement_moves_profiles_and_labels,
    replacement_of_a_gone_segment_conflicts,
    concurrent_replacements_one_wins,
    retention_drops_segments_and_profiles,
    retention_keeps_recent_profiles_of_a_merge,
);

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
