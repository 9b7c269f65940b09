//! Pieces shared by every query result: the profile type as clients read it, and what a
//! scan read.

use serde::Serialize;
use stackhouse_storage::model::ProfileType;
use std::collections::BTreeMap;
use utoipa::ToSchema;

/// The profile type of a result, as its id and its four parts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, ToSchema)]
pub struct ProfileTypeInfo {
    /// `sample_type:sample_unit:period_type:period_unit`, e.g. `samples:count:cpu:nanoseconds`.
    pub profile_type: String,
    pub sample_type: String,
    pub sample_unit: String,
    pub period_type: String,
    pub period_unit: String,
}

impl From<&ProfileType> for ProfileTypeInfo {
    fn from(t: &ProfileType) -> Self {
        ProfileTypeInfo {
            profile_type: t.id(),
            sample_type: t.sample_type.clone(),
            sample_unit: t.sample_unit.clone(),
            period_type: t.period_type.clone(),
            period_unit: t.period_unit.clone(),
        }
    }
}

impl ProfileTypeInfo {
    pub fn to_profile_type(&self) -> ProfileType {
        ProfileType {
            sample_type: self.sample_type.clone(),
            sample_unit: self.sample_unit.clone(),
            period_type: self.period_type.clone(),
            period_unit: self.period_unit.clone(),
        }
    }
}

/// What answering a query read, summed over its scans: how well the catalog and the
/// Parquet statistics and bloom filters pruned.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, ToSchema)]
pub struct ScanStats {
    /// Segments left after catalog pruning by time and series.
    pub segments: u64,
    /// Size of the `samples` objects of those segments.
    pub bytes_total: u64,
    /// Bytes actually fetched from object storage (footers, bloom filters, pages).
    pub bytes_scanned: u64,
    /// Row groups in those objects.
    pub row_groups_total: u64,
    /// Row groups skipped by min/max statistics or bloom filters.
    pub row_groups_pruned: u64,
    /// Rows that survived pruning and were decoded.
    pub rows_scanned: u64,
    /// Bytes of Arrow batches the coordinator received from query workers (0 when the
    /// query ran in-process); not part of answers, which must not depend on where a
    /// query ran.
    #[serde(skip)]
    pub bytes_shipped: u64,
    /// Rows scanned per resolution read: `raw`, and the rollup tiers `1m` and `1h`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub rows_by_tier: BTreeMap<String, u64>,
    /// `[start, end)` in unix nanoseconds that the answer covers, present only when it is
    /// wider than the range asked: where retention left only coarser rollups, a range
    /// edge is read to the edge of the rollup's step.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<i64>>)]
    pub answered: Option<(i64, i64)>,
}

impl ScanStats {
    pub fn add(&mut self, other: &ScanStats) {
        self.segments += other.segments;
        self.bytes_total += other.bytes_total;
        self.bytes_scanned += other.bytes_scanned;
        self.row_groups_total += other.row_groups_total;
        self.row_groups_pruned += other.row_groups_pruned;
        self.rows_scanned += other.rows_scanned;
        self.bytes_shipped += other.bytes_shipped;
        for (tier, rows) in &other.rows_by_tier {
            *self.rows_by_tier.entry(tier.clone()).or_default() += rows;
        }
        self.answered = match (self.answered, other.answered) {
            (Some(a), Some(b)) => Some((a.0.min(b.0), a.1.max(b.1))),
            (a, b) => a.or(b),
        };
    }
}
