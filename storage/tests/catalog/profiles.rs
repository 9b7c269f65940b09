//! Profiles: lookup by id and by key, and the key claimed once at commit.

use stackhouse_storage::catalog::{CatalogError, CommitOutcome, CommitRefusal};
use stackhouse_storage::model::{Labels, ProfileRecord, TimeRange};

use crate::fixtures::{commit, cpu, labels, merged, off_cpu, open, range, record, replacement, series};

suite!(
    profile_lookup,
    stored_profiles_by_key,
    profile_metadata_round_trips,
    concurrent_commits_store_a_profile_key_once,
    a_key_listed_twice_in_one_commit_is_stored_once,
    compaction_and_retention_keep_keys_claimed_exactly,
    a_purge_drops_the_profiles_wholly_inside_its_range,
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

/// Two ingesters commit segments carrying the same retried profile at the same moment:
/// the catalog stores the key once, and the loser hears which key it lost.
async fn concurrent_commits_store_a_profile_key_once(url: String) {
    let cat = open(&url).await;
    let web = series(cpu(), &[("service.name", "web")]);
    const ROUNDS: u8 = 12;
    let mut winners = Vec::new();
    for round in 0..ROUNDS {
        let shared = record(round, web.id, 100, 110);
        let mut tasks = Vec::new();
        for side in ["a", "b"] {
            let mut c = commit("t", &format!("seg-{round}-{side}"), &[(&web, 100, 110)]);
            // Each side also carries a profile only it has: refused along with the shared one.
            let own = ProfileRecord {
                start_nanos: if side == "a" { 101 } else { 102 },
                ..shared.clone()
            };
            c.profiles = vec![shared.clone(), own];
            let cat = cat.clone();
            tasks.push(tokio::spawn(
                async move { cat.commit_segment_within(&c, 0).await },
            ));
        }
        let mut outcomes = Vec::new();
        for task in tasks {
            outcomes.push(task.await.unwrap().unwrap());
        }
        let committed: Vec<usize> = (0..2)
            .filter(|&i| outcomes[i] == CommitOutcome::Committed)
            .collect();
        assert_eq!(committed.len(), 1, "round {round}: {outcomes:?}");
        let loser = 1 - committed[0];
        assert_eq!(
            outcomes[loser],
            CommitOutcome::Refused(CommitRefusal {
                repeated: vec![shared.key()],
                refused_series: vec![],
                stale_symbols: false,
            }),
            "round {round}"
        );
        winners.push(format!("seg-{round}-{}", ["a", "b"][committed[0]]));
    }
    // Only the winners' segments are visible, each with its two profiles; the id of each
    // round's shared profile is stored once.
    let mut visible: Vec<String> = cat
        .segments("t", TimeRange::ALL)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    visible.sort();
    winners.sort();
    assert_eq!(visible, winners);
    for round in 0..ROUNDS {
        let rows = cat.profile("t", [round; 16]).await.unwrap();
        let mut starts: Vec<i64> = rows.iter().map(|(_, r)| r.start_nanos).collect();
        starts.sort();
        assert_eq!(starts.len(), 2, "round {round}: {rows:?}");
        assert_eq!(starts[0], 100, "round {round}");
    }
    // A plain commit of a stored key is an error, and stores nothing.
    let mut again = commit("t", "seg-again", &[(&web, 100, 110)]);
    again.profiles = vec![record(0, web.id, 100, 110)];
    let err = cat.commit_segment(&again).await.unwrap_err();
    assert!(
        matches!(&err, CatalogError::Refused(r) if r.repeated == vec![([0; 16], web.id, 100)]),
        "{err:?}"
    );
    assert_eq!(
        cat.segments("t", TimeRange::ALL).await.unwrap().len(),
        ROUNDS as usize
    );
    // Another tenant has its own keys.
    let mut other = commit("u", "seg-u", &[(&web, 100, 110)]);
    other.profiles = vec![record(0, web.id, 100, 110)];
    cat.commit_segment(&other).await.unwrap();
}

async fn a_key_listed_twice_in_one_commit_is_stored_once(url: String) {
    let cat = open(&url).await;
    let web = series(cpu(), &[("service.name", "web")]);
    let mut c = commit("t", "seg", &[(&web, 100, 110)]);
    c.profiles = vec![record(7, web.id, 100, 110), record(7, web.id, 100, 110)];
    assert_eq!(
        cat.commit_segment_within(&c, 0).await.unwrap(),
        CommitOutcome::Committed
    );
    assert_eq!(cat.profile("t", [7; 16]).await.unwrap().len(), 1);
}

/// Compaction moves profile rows to the merged segment in one transaction while the keys
/// stay claimed, and retention frees the keys of what it removes.
async fn compaction_and_retention_keep_keys_claimed_exactly(url: String) {
    let cat = open(&url).await;
    let web = series(cpu(), &[("service.name", "web")]);
    let mut c1 = commit("t", "seg-1", &[(&web, 100, 200)]);
    c1.profiles = vec![record(1, web.id, 100, 150)];
    let mut c2 = commit("t", "seg-2", &[(&web, 300, 400)]);
    c2.profiles = vec![record(2, web.id, 300, 350)];
    cat.commit_segment(&c1).await.unwrap();
    cat.commit_segment(&c2).await.unwrap();
    cat.replace_segments(&replacement(
        "t",
        &["seg-1", "seg-2"],
        Some(merged("t", "seg-m", &[(&web, 100, 400)])),
        0,
    ))
    .await
    .unwrap();
    assert_eq!(
        cat.profile("t", [1; 16]).await.unwrap(),
        vec![("seg-m".to_string(), record(1, web.id, 100, 150))]
    );
    // Still claimed after the move.
    let mut retry = commit("t", "seg-3", &[(&web, 100, 150)]);
    retry.profiles = vec![record(1, web.id, 100, 150)];
    assert!(matches!(
        cat.commit_segment_within(&retry, 0).await.unwrap(),
        CommitOutcome::Refused(_)
    ));
    // Retention drops the merged segment: its keys are free again.
    let mut expire = replacement("t", &["seg-m"], None, 0);
    expire.drop_profiles_before = Some(1000);
    cat.replace_segments(&expire).await.unwrap();
    assert!(cat.profile("t", [1; 16]).await.unwrap().is_empty());
    assert_eq!(
        cat.commit_segment_within(&retry, 0).await.unwrap(),
        CommitOutcome::Committed
    );
}

async fn a_purge_drops_the_profiles_wholly_inside_its_range(url: String) {
    let cat = open(&url).await;
    let web = series(cpu(), &[("service.name", "web")]);
    let api = series(off_cpu(), &[("service.name", "api")]);
    let mut c = commit("t", "seg-1", &[(&web, 100, 500), (&api, 100, 500)]);
    c.profiles = vec![
        record(1, web.id, 100, 150),
        record(2, web.id, 150, 210),
        // No duration: it covers its start.
        record(3, web.id, 300, 300),
        record(4, api.id, 100, 150),
    ];
    cat.commit_segment(&c).await.unwrap();
    let mut other = commit("u", "seg-u", &[(&web, 100, 500)]);
    other.profiles = vec![record(1, web.id, 100, 150)];
    cat.commit_segment(&other).await.unwrap();

    // Profile 2 reaches past the range; api's profile 4 is not of the series asked.
    assert_eq!(
        cat.drop_profiles("t", &[web.id], range(100, 200)).await.unwrap(),
        1
    );
    assert!(cat.profile("t", [1; 16]).await.unwrap().is_empty());
    assert_eq!(cat.profile("t", [2; 16]).await.unwrap().len(), 1);
    assert_eq!(cat.profile("t", [4; 16]).await.unwrap().len(), 1);
    assert_eq!(
        cat.profile("u", [1; 16]).await.unwrap().len(),
        1,
        "another tenant's"
    );
    assert_eq!(
        cat.drop_profiles("t", &[web.id], range(299, 300)).await.unwrap(),
        0
    );
    assert_eq!(
        cat.drop_profiles("t", &[web.id], range(300, 301)).await.unwrap(),
        1
    );
    assert_eq!(cat.drop_profiles("t", &[], range(0, 1000)).await.unwrap(), 0);
}
