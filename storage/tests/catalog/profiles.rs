//! Profiles: lookup by id and by key.

use stackhouse_storage::model::{Labels, ProfileRecord};

use crate::fixtures::{commit, cpu, labels, off_cpu, open, series};

suite!(
    profile_lookup,
    stored_profiles_by_key,
    profile_metadata_round_trips,
);

async fn profile_lookup(url: String) {
    let cat = open(&url).await;
    let cpu_s = series(cpu(), &[("service.name", "web")]);
    let off_s = series(off_cpu(), &[("service.name", "web")]);
    let id = [0xab; 16];
    let record = |series_id, start_nanos, sample_count| ProfileRecord {
        profile_id: id,
        series_id,
        start_nanos,
        end_nanos: start_nanos + 10,
        sample_count,
        resource: Labels::new(),
        attributes: Labels::new(),
    };
    let mut c1 = commit("t", "seg-1", &[(&cpu_s, 100, 110), (&off_s, 100, 110)]);
    c1.profiles = vec![record(cpu_s.id, 100, 5), record(off_s.id, 100, 6)];
    let mut c2 = commit("t", "seg-2", &[(&cpu_s, 200, 210)]);
    c2.profiles = vec![
        record(cpu_s.id, 200, 7),
        ProfileRecord {
            profile_id: [0xcd; 16],
            ..record(cpu_s.id, 200, 1)
        },
    ];
    cat.commit_segment(&c1).await.unwrap();
    cat.commit_segment(&c2).await.unwrap();

    let found = cat.profile("t", id).await.unwrap();
    let mut expected = vec![
        ("seg-1".to_string(), record(cpu_s.id, 100, 5)),
        ("seg-1".to_string(), record(off_s.id, 100, 6)),
        ("seg-2".to_string(), record(cpu_s.id, 200, 7)),
    ];
    let mut found_sorted = found.clone();
    found_sorted.sort_by_key(|(seg, r)| (seg.clone(), r.series_id));
    expected.sort_by_key(|(seg, r)| (seg.clone(), r.series_id));
    assert_eq!(found_sorted, expected);
    assert_eq!(cat.profile("t", [0xcd; 16]).await.unwrap().len(), 1);
    assert!(cat.profile("t", [0xef; 16]).await.unwrap().is_empty());
}

async fn stored_profiles_by_key(url: String) {
    let cat = open(&url).await;
    let cpu_s = series(cpu(), &[("service.name", "web")]);
    let off_s = series(off_cpu(), &[("service.name", "web")]);
    let record = |profile_id, series_id, start_nanos| ProfileRecord {
        profile_id,
        series_id,
        start_nanos,
        end_nanos: start_nanos + 10,
        sample_count: 1,
        resource: Labels::new(),
        attributes: Labels::new(),
    };
    let mut c = commit("t", "seg-1", &[(&cpu_s, 100, 110), (&off_s, 100, 110)]);
    c.profiles = vec![record([1; 16], cpu_s.id, 100), record([2; 16], off_s.id, 100)];
    cat.commit_segment(&c).await.unwrap();
    let asked = [
        ([1; 16], cpu_s.id, 100),
        ([1; 16], cpu_s.id, 101), // another start
        ([1; 16], off_s.id, 100), // another series
        ([2; 16], off_s.id, 100),
        ([3; 16], cpu_s.id, 100), // never stored
    ];
    let mut found = cat.stored_profiles("t", &asked).await.unwrap();
    found.sort();
    assert_eq!(found, vec![([1; 16], cpu_s.id, 100), ([2; 16], off_s.id, 100)]);
    assert!(cat.stored_profiles("other", &asked).await.unwrap().is_empty());
    assert!(cat.stored_profiles("t", &[]).await.unwrap().is_empty());
    // More keys than SQLite binds parameters.
    let many: Vec<_> = (0..40_000i64)
        .map(|i| ([9; 16], i, i))
        .chain([asked[0]])
        .collect();
    assert_eq!(cat.stored_profiles("t", &many).await.unwrap(), vec![asked[0]]);
}

async fn profile_metadata_round_trips(url: String) {
    let cat = open(&url).await;
    let web = series(
        cpu(),
        &[("service.name", "web"), ("host.name", "a"), ("profile.kind", "x")],
    );
    // Keys and values that need escaping in JSON, and a resource key the attributes share.
    let with_metadata = ProfileRecord {
        profile_id: [0x11; 16],
        series_id: web.id,
        start_nanos: 100,
        end_nanos: 150,
        sample_count: 2,
        resource: labels(&[("service.name", "web"), ("host.name", "a"), ("k\"q", "v\\\n é")]),
        attributes: labels(&[("profile.kind", "x"), ("service.name", "override")]),
    };
    let bare = ProfileRecord {
        profile_id: [0x22; 16],
        resource: Labels::new(),
        attributes: Labels::new(),
        ..with_metadata.clone()
    };
    let mut c = commit("t", "seg", &[(&web, 100, 150)]);
    c.profiles = vec![with_metadata.clone(), bare.clone()];
    cat.commit_segment(&c).await.unwrap();

    assert_eq!(
        cat.profile("t", [0x11; 16]).await.unwrap(),
        vec![("seg".to_string(), with_metadata)]
    );
    assert_eq!(
        cat.profile("t", [0x22; 16]).await.unwrap(),
        vec![("seg".to_string(), bare)]
    );
}
