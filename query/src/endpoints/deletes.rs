//! Deletion requests of a tenant: made (checked, counted and committed to the catalog, after
//! which no read returns what they match: see the engine's `deleted` module), listed, and
//! cancelled within their period. The API serves them under `/api/v1/admin/deletes`.

use std::collections::HashSet;
use std::time::Duration;

use stackhouse_storage::catalog::{Cancelled, DeleteRequest, DeleteState, TableKind};
use stackhouse_storage::model::TimeRange;
use stackhouse_storage::rollup::Resolution;

use crate::engine::QueryEngine;
use crate::error::QueryError;
use crate::request::{parse_time, selector};

/// A deletion as asked: a series selector and a range, in the query API's forms.
#[derive(Clone, Debug, Default)]
pub struct DeleteAsked {
    pub tenant: String,
    pub selector: String,
    pub from: String,
    pub to: String,
}

impl QueryEngine {
    /// Checks a deletion, counts what it matches now, and commits it; reads leave its
    /// samples out from the moment this returns. It may be cancelled for the configured
    /// period ([`crate::engine::QueryConfig`]'s `deletion_cancel_period`).
    pub async fn request_delete(&self, asked: &DeleteAsked) -> Result<DeleteRequest, QueryError> {
        let cancel_period = self.deletion_cancel_period;
        let now = self.now_nanos();
        let time = |name: &str, value: &str| {
            parse_time(value, now).map_err(|e| QueryError::bad_request(format!("{name}: {e}")))
        };
        let range = TimeRange {
            start: time("from", &asked.from)?,
            end: time("to", &asked.to)?,
        };
        if range.start >= range.end {
            return Err(QueryError::bad_request(format!(
                "from ({}) must be before to ({})",
                asked.from, asked.to
            )));
        }
        let parsed = selector("selector", Some(&asked.selector))?;
        let tenant = &asked.tenant;
        // Sample attributes (a thread name) are not series labels: a matcher on one would
        // read as "" for every series and delete far more than asked.
        let known = self.catalog.series(tenant, TimeRange::ALL).await?;
        let names: HashSet<&str> = known
            .iter()
            .flat_map(|s| s.labels.keys().map(String::as_str))
            .collect();
        if let Some(m) = parsed.matchers.iter().find(|m| !names.contains(m.name.as_str())) {
            return Err(QueryError::bad_request(format!(
                "selector: {:?} is not a label of any series of tenant {tenant:?}; deletions select \
                 series by their labels (sample attributes such as thread names cannot be deleted by)",
                m.name
            )));
        }
        let segments = self.catalog.segments(tenant, range).await?;
        for edge in [range.start, range.end] {
            unreachable_edge(&segments, edge)?;
        }
        let now_millis = now.div_euclid(1_000_000);
        let mut request = DeleteRequest {
            id: new_id(now),
            selector: asked.selector.clone(),
            from_nanos: range.start,
            to_nanos: range.end,
            created_at_millis: now_millis,
            cancel_until_millis: now_millis
                .saturating_add(cancel_period.as_millis().min(i64::MAX as u128) as i64),
            state: DeleteState::Pending,
            matched_series: 0,
            matched_samples: 0,
        };
        let in_range = self.catalog.series(tenant, range).await?;
        let matched: HashSet<i64> = request
            .matched_ids(&in_range)
            .map_err(|e| QueryError::bad_request(format!("selector: {e}")))?
            .into_iter()
            .collect();
        let matched_samples = segments
            .iter()
            .flat_map(|segment| &segment.series)
            .filter(|s| matched.contains(&s.series_id))
            .map(|s| share_inside(s.samples, s.min_time, s.max_time, range))
            .sum::<u64>();
        request.matched_series = matched.len() as i64;
        request.matched_samples = matched_samples.min(i64::MAX as u64) as i64;
        self.catalog.add_delete_request(tenant, &request).await?;
        Ok(request)
    }

    /// The tenant's deletion requests, oldest first.
    pub async fn delete_requests(&self, tenant: &str) -> Result<Vec<DeleteRequest>, QueryError> {
        Ok(self.catalog.delete_requests(tenant).await?)
    }

    /// One of the tenant's deletion requests.
    pub async fn delete_request(&self, tenant: &str, id: &str) -> Result<DeleteRequest, QueryError> {
        self.catalog
            .delete_request(tenant, id)
            .await?
            .ok_or_else(|| QueryError::NotFound(format!("tenant {tenant:?} has no deletion request {id:?}")))
    }

    /// Cancels a request within its period: reads show what it hid again.
    pub async fn cancel_delete(&self, tenant: &str, id: &str) -> Result<DeleteRequest, QueryError> {
        let now_millis = self.now_nanos().div_euclid(1_000_000);
        match self.catalog.cancel_delete_request(tenant, id, now_millis).await? {
            Cancelled::Now | Cancelled::Already => {}
            Cancelled::Unknown => {
                return Err(QueryError::NotFound(format!(
                    "tenant {tenant:?} has no deletion request {id:?}"
                )));
            }
            Cancelled::TooLate { cancel_until_millis } => {
                return Err(QueryError::Conflict(format!(
                    "deletion request {id:?} can no longer be cancelled: its cancel period ended at {} \
                     (--deletion-cancel-period) or its purge has begun",
                    rfc3339_millis(cancel_until_millis)
                )));
            }
        }
        self.delete_request(tenant, id).await
    }
}

/// Refuses an edge where raw retention left only rollups whose cells straddle it: reads
/// could then hide neither exactly the samples before nor those after it.
fn unreachable_edge(
    segments: &[stackhouse_storage::catalog::SegmentMeta],
    edge: i64,
) -> Result<(), QueryError> {
    for segment in segments {
        // A day segment sums its day's blocks, which say where their own cells lie.
        if segment.is_day()
            || segment.object(TableKind::Samples).is_some()
            || edge < segment.min_time
            || edge > segment.max_time
        {
            continue;
        }
        let Some(finest) = Resolution::ALL
            .into_iter()
            .find(|r| segment.object(r.kind()).is_some())
        else {
            continue;
        };
        if finest.bucket(edge) != edge {
            return Err(QueryError::bad_request(format!(
                "{} lies where raw retention kept only rollups of {}: choose an edge on that grid, such as {}",
                rfc3339_millis(edge.div_euclid(1_000_000)),
                humantime::format_duration(Duration::from_nanos(finest.step_nanos() as u64)),
                rfc3339_millis(finest.bucket(edge).div_euclid(1_000_000)),
            )));
        }
    }
    Ok(())
}

/// The part of `samples` spread over `[min, max]` that lies in `range`, by time.
fn share_inside(samples: u64, min: i64, max: i64, range: TimeRange) -> u64 {
    let start = min.max(range.start);
    let end = max.saturating_add(1).min(range.end);
    if start >= end {
        return 0;
    }
    let span = max.saturating_add(1).saturating_sub(min).max(1) as u128;
    (u128::from(samples) * (end - start) as u128 / span) as u64
}

/// Unique, not secret: the clock and the process's per-map random keys.
fn new_id(now_nanos: i64) -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_i64(now_nanos);
    format!("{:016x}", hasher.finish())
}

fn rfc3339_millis(millis: i64) -> String {
    chrono::DateTime::from_timestamp_millis(millis)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
        .unwrap_or_else(|| millis.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_share_inside_the_range_is_by_time() {
        let range = TimeRange { start: 100, end: 200 };
        assert_eq!(share_inside(10, 120, 129, range), 10);
        assert_eq!(share_inside(10, 150, 249, range), 5);
        assert_eq!(share_inside(10, 300, 400, range), 0);
        assert_eq!(share_inside(7, 100, 100, range), 7);
    }
}
