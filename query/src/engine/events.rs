//! Events: the selected samples themselves, in time order, one page at a time.
//!
//! Rows are ordered by every column, so the order is total up to identical rows, and a
//! cursor is "time t, after the first n rows at t". The next page re-reads from t and
//! skips those n; row groups wholly before t are pruned by their statistics.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use datafusion::logical_expr::{col, lit};
use stackhouse_storage::model::IdMap;
use stackhouse_storage::schema::samples;

use super::aggregate::Dim;
use super::{EventsQuery, QueryEngine};
use crate::error::QueryError;
use crate::events::{Event, EventsPage};
use crate::limits::exceeded;
use crate::symbolize::Symbolizer;
use crate::types::ProfileTypeInfo;

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
    pub(crate) async fn run_events(&self, q: &EventsQuery) -> Result<EventsPage, QueryError> {
        if q.limit == 0 {
            return Err(QueryError::InvalidArgument("limit must be at least 1".into()));
        }
        if q.limit > self.limits.max_events {
            return Err(exceeded(
                "max_events",
                format!(
                    "limit {} is more than {} events per page",
                    q.limit, self.limits.max_events
                ),
            ));
        }
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
        let Some(plan) = self.plan(&q.scope).await? else {
            return Ok(page);
        };
        let skip = cursor.map_or(0, |c| c.skip as usize);
        let after = cursor.map(|c| col(samples::TIME).gt_eq(lit(c.time)));
        // One row more than the page tells whether another page follows.
        let fetch = skip.saturating_add(q.limit).saturating_add(1);
        let (mut rows, stats) = self.select_sorted(&plan, after, &ORDER, fetch).await?;
        // Rows at the cursor's time come first; the earlier pages returned `skip` of them.
        let at_cursor = match cursor {
            Some(c) => rows.iter().take(skip).take_while(|r| r.time == c.time).count(),
            None => 0,
        };
        rows.drain(..at_cursor);
        let more = rows.len() > q.limit;
        rows.truncate(q.limit);
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

        let symbols = self.symbols.read(&q.scope.tenant).await?;
        let mut symbolizer = Symbolizer::new(&symbols);
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
        page.stats = Some(stats);
        Ok(page)
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
