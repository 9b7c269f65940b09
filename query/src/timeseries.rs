//! Time series: values bucketed by step, one series per group.

use std::collections::BTreeMap;

use serde::Serialize;
use utoipa::ToSchema;

use crate::types::{ProfileTypeInfo, ScanStats};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Aggregation {
    /// The sum of the values in the bucket.
    Sum,
    /// The mean over the bucket's points, a point being what one series recorded at one
    /// timestamp (one aggregated profile, or one timestamped sample).
    Avg,
}

impl Aggregation {
    pub fn parse(value: &str) -> Option<Aggregation> {
        match value {
            "sum" => Some(Aggregation::Sum),
            "avg" | "average" => Some(Aggregation::Avg),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
pub struct TimeseriesGroup {
    /// The `group_by` keys and their values (`""` for samples without the key); empty
    /// without `group_by`.
    pub group: BTreeMap<String, String>,
    /// `[bucket start in unix nanoseconds, value]`, in time order; buckets without samples
    /// are absent.
    #[schema(value_type = Vec<Vec<f64>>)]
    pub points: Vec<(i64, f64)>,
    /// Sum of the points' values (for `avg`, of the bucket sums).
    pub total: i64,
}

#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
pub struct Timeseries {
    #[serde(flatten)]
    pub kind: ProfileTypeInfo,
    pub unit: String,
    /// Start of the first bucket; bucket `i` covers `[from + i*step, from + (i+1)*step)`.
    pub from: i64,
    pub to: i64,
    pub step_nanos: i64,
    pub aggregation: Aggregation,
    pub group_by: Vec<String>,
    /// Sorted by total, largest first, then by group.
    pub series: Vec<TimeseriesGroup>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stats: Option<ScanStats>,
}
