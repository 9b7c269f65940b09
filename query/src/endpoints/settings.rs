//! `settings`: the named values a tenant stored (the Profiles Drilldown app's settings).
//! Only reads are queries; writes go to the catalog from the API.

use stackhouse_storage::catalog::Setting;

use crate::engine::QueryEngine;
use crate::error::QueryError;

impl QueryEngine {
    /// The tenant's settings.
    pub async fn settings(&self, tenant: &str) -> Result<Vec<Setting>, QueryError> {
        self.bounded("settings", async { Ok(self.catalog.settings(tenant).await?) })
            .await
    }
}
