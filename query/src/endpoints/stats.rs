//! `stats`: what a tenant has stored, as totals and as the time span of its samples.
//! Pyroscope reads the span as `GetProfileStats`; its `AnalyzeQuery` (what a query would
//! read) is answered here too, empty.

use stackhouse_proto::pyroscope_querier::{AnalyzeQueryRequest, AnalyzeQueryResponse};
use stackhouse_proto::pyroscope_types::{GetProfileStatsRequest, GetProfileStatsResponse};
use stackhouse_storage::catalog::CatalogStats;

use crate::engine::QueryEngine;
use crate::error::QueryError;
use crate::pyroscope::{Caller, NANOS_PER_MILLI};

impl QueryEngine {
    /// The tenant's segments, series, and per-table objects, rows and bytes.
    pub async fn stats(&self, tenant: &str) -> Result<CatalogStats, QueryError> {
        self.bounded("stats", async {
            let all = self
                .per_tenant(tenant, |t| async move { Ok(self.catalog.stats(t).await?) })
                .await?;
            let mut stats = CatalogStats::default();
            for (_, of_tenant) in &all {
                stats.add(of_tenant);
            }
            Ok(stats)
        })
        .await
    }

    /// Unix nanoseconds of the tenant's oldest and newest sample; `None` without data.
    pub async fn data_range(&self, tenant: &str) -> Result<Option<(i64, i64)>, QueryError> {
        self.bounded("data_range", self.catalog_data_range(tenant)).await
    }
}

/// Pyroscope's `GetProfileStats`.
pub async fn get_profile_stats(
    engine: &QueryEngine,
    call: &Caller,
    _: GetProfileStatsRequest,
) -> Result<GetProfileStatsResponse, QueryError> {
    engine
        .bounded("data_range", async move {
            Ok(match engine.data_range(&call.tenant).await? {
                Some((oldest, newest)) => GetProfileStatsResponse {
                    data_ingested: true,
                    oldest_profile_time: oldest / NANOS_PER_MILLI,
                    newest_profile_time: newest / NANOS_PER_MILLI,
                },
                None => GetProfileStatsResponse::default(),
            })
        })
        .await
}

/// Pyroscope's own answer is empty too; the Drilldown app only shows what is there.
pub async fn analyze_query(
    _: &QueryEngine,
    _: &Caller,
    _: AnalyzeQueryRequest,
) -> Result<AnalyzeQueryResponse, QueryError> {
    Ok(AnalyzeQueryResponse::default())
}
