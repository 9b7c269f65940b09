//! What a tenant's deletion requests hide from a query: from the moment a request is in the
//! catalog until it is cancelled, no read returns the samples of the series its selector
//! matches in its range (nor, after the purge, could any: the mask stays as a guard). A
//! series hidden over the whole range is left out before planning; one hidden over part
//! of it keeps a row filter, and the range is cut at the request's edges so that no
//! rollup cell straddles one (a cell lies wholly inside or outside every request).

use std::collections::HashSet;
use std::ops::Not;

use datafusion::logical_expr::{Expr, col, lit};
use stackhouse_storage::catalog::DeleteRequest;
use stackhouse_storage::model::{Series, TimeRange};
use stackhouse_storage::schema::samples;

use crate::error::QueryError;

/// Series hidden over part of a query's range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Hidden {
    pub range: TimeRange,
    pub series_ids: Vec<i64>,
}

/// What the requests of a tenant hide from one query.
#[derive(Clone, Debug, Default)]
pub(crate) struct Deleted {
    /// Hidden over the whole range: not read at all.
    pub whole: HashSet<i64>,
    /// Hidden over part of the range.
    pub partial: Vec<Hidden>,
}

impl Deleted {
    /// Of `requests` (every state), over `series` of a query of `range`.
    pub(crate) fn of(
        requests: &[DeleteRequest],
        series: &[Series],
        range: TimeRange,
    ) -> Result<Deleted, QueryError> {
        let mut deleted = Deleted::default();
        for request in requests.iter().filter(|r| r.state.hides()) {
            let hidden = TimeRange {
                start: request.from_nanos.max(range.start),
                end: request.to_nanos.min(range.end),
            };
            if hidden.start >= hidden.end {
                continue;
            }
            // Guessing about a selector that no longer parses would show deleted data.
            let series_ids = request.matched_ids(series).map_err(|e| {
                QueryError::Internal(format!(
                    "deletion request {} has a selector that does not parse: {e}",
                    request.id
                ))
            })?;
            if hidden == range {
                deleted.whole.extend(series_ids);
            } else {
                deleted.partial.push(Hidden {
                    range: hidden,
                    series_ids,
                });
            }
        }
        deleted.partial.retain_mut(|h| {
            h.series_ids.retain(|id| !deleted.whole.contains(id));
            !h.series_ids.is_empty()
        });
        Ok(deleted)
    }

    /// Keeps only what hides some of `selected`.
    pub(crate) fn narrow(&mut self, selected: &HashSet<i64>) {
        self.partial.retain_mut(|h| {
            h.series_ids.retain(|id| selected.contains(id));
            !h.series_ids.is_empty()
        });
    }

    /// The edges of the partly hidden stretches, where the range must be cut.
    pub(crate) fn cuts(&self) -> Vec<i64> {
        let mut cuts: Vec<i64> = self
            .partial
            .iter()
            .flat_map(|h| [h.range.start, h.range.end])
            .collect();
        cuts.sort_unstable();
        cuts.dedup();
        cuts
    }

    /// `NOT (series_id IN (...) AND time in range) AND ...`; `None` when nothing is partly
    /// hidden. Exact on rollup rows too, since the range is cut at every edge.
    pub(crate) fn filter(&self) -> Option<Expr> {
        self.partial
            .iter()
            .map(|h| {
                let time = col(samples::TIME);
                col(samples::SERIES_ID)
                    .in_list(h.series_ids.iter().map(|&id| lit(id)).collect(), false)
                    .and(time.clone().gt_eq(lit(h.range.start)))
                    .and(time.lt(lit(h.range.end)))
                    .not()
            })
            .reduce(Expr::and)
    }
}

#[cfg(test)]
mod tests {
    use stackhouse_storage::catalog::DeleteState;
    use stackhouse_storage::model::ProfileType;

    use super::*;

    fn series(id_label: &str) -> Series {
        let labels = [("service.name".to_string(), id_label.to_string())].into();
        Series::new(
            ProfileType::parse("samples:count:cpu:nanoseconds").unwrap(),
            labels,
            1,
        )
    }

    fn request(selector: &str, from: i64, to: i64, state: DeleteState) -> DeleteRequest {
        DeleteRequest {
            id: "d".into(),
            selector: selector.into(),
            from_nanos: from,
            to_nanos: to,
            created_at_millis: 0,
            cancel_until_millis: 0,
            state,
            matched_series: 0,
            matched_samples: 0,
        }
    }

    #[test]
    fn whole_and_partial_hiding_and_cancelled_requests_hide_nothing() {
        let all = [series("a"), series("b"), series("c")];
        let range = TimeRange { start: 100, end: 200 };
        let requests = [
            request("{service.name=\"a\"}", 0, 1000, DeleteState::Pending),
            request("{service.name=~\"a|b\"}", 150, 300, DeleteState::Purged),
            request("{service.name=\"c\"}", 120, 130, DeleteState::Cancelled),
            request("{service.name=\"c\"}", 200, 300, DeleteState::Pending),
        ];
        let deleted = Deleted::of(&requests, &all, range).unwrap();
        assert_eq!(deleted.whole, HashSet::from([all[0].id]));
        // a is hidden whole already; the cancelled and the later request hide nothing here.
        assert_eq!(
            deleted.partial,
            [Hidden {
                range: TimeRange { start: 150, end: 200 },
                series_ids: vec![all[1].id]
            }]
        );
        assert_eq!(deleted.cuts(), [150, 200]);
        let filter = deleted.filter().unwrap().to_string();
        assert!(filter.starts_with("NOT series_id IN"), "{filter}");
        assert!(filter.contains("time_nanos >= Int64(150)"), "{filter}");
        let mut narrowed = deleted;
        narrowed.narrow(&HashSet::from([all[2].id]));
        assert!(narrowed.filter().is_none());
    }
}
