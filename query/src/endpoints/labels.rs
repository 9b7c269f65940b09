//! `labels`: the label names (series labels and sample attribute keys) and one label's
//! values with samples in a range, answered from the catalog. The query API reads them as
//! `GET /api/v1/labels` and `/labels/{name}/values`; Pyroscope as `LabelNames` and
//! `LabelValues`, filtered by its matchers and named as it names labels.

use std::collections::BTreeSet;

use stackhouse_proto::pyroscope_types::{
    LabelNamesRequest, LabelNamesResponse, LabelValuesRequest, LabelValuesResponse,
};
use stackhouse_storage::model::TimeRange;

use crate::engine::QueryEngine;
use crate::error::QueryError;
use crate::pyroscope::scope::{listing, range_ms};
use crate::pyroscope::{Caller, names};
use crate::request::ListingRequest;

impl QueryEngine {
    /// Sorted label names with samples in `range`.
    pub async fn label_names(&self, tenant: &str, range: TimeRange) -> Result<Vec<String>, QueryError> {
        self.listing(
            "label_names",
            tenant,
            range,
            self.catalog_label_names(tenant, range),
        )
        .await
    }

    /// Sorted values of the label `name` with samples in `range`.
    pub async fn label_values(
        &self,
        tenant: &str,
        name: &str,
        range: TimeRange,
    ) -> Result<Vec<String>, QueryError> {
        let read = self.catalog_label_values(tenant, name, range);
        self.listing("label_values", tenant, range, read).await
    }
}

impl QueryEngine {
    /// `GET /api/v1/labels`.
    pub async fn read_label_names(&self, r: &ListingRequest) -> Result<Vec<String>, QueryError> {
        self.bounded("label_names", async {
            let range = self.resolve_range(&r.range)?;
            self.label_names(&r.tenant, range).await
        })
        .await
    }

    /// `GET /api/v1/labels/{name}/values`.
    pub async fn read_label_values(&self, r: &ListingRequest, name: &str) -> Result<Vec<String>, QueryError> {
        self.bounded("label_values", async {
            let range = self.resolve_range(&r.range)?;
            self.label_values(&r.tenant, name, range).await
        })
        .await
    }
}

/// Pyroscope's `LabelNames`.
pub async fn label_names(
    engine: &QueryEngine,
    call: &Caller,
    r: LabelNamesRequest,
) -> Result<LabelNamesResponse, QueryError> {
    engine
        .bounded("label_names", async move {
            let Some(range) = range_ms(r.start, r.end, engine.now_nanos())? else {
                return Ok(LabelNamesResponse::default());
            };
            let listing = listing(engine, &call.tenant, range, &r.matchers).await?;
            let mut names: BTreeSet<String> = listing
                .series
                .iter()
                .flat_map(|s| names::series_labels(s, call.utf8_names))
                .map(|(name, _)| name)
                .collect();
            if !listing.series.is_empty() {
                names.extend(
                    listing
                        .sample_only
                        .iter()
                        .map(|n| names::wire_name(n, call.utf8_names).into_owned()),
                );
            }
            Ok(LabelNamesResponse {
                names: names.into_iter().collect(),
            })
        })
        .await
}

/// Pyroscope's `LabelValues`.
pub async fn label_values(
    engine: &QueryEngine,
    call: &Caller,
    r: LabelValuesRequest,
) -> Result<LabelValuesResponse, QueryError> {
    engine
        .bounded("label_values", async move {
            let Some(range) = range_ms(r.start, r.end, engine.now_nanos())? else {
                return Ok(LabelValuesResponse::default());
            };
            let listing = listing(engine, &call.tenant, range, &r.matchers).await?;
            let name = listing.names.resolve(&r.name);
            let mut values: BTreeSet<String> = if listing.sample_only.contains(&name) {
                engine
                    .label_values(&call.tenant, &name, range)
                    .await?
                    .into_iter()
                    .collect()
            } else {
                listing
                    .series
                    .iter()
                    .filter_map(|s| names::series_label(s, &name))
                    .collect()
            };
            values.remove("");
            Ok(LabelValuesResponse {
                names: values.into_iter().collect(),
            })
        })
        .await
}
