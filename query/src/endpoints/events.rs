//! Events: the selected samples themselves, in time order, one page at a time; the query
//! API reads them as `GET /api/v1/events`.
//!
//! Rows are ordered by every column, so the order is total up to identical rows, and a
//! cursor is "time t, after the first n rows at t". The next page re-reads from t and
//! skips those n; row groups wholly before t are pruned by their statistics.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use datafusion::logical_expr::{col, lit};
use serde::Serialize;
use stackhouse_storage::model::IdMap;
use stackhouse_storage::schema::samples;
use utoipa::ToSchema;

use crate::engine::QueryEngine;
use crate::engine::aggregate::Dim;
use crate::engine::plan::Needs;
use crate::engine::scope::Scope;
use crate::error::QueryError;
use crate::limits::size;
use crate::request::ScopeRequest;
use crate::symbolize::Symbolizer;
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

/// Events per page when the query does not say.
pub const DEFAULT_EVENTS_LIMIT: usize = 1000;

#[derive(Clone, Debug)]
pub struct EventsQuery {
    pub scope: Scope,
    /// Page size; 0 means [`DEFAULT_EVENTS_LIMIT`] (or `max_events`, if smaller).
    pub limit: usize,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// Where the previous page ended: the time of its last event, and how many events at that
/// time it and the pages before it returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Cursor {
    time: i64,
    skip: u64,
}

impl Cursor {
    fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(format!("v1:{}:{}", self.time, self.skip))
    }

    fn decode(value: &str) -> Result<Cursor, QueryError> {
        let invalid =
            || QueryError::InvalidArgument(format!("invalid cursor {value:?}: pass next_cursor as given"));
        let bytes = URL_SAFE_NO_PAD.decode(value).map_err(|_| invalid())?;
        let text = String::from_utf8(bytes).map_err(|_| invalid())?;
        let mut parts = text.split(':');
        let (Some("v1"), Some(time), Some(skip), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(invalid());
        };
        Ok(Cursor {
            time: time.parse().map_err(|_| invalid())?,
            skip: skip.parse().map_err(|_| invalid())?,
        })
    }
}

const ORDER: [Dim; 8] = [
    Dim::Time,
    Dim::Series,
    Dim::Stack,
    Dim::AttrSet,
    Dim::Value,
    Dim::Trace,
    Dim::Span,
    Dim::Profile,
];

impl QueryEngine {
    /// The page size events get when `asked` (0 asks for the default); `events` checks it
    /// here, and a caller may check it before other work.
    pub fn events_limit(&self, asked: usize) -> Result<usize, QueryError> {
        size(
            "max_events",
            "limit",
            asked,
            DEFAULT_EVENTS_LIMIT,
            self.limits.max_events,
        )
    }

    /// One page of individual samples in time order.
    pub async fn events(&self, q: &EventsQuery) -> Result<EventsPage, QueryError> {
        self.bounded("events", async {
            let limit = self.events_limit(q.limit)?;
            let cursor = q.cursor.as_deref().map(Cursor::decode).transpose()?;
            let mut page = EventsPage {
                kind: ProfileTypeInfo::from(&q.scope.profile_type),
                unit: q.scope.profile_type.sample_unit.clone(),
                events: Vec::new(),
                stacks: BTreeMap::new(),
                series: BTreeMap::new(),
                next_cursor: None,
                stats: None,
            };
            let Some(plan) = self.plan(&q.scope, Needs::grouped(ORDER.to_vec(), &[])).await? else {
                return Ok(page);
            };
            let skip = cursor.map_or(0, |c| c.skip as usize);
            let after = cursor.map(|c| col(samples::TIME).gt_eq(lit(c.time)));
            // One row more than the page tells whether another page follows.
            let fetch = skip.saturating_add(limit).saturating_add(1);
            let (mut rows, stats) = self.select_sorted(&plan, after, fetch).await?;
            // Rows at the cursor's time come first; the earlier pages returned `skip` of them.
            let at_cursor = match cursor {
                Some(c) => rows.iter().take(skip).take_while(|r| r.time == c.time).count(),
                None => 0,
            };
            rows.drain(..at_cursor);
            let more = rows.len() > limit;
            rows.truncate(limit);
            if more && let Some(last) = rows.last() {
                let mut skip = rows.iter().rev().take_while(|r| r.time == last.time).count() as u64;
                if let Some(c) = cursor.filter(|c| c.time == last.time) {
                    skip += c.skip;
                }
                page.next_cursor = Some(
                    Cursor {
                        time: last.time,
                        skip,
                    }
                    .encode(),
                );
            }

            let symbols = self.symbols.loaded(&q.scope.tenant).await;
            let native = self.debuginfo.files_for(&q.scope.tenant, &symbols).await?;
            let mut symbolizer = Symbolizer::new(&symbols, &native);
            let mut attributes: IdMap<BTreeMap<String, String>> = IdMap::default();
            for row in rows {
                let stack = row.stack_id.to_hex();
                if !page.stacks.contains_key(&stack) {
                    page.stacks.insert(stack.clone(), symbolizer.frames(row.stack_id));
                }
                let series = row.series_id.to_string();
                if !page.series.contains_key(&series)
                    && let Some(s) = plan.series.get(&row.series_id)
                {
                    page.series.insert(series.clone(), s.labels.clone());
                }
                let attrs = attributes
                    .entry(row.attr_set_id)
                    .or_insert_with(|| {
                        symbols
                            .attr_sets
                            .get(&row.attr_set_id)
                            .map(|set| set.attrs.iter().cloned().collect())
                            .unwrap_or_default()
                    })
                    .clone();
                page.events.push(Event {
                    timestamp: row.time,
                    value: row.value,
                    stack_id: stack,
                    thread: attrs
                        .get("thread.name")
                        .or_else(|| attrs.get("thread.id"))
                        .cloned(),
                    attributes: attrs,
                    series_id: series,
                    trace_id: row.trace_id.map(hex::encode),
                    span_id: row.span_id.map(hex::encode),
                    profile_id: row.profile_id.map(hex::encode),
                });
            }
            let missing = symbolizer.missing();
            if !missing.is_empty() {
                tracing::warn!(tenant = %q.scope.tenant, ?missing, "symbols missing, frames named <unknown>");
            }
            page.stats = Some(stats);
            Ok(page)
        })
        .await
    }
}

#[derive(Clone, Debug)]
pub struct EventsRequest {
    pub scope: ScopeRequest,
    /// Page size asked for; 0: the default.
    pub limit: usize,
    pub cursor: Option<String>,
}

impl QueryEngine {
    /// `GET /api/v1/events`.
    pub async fn read_events(&self, r: &EventsRequest) -> Result<EventsPage, QueryError> {
        self.bounded("events", async {
            let limit = self.events_limit(r.limit)?;
            let scope = self.resolve_scope(&r.scope).await?;
            self.events(&EventsQuery {
                scope,
                limit,
                cursor: r.cursor.clone(),
            })
            .await
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_round_trips_and_rejects_garbage() {
        let c = Cursor { time: -5, skip: 42 };
        assert_eq!(Cursor::decode(&c.encode()).unwrap(), c);
        for bad in [
            "",
            "!!",
            &URL_SAFE_NO_PAD.encode("v2:1:2"),
            &URL_SAFE_NO_PAD.encode("v1:x:2"),
        ] {
            assert!(
                matches!(Cursor::decode(bad), Err(QueryError::InvalidArgument(_))),
                "{bad}"
            );
        }
    }
}
