//! Assertions shared by the tests that ingest a capture: every flamegraph the API returns
//! equals what the observations computed from the input say.

use std::collections::{BTreeMap, BTreeSet};

use crate::capture::{Observation, folded, total};
use crate::client::Api;

/// `[first, last + 1)` of the observations' times: a query range that holds them all.
pub fn span(obs: &[&Observation]) -> (i64, i64) {
    let min = obs.iter().map(|o| o.time).min().unwrap();
    let max = obs.iter().map(|o| o.time).max().unwrap();
    (min, max + 1)
}

/// Totals and per-path values for every profile type, selectors on resource and sample
/// attributes, and time ranges that cut through profiles.
pub async fn assert_api_matches(api: &Api, observations: &[Observation]) {
    let types: BTreeSet<&str> = observations.iter().map(|o| o.profile_type.as_str()).collect();
    assert!(!types.is_empty());
    let all: Vec<&Observation> = observations.iter().collect();
    let (from, to) = span(&all);

    let (status, listed) = api
        .get_json(
            "/api/v1/profile-types",
            &[("from", from.to_string()), ("to", to.to_string())],
        )
        .await;
    assert_eq!(status, 200);
    let listed: BTreeSet<&str> = listed["profile_types"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, types, "profile types");

    let range = [("from", from.to_string()), ("to", to.to_string())];
    let (status, names) = api.get_json("/api/v1/labels", &range).await;
    assert_eq!(status, 200);
    let names: BTreeSet<&str> = names["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    let expected_names: BTreeSet<&str> = observations
        .iter()
        .flat_map(|o| o.attrs.keys().map(String::as_str))
        .collect();
    assert!(
        expected_names.is_subset(&names),
        "label names {names:?} lack some of {expected_names:?}"
    );
    let (status, values) = api.get_json("/api/v1/labels/thread.name/values", &range).await;
    assert_eq!(status, 200);
    let values: BTreeSet<&str> = values["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    let expected_values: BTreeSet<&str> = observations
        .iter()
        .filter_map(|o| o.attrs.get("thread.name").map(String::as_str))
        .collect();
    assert_eq!(values, expected_values, "thread.name values");

    for ty in &types {
        let of_type: Vec<&Observation> = observations.iter().filter(|o| o.profile_type == *ty).collect();
        let expected = folded(of_type.iter().copied());
        assert!(!expected.is_empty());
        assert_eq!(
            api.folded(ty, "{}", from, to).await,
            expected,
            "{ty}: folded flamegraph"
        );
        let json = api.flamegraph(ty, "", from, to, None).await;
        assert_eq!(
            json["total"].as_i64(),
            Some(total(of_type.iter().copied())),
            "{ty}: json total"
        );
        assert_eq!(json["root"]["total"].as_i64(), json["total"].as_i64());

        // A time range that cuts through profiles (per-sample timestamps).
        let mut times: Vec<i64> = of_type.iter().map(|o| o.time).collect();
        times.sort();
        let mid = times[times.len() / 2];
        let before = folded(of_type.iter().copied().filter(|o| o.time < mid));
        let after = folded(of_type.iter().copied().filter(|o| o.time >= mid));
        assert!(!before.is_empty() && !after.is_empty());
        assert_eq!(api.folded(ty, "{}", from, mid).await, before, "{ty}: [from, mid)");
        assert_eq!(api.folded(ty, "", mid, to).await, after, "{ty}: [mid, to)");

        for (key, value) in interesting_labels(&of_type) {
            for (op, keep) in [("=", true), ("!=", false)] {
                let selector = format!("{{{key}{op}{value:?}}}");
                let expected = folded(
                    of_type
                        .iter()
                        .copied()
                        .filter(|o| (o.attrs.get(&key).map(String::as_str).unwrap_or("") == value) == keep),
                );
                assert_eq!(
                    api.folded(ty, &selector, from, to).await,
                    expected,
                    "{ty}: {selector}"
                );
            }
        }
        // A regex over a sample attribute, combined with a time cut.
        let selector = r#"{thread.name=~"kworker.*|containerd"}"#;
        let re_match = |o: &&Observation| {
            let t = o.attrs.get("thread.name").map(String::as_str).unwrap_or("");
            t.starts_with("kworker") || t == "containerd"
        };
        let expected = folded(of_type.iter().copied().filter(re_match).filter(|o| o.time >= mid));
        assert_eq!(
            api.folded(ty, selector, mid, to).await,
            expected,
            "{ty}: {selector} from mid"
        );
    }
}

/// A resource attribute of the eBPF capture (`process.executable.name=containerd`) plus the
/// most frequent thread name of a type.
fn interesting_labels(obs: &[&Observation]) -> Vec<(String, String)> {
    let mut out = vec![("process.executable.name".to_string(), "containerd".to_string())];
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for o in obs {
        if let Some(t) = o.attrs.get("thread.name") {
            *counts.entry(t).or_default() += 1;
        }
    }
    if let Some((t, _)) = counts.iter().max_by_key(|(_, c)| **c) {
        out.push(("thread.name".to_string(), t.to_string()));
    }
    out
}
