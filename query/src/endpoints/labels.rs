//! `labels`: the label names (series labels and sample attribute keys) and one label's
//! values with samples in a range, answered from the catalog.

use stackhouse_storage::model::TimeRange;

use crate::engine::QueryEngine;
use crate::error::QueryError;

impl QueryEngine {
    /// Sorted label names with samples in `range`.
    pub async fn label_names(&self, tenant: &str, range: TimeRange) -> Result<Vec<String>, QueryError> {
        self.listing(
            "label_names",
            tenant,
            range,
            self.catalog.label_names(tenant, range),
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
        let read = self.catalog.label_values(tenant, name, range);
        self.listing("label_values", tenant, range, read).await
    }
}
