//! `profile_types`: the profile types a tenant has stored.

use stackhouse_storage::model::{ProfileType, TimeRange};

use crate::engine::QueryEngine;
use crate::error::QueryError;

impl QueryEngine {
    /// Profile types with samples in `range`.
    pub async fn profile_types(
        &self,
        tenant: &str,
        range: TimeRange,
    ) -> Result<Vec<ProfileType>, QueryError> {
        let read = self.catalog.profile_types(tenant, range);
        self.listing("profile_types", tenant, range, read).await
    }

    /// Every profile type the tenant has stored, at any time: what a query's profile type
    /// is checked against. Not held to `max_range`: the query it resolves a type for is,
    /// over its own range.
    pub async fn stored_profile_types(&self, tenant: &str) -> Result<Vec<ProfileType>, QueryError> {
        self.bounded("profile_types", async {
            Ok(self.catalog.profile_types(tenant, TimeRange::ALL).await?)
        })
        .await
    }
}
