//! Recording rules: created under a per-tenant limit, replaced only at the generation the
//! writer read, deleted with their progress; kept per tenant and across reopening.

use std::sync::Arc;

use stackhouse_storage::catalog::{RuleProgress, RuleUpsert, StoredRule};

use crate::fixtures::open;

suite!(
    rules_are_versioned_and_limited_per_tenant,
    concurrent_creations_respect_the_limit,
    progress_is_kept_per_rule,
);

fn stored(id: &str, generation: i64, definition: &str) -> RuleUpsert {
    RuleUpsert::Stored(StoredRule {
        id: id.into(),
        generation,
        definition: definition.into(),
    })
}

async fn rules_are_versioned_and_limited_per_tenant(url: String) {
    {
        let cat = open(&url).await;
        assert!(cat.recording_rules("a").await.unwrap().is_empty());
        assert_eq!(
            cat.upsert_recording_rule("a", "one", 0, "{\"v\":1}", 2)
                .await
                .unwrap(),
            stored("one", 1, "{\"v\":1}")
        );
        // A replacement must name the generation it read.
        assert_eq!(
            cat.upsert_recording_rule("a", "one", 0, "{\"v\":2}", 2)
                .await
                .unwrap(),
            RuleUpsert::Conflict { stored_generation: 1 }
        );
        assert_eq!(
            cat.upsert_recording_rule("a", "one", 1, "{\"v\":2}", 2)
                .await
                .unwrap(),
            stored("one", 2, "{\"v\":2}")
        );
        assert_eq!(
            cat.upsert_recording_rule("a", "one", 1, "{\"v\":3}", 2)
                .await
                .unwrap(),
            RuleUpsert::Conflict { stored_generation: 2 }
        );
        cat.upsert_recording_rule("a", "two", 0, "{}", 2).await.unwrap();
        // The limit counts creations only: a third rule is refused, a replacement is not.
        assert_eq!(
            cat.upsert_recording_rule("a", "three", 0, "{}", 2).await.unwrap(),
            RuleUpsert::Limit { max: 2 }
        );
        assert_eq!(
            cat.upsert_recording_rule("a", "two", 1, "{\"x\":1}", 2)
                .await
                .unwrap(),
            stored("two", 2, "{\"x\":1}")
        );
        // Another tenant has its own rules and its own limit.
        cat.upsert_recording_rule("b", "one", 0, "{\"b\":1}", 1)
            .await
            .unwrap();
    }
    let cat = open(&url).await;
    assert_eq!(
        cat.recording_rules("a").await.unwrap(),
        vec![
            StoredRule {
                id: "one".into(),
                generation: 2,
                definition: "{\"v\":2}".into()
            },
            StoredRule {
                id: "two".into(),
                generation: 2,
                definition: "{\"x\":1}".into()
            },
        ]
    );
    assert_eq!(cat.recording_rule_tenants().await.unwrap(), ["a", "b"]);
    assert!(cat.delete_recording_rule("a", "one").await.unwrap());
    assert!(!cat.delete_recording_rule("a", "one").await.unwrap());
    assert_eq!(cat.recording_rules("a").await.unwrap().len(), 1);
    assert_eq!(cat.recording_rules("b").await.unwrap()[0].definition, "{\"b\":1}");
    // A rule created again under a deleted id starts over at generation 1.
    assert_eq!(
        cat.upsert_recording_rule("a", "one", 0, "{}", 0).await.unwrap(),
        stored("one", 1, "{}")
    );
}

async fn concurrent_creations_respect_the_limit(url: String) {
    let cat = open(&url).await;
    let tasks: Vec<_> = (0..12)
        .map(|i| {
            let cat = Arc::clone(&cat);
            tokio::spawn(async move {
                cat.upsert_recording_rule("t", &format!("r{i:02}"), 0, "{}", 5)
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut created = 0;
    for task in tasks {
        match task.await.unwrap() {
            RuleUpsert::Stored(_) => created += 1,
            RuleUpsert::Limit { max } => assert_eq!(max, 5),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(created, 5);
    assert_eq!(cat.recording_rules("t").await.unwrap().len(), 5);
}

async fn progress_is_kept_per_rule(url: String) {
    let progress = |id: &str, until: i64, coarse: &str| RuleProgress {
        rule_id: id.into(),
        evaluated_until: until,
        coarse: coarse.into(),
    };
    {
        let cat = open(&url).await;
        cat.upsert_recording_rule("a", "stored", 0, "{}", 0)
            .await
            .unwrap();
        cat.set_rule_progress("a", &progress("stored", 60, "[]"))
            .await
            .unwrap();
        // A configured rule has progress without a stored rule.
        cat.set_rule_progress("a", &progress("configured", 120, "[]"))
            .await
            .unwrap();
        cat.set_rule_progress("a", &progress("stored", 180, "[[0,3600]]"))
            .await
            .unwrap();
        cat.set_rule_progress("b", &progress("stored", 1, "[]"))
            .await
            .unwrap();
    }
    let cat = open(&url).await;
    assert_eq!(
        cat.rule_progress("a").await.unwrap(),
        vec![
            progress("configured", 120, "[]"),
            progress("stored", 180, "[[0,3600]]")
        ]
    );
    // Deleting a rule forgets its progress: created again, it is backfilled again.
    cat.delete_recording_rule("a", "stored").await.unwrap();
    assert_eq!(
        cat.rule_progress("a").await.unwrap(),
        vec![progress("configured", 120, "[]")]
    );
    assert_eq!(cat.rule_progress("b").await.unwrap().len(), 1);
}
