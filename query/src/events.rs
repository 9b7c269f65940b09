//! Events: individual timestamped samples in time order, paged by an opaque cursor.

use std::collections::BTreeMap;

use serde::Serialize;
use utoipa::ToSchema;

use crate::types::{ProfileTypeInfo, ScanStats};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct Event {
    /// Unix nanoseconds.
    pub timestamp: i64,
    pub value: i64,
    /// Key into the page's `stacks`; all zeros for an empty stack.
    pub stack_id: String,
    /// `thread.name` (else `thread.id`) of the sample, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread: Option<String>,
    /// Sample attributes.
    pub attributes: BTreeMap<String, String>,
    /// Key into the page's `series`.
    pub series_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub span_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile_id: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct EventsPage {
    #[serde(flatten)]
    pub kind: ProfileTypeInfo,
    pub unit: String,
    /// In time order (ties in a fixed order, stable across pages).
    pub events: Vec<Event>,
    /// Frames of each stack of the page, caller first.
    pub stacks: BTreeMap<String, Vec<String>>,
    /// Labels (resource, scope and profile attributes) of each series of the page.
    pub series: BTreeMap<String, BTreeMap<String, String>>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stats: Option<ScanStats>,
}
