//! What a selector selects, decided from the catalog and the symbol tables before any
//! Parquet is read: which series, which sample attribute sets within them, which segments.
//!
//! A matcher applies to a series label when the series carries that key, and to the
//! sample attributes otherwise. So series are grouped by which matchers they leave to
//! the sample attributes, and each group gets the attribute set ids that pass them.

use std::collections::{BTreeMap, HashSet};

use stackhouse_storage::catalog::SegmentMeta;
use stackhouse_storage::model::{AttributeSet, IdMap, ProfileType, Series, SymbolId, TimeRange};

use crate::selector::{Matcher, Selector};

/// Series that share the same sample attribute filter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SeriesGroup {
    /// Sorted.
    pub series_ids: Vec<i64>,
    /// Sorted; `None` when every sample of the series is selected.
    pub attr_set_ids: Option<Vec<SymbolId>>,
}

/// Series of one of `profile_types` that pass every matcher on the labels they carry, keyed by the
/// indices (into `selector.matchers`) of the matchers left for their sample attributes.
pub(crate) fn match_series<'s>(
    series: &'s [Series],
    profile_types: &[ProfileType],
    selector: &Selector,
) -> BTreeMap<Vec<usize>, Vec<&'s Series>> {
    let mut groups: BTreeMap<Vec<usize>, Vec<&Series>> = BTreeMap::new();
    'series: for s in series.iter().filter(|s| profile_types.contains(&s.profile_type)) {
        let mut on_samples = Vec::new();
        for (i, m) in selector.matchers.iter().enumerate() {
            match s.labels.get(&m.name) {
                Some(value) if !m.matches(Some(value)) => continue 'series,
                Some(_) => {}
                None => on_samples.push(i),
            }
        }
        groups.entry(on_samples).or_default().push(s);
    }
    groups
}

/// Ids of the attribute sets (the empty set, [`SymbolId::ZERO`], included) that pass
/// every matcher; a key a set lacks counts as `""`.
pub(crate) fn matching_attr_sets(attr_sets: &IdMap<AttributeSet>, matchers: &[&Matcher]) -> Vec<SymbolId> {
    let passes = |set: &AttributeSet| matchers.iter().all(|m| m.matches(set.get(&m.name)));
    let mut ids: Vec<SymbolId> = attr_sets
        .iter()
        .filter(|(_, set)| passes(set))
        .map(|(&id, _)| id)
        .collect();
    if passes(&AttributeSet::default()) {
        ids.push(SymbolId::ZERO);
    }
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// The series groups a selector picks; groups whose attribute filter admits no set are
/// left out, since they cannot contribute a sample.
pub(crate) fn series_groups(
    matched: &BTreeMap<Vec<usize>, Vec<&Series>>,
    selector: &Selector,
    attr_sets: &IdMap<AttributeSet>,
) -> Vec<SeriesGroup> {
    let mut groups = Vec::with_capacity(matched.len());
    for (on_samples, series) in matched {
        let attr_set_ids = if on_samples.is_empty() {
            None
        } else {
            let matchers: Vec<&Matcher> = on_samples.iter().map(|&i| &selector.matchers[i]).collect();
            let ids = matching_attr_sets(attr_sets, &matchers);
            if ids.is_empty() {
                continue;
            }
            Some(ids)
        };
        let mut series_ids: Vec<i64> = series.iter().map(|s| s.id).collect();
        series_ids.sort_unstable();
        groups.push(SeriesGroup {
            series_ids,
            attr_set_ids,
        });
    }
    groups
}

/// Segments holding samples (raw, or rolled up) of one of `series_ids` inside `range`.
pub(crate) fn segments_to_scan(
    segments: Vec<SegmentMeta>,
    series_ids: &HashSet<i64>,
    range: TimeRange,
) -> Vec<SegmentMeta> {
    segments
        .into_iter()
        .filter(|seg| {
            seg.series
                .iter()
                .any(|s| series_ids.contains(&s.series_id) && range.overlaps(s.min_time, s.max_time))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use stackhouse_storage::catalog::{ObjectMeta, SegmentSeries, TableKind};
    use stackhouse_storage::model::Labels;

    use super::*;
    use crate::selector::parse_selector;

    fn series(pt: &ProfileType, labels: &[(&str, &str)]) -> Series {
        let labels: Labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Series::new(pt.clone(), labels, 100)
    }

    fn set(attrs: &[(&str, &str)]) -> AttributeSet {
        AttributeSet::new(
            attrs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn matchers_apply_to_labels_when_the_series_has_the_key() {
        let cpu = ProfileType::parse("samples:count:cpu:nanoseconds").unwrap();
        let mem = ProfileType::parse("alloc:bytes::").unwrap();
        let api = series(&cpu, &[("service.name", "api"), ("thread.name", "main")]);
        let web = series(&cpu, &[("service.name", "web")]);
        let db = series(&cpu, &[("service.name", "db")]);
        let api_mem = series(&mem, &[("service.name", "api")]);
        let all = vec![api.clone(), web.clone(), db, api_mem];
        let sel = parse_selector(r#"{service.name=~"api|web", thread.name="main"}"#).unwrap();
        let matched = match_series(&all, std::slice::from_ref(&cpu), &sel);
        // api has thread.name as a label; web leaves it to its samples.
        assert_eq!(matched.len(), 2);
        assert_eq!(matched[&vec![]], vec![&api]);
        assert_eq!(matched[&vec![1]], vec![&web]);

        let main = set(&[("thread.name", "main")]);
        let gc = set(&[("thread.name", "gc")]);
        let attr_sets: IdMap<AttributeSet> = [main.clone(), gc].into_iter().map(|s| (s.id(), s)).collect();
        let groups = series_groups(&matched, &sel, &attr_sets);
        assert_eq!(
            groups,
            vec![
                SeriesGroup {
                    series_ids: vec![api.id],
                    attr_set_ids: None
                },
                SeriesGroup {
                    series_ids: vec![web.id],
                    attr_set_ids: Some(vec![main.id()])
                },
            ]
        );
    }

    #[test]
    fn the_empty_attribute_set_counts_as_all_keys_empty() {
        let a = set(&[("thread.name", "a")]);
        let other = set(&[("x", "1")]);
        let sets: IdMap<AttributeSet> = [a.clone(), other.clone()]
            .into_iter()
            .map(|s| (s.id(), s))
            .collect();
        let m = |s: &str| parse_selector(s).unwrap().matchers.remove(0);
        let ids = |s: &str| matching_attr_sets(&sets, &[&m(s)]);
        let mut without_thread = vec![SymbolId::ZERO, other.id()];
        without_thread.sort();
        assert_eq!(ids(r#"{thread.name=""}"#), without_thread);
        assert_eq!(ids(r#"{thread.name!=""}"#), vec![a.id()]);
        assert_eq!(ids(r#"{thread.name="b"}"#), vec![]);
    }

    #[test]
    fn groups_without_matching_attribute_sets_are_dropped() {
        let cpu = ProfileType::parse("samples:count:cpu:nanoseconds").unwrap();
        let all = vec![series(&cpu, &[])];
        let sel = parse_selector(r#"{thread.name="nope"}"#).unwrap();
        let matched = match_series(&all, std::slice::from_ref(&cpu), &sel);
        assert!(series_groups(&matched, &sel, &IdMap::default()).is_empty());
    }

    #[test]
    fn segments_are_pruned_by_series_extent() {
        let seg = |id: &str, extents: &[(i64, i64, i64)]| SegmentMeta {
            id: id.into(),
            tenant: "t".into(),
            min_time: extents.iter().map(|e| e.1).min().unwrap(),
            max_time: extents.iter().map(|e| e.2).max().unwrap(),
            level: 0,
            created_at_nanos: 0,
            objects: vec![ObjectMeta {
                kind: TableKind::Samples,
                key: id.into(),
                size_bytes: 1,
                rows: 1,
            }],
            series: extents
                .iter()
                .map(|&(series_id, min_time, max_time)| SegmentSeries {
                    series_id,
                    min_time,
                    max_time,
                    samples: 1,
                })
                .collect(),
        };
        let segments = vec![
            seg("a", &[(1, 0, 10), (2, 20, 30)]),
            seg("b", &[(1, 40, 50)]),
            seg("c", &[(3, 0, 50)]),
        ];
        let ids = |v: Vec<SegmentMeta>| v.into_iter().map(|s| s.id).collect::<Vec<_>>();
        let selected: HashSet<i64> = [1].into();
        // Series 1 is not in [15, 35) in segment a, though series 2 is.
        assert!(segments_to_scan(segments.clone(), &selected, TimeRange { start: 15, end: 35 }).is_empty());
        assert_eq!(
            ids(segments_to_scan(
                segments.clone(),
                &selected,
                TimeRange { start: 10, end: 41 }
            )),
            ["a", "b"]
        );
        assert_eq!(
            ids(segments_to_scan(segments, &[2, 3].into(), TimeRange::ALL)),
            ["a", "c"]
        );
    }
}
