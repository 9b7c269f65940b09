//! The deletion queue and which keys nothing refers to.

use crate::fixtures::{commit, cpu, open, replacement, samples_key, series, stacks_key};

suite!(deletion_queue, unreferenced_keys,);

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
