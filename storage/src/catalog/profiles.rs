//! Profiles: where each stored profile id is, so a trace finds its profile and a retried
//! export is not stored twice.

use async_trait::async_trait;

use super::CatalogResult;
use super::backend::{Dialect, PerDialect, SqlCatalog, on_either};
use super::common::{ProfileRow, json_ids, profile_key};
use crate::model::{ProfileKey, ProfileRecord, TimeRange};

#[async_trait]
pub trait ProfileCatalog: Send + Sync {
    /// Which of `keys` (profile id, series, start) `tenant` has stored already: a retried
    /// export finds its profiles here and is not stored twice.
    async fn stored_profiles(&self, tenant: &str, keys: &[ProfileKey]) -> CatalogResult<Vec<ProfileKey>>;

    /// Where a profile id was stored.
    async fn profile(
        &self,
        tenant: &str,
        profile_id: [u8; 16],
    ) -> CatalogResult<Vec<(String, ProfileRecord)>>;

    /// Forgets the profiles of `series_ids` that lie wholly inside `range`, each covering
    /// `[start, max(end, start + 1))` as profile lookups judge them: what a purged deletion
    /// request leaves of them is nothing. How many went.
    async fn drop_profiles(&self, tenant: &str, series_ids: &[i64], range: TimeRange) -> CatalogResult<u64>;
}

/// `$2` a JSON array of series ids.
const DROP_PROFILES: PerDialect = PerDialect {
    sqlite: "DELETE FROM profiles WHERE tenant = $1
        AND series_id IN (SELECT value FROM json_each($2))
        AND start_nanos >= $3 AND MAX(end_nanos, start_nanos + 1) <= $4",
    postgres: "DELETE FROM profiles WHERE tenant = $1
        AND series_id IN (SELECT jsonb_array_elements_text($2::jsonb)::BIGINT)
        AND start_nanos >= $3 AND GREATEST(end_nanos, start_nanos + 1) <= $4",
};

const PROFILE: PerDialect = PerDialect {
    sqlite:
        "SELECT segment_id, profile_id, series_id, start_nanos, end_nanos, sample_count, resource, attributes
        FROM profiles WHERE tenant = $1 AND profile_id = $2
        ORDER BY segment_id, series_id, start_nanos",
    postgres:
        "SELECT segment_id, profile_id, series_id, start_nanos, end_nanos, sample_count, resource, attributes
        FROM profiles WHERE tenant = $1 AND profile_id = $2
        ORDER BY segment_id COLLATE \"C\", series_id, start_nanos",
};

#[async_trait]
impl ProfileCatalog for SqlCatalog {
    async fn stored_profiles(&self, tenant: &str, keys: &[ProfileKey]) -> CatalogResult<Vec<ProfileKey>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let rows = on_either!(self, |pool| pool.stored_profiles(tenant, keys).await?);
        rows.into_iter().map(profile_key).collect()
    }

    async fn profile(&self, tenant: &str, id: [u8; 16]) -> CatalogResult<Vec<(String, ProfileRecord)>> {
        let rows: Vec<ProfileRow> = on_either!(self, |pool| sqlx::query_as(pool.sql(&PROFILE))
            .bind(tenant)
            .bind(&id[..])
            .fetch_all(pool)
            .await?);
        rows.into_iter().map(ProfileRow::into_record).collect()
    }

    async fn drop_profiles(&self, tenant: &str, series_ids: &[i64], range: TimeRange) -> CatalogResult<u64> {
        if series_ids.is_empty() {
            return Ok(0);
        }
        let ids = json_ids(series_ids);
        Ok(on_either!(self, |pool| sqlx::query(pool.sql(&DROP_PROFILES))
            .bind(tenant)
            .bind(ids.as_str())
            .bind(range.start)
            .bind(range.end)
            .execute(pool)
            .await?
            .rows_affected()))
    }
}
