//! `series`: the stored series (label sets and profile types) with samples in a range, for
//! listings that filter them further (Pyroscope's `LabelNames` and `LabelValues` with
//! matchers). Pyroscope reads them as `Series`: the label sets its matchers select, cut to
//! the label names it asks for.

use std::collections::BTreeSet;

use stackhouse_proto::pyroscope_querier::{SeriesRequest, SeriesResponse};
use stackhouse_proto::pyroscope_types::Labels;
use stackhouse_storage::model::{Series, TimeRange};

use crate::engine::QueryEngine;
use crate::error::QueryError;
use crate::pyroscope::scope::{listing, pairs, range_ms};
use crate::pyroscope::{Caller, names};

impl QueryEngine {
    /// Every series of the tenant with samples in `range`.
    pub async fn series(&self, tenant: &str, range: TimeRange) -> Result<Vec<Series>, QueryError> {
        self.listing("series", tenant, range, self.catalog_series(tenant, range))
            .await
    }
}

/// Pyroscope's `Series`.
pub async fn series(
    engine: &QueryEngine,
    call: &Caller,
    r: SeriesRequest,
) -> Result<SeriesResponse, QueryError> {
    engine
        .bounded("series", async move {
            let Some(range) = range_ms(r.start, r.end, engine.now_nanos())? else {
                return Ok(SeriesResponse::default());
            };
            let listing = listing(engine, &call.tenant, range, &r.matchers).await?;
            let wanted: Vec<(String, String)> = r
                .label_names
                .iter()
                .map(|wire| (wire.clone(), listing.names.resolve(wire)))
                .collect();
            let mut sets: BTreeSet<Vec<(String, String)>> = BTreeSet::new();
            for s in &listing.series {
                let set = if wanted.is_empty() {
                    names::series_labels(s, call.utf8_names)
                } else {
                    let mut set: Vec<(String, String)> = wanted
                        .iter()
                        .filter_map(|(wire, ours)| names::series_label(s, ours).map(|v| (wire.clone(), v)))
                        .collect();
                    set.sort();
                    set.dedup();
                    set
                };
                sets.insert(set);
            }
            Ok(SeriesResponse {
                labels_set: sets
                    .into_iter()
                    .map(|set| Labels { labels: pairs(set) })
                    .collect(),
            })
        })
        .await
}
