//! Series, profile types and labels in a time range.

use stackhouse_storage::model::TimeRange;

use crate::fixtures::{commit, cpu, ids, off_cpu, open, range, series, strings};

suite!(series_extent_not_segment_extent, labels_include_sample_labels,);

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
