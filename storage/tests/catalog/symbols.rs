//! Symbol objects: the tenant's, replaced by merged ones, moved out of segments by migration.

use std::sync::Arc;

use stackhouse_storage::catalog::{
    CatalogError, CommitOutcome, ObjectMeta, SymbolEpoch, TableKind, TableStats,
};
use stackhouse_storage::model::TimeRange;

use crate::fixtures::{commit, cpu, ids, is_conflict, object, open, series, stacks_key, strings};

suite!(
    symbol_objects_are_the_tenants,
    symbol_replacement,
    concurrent_symbol_replacements_one_wins,
    migration_moves_symbol_objects,
    the_symbol_epoch_refuses_commits_listed_before_a_collection,
    concurrent_commits_and_a_collection_agree_on_the_epoch,
);

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

/// A writer's commit carries the epoch its symbol listing was read at: a collection's start
/// and end and a tenant's deletion each move the epoch, and a commit made at an older one is
/// refused with nothing of it stored.
async fn the_symbol_epoch_refuses_commits_listed_before_a_collection(url: String) {
    let cat = open(&url).await;
    let web = series(cpu(), &[("service.name", "web")]);
    let epoch = |epoch, collect| SymbolEpoch { epoch, collect };
    assert_eq!(cat.symbol_epoch("t").await.unwrap(), epoch(0, false));
    cat.commit_segment(&commit("t", "seg-0", &[(&web, 1, 2)]))
        .await
        .unwrap();

    cat.symbols_to_collect("t").await.unwrap();
    assert_eq!(cat.symbol_epoch("t").await.unwrap(), epoch(0, true));
    assert_eq!(cat.begin_symbol_collection("t").await.unwrap(), 1);
    assert!(cat.symbol_epoch("t").await.unwrap().collecting());
    let stale = commit("t", "seg-1", &[(&web, 3, 4)]);
    let refused = cat.commit_segment_within(&stale, 0).await.unwrap();
    let CommitOutcome::Refused(refusal) = refused else {
        panic!("a commit at epoch 0 after a collection began was stored");
    };
    assert!(refusal.stale_symbols && refusal.repeated.is_empty() && refusal.refused_series.is_empty());
    assert_eq!(ids(&cat.segments("t", TimeRange::ALL).await.unwrap()), ["seg-0"]);
    assert_eq!(
        cat.symbol_objects("t").await.unwrap().len(),
        1,
        "the refused commit's symbols are not listed"
    );
    // Another tenant's epoch did not move.
    cat.commit_segment(&commit("u", "seg-u", &[(&web, 3, 4)]))
        .await
        .unwrap();

    let mut during = commit("t", "seg-2", &[(&web, 5, 6)]);
    during.symbol_epoch = 1;
    cat.commit_segment(&during).await.unwrap();
    // The collection swaps the objects listed when it began; seg-2's stay.
    let listed_at_start = vec![stacks_key("seg-0")];
    let merged = object("collected", TableKind::Stacks, 9, 9);
    let wrong = cat
        .collect_symbols("t", &listed_at_start, std::slice::from_ref(&merged), 0, 3)
        .await;
    assert!(
        is_conflict(&wrong),
        "a collection that did not begin at epoch 3 ends nothing: {wrong:?}"
    );
    cat.collect_symbols("t", &listed_at_start, std::slice::from_ref(&merged), 0, 1)
        .await
        .unwrap();
    assert_eq!(cat.symbol_epoch("t").await.unwrap(), epoch(2, false));
    let keys: Vec<String> = cat
        .symbol_objects("t")
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.key)
        .collect();
    assert_eq!(keys, [merged.key.clone(), stacks_key("seg-2")]);
    let refused = cat.commit_segment_within(&during, 0).await.unwrap();
    assert!(matches!(refused, CommitOutcome::Refused(r) if r.stale_symbols));

    // A collection killed midway left an odd epoch: the next one moves past it.
    cat.symbols_to_collect("t").await.unwrap();
    assert_eq!(cat.begin_symbol_collection("t").await.unwrap(), 3);
    assert_eq!(cat.begin_symbol_collection("t").await.unwrap(), 5);
    // A collection with nothing to swap still ends.
    cat.collect_symbols("t", &[], &[], 0, 5).await.unwrap();
    assert_eq!(cat.symbol_epoch("t").await.unwrap(), epoch(6, false));

    // Deleting the tenant moves it to a newer even epoch: writers that listed its symbols
    // before must bring them again.
    cat.delete_tenant("t", 0).await.unwrap();
    assert_eq!(cat.symbol_epoch("t").await.unwrap(), epoch(8, false));
    let mut after = commit("t", "seg-3", &[(&web, 7, 8)]);
    after.symbol_epoch = 6;
    assert!(matches!(
        cat.commit_segment_within(&after, 0).await.unwrap(),
        CommitOutcome::Refused(r) if r.stale_symbols
    ));
    after.symbol_epoch = 8;
    cat.commit_segment(&after).await.unwrap();
    assert_eq!(cat.symbol_epoch("u").await.unwrap(), epoch(0, false));
}

/// Commits racing the start of a collection: each is either stored before the epoch moved
/// (and then listed by whoever lists after the move) or refused, never stored unseen.
async fn concurrent_commits_and_a_collection_agree_on_the_epoch(url: String) {
    let cat = open(&url).await;
    let web = series(cpu(), &[("service.name", "web")]);
    let commits: Vec<_> = (0..16)
        .map(|i| {
            let cat = cat.clone();
            let c = commit("t", &format!("seg-{i:02}"), &[(&web, i, i + 1)]);
            tokio::spawn(async move { cat.commit_segment_within(&c, 0).await.unwrap() })
        })
        .collect();
    let began = cat.begin_symbol_collection("t").await.unwrap();
    let listed = cat.segments("t", TimeRange::ALL).await.unwrap();
    let mut stored = 0;
    for c in commits {
        if c.await.unwrap() == CommitOutcome::Committed {
            stored += 1;
        }
    }
    assert_eq!(began, 1);
    assert_eq!(
        listed.len(),
        stored,
        "every commit stored at epoch 0 was listed after the epoch moved"
    );
    assert_eq!(cat.segments("t", TimeRange::ALL).await.unwrap().len(), stored);
}
