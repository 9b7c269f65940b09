//! Label listings through the label index agree with the series extents they summarize,
//! over every kind of range, through compaction, retention and splits.

use std::collections::BTreeSet;
use std::sync::Arc;

use stackhouse_storage::catalog::Catalog;
use stackhouse_storage::model::{Series, TimeRange};

use crate::fixtures::{commit, cpu, merged, open, range, replacement, series};

suite!(listings_equal_the_extents_through_compaction_retention_and_splits);

const DAY: i64 = 86_400_000_000_000;
const HOUR: i64 = DAY / 24;

/// A series extent: (index into the model's series, first time, last time).
type Extent = (usize, i64, i64);

/// The segments the catalog holds, as the test wrote them: the expected listings come from
/// these extents, never from the catalog.
struct Model {
    series: Vec<Series>,
    /// (segment id, extents as (series index, min, max)).
    segments: Vec<(String, Vec<Extent>)>,
}

impl Model {
    fn values(&self, name: &str, r: TimeRange) -> Vec<String> {
        let mut out = BTreeSet::new();
        for (_, extents) in &self.segments {
            for &(i, min, max) in extents {
                if min < r.end
                    && max >= r.start
                    && let Some(v) = self.series[i].labels.get(name)
                {
                    out.insert(v.clone());
                }
            }
        }
        out.into_iter().collect()
    }

    fn names(&self, r: TimeRange) -> Vec<String> {
        let mut out = BTreeSet::new();
        for (_, extents) in &self.segments {
            for &(i, min, max) in extents {
                if min < r.end && max >= r.start {
                    out.extend(self.series[i].labels.keys().cloned());
                }
            }
        }
        out.into_iter().collect()
    }

    fn take(&mut self, id: &str) -> Vec<Extent> {
        let at = self.segments.iter().position(|(s, _)| s == id).unwrap();
        self.segments.remove(at).1
    }

    fn refs(&self, extents: &[Extent]) -> Vec<(Series, i64, i64)> {
        extents
            .iter()
            .map(|&(i, min, max)| (self.series[i].clone(), min, max))
            .collect()
    }
}

/// Ranges that probe every edge: whole days, several days, inside one day and one hour,
/// edges on and next to every extent boundary, and all of time.
fn ranges(model: &Model) -> Vec<TimeRange> {
    let mut out = vec![TimeRange::ALL, range(0, 6 * DAY)];
    for d in 0..5 {
        out.push(range(d * DAY, (d + 1) * DAY));
        out.push(range(d * DAY + 3 * HOUR, (d + 2) * DAY + 5 * HOUR));
        out.push(range(d * DAY + 10 * HOUR, d * DAY + 11 * HOUR));
        out.push(range(d * DAY + 2 * HOUR, d * DAY + 22 * HOUR));
        out.push(range(d * DAY + 23 * HOUR, (d + 1) * DAY + HOUR));
    }
    for (_, extents) in &model.segments {
        for &(_, min, max) in extents.iter().take(3) {
            out.push(range(min, min + 1));
            out.push(range(max, max + 1));
            out.push(range(max + 1, max + HOUR));
            out.push(range(min - HOUR, min));
            out.push(range(min + 1, max));
        }
    }
    out
}

async fn check(cat: &Arc<dyn Catalog>, model: &Model, stage: &str) {
    let mut checked = 0;
    for r in ranges(model) {
        assert_eq!(
            cat.label_names("t", r).await.unwrap(),
            model.names(r),
            "{stage}: label names over {r:?}"
        );
        for name in ["service.name", "pod"] {
            assert_eq!(
                cat.label_values("t", name, r).await.unwrap(),
                model.values(name, r),
                "{stage}: values of {name} over {r:?}"
            );
            checked += 1;
        }
    }
    assert!(checked > 100, "{stage}: only {checked} listings checked");
}

/// A small deterministic generator, so a failure names a reproducible case.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: i64) -> i64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as i64
    }
}

async fn listings_equal_the_extents_through_compaction_retention_and_splits(url: String) {
    let cat = open(&url).await;
    let mut rng = Lcg(7);
    let series: Vec<Series> = (0..24)
        .map(|i| {
            let service = format!("svc-{}", i % 6);
            let pod = format!("pod-{i}");
            if i % 5 == 0 {
                series(
                    cpu(),
                    &[("service.name", &service), ("pod", &pod), ("zone", "eu")],
                )
            } else {
                series(cpu(), &[("service.name", &service), ("pod", &pod)])
            }
        })
        .collect();
    let mut model = Model {
        series,
        segments: Vec::new(),
    };

    // Level-0 flushes over five days: short extents, some across midnight, some long
    // (a pod reporting for more than a day in one flush), with gaps inside days.
    for n in 0..60 {
        let mut extents: Vec<Extent> = Vec::new();
        for _ in 0..3 {
            let i = rng.below(24) as usize;
            let start = rng.below(5) * DAY + rng.below(24) * HOUR + rng.below(HOUR);
            let length = match rng.below(6) {
                0 => DAY + rng.below(DAY),
                1 => 2 * HOUR + rng.below(3 * HOUR),
                _ => rng.below(HOUR / 4),
            };
            if !extents.iter().any(|&(j, ..)| j == i) {
                extents.push((i, start, start + length));
            }
        }
        let id = format!("l0-{n}");
        let refs = model.refs(&extents);
        let refs: Vec<(&Series, i64, i64)> = refs.iter().map(|(s, a, b)| (s, *a, *b)).collect();
        cat.commit_segment(&commit("t", &id, &refs)).await.unwrap();
        model.segments.push((id, extents));
    }
    check(&cat, &model, "level 0 only").await;

    // Compaction: 50 of them merged, ten at a time, into level-1 segments whose extents
    // are the per-series hulls (they cover what they replace); ten stay at level 0.
    for g in 0..5 {
        let ids: Vec<String> = (g * 10..g * 10 + 10).map(|n| format!("l0-{n}")).collect();
        let mut hulls: Vec<Extent> = Vec::new();
        for id in &ids {
            for (i, min, max) in model.take(id) {
                match hulls.iter_mut().find(|h| h.0 == i) {
                    Some(h) => {
                        h.1 = h.1.min(min);
                        h.2 = h.2.max(max);
                    }
                    None => hulls.push((i, min, max)),
                }
            }
        }
        let id = format!("l1-{g}");
        let refs = model.refs(&hulls);
        let refs: Vec<(&Series, i64, i64)> = refs.iter().map(|(s, a, b)| (s, *a, *b)).collect();
        let removed: Vec<&str> = ids.iter().map(String::as_str).collect();
        cat.replace_segments(&replacement("t", &removed, Some(merged("t", &id, &refs)), 0))
            .await
            .unwrap();
        model.segments.push((id, hulls));
    }
    check(&cat, &model, "after compaction").await;

    // Retention: two merged segments gone with nothing in their place.
    for id in ["l1-1", "l1-3"] {
        model.take(id);
    }
    cat.replace_segments(&replacement("t", &["l1-1", "l1-3"], None, 0))
        .await
        .unwrap();
    check(&cat, &model, "after retention").await;

    // A split: each extent of l1-0 cut in two around a gap, into two segments that each
    // hold one side (neither covers the extent it replaces); an extent too short to cut
    // keeps its first nanosecond only.
    let old = model.take("l1-0");
    let (mut before, mut after) = (Vec::new(), Vec::new());
    for &(i, min, max) in &old {
        let third = (max - min) / 3;
        if third > 0 {
            before.push((i, min, min + third));
            after.push((i, max - third, max));
        } else {
            before.push((i, min, min));
        }
    }
    let mut added = Vec::new();
    for (id, extents) in [("split-a", before), ("split-b", after)] {
        if extents.is_empty() {
            continue;
        }
        let refs = model.refs(&extents);
        let refs: Vec<(&Series, i64, i64)> = refs.iter().map(|(s, a, b)| (s, *a, *b)).collect();
        added.push(merged("t", id, &refs));
        model.segments.push((id.to_string(), extents));
    }
    cat.replace_segments(&replacement("t", &["l1-0"], added, 0))
        .await
        .unwrap();
    check(&cat, &model, "after a split").await;

    // A catalog migrated from before the index: its backfill builds the same rows.
    rerun_backfill(&url).await;
    check(&cat, &model, "after the migration's backfill").await;

    // The index is kept per tenant: another tenant's listings stay empty.
    assert!(cat.label_names("u", TimeRange::ALL).await.unwrap().is_empty());
    assert!(
        cat.label_values("u", "pod", range(0, 6 * DAY))
            .await
            .unwrap()
            .is_empty()
    );
}

/// Empties the index and runs the part of its migration that fills it from what is stored.
async fn rerun_backfill(url: &str) {
    let (migration, wipe) = (
        if url.starts_with("sqlite") {
            include_str!("../../../migrations/sqlite/0008_label_index.sql")
        } else {
            include_str!("../../../migrations/postgres/0008_label_index.sql")
        },
        "DELETE FROM label_value_days; DELETE FROM label_name_days; DELETE FROM label_values;",
    );
    let backfill = &migration[migration
        .find("-- The rows of what is stored already.")
        .expect("the migration fills the index from what is stored")..];
    for sql in [wipe, backfill] {
        if url.starts_with("sqlite") {
            let pool = sqlx::SqlitePool::connect(url).await.unwrap();
            sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                .execute(&pool)
                .await
                .unwrap();
        } else {
            let pool = sqlx::PgPool::connect(url).await.unwrap();
            sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                .execute(&pool)
                .await
                .unwrap();
        }
    }
}
