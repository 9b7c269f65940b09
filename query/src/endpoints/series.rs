//! `series`: the stored series (label sets and profile types) with samples in a range, for
//! listings that filter them further (Pyroscope's `Series`, `LabelNames` with matchers).

use stackhouse_storage::model::{Series, TimeRange};

use crate::engine::QueryEngine;
use crate::error::QueryError;

impl QueryEngine {
    /// Every series of the tenant with samples in `range`.
    pub async fn series(&self, tenant: &str, range: TimeRange) -> Result<Vec<Series>, QueryError> {
        self.listing("series", tenant, range, self.catalog.series(tenant, range))
            .await
    }
}
