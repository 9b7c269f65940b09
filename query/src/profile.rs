//! One stored profile, found by its id: metadata from the catalog, samples by scan.

use std::collections::BTreeMap;

use serde::Serialize;
use utoipa::ToSchema;

use crate::tree::Flamegraph;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct ProfileMeta {
    /// Hex.
    pub profile_id: String,
    pub profile_type: String,
    /// Unix nanoseconds.
    pub start: i64,
    pub end: i64,
    pub duration_nanos: i64,
    pub sample_count: i64,
    /// Resource, scope and profile attributes together (the series labels).
    pub labels: BTreeMap<String, String>,
    /// The resource attributes alone.
    pub resource: BTreeMap<String, String>,
    /// The profile's own attributes alone.
    pub attributes: BTreeMap<String, String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct ProfileDetail {
    #[serde(flatten)]
    pub meta: ProfileMeta,
    pub flamegraph: Flamegraph,
}
