//! `profile_types`: the profile types a tenant has stored. The query API reads them as
//! `GET /api/v1/profile-types` (with the series that have them); Pyroscope as `ProfileTypes`.

use stackhouse_proto::pyroscope_querier::{ProfileTypesRequest, ProfileTypesResponse};
use stackhouse_storage::model::{ProfileType, Series, TimeRange};

use crate::engine::QueryEngine;
use crate::error::QueryError;
use crate::pyroscope::scope::range_ms;
use crate::pyroscope::{Caller, profile_type};
use crate::request::ListingRequest;

impl QueryEngine {
    /// Profile types with samples in `range`.
    pub async fn profile_types(
        &self,
        tenant: &str,
        range: TimeRange,
    ) -> Result<Vec<ProfileType>, QueryError> {
        let read = self.catalog_profile_types(tenant, range);
        self.listing("profile_types", tenant, range, read).await
    }

    /// Every profile type the tenant has stored, at any time: what a query's profile type
    /// is checked against. Not held to `max_range`: the query it resolves a type for is,
    /// over its own range.
    pub async fn stored_profile_types(&self, tenant: &str) -> Result<Vec<ProfileType>, QueryError> {
        self.bounded("profile_types", async {
            self.catalog_profile_types(tenant, TimeRange::ALL).await
        })
        .await
    }

    /// Whether the tenant has stored `profile_type`; if not, the types it has stored. A
    /// type once found is remembered, so that a query for it does not wait on the catalog
    /// before its own planning can start. Types are only added, except when retention or a
    /// deletion removes a type's last sample: its queries then answer empty rather than
    /// naming the stored types.
    pub async fn stored_profile_type(
        &self,
        tenant: &str,
        profile_type: &ProfileType,
    ) -> Result<Result<(), Vec<ProfileType>>, QueryError> {
        if self.known_types.contains(tenant, profile_type) {
            return Ok(Ok(()));
        }
        let stored = self.stored_profile_types(tenant).await?;
        if !stored.contains(profile_type) {
            return Ok(Err(stored));
        }
        self.known_types.insert(tenant, profile_type);
        Ok(Ok(()))
    }
}

impl QueryEngine {
    /// `GET /api/v1/profile-types`: the types with data in the range, and the series that
    /// have them.
    pub async fn read_profile_types(
        &self,
        r: &ListingRequest,
    ) -> Result<(Vec<ProfileType>, Vec<Series>), QueryError> {
        self.bounded("profile_types", async {
            let range = self.resolve_range(&r.range)?;
            futures::try_join!(
                self.profile_types(&r.tenant, range),
                self.series(&r.tenant, range)
            )
        })
        .await
    }
}

/// Pyroscope's `ProfileTypes`.
pub async fn profile_types(
    engine: &QueryEngine,
    call: &Caller,
    r: ProfileTypesRequest,
) -> Result<ProfileTypesResponse, QueryError> {
    engine
        .bounded("profile_types", async move {
            let Some(range) = range_ms(r.start, r.end, engine.now_nanos())? else {
                return Ok(ProfileTypesResponse::default());
            };
            let mut profile_types: Vec<_> = engine
                .profile_types(&call.tenant, range)
                .await?
                .iter()
                .map(profile_type::to_wire)
                .collect();
            profile_types.sort_by(|a, b| a.id.cmp(&b.id));
            // Counted CPU samples and CPU time are served as one type.
            profile_types.dedup_by(|a, b| a.id == b.id);
            Ok(ProfileTypesResponse { profile_types })
        })
        .await
}
