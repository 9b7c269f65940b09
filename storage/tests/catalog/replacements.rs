//! Segment replacements: compaction swaps segments for a merged one, retention for nothing.

use std::sync::Arc;

use stackhouse_storage::catalog::{CatalogError, SegmentMeta, TableKind};
use stackhouse_storage::model::TimeRange;

use crate::fixtures::{
    fixture, ids, is_conflict, merged, object, open, range, replacement, samples_key, strings,
};

suite!(
    replacement_moves_profiles_and_labels,
    replacement_adds_several_segments,
    replacement_to_rollups_only_drops_profiles,
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

/// What retention makes of seg-1 (web, 100..200): its rollups reusing seg-1's objects,
/// listed first, then a segment with samples.
fn split_of_seg_1(f: &crate::fixtures::Fixture) -> (SegmentMeta, SegmentMeta) {
    let mut rollups = merged("t", "seg-r", &[(&f.web, 100, 149)]);
    rollups.objects = vec![
        object("seg-1", TableKind::Rollup1m, 40, 4),
        object("seg-1", TableKind::Rollup1h, 20, 2),
    ];
    let raw = merged("t", "seg-s", &[(&f.web, 150, 200)]);
    (rollups, raw)
}

async fn replacement_adds_several_segments(url: String) {
    let cat = open(&url).await;
    let f = fixture(&cat).await;
    // seg-1 as it would be after compaction: samples and rollups.
    let (rollups, raw) = split_of_seg_1(&f);
    let mut r = replacement("t", &["seg-1"], vec![rollups.clone(), raw.clone()], 9_000);
    r.drop_profiles_before = Some(155);
    cat.replace_segments(&r).await.unwrap();

    let segments = cat.segments("t", TimeRange::ALL).await.unwrap();
    assert_eq!(ids(&segments), ["seg-2", "seg-3", "seg-r", "seg-s"]);
    assert!(segments.contains(&rollups) && segments.contains(&raw));
    // Profile 1 ended before the cut and is dropped; profile 2 moves to the first new
    // segment with samples, not to the rollups listed before it.
    assert!(cat.profile("t", [1; 16]).await.unwrap().is_empty());
    assert_eq!(
        cat.profile("t", [2; 16]).await.unwrap(),
        vec![("seg-s".to_string(), f.c1.profiles[1].clone())]
    );
    // Both new segments answer seg-1's sample labels.
    for (start, end) in [(100, 149), (150, 201)] {
        assert_eq!(
            cat.label_values("t", "thread.name", range(start, end))
                .await
                .unwrap(),
            strings(&["main"]),
            "{start}..{end}"
        );
    }
    let stats = cat.stats("t").await.unwrap();
    assert_eq!(stats.segments, 4);
    assert_eq!(stats.tables["rollup_1m"].objects, 1);
    assert_eq!(
        (stats.tables["rollup_1h"].rows, stats.tables["rollup_1h"].bytes),
        (2, 20)
    );
    // seg-1's samples object goes; the rollup keys a new segment lists again were never
    // seg-1's here, so only its samples key is queued.
    assert_eq!(
        cat.due_deletions(9_000, 100).await.unwrap(),
        [samples_key("seg-1")]
    );

    // Now the rollups segment loses its minute rollup: its hour rollup is listed again by
    // a new segment that is not the first, and must not be deleted.
    let mut hour_only = rollups.clone();
    hour_only.id = "seg-h".into();
    hour_only.objects.retain(|o| o.kind == TableKind::Rollup1h);
    let first = merged("t", "seg-o", &[(&f.web, 100, 120)]);
    cat.replace_segments(&replacement("t", &["seg-r"], vec![first, hour_only], 9_500))
        .await
        .unwrap();
    let queued = cat.due_deletions(i64::MAX, 100).await.unwrap();
    let minute_key = rollups.objects[0].key.clone();
    let hour_key = rollups.objects[1].key.clone();
    assert!(queued.contains(&minute_key), "{queued:?}");
    assert!(!queued.contains(&hour_key), "{queued:?}");
    assert!(
        cat.unreferenced(std::slice::from_ref(&hour_key))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        cat.label_values("t", "thread.name", range(100, 149))
            .await
            .unwrap(),
        strings(&["main"])
    );

    // A new segment of another tenant is refused, whichever place it has.
    let mut foreign = merged("other", "seg-x", &[(&f.web, 300, 350)]);
    foreign.objects.clear();
    let result = cat
        .replace_segments(&replacement("t", &["seg-2"], vec![raw.clone(), foreign], 0))
        .await;
    assert!(matches!(result, Err(CatalogError::Corrupt(_))), "{result:?}");
    assert!(ids(&cat.segments("t", TimeRange::ALL).await.unwrap()).contains(&"seg-2"));
}

async fn replacement_to_rollups_only_drops_profiles(url: String) {
    let cat = open(&url).await;
    let f = fixture(&cat).await;
    let (rollups, _) = split_of_seg_1(&f);
    cat.replace_segments(&replacement("t", &["seg-1"], Some(rollups), 0))
        .await
        .unwrap();
    // No new segment has samples: seg-1's profiles go with them.
    for p in &f.c1.profiles {
        assert!(cat.profile("t", p.profile_id).await.unwrap().is_empty());
    }
    assert_eq!(
        cat.profile("t", f.c2.profiles[0].profile_id).await.unwrap().len(),
        1
    );
    assert_eq!(
        cat.label_values("t", "thread.name", range(100, 149))
            .await
            .unwrap(),
        strings(&["main"])
    );
    assert_eq!(
        cat.series("t", range(100, 149)).await.unwrap(),
        vec![f.web.clone()]
    );
}
