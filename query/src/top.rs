//! The top table: functions by self value.

use serde::Serialize;
use utoipa::ToSchema;

use crate::types::{ProfileTypeInfo, ScanStats};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct TopFunction {
    /// The frame name, as in the flamegraph.
    pub name: String,
    /// Value of samples whose leaf frame is this function.
    #[serde(rename = "self")]
    pub self_value: i64,
    /// Value of samples with this function anywhere on the stack (recursion counted once).
    pub total: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct Top {
    #[serde(flatten)]
    pub kind: ProfileTypeInfo,
    pub unit: String,
    /// Value of every selected sample.
    pub total: i64,
    /// Sorted by self value, largest first, then by total and name; at most `limit`.
    pub functions: Vec<TopFunction>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stats: Option<ScanStats>,
}
