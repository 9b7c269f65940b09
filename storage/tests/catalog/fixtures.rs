//! What the behaviours build their catalogs from.

use std::sync::Arc;

use stackhouse_storage::catalog::{
    Catalog, CatalogError, ObjectMeta, SegmentCommit, SegmentMeta, SegmentReplacement, SegmentSeries,
    TableKind, open_catalog,
};
use stackhouse_storage::model::{Labels, ProfileRecord, ProfileType, Series, TimeRange};

pub(crate) fn cpu() -> ProfileType {
    ProfileType::parse("samples:count:cpu:nanoseconds").unwrap()
}

pub(crate) fn off_cpu() -> ProfileType {
    ProfileType::parse("off_cpu:nanoseconds::").unwrap()
}

pub(crate) fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub(crate) fn series(profile_type: ProfileType, pairs: &[(&str, &str)]) -> Series {
    Series::new(profile_type, labels(pairs), 10_000_000)
}

pub(crate) fn object(segment: &str, kind: TableKind, size_bytes: u64, rows: u64) -> ObjectMeta {
    ObjectMeta {
        kind,
        key: format!("t/{segment}/{}.parquet", kind.as_str()),
        size_bytes,
        rows,
    }
}

/// A segment spanning its series' extents with its samples object, written with a stacks
/// symbol object.
pub(crate) fn commit(tenant: &str, id: &str, extents: &[(&Series, i64, i64)]) -> SegmentCommit {
    let min_time = extents.iter().map(|e| e.1).min().unwrap();
    let max_time = extents.iter().map(|e| e.2).max().unwrap();
    SegmentCommit {
        segment: SegmentMeta {
            id: id.to_string(),
            tenant: tenant.to_string(),
            min_time,
            max_time,
            level: 0,
            created_at_nanos: 1_700_000_000_000_000_000,
            objects: vec![object(id, TableKind::Samples, 1000, 10)],
            series: extents
                .iter()
                .map(|(s, min, max)| SegmentSeries {
                    series_id: s.id,
                    min_time: *min,
                    max_time: *max,
                    samples: 5,
                })
                .collect(),
        },
        symbols: vec![object(id, TableKind::Stacks, 300, 3)],
        series: extents.iter().map(|e| e.0.clone()).collect(),
        sample_labels: vec![],
        profiles: vec![],
        symbol_epoch: 0,
    }
}

pub(crate) fn range(start: i64, end: i64) -> TimeRange {
    TimeRange { start, end }
}

pub(crate) fn ids(segments: &[SegmentMeta]) -> Vec<&str> {
    segments.iter().map(|s| s.id.as_str()).collect()
}

pub(crate) fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

pub(crate) async fn open(url: &str) -> Arc<dyn Catalog> {
    open_catalog(url).await.unwrap()
}

pub(crate) fn record(id: u8, series_id: i64, start_nanos: i64, end_nanos: i64) -> ProfileRecord {
    ProfileRecord {
        profile_id: [id; 16],
        series_id,
        start_nanos,
        end_nanos,
        sample_count: i64::from(id),
        resource: Labels::new(),
        attributes: Labels::new(),
    }
}

/// What a compactor writes for the given extents: one level-1 segment with a samples object.
pub(crate) fn merged(tenant: &str, id: &str, extents: &[(&Series, i64, i64)]) -> SegmentMeta {
    let mut segment = commit(tenant, id, extents).segment;
    segment.level = 1;
    segment.created_at_nanos += 1;
    segment.objects = vec![object(id, TableKind::Samples, 900, 20)];
    segment
}

/// `added` is any number of segments: `None`, `Some(merged)` or a list.
pub(crate) fn replacement(
    tenant: &str,
    removed: &[&str],
    added: impl IntoIterator<Item = SegmentMeta>,
    delete_after: i64,
) -> SegmentReplacement {
    SegmentReplacement {
        tenant: tenant.to_string(),
        removed: strings(removed),
        added: added.into_iter().collect(),
        drop_profiles_before: None,
        delete_after_nanos: delete_after,
    }
}

pub(crate) fn samples_key(segment: &str) -> String {
    object(segment, TableKind::Samples, 0, 0).key
}

pub(crate) fn stacks_key(segment: &str) -> String {
    object(segment, TableKind::Stacks, 0, 0).key
}

pub(crate) fn is_conflict<T: std::fmt::Debug>(result: &Result<T, CatalogError>) -> bool {
    matches!(result, Err(CatalogError::Conflict(_)))
}

/// Two segments of tenant "t" with profiles and sample labels, and a third one to the side.
pub(crate) struct Fixture {
    pub(crate) web: Series,
    pub(crate) api: Series,
    pub(crate) c1: SegmentCommit,
    pub(crate) c2: SegmentCommit,
    pub(crate) c3: SegmentCommit,
}

pub(crate) async fn fixture(cat: &Arc<dyn Catalog>) -> Fixture {
    let web = series(cpu(), &[("service.name", "web")]);
    let api = series(off_cpu(), &[("service.name", "api")]);
    let mut c1 = commit("t", "seg-1", &[(&web, 100, 200)]);
    c1.sample_labels = vec![("thread.name".into(), "main".into())];
    c1.profiles = vec![record(1, web.id, 100, 150), record(2, web.id, 160, 180)];
    let mut c2 = commit("t", "seg-2", &[(&api, 300, 400), (&web, 300, 350)]);
    c2.sample_labels = vec![
        ("thread.name".into(), "gc".into()),
        ("thread.name".into(), "main".into()),
    ];
    c2.profiles = vec![record(3, api.id, 300, 400)];
    let mut c3 = commit("t", "seg-3", &[(&web, 1000, 2000)]);
    c3.sample_labels = vec![("thread.name".into(), "io".into())];
    c3.profiles = vec![record(4, web.id, 1000, 2000)];
    for c in [&c1, &c2, &c3] {
        cat.commit_segment(c).await.unwrap();
    }
    Fixture { web, api, c1, c2, c3 }
}

impl Fixture {
    /// The merge of seg-1 and seg-2.
    pub(crate) fn merged(&self, id: &str) -> SegmentMeta {
        merged("t", id, &[(&self.web, 100, 350), (&self.api, 300, 400)])
    }
}
