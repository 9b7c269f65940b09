//! `stats`: what a tenant has stored, as totals and as the time span of its samples.

use stackhouse_storage::catalog::CatalogStats;

use crate::engine::QueryEngine;
use crate::error::QueryError;

impl QueryEngine {
    /// The tenant's segments, series, and per-table objects, rows and bytes.
    pub async fn stats(&self, tenant: &str) -> Result<CatalogStats, QueryError> {
        self.bounded("stats", async { Ok(self.catalog.stats(tenant).await?) })
            .await
    }

    /// Unix nanoseconds of the tenant's oldest and newest sample; `None` without data.
    pub async fn data_range(&self, tenant: &str) -> Result<Option<(i64, i64)>, QueryError> {
        self.bounded("data_range", async { Ok(self.catalog.data_range(tenant).await?) })
            .await
    }
}
