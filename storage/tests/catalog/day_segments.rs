//! Day segments: listed only when they sum every segment of their day, and made stale by
//! any commit or swap of a segment in that day.

use stackhouse_storage::catalog::{
    CatalogError, DAY_LEVEL, DayCommit, STALE_DAY_LEVEL, SegmentMeta, TableKind,
};
use stackhouse_storage::model::TimeRange;

use crate::fixtures::{commit, fixture, ids, is_conflict, object, open, range, replacement, strings};

suite!(
    a_day_segment_is_listed_only_over_every_segment_of_its_day,
    commits_and_swaps_in_its_day_make_it_stale,
);

const DAY: i64 = 24 * 3600 * 1_000_000_000;

/// A day segment of day 0 (the fixture's segments all lie in it).
fn day_segment(id: &str) -> SegmentMeta {
    SegmentMeta {
        id: id.to_string(),
        tenant: "t".into(),
        min_time: 100,
        max_time: 2000,
        level: DAY_LEVEL,
        created_at_nanos: 1_700_000_000_000_000_100,
        objects: vec![
            object(id, TableKind::Rollup1d, 50, 4),
            object(id, TableKind::Totals1d, 20, 2),
        ],
        series: vec![],
    }
}

fn day_commit(id: &str, sources: &[&str], delete_after_nanos: i64) -> DayCommit {
    DayCommit {
        segment: day_segment(id),
        sources: strings(sources),
        delete_after_nanos,
    }
}

/// The levels of the day segments `tenant` lists, by id.
async fn day_levels(cat: &std::sync::Arc<dyn stackhouse_storage::catalog::Catalog>) -> Vec<(String, i32)> {
    cat.segments("t", TimeRange::ALL)
        .await
        .unwrap()
        .into_iter()
        .filter(|s| s.is_day())
        .map(|s| (s.id, s.level))
        .collect()
}

async fn a_day_segment_is_listed_only_over_every_segment_of_its_day(url: String) {
    let cat = open(&url).await;
    let f = fixture(&cat).await;
    let before = cat.segments("t", TimeRange::ALL).await.unwrap();
    for sources in [
        &["seg-1", "seg-2"][..],
        &["seg-1", "seg-2", "seg-3", "seg-gone"],
        &["seg-1", "seg-2", "seg-gone"],
    ] {
        let result = cat.commit_day(&day_commit("day-0", sources, 0)).await;
        assert!(is_conflict(&result), "{sources:?}: {result:?}");
    }
    assert_eq!(cat.segments("t", TimeRange::ALL).await.unwrap(), before);
    // A segment that is not a day segment, or lists series, is refused.
    let mut block = day_segment("not-a-day");
    block.level = 2;
    let refused = cat
        .commit_day(&DayCommit {
            segment: block,
            sources: strings(&["seg-1", "seg-2", "seg-3"]),
            delete_after_nanos: 0,
        })
        .await;
    assert!(matches!(refused, Err(CatalogError::Corrupt(_))), "{refused:?}");

    cat.commit_day(&day_commit("day-0", &["seg-3", "seg-1", "seg-2"], 0))
        .await
        .unwrap();
    assert_eq!(day_levels(&cat).await, [("day-0".to_string(), DAY_LEVEL)]);
    let listed = cat.segments("t", TimeRange::ALL).await.unwrap();
    assert_eq!(
        listed.iter().find(|s| s.id == "day-0"),
        Some(&day_segment("day-0"))
    );
    // A query over a few series lists it too: it has no extents to select by.
    let holding = cat
        .segments_holding("t", range(0, 5000), &[f.api.id])
        .await
        .unwrap();
    let mut holding = ids(&holding);
    holding.sort();
    assert_eq!(holding, ["day-0", "seg-2"]);
    // A read that takes whole days from day segments does not list what they sum, with
    // or without a selection of series; over less than the whole day it lists everything.
    let whole_day = range(0, DAY);
    assert_eq!(
        ids(&cat.segments_summed("t", whole_day, None).await.unwrap()),
        ["day-0"]
    );
    let selected = cat
        .segments_summed("t", whole_day, Some(&[f.api.id]))
        .await
        .unwrap();
    assert_eq!(ids(&selected), ["day-0"]);
    let mut part = cat.segments_summed("t", range(0, DAY - 1), None).await.unwrap();
    part.sort_by(|a, b| a.id.cmp(&b.id));
    let mut all = cat.segments("t", TimeRange::ALL).await.unwrap();
    all.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(part, all, "objects and extents as the plain listing has them");
    // It counts as a segment with its tables, but holds no series of its own.
    let stats = cat.stats("t").await.unwrap();
    assert_eq!(stats.segments, 4);
    assert_eq!(stats.tables["rollup_1d"].rows, 4);
    assert_eq!(cat.data_range("t").await.unwrap(), Some((100, 2000)));
}

async fn commits_and_swaps_in_its_day_make_it_stale(url: String) {
    let cat = open(&url).await;
    let f = fixture(&cat).await;
    cat.commit_day(&day_commit("day-0", &["seg-1", "seg-2", "seg-3"], 0))
        .await
        .unwrap();
    // A segment of the next day leaves it alone.
    cat.commit_segment(&commit("t", "seg-next", &[(&f.web, DAY + 10, DAY + 20)]))
        .await
        .unwrap();
    assert_eq!(day_levels(&cat).await, [("day-0".to_string(), DAY_LEVEL)]);
    // A late segment in its day makes it stale in the same commit.
    cat.commit_segment(&commit("t", "seg-late", &[(&f.web, 500, 600)]))
        .await
        .unwrap();
    assert_eq!(day_levels(&cat).await, [("day-0".to_string(), STALE_DAY_LEVEL)]);
    // A stale day segment leaves nothing out.
    let listed = cat.segments_summed("t", range(0, DAY), None).await.unwrap();
    assert_eq!(listed.len(), 5, "{:?}", ids(&listed));
    // Summing the day again replaces the stale one, whose objects go after the grace.
    cat.commit_day(&day_commit(
        "day-0b",
        &["seg-1", "seg-2", "seg-3", "seg-late"],
        7_000,
    ))
    .await
    .unwrap();
    assert_eq!(day_levels(&cat).await, [("day-0b".to_string(), DAY_LEVEL)]);
    let mut queued = vec![
        object("day-0", TableKind::Rollup1d, 0, 0).key,
        object("day-0", TableKind::Totals1d, 0, 0).key,
    ];
    queued.sort();
    assert!(cat.due_deletions(6_999, 10).await.unwrap().is_empty());
    assert_eq!(cat.due_deletions(7_000, 10).await.unwrap(), queued);
    // A swap in the day (a merge of two of its segments) makes it stale too.
    cat.replace_segments(&replacement("t", &["seg-1", "seg-2"], Some(f.merged("seg-m")), 0))
        .await
        .unwrap();
    assert_eq!(day_levels(&cat).await, [("day-0b".to_string(), STALE_DAY_LEVEL)]);
    // Removing the stale one is an ordinary swap, and touches no other day.
    cat.commit_day(&DayCommit {
        segment: SegmentMeta {
            min_time: DAY + 10,
            max_time: DAY + 20,
            ..day_segment("day-1")
        },
        sources: strings(&["seg-next"]),
        delete_after_nanos: 0,
    })
    .await
    .unwrap();
    cat.replace_segments(&replacement("t", &["day-0b"], None, 0))
        .await
        .unwrap();
    assert_eq!(day_levels(&cat).await, [("day-1".to_string(), DAY_LEVEL)]);
}
