//! Purging deletion requests: once a request's cancel period is over, every object holding
//! samples it matches is rewritten without them. Reads have hidden those samples since the
//! request was committed (the query engine's mask stays as a guard); the purge makes them
//! gone from the store.
//!
//! A request moves from pending to purging in one conditional update, so a cancel and the
//! purge cannot both win. Then, under the tenant's compaction lease, each segment that may
//! hold matched rows is read at its finest tier and written again without them: samples
//! with the rollups the segment had, recomputed from the samples that remain; or, where
//! retention left rollups only, the finest rollup filtered (requests over such ranges have
//! edges on its grid, checked when they were made) with the coarser ones summed from it.
//! Each segment is one catalog swap; the objects it replaced go after the deletion grace.
//! A segment left with nothing is removed. A purge killed midway leaves its requests in
//! purging and the next pass takes them up where the swaps stopped: a segment already
//! rewritten holds nothing to remove and is left as it is. Once no segment holds a matched
//! row, profiles wholly inside the range are forgotten, and series with nothing left, and
//! the requests become purged; the tenant's next symbol merge collects the symbols nothing
//! uses any more ([`crate::compaction`]'s symbols).

use std::collections::HashSet;

use arrow::array::AsArray;
use arrow::compute::concat_batches;
use arrow::datatypes::Int64Type;

use crate::catalog::{CatalogError, DeleteRequest, DeleteState, SegmentMeta, SegmentSeries};
use crate::compaction::merge::{filter_rows, write_block};
use crate::compaction::{CompactionError, CompactionReport, Compactor, Lease};
use crate::model::TimeRange;
use crate::rollup::{Resolution, write_rollups};
use crate::schema::{self, samples as col};
use crate::segment::read_table;
use crate::store::{Store, StoreError, blocking};

/// What one request removes: these series' rows in `range`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Cut {
    range: TimeRange,
    series: HashSet<i64>,
}

impl Cut {
    /// Whether `s`, a segment's extent of one series, may hold rows this cut removes.
    fn touches(&self, s: &SegmentSeries) -> bool {
        self.series.contains(&s.series_id) && s.min_time < self.range.end && s.max_time >= self.range.start
    }

    fn removes(&self, series_id: i64, time: i64) -> bool {
        self.range.start <= time && time < self.range.end && self.series.contains(&series_id)
    }
}

/// Purges every tenant's requests whose cancel period has ended at the compactor's clock;
/// a tenant another compactor holds waits for the next pass.
pub async fn run_once(compactor: &Compactor) -> Result<CompactionReport, CompactionError> {
    let mut report = CompactionReport::default();
    let mut states = [0u64; DeleteState::ALL.len()];
    for tenant in compactor.catalog().tenants().await? {
        match purge_tenant(compactor, &tenant, &mut states).await {
            Ok(r) => report.add_from(r),
            Err(CompactionError::Busy(_)) => {}
            Err(e) => tracing::warn!(%tenant, error = %e, "purging deletion requests failed"),
        }
    }
    // The backlog an operator watches: requests waiting for their purge or in it.
    for (state, count) in DeleteState::ALL.into_iter().zip(states) {
        metrics::gauge!("stackhouse_deletion_requests", "state" => state.as_str()).set(count as f64);
    }
    Ok(report)
}

/// Moves `tenant`'s requests past their cancel period to purging, and purges every request
/// in that state (those a killed pass left too).
/// `states` counts the tenant's requests by state as the pass finds them.
pub async fn purge_tenant(
    compactor: &Compactor,
    tenant: &str,
    states: &mut [u64; DeleteState::ALL.len()],
) -> Result<CompactionReport, CompactionError> {
    let catalog = compactor.catalog();
    let now_millis = compactor.clock().now_nanos().div_euclid(1_000_000);
    let mut purging = Vec::new();
    for mut request in catalog.delete_requests(tenant).await? {
        let due = request.state == DeleteState::Pending && request.cancel_until_millis <= now_millis;
        if due
            && catalog
                .move_delete_request(tenant, &request.id, DeleteState::Pending, DeleteState::Purging)
                .await?
        {
            request.state = DeleteState::Purging;
        }
        if let Some(i) = DeleteState::ALL.iter().position(|s| *s == request.state) {
            states[i] += 1;
        }
        if request.state == DeleteState::Purging {
            purging.push(request);
        }
    }
    if purging.is_empty() {
        return Ok(CompactionReport::default());
    }
    let lease = compactor.lease(tenant).await?;
    let result = purge_leased(compactor, tenant, &purging, &lease).await;
    lease.release().await;
    result
}

async fn purge_leased(
    compactor: &Compactor,
    tenant: &str,
    requests: &[DeleteRequest],
    lease: &Lease,
) -> Result<CompactionReport, CompactionError> {
    let catalog = compactor.catalog();
    let series = catalog.series(tenant, TimeRange::ALL).await?;
    let mut cuts = Vec::new();
    for request in requests {
        let matched = request.matched_ids(&series).map_err(|e| {
            CatalogError::Corrupt(format!(
                "deletion request {} has a selector that does not parse: {e}",
                request.id
            ))
        })?;
        cuts.push(Cut {
            range: request.range(),
            series: matched.into_iter().collect(),
        });
    }
    let hull = TimeRange {
        start: cuts.iter().map(|c| c.range.start).min().unwrap_or(0),
        end: cuts.iter().map(|c| c.range.end).max().unwrap_or(0),
    };
    let mut report = CompactionReport::default();
    for segment in catalog.segments(tenant, hull).await? {
        let touching: Vec<Cut> = cuts
            .iter()
            .filter(|c| segment.series.iter().any(|s| c.touches(s)))
            .cloned()
            .collect();
        if touching.is_empty() {
            continue;
        }
        lease.renew().await?;
        let now = compactor.clock().now_nanos();
        let added = match without(compactor.store(), &segment, touching, now).await? {
            Rewritten::Unchanged => continue,
            Rewritten::Empty => Vec::new(),
            Rewritten::Into(new) => vec![new],
        };
        let swapped = compactor
            .replace(tenant, std::slice::from_ref(&segment), added, None, lease)
            .await?;
        if swapped.conflicts > 0 {
            // Someone else replaced it; what replaced it is purged on the next pass.
            return Ok(report);
        }
        report.add_from(swapped);
    }
    // Symbols only the removed rows used go at the next symbol merge.
    lease.commit(catalog.symbols_to_collect(tenant)).await?;
    for (request, cut) in requests.iter().zip(&cuts) {
        let ids: Vec<i64> = cut.series.iter().copied().collect();
        lease
            .commit(async {
                catalog.drop_profiles(tenant, &ids, cut.range).await?;
                catalog.forget_empty_series(tenant, &ids).await.map(drop)
            })
            .await?;
        catalog
            .move_delete_request(tenant, &request.id, DeleteState::Purging, DeleteState::Purged)
            .await?;
        tracing::info!(%tenant, request = %request.id, "deletion request purged");
    }
    Ok(report)
}

/// What a segment becomes without the rows of some cuts.
enum Rewritten {
    /// It held none of them.
    Unchanged,
    /// It held nothing else.
    Empty,
    Into(SegmentMeta),
}

/// `segment` written again, as a segment created at `now` of the same level and tiers,
/// without the rows `cuts` remove from its finest tier.
async fn without(
    store: &Store,
    segment: &SegmentMeta,
    cuts: Vec<Cut>,
    now: i64,
) -> Result<Rewritten, StoreError> {
    let present = segment.resolutions();
    let Some(&finest) = present.first() else {
        return Ok(Rewritten::Empty);
    };
    let object = segment
        .object(finest.kind())
        .expect("a listed resolution has its object");
    let parts = read_table(store, finest.kind(), object).await?;
    let table_schema = schema::schema_of(finest.kind());
    let (kept, removed) = blocking("removing deleted rows", move || -> Result<_, StoreError> {
        let table = concat_batches(&table_schema, &parts)?;
        let kept = filter_rows(&table, |s, t| !cuts.iter().any(|c| c.removes(s, t)))?;
        let removed = table.num_rows() - kept.num_rows();
        Ok((kept, removed))
    })
    .await?;
    if removed == 0 {
        return Ok(Rewritten::Unchanged);
    }
    if kept.num_rows() == 0 {
        return Ok(Rewritten::Empty);
    }
    let rollups: Vec<Resolution> = present.into_iter().filter(|r| *r != Resolution::Raw).collect();
    if finest == Resolution::Raw {
        let tenant = &segment.tenant;
        let block = write_block(store, tenant, segment.level, now, kept, &rollups).await?;
        return Ok(Rewritten::Into(block));
    }
    // Rollup rows carry bucket starts, not sample times: the series that keep rows keep
    // their extents as they were, which is what the rollups were summed from.
    let left: HashSet<i64> = kept
        .column(kept.schema().index_of(col::SERIES_ID).expect("rollup schema"))
        .as_primitive::<Int64Type>()
        .values()
        .iter()
        .copied()
        .collect();
    let id = uuid::Uuid::now_v7().to_string();
    let objects = write_rollups(store, &segment.tenant, &id, &kept, &rollups).await?;
    Ok(Rewritten::Into(SegmentMeta {
        id,
        created_at_nanos: now,
        objects,
        series: segment
            .series
            .iter()
            .filter(|s| left.contains(&s.series_id))
            .cloned()
            .collect(),
        ..segment.clone()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_touches_series_extents_it_overlaps_and_removes_rows_inside() {
        let cut = Cut {
            range: TimeRange { start: 100, end: 200 },
            series: HashSet::from([1]),
        };
        let extent = |series_id, min_time, max_time| SegmentSeries {
            series_id,
            min_time,
            max_time,
            samples: 1,
        };
        assert!(cut.touches(&extent(1, 50, 100)));
        assert!(cut.touches(&extent(1, 199, 300)));
        assert!(!cut.touches(&extent(1, 200, 300)));
        assert!(!cut.touches(&extent(1, 0, 99)));
        assert!(!cut.touches(&extent(2, 0, 1000)));
        assert!(cut.removes(1, 100) && cut.removes(1, 199));
        assert!(!cut.removes(1, 200) && !cut.removes(1, 99) && !cut.removes(2, 150));
    }
}
