//! Assertions that a stored file equals what an independent reader computed from it:
//! per profile type the flamegraph total and every root-to-leaf path's value (paths compared
//! as frame lists, so names holding `;` or newlines stay exact), plus attribute selectors.

use std::collections::{BTreeMap, BTreeSet};

use crate::capture::Observation;
use crate::client::Api;
use crate::formats::{Expected, paths_by_type, totals_by_type};
use crate::trees::decode_flamebearer;

pub type Paths = BTreeMap<Vec<String>, i64>;

/// Total and non-zero self values by path of the flamegraph, read in Pyroscope's flat
/// flamebearer layout (its invariants checked): stacks deeper than serde_json's nesting
/// limit (.NET's are) stay readable.
pub async fn tree(api: &Api, profile_type: &str, selector: &str, from: i64, to: i64) -> (i64, Paths) {
    tree_with(api, profile_type, selector, from, to, &[]).await
}

/// [`tree`] with more query parameters (`span_id`, `profile_id`, ...).
pub async fn tree_with(
    api: &Api,
    profile_type: &str,
    selector: &str,
    from: i64,
    to: i64,
    extra: &[(&str, String)],
) -> (i64, Paths) {
    let mut query = vec![
        ("profile_type", profile_type.to_string()),
        ("selector", selector.to_string()),
        ("from", from.to_string()),
        ("to", to.to_string()),
        ("max_nodes", "65536".to_string()),
        ("format", "flamebearer".to_string()),
    ];
    query.extend(extra.iter().cloned());
    let (status, body) = api.get_json("/api/v1/flamegraph", &query).await;
    assert_eq!(status, 200, "flamegraph {profile_type} {selector}: {body}");
    if body["flamebearer"]["numTicks"] == 0 {
        // An empty flamegraph has a root of no width, which the decoder refuses.
        return (0, Paths::new());
    }
    let decoded = decode_flamebearer(&body);
    let total = decoded.get(&Vec::new()).map_or(0, |v| v[0][1]);
    let paths = decoded
        .into_iter()
        .filter(|(path, v)| !path.is_empty() && v[0][0] != 0)
        .map(|(path, v)| (path, v[0][0]))
        .collect();
    (total, paths)
}

/// Names the first differences of two path maps, for readable failures.
pub fn diff(expected: &Paths, got: &Paths) -> String {
    let mut out = Vec::new();
    for (p, v) in expected {
        match got.get(p) {
            Some(g) if g == v => {}
            Some(g) => out.push(format!("  {p:?}: expected {v}, got {g}")),
            None => out.push(format!("  {p:?}: expected {v}, missing")),
        }
    }
    for (p, g) in got {
        if !expected.contains_key(p) {
            out.push(format!("  {p:?}: unexpected, got {g}"));
        }
    }
    let n = out.len();
    out.truncate(12);
    format!(
        "{n} differing paths (expected {} paths, got {}):\n{}",
        expected.len(),
        got.len(),
        out.join("\n")
    )
}

/// Every profile type of the file: total and per-path values under `selector` in `[from, to)`.
pub async fn assert_stored(
    api: &Api,
    selector: &str,
    (from, to): (i64, i64),
    expected: &Expected,
    what: &str,
) {
    let by_type = paths_by_type(&expected.observations);
    let totals = totals_by_type(&expected.observations);
    assert!(!totals.is_empty(), "{what}: the file has no observations");
    for (ty, total) in &totals {
        let want = by_type.get(ty).cloned().unwrap_or_default();
        if want.is_empty() && *total == 0 {
            // A type whose every value is 0 may be stored empty or not at all.
            continue;
        }
        let (got_total, got) = tree(api, ty, selector, from, to).await;
        assert!(
            want == got,
            "{what} {ty} {selector}: paths differ: {}",
            diff(&want, &got)
        );
        assert_eq!(got_total, *total, "{what} {ty} {selector}: total");
    }
}

/// For each type, the most frequent string attribute of the samples (outside `skip`) as a
/// selector: `{key="v"}` keeps exactly the observations having it, `{key!="v"}` the rest.
pub async fn assert_attribute_selectors(
    api: &Api,
    base: &[String],
    range: (i64, i64),
    expected: &Expected,
    skip: &[&str],
    what: &str,
) {
    let types: BTreeSet<&str> = expected
        .observations
        .iter()
        .map(|o| o.profile_type.as_str())
        .collect();
    for ty in types {
        let of_type: Vec<&Observation> = expected
            .observations
            .iter()
            .filter(|o| o.profile_type == ty)
            .collect();
        let mut counts: BTreeMap<(&str, &str), usize> = BTreeMap::new();
        for o in &of_type {
            for (k, v) in &o.attrs {
                if !skip.contains(&k.as_str()) {
                    *counts.entry((k, v)).or_default() += 1;
                }
            }
        }
        let Some(((key, value), _)) = counts.into_iter().max_by_key(|(_, c)| *c) else {
            continue;
        };
        for (op, keep) in [("=", true), ("!=", false)] {
            let mut matchers = base.to_vec();
            matchers.push(format!("{key}{op}{value:?}"));
            let selector = format!("{{{}}}", matchers.join(", "));
            let kept: Vec<Observation> = of_type
                .iter()
                .filter(|o| (o.attrs.get(key).map(String::as_str) == Some(value)) == keep)
                .map(|o| (*o).clone())
                .collect();
            let want = paths_by_type(&kept).remove(ty).unwrap_or_default();
            let (total, got) = tree(api, ty, &selector, range.0, range.1).await;
            assert!(want == got, "{what} {ty} {selector}: {}", diff(&want, &got));
            assert_eq!(
                total,
                kept.iter().map(|o| o.value).sum::<i64>(),
                "{what} {ty} {selector}: total"
            );
        }
    }
}

/// pprof's span labels (`span_id`, or a 16-hex-digit `profile_id` as Go exemplars write it)
/// feed the `span_id` filter: the most frequent one selects exactly its samples.
pub async fn assert_span_filter(
    api: &Api,
    selector: &str,
    range: (i64, i64),
    expected: &Expected,
    what: &str,
) {
    let span_of = |o: &Observation| {
        ["span_id", "profile_id"]
            .iter()
            .filter_map(|k| o.attrs.get(*k))
            .find(|v| v.len() == 16 && v.bytes().all(|b| b.is_ascii_hexdigit()))
            .cloned()
    };
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for o in &expected.observations {
        if let Some(span) = span_of(o) {
            *counts.entry(span).or_default() += 1;
        }
    }
    let Some((span, _)) = counts.into_iter().max_by_key(|(_, c)| *c) else {
        return;
    };
    let kept: Vec<Observation> = expected
        .observations
        .iter()
        .filter(|o| span_of(o).as_deref() == Some(span.as_str()))
        .cloned()
        .collect();
    for (ty, want) in paths_by_type(&kept) {
        let extra = [("span_id", span.to_lowercase())];
        let (_, got) = tree_with(api, &ty, selector, range.0, range.1, &extra).await;
        assert!(want == got, "{what} {ty} span_id={span}: {}", diff(&want, &got));
    }
}
