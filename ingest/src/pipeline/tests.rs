use std::time::Duration;

use bytes::Bytes;
use stackhouse_storage::catalog::{Catalog, open_catalog};
use stackhouse_storage::clock::ManualClock;
use stackhouse_storage::per_tenant::PerTenant;
use stackhouse_storage::store::Store;
use stackhouse_storage::symbols::SymbolCache;
use stackhouse_storage::writer::WriterConfig;

use super::*;
use crate::convert::Source;
use crate::formats::{self, Body};

const HOUR: i64 = 3_600_000_000_000;

async fn writer(dir: &std::path::Path) -> Arc<Writer> {
    writer_over(dir, open_catalog("sqlite::memory:").await.unwrap())
}

fn writer_over(dir: &std::path::Path, catalog: Arc<dyn Catalog>) -> Arc<Writer> {
    let store = Store::open(&format!("file://{}", dir.display())).unwrap();
    let symbols = Arc::new(SymbolCache::new(store.clone(), catalog.clone()));
    let config = WriterConfig {
        flush_interval: Duration::from_millis(10),
        ..WriterConfig::default()
    };
    Arc::new(Writer::start(store, catalog, symbols, config))
}

fn folded_at(time_nanos: i64) -> Payload {
    folded_of("app", time_nanos)
}

fn folded_of(service: &str, time_nanos: i64) -> Payload {
    Payload {
        format: &formats::folded::Folded,
        body: Body::Raw(Bytes::from_static(b"main;work 10\nmain;idle 3\n")),
        params: Params {
            source: Source {
                resource: vec![("service.name".into(), service.into())],
                time_nanos: Some(time_nanos),
                ..Source::default()
            },
            ..Params::default()
        },
        sent_bytes: 24,
    }
}

#[tokio::test]
async fn the_time_window_follows_the_injected_clock() {
    let dir = std::env::temp_dir().join(format!("stackhouse-pipeline-{}", std::process::id()));
    let writer = writer(&dir).await;
    let now = 1_000 * HOUR;
    let clock = ManualClock::at(now);
    let retention = PerTenant::uniform(Duration::from_secs(3600));
    let pipeline =
        Pipeline::new(writer.clone(), clock.clone()).with_time_window(retention, Duration::from_secs(600));

    let old = pipeline
        .ingest("t".into(), folded_at(now - 2 * HOUR))
        .await
        .unwrap();
    assert_eq!((old.stored_profiles, old.rejected_profiles), (0, 1));
    assert!(
        old.errors[0].contains("older than the tenant's retention"),
        "{:?}",
        old.errors
    );

    // An hour later by the clock, a time an hour ahead of the old now is no longer future.
    let ahead = now + HOUR;
    let future = pipeline.ingest("t".into(), folded_at(ahead)).await.unwrap();
    assert_eq!(future.rejected_profiles, 1, "{:?}", future.errors);
    clock.advance(Duration::from_secs(3600));
    let stored = pipeline.ingest("t".into(), folded_at(ahead)).await.unwrap();
    assert_eq!((stored.stored_profiles, stored.rejected_profiles), (1, 0));
    assert_eq!(stored.stored_samples, 2);
    assert_eq!(stored.converted.samples, 2);
    writer.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_request_over_the_rate_is_refused_before_it_is_stored() {
    let dir = std::env::temp_dir().join(format!("stackhouse-pipeline-rate-{}", std::process::id()));
    let writer = writer(&dir).await;
    let limiter = RateLimiter::new(crate::limits::RateLimits {
        samples: PerTenant::uniform(1),
        burst_seconds: 1,
        ..Default::default()
    });
    let pipeline =
        Pipeline::new(writer.clone(), ManualClock::at(1_000 * HOUR)).with_rate_limiter(Arc::new(limiter));
    let refused = pipeline
        .ingest("t".into(), folded_at(1_000 * HOUR))
        .await
        .unwrap_err();
    assert!(matches!(refused, IngestError::TooLarge(_)), "{refused:?}");
    writer.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
}

/// Two ingesters whose own series counts each see room: the catalog counts at commit and
/// the request over the limit hears its profile was refused.
#[tokio::test]
async fn the_series_limit_is_counted_across_ingesters() {
    let dir = std::env::temp_dir().join(format!("stackhouse-pipeline-series-{}", std::process::id()));
    let catalog = open_catalog("sqlite::memory:").await.unwrap();
    let now = 1_000 * HOUR;
    let limits = || IngestLimits {
        max_series: PerTenant::uniform(2),
        ..IngestLimits::default()
    };
    let ingester = |catalog: &Arc<dyn Catalog>| {
        Pipeline::new(writer_over(&dir, catalog.clone()), ManualClock::at(now))
            .with_limits(limits(), SeriesCounter::new(catalog.clone()))
    };
    let (a, b) = (ingester(&catalog), ingester(&catalog));
    // b reads the tenant's series (none yet) and stores s2; a then stores s1, which leaves
    // no room, but b's own count still has one place.
    let s2 = b.ingest("t".into(), folded_of("s2", now)).await.unwrap();
    assert_eq!((s2.stored_profiles, s2.rejected_profiles), (1, 0));
    let s1 = a.ingest("t".into(), folded_of("s1", now)).await.unwrap();
    assert_eq!((s1.stored_profiles, s1.rejected_profiles), (1, 0));

    let s3 = b.ingest("t".into(), folded_of("s3", now)).await.unwrap();
    assert_eq!(
        (s3.stored_profiles, s3.stored_samples, s3.rejected_profiles),
        (0, 0, 1)
    );
    assert!(
        s3.errors
            .iter()
            .any(|e| e.contains("limit of 2 series") && e.contains("across all ingesters")),
        "{:?}",
        s3.errors
    );
    assert!(
        s3.response()
            .partial_success
            .is_some_and(|p| p.rejected_profiles == 1)
    );
    let stored = catalog
        .series("t", stackhouse_storage::model::TimeRange::ALL)
        .await
        .unwrap();
    assert_eq!(stored.len(), 2);
    // b read the tenant's series again: its own gate now refuses s3 up front.
    let again = b.ingest("t".into(), folded_of("s3", now)).await.unwrap();
    assert_eq!(again.rejected_profiles, 1);
    assert!(
        again
            .errors
            .iter()
            .any(|e| e.contains("--ingest-max-series") && !e.contains("across")),
        "{:?}",
        again.errors
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// The series limit counts series after relabeling: three services mapped to one series
/// by the tenant's rules fit a limit of one; a rule's drop is a refusal that names it.
#[tokio::test]
async fn the_series_limit_counts_series_after_relabeling() {
    let dir = std::env::temp_dir().join(format!("stackhouse-pipeline-relabel-{}", std::process::id()));
    let catalog = open_catalog("sqlite::memory:").await.unwrap();
    let now = 1_000 * HOUR;
    let rules = crate::relabel::Rules::from_json(
        r#"[{"source_labels": ["service.name"], "regex": "noise-.*", "action": "drop"},
            {"source_labels": ["service.name"], "regex": "(s)[0-9]", "target_label": "service.name", "replacement": "$1-all"}]"#,
    )
    .unwrap();
    let limits = IngestLimits {
        max_series: PerTenant::uniform(1),
        relabel: PerTenant::new(
            Arc::new(crate::relabel::Rules::NONE),
            &[("t".to_string(), Arc::new(rules))],
        ),
        ..IngestLimits::default()
    };
    let pipeline = Pipeline::new(writer_over(&dir, catalog.clone()), ManualClock::at(now))
        .with_limits(limits, SeriesCounter::new(catalog.clone()));
    for service in ["s1", "s2", "s3"] {
        let out = pipeline
            .ingest("t".into(), folded_of(service, now))
            .await
            .unwrap();
        assert_eq!(
            (out.stored_profiles, out.rejected_profiles),
            (1, 0),
            "{service}: {out:?}"
        );
    }
    let dropped = pipeline
        .ingest("t".into(), folded_of("noise-1", now))
        .await
        .unwrap();
    assert_eq!(
        (
            dropped.stored_profiles,
            dropped.rejected_profiles,
            dropped.relabeled_profiles
        ),
        (0, 1, 1)
    );
    assert!(
        dropped
            .errors
            .iter()
            .any(|e| e.contains("relabel rule 0 (action drop)")),
        "{:?}",
        dropped.errors
    );
    let stored = catalog
        .series("t", stackhouse_storage::model::TimeRange::ALL)
        .await
        .unwrap();
    assert_eq!(stored.len(), 1, "{stored:?}");
    assert_eq!(
        stored[0].labels.get("service.name").map(String::as_str),
        Some("s-all")
    );
    // Another tenant has no rules: its second service is over the limit.
    pipeline.ingest("u".into(), folded_of("s1", now)).await.unwrap();
    let over = pipeline.ingest("u".into(), folded_of("s2", now)).await.unwrap();
    assert_eq!(over.rejected_profiles, 1);
    let _ = std::fs::remove_dir_all(dir);
}
