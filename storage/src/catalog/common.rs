//! Backend-independent pieces of the catalog: value conversions, commit validation and
//! assembling segments from the flat rows both databases return.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::{
    CatalogError, CatalogResult, CatalogStats, CommitOutcome, CommitRefusal, ObjectMeta, SegmentCommit,
    SegmentMeta, SegmentReplacement, SegmentSeries, TableKind, TableStats,
};
use crate::model::{Labels, ProfileKey, ProfileRecord, ProfileType, Series};

/// Both databases store integers as signed 64-bit; a count that does not fit is refused
/// rather than wrapped into a negative number.
pub(crate) fn to_i64(value: u64, what: &str) -> CatalogResult<i64> {
    i64::try_from(value)
        .map_err(|_| CatalogError::Corrupt(format!("{what} {value} does not fit a 64-bit signed column")))
}

pub(crate) fn to_u64(value: i64, what: &str) -> CatalogResult<u64> {
    u64::try_from(value).map_err(|_| CatalogError::Corrupt(format!("negative {what} {value}")))
}

pub(crate) fn parse_kind(kind: &str) -> CatalogResult<TableKind> {
    TableKind::ALL
        .into_iter()
        .find(|k| k.as_str() == kind)
        .ok_or_else(|| CatalogError::Corrupt(format!("unknown table kind {kind:?}")))
}

pub(crate) fn encode_labels(labels: &Labels) -> CatalogResult<String> {
    serde_json::to_string(labels).map_err(|e| CatalogError::Corrupt(format!("labels do not serialize: {e}")))
}

pub(crate) fn decode_labels(json: &str) -> CatalogResult<Labels> {
    serde_json::from_str(json)
        .map_err(|e| CatalogError::Corrupt(format!("labels are not a json object of strings: {e}")))
}

pub(crate) fn profile_id(bytes: &[u8]) -> CatalogResult<[u8; 16]> {
    bytes
        .try_into()
        .map_err(|_| CatalogError::Corrupt(format!("profile id has {} bytes, not 16", bytes.len())))
}

/// A `(profile_id, series_id, start_nanos)` row as a [`ProfileKey`].
pub(crate) fn profile_key((id, series, start): (Vec<u8>, i64, i64)) -> CatalogResult<ProfileKey> {
    Ok((profile_id(&id)?, series, start))
}

/// The profiles of a commit, the first of each key, sorted by key: a key listed twice in
/// one commit is stored once rather than refusing the commit as repeated by itself.
pub(crate) fn distinct_profiles(commit: &SegmentCommit) -> Vec<&ProfileRecord> {
    let mut by_key: BTreeMap<ProfileKey, &ProfileRecord> = BTreeMap::new();
    for p in &commit.profiles {
        by_key.entry(p.key()).or_insert(p);
    }
    by_key.into_values().collect()
}

/// The new series of a commit over the tenant's limit: `series` sorted by id, `live` the
/// ones among them that already have samples, `live_count` how many series of the tenant
/// do. New series are admitted lowest id first while there is room.
pub(crate) fn over_limit(
    series: &[&Series],
    live: &BTreeSet<i64>,
    live_count: i64,
    max_series: usize,
) -> Vec<i64> {
    let room = max_series.saturating_sub(usize::try_from(live_count).unwrap_or(0));
    series
        .iter()
        .map(|s| s.id)
        .filter(|id| !live.contains(id))
        .skip(room)
        .collect()
}

/// How a commit transaction ends that claimed `claimed` of `profiles` and found
/// `refused_series` over the limit: committed only when nothing was left out.
pub(crate) fn outcome(
    profiles: &[&ProfileRecord],
    claimed: &BTreeSet<ProfileKey>,
    refused_series: Vec<i64>,
) -> CommitOutcome {
    let refusal = CommitRefusal {
        repeated: profiles
            .iter()
            .map(|p| p.key())
            .filter(|k| !claimed.contains(k))
            .collect(),
        refused_series,
        stale_symbols: false,
    };
    if refusal.is_empty() {
        CommitOutcome::Committed
    } else {
        CommitOutcome::Refused(refusal)
    }
}

/// The series of a commit, one per id and sorted by id so concurrent commits take row locks
/// in the same order. Two different definitions under one id are a collision.
pub(crate) fn distinct_series(commit: &SegmentCommit) -> CatalogResult<Vec<&Series>> {
    let mut by_id: BTreeMap<i64, &Series> = BTreeMap::new();
    for series in &commit.series {
        if let Some(other) = by_id.insert(series.id, series)
            && !same_identity(other, series)
        {
            return Err(CatalogError::SeriesCollision { id: series.id });
        }
    }
    Ok(by_id.into_values().collect())
}

/// Whether two definitions name the same series (the period is not part of the identity).
pub(crate) fn same_identity(a: &Series, b: &Series) -> bool {
    a.profile_type == b.profile_type && a.labels == b.labels
}

/// Rebuilds a series from its stored columns.
pub(crate) fn series_from_columns(
    id: i64,
    profile_type: [String; 4],
    labels_json: &str,
    period: i64,
) -> CatalogResult<Series> {
    let [sample_type, sample_unit, period_type, period_unit] = profile_type;
    Ok(Series {
        id,
        profile_type: ProfileType {
            sample_type,
            sample_unit,
            period_type,
            period_unit,
        },
        labels: decode_labels(labels_json)?,
        period,
    })
}

/// An object's stored columns, in this order.
#[derive(sqlx::FromRow)]
pub(crate) struct ObjectColumns {
    kind: String,
    key: String,
    size_bytes: i64,
    rows: i64,
}

impl TryFrom<ObjectColumns> for ObjectMeta {
    type Error = CatalogError;

    fn try_from(c: ObjectColumns) -> CatalogResult<ObjectMeta> {
        object_meta(&c.kind, c.key, c.size_bytes, c.rows)
    }
}

/// One row of `SERIES_IN_RANGE`.
#[derive(sqlx::FromRow)]
pub(crate) struct SeriesRow {
    series_id: i64,
    sample_type: String,
    sample_unit: String,
    period_type: String,
    period_unit: String,
    labels: String,
    period: i64,
}

impl TryFrom<SeriesRow> for Series {
    type Error = CatalogError;

    fn try_from(r: SeriesRow) -> CatalogResult<Series> {
        let profile_type = [r.sample_type, r.sample_unit, r.period_type, r.period_unit];
        series_from_columns(r.series_id, profile_type, &r.labels, r.period)
    }
}

/// One row of `PROFILE_TYPES_IN_RANGE`.
#[derive(sqlx::FromRow)]
pub(crate) struct ProfileTypeRow {
    sample_type: String,
    sample_unit: String,
    period_type: String,
    period_unit: String,
}

impl From<ProfileTypeRow> for ProfileType {
    fn from(r: ProfileTypeRow) -> ProfileType {
        ProfileType {
            sample_type: r.sample_type,
            sample_unit: r.sample_unit,
            period_type: r.period_type,
            period_unit: r.period_unit,
        }
    }
}

/// One row of a profile lookup: the segment it is in and its record.
#[derive(sqlx::FromRow)]
pub(crate) struct ProfileRow {
    segment_id: String,
    profile_id: Vec<u8>,
    series_id: i64,
    start_nanos: i64,
    end_nanos: i64,
    sample_count: i64,
    resource: String,
    attributes: String,
}

impl ProfileRow {
    pub(crate) fn into_record(self) -> CatalogResult<(String, ProfileRecord)> {
        let record = ProfileRecord {
            profile_id: profile_id(&self.profile_id)?,
            series_id: self.series_id,
            start_nanos: self.start_nanos,
            end_nanos: self.end_nanos,
            sample_count: self.sample_count,
            resource: decode_labels(&self.resource)?,
            attributes: decode_labels(&self.attributes)?,
        };
        Ok((self.segment_id, record))
    }
}

/// Rebuilds an object from its stored columns.
pub(crate) fn object_meta(kind: &str, key: String, size_bytes: i64, rows: i64) -> CatalogResult<ObjectMeta> {
    Ok(ObjectMeta {
        kind: parse_kind(kind)?,
        key,
        size_bytes: to_u64(size_bytes, "object size")?,
        rows: to_u64(rows, "object row count")?,
    })
}

/// Ids or keys without duplicates and sorted, so the count a conflict check expects is
/// exact and concurrent transactions lock rows in the same order (no deadlocks).
pub(crate) fn distinct_sorted(items: &[String]) -> Vec<String> {
    items
        .iter()
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// Refuses a replacement with a new segment of another tenant: its rows would be invisible
/// to the tenant that lost its segments.
pub(crate) fn check_replacement(replacement: &SegmentReplacement) -> CatalogResult<()> {
    match replacement
        .added
        .iter()
        .find(|added| added.tenant != replacement.tenant)
    {
        Some(added) => Err(CatalogError::Corrupt(format!(
            "replacement segment {} belongs to tenant {:?}, not {:?}",
            added.id, added.tenant, replacement.tenant
        ))),
        None => Ok(()),
    }
}

/// The new segment of a replacement that the removed segments' profiles move to: the first
/// one with samples, which is what profile lookups read.
pub(crate) fn profiles_heir(replacement: &SegmentReplacement) -> Option<&SegmentMeta> {
    replacement
        .added
        .iter()
        .find(|s| s.object(TableKind::Samples).is_some())
}

pub(crate) fn segments_gone(expected: &[String], found: usize) -> CatalogError {
    CatalogError::Conflict(format!(
        "{} of the segments to replace ({}) are gone; another compactor or retention run replaced them",
        expected.len() - found.min(expected.len()),
        expected.join(", ")
    ))
}

pub(crate) fn symbols_gone(tenant: &str, expected: &[String], found: usize) -> CatalogError {
    CatalogError::Conflict(format!(
        "{} of the symbol objects to replace for tenant {tenant:?} are gone; another compactor replaced them",
        expected.len() - found.min(expected.len())
    ))
}

/// A commit refused because symbols may have been collected since its writer listed them.
pub(crate) fn stale_symbols() -> CommitOutcome {
    CommitOutcome::Refused(CommitRefusal {
        stale_symbols: true,
        ..Default::default()
    })
}

pub(crate) fn duration_nanos(ttl: std::time::Duration) -> i64 {
    i64::try_from(ttl.as_nanos()).unwrap_or(i64::MAX)
}

/// The keys of `keys` found in `unreferenced`, in the caller's order, without duplicates.
pub(crate) fn keep_in_order(keys: &[String], unreferenced: Vec<String>) -> Vec<String> {
    let mut wanted: BTreeSet<String> = unreferenced.into_iter().collect();
    keys.iter()
        .filter(|k| wanted.remove(k.as_str()))
        .cloned()
        .collect()
}

/// Sample labels of a commit without duplicates, in a stable order.
pub(crate) fn distinct_sample_labels(commit: &SegmentCommit) -> Vec<(&str, &str)> {
    commit
        .sample_labels
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// One row of `segments`.
#[derive(sqlx::FromRow)]
pub(crate) struct SegmentRow {
    pub id: String,
    pub tenant: String,
    pub min_time: i64,
    pub max_time: i64,
    pub level: i32,
    pub created_at_nanos: i64,
}

/// One row of `segment_objects`.
#[derive(sqlx::FromRow)]
pub(crate) struct ObjectRow {
    pub segment_id: String,
    pub position: i64,
    pub kind: String,
    pub key: String,
    pub size_bytes: i64,
    pub rows: i64,
}

/// One row of `segment_series`.
#[derive(sqlx::FromRow)]
pub(crate) struct SegmentSeriesRow {
    pub segment_id: String,
    pub position: i64,
    pub series_id: i64,
    pub min_time: i64,
    pub max_time: i64,
    pub samples: i64,
}

/// Joins the three row sets fetched in bulk into segments ordered by id. Child rows of
/// segments not in `segments` are ignored.
pub(crate) fn assemble_segments(
    segments: Vec<SegmentRow>,
    objects: Vec<ObjectRow>,
    series: Vec<SegmentSeriesRow>,
) -> CatalogResult<Vec<SegmentMeta>> {
    let mut objects_by_segment: HashMap<String, Vec<(i64, ObjectMeta)>> = HashMap::new();
    for row in objects {
        let meta = ObjectMeta {
            kind: parse_kind(&row.kind)?,
            key: row.key,
            size_bytes: to_u64(row.size_bytes, "object size")?,
            rows: to_u64(row.rows, "object row count")?,
        };
        objects_by_segment
            .entry(row.segment_id)
            .or_default()
            .push((row.position, meta));
    }
    let mut series_by_segment: HashMap<String, Vec<(i64, SegmentSeries)>> = HashMap::new();
    for row in series {
        let meta = SegmentSeries {
            series_id: row.series_id,
            min_time: row.min_time,
            max_time: row.max_time,
            samples: to_u64(row.samples, "sample count")?,
        };
        series_by_segment
            .entry(row.segment_id)
            .or_default()
            .push((row.position, meta));
    }
    let mut out: Vec<SegmentMeta> = segments
        .into_iter()
        .map(|row| SegmentMeta {
            objects: in_position_order(objects_by_segment.remove(&row.id)),
            series: in_position_order(series_by_segment.remove(&row.id)),
            id: row.id,
            tenant: row.tenant,
            min_time: row.min_time,
            max_time: row.max_time,
            level: row.level,
            created_at_nanos: row.created_at_nanos,
        })
        .collect();
    // Sorted here rather than in SQL: Postgres would order by its locale collation.
    out.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
}

fn in_position_order<T>(items: Option<Vec<(i64, T)>>) -> Vec<T> {
    let mut items = items.unwrap_or_default();
    items.sort_by_key(|(position, _)| *position);
    items.into_iter().map(|(_, item)| item).collect()
}

/// Sorted, deduplicated strings in byte order, the same for both databases.
pub(crate) fn sorted_distinct(values: Vec<String>) -> Vec<String> {
    values.into_iter().collect::<BTreeSet<_>>().into_iter().collect()
}

/// Stats with every table kind present, so callers can index any kind of an empty tenant.
pub(crate) fn empty_stats(segments: i64, series: i64) -> CatalogResult<CatalogStats> {
    Ok(CatalogStats {
        segments: to_u64(segments, "segment count")?,
        series: to_u64(series, "series count")?,
        tables: TableKind::ALL
            .iter()
            .map(|k| (k.as_str().to_string(), TableStats::default()))
            .collect(),
    })
}

pub(crate) fn add_table_stats(
    stats: &mut CatalogStats,
    kind: &str,
    objects: i64,
    rows: i64,
    bytes: i64,
) -> CatalogResult<()> {
    let kind = parse_kind(kind)?;
    stats.tables.insert(
        kind.as_str().to_string(),
        TableStats {
            objects: to_u64(objects, "object count")?,
            rows: to_u64(rows, "row count")?,
            bytes: to_u64(bytes, "byte count")?,
        },
    );
    Ok(())
}

/// Connection urls carry passwords; error messages must not.
pub fn redact_password(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("redacted"));
            parsed.to_string()
        }
        _ => url.to_string(),
    }
}

/// Series ids bound as one JSON array parameter, read with `json_each` (SQLite) or
/// `jsonb_array_elements_text` (Postgres): no cap on the number of bound parameters.
pub(crate) fn json_ids(series_ids: &[i64]) -> String {
    serde_json::to_string(series_ids).expect("integers serialize")
}
