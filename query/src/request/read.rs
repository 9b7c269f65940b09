//! The reads of the query API, each one engine request: the request as sent is resolved
//! (scope, limits, defaults) and answered inside one endpoint's timeout and metrics, and
//! the edge only encodes what comes back.

use stackhouse_proto::pprof::Profile;
use stackhouse_storage::model::{ProfileType, Series, TimeRange};

use super::RangeRequest;
use super::scope::{ScopeRequest, parse_profile_type, selector};
use crate::endpoints::diff::{Diff, DiffQuery};
use crate::endpoints::events::{EventsPage, EventsQuery};
use crate::endpoints::export::PprofQuery;
use crate::endpoints::flamegraph::FlamegraphQuery;
use crate::endpoints::profile::ProfileDetail;
use crate::endpoints::timeseries::{Aggregation, Timeseries, TimeseriesQuery};
use crate::endpoints::top::{Top, TopQuery};
use crate::engine::QueryEngine;
use crate::engine::scope::{GroupKey, Scope};
use crate::error::QueryError;
use crate::tree::{Flamegraph, FlamegraphJson};

/// Buckets a time series gets at most when no step is given.
const DEFAULT_BUCKETS: i64 = 1000;
const NANOS_PER_SEC: i64 = 1_000_000_000;

/// What the edge encodes a tree read into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TreeOutput {
    /// The flamegraph JSON, written while the tree is cut.
    Json,
    /// The tree itself, for the edge's other renderers.
    Tree,
    /// A pprof profile of the samples, untruncated.
    Pprof,
}

/// A flamegraph read: the scope (a trace's flamegraph is one with its trace id), grouping,
/// the node budget asked for (0: the default).
#[derive(Clone, Debug)]
pub struct FlamegraphRequest {
    pub scope: ScopeRequest,
    pub group_by: Vec<GroupKey>,
    pub max_nodes: usize,
    pub output: TreeOutput,
}

/// A tree read's answer, in the output asked for.
// Built once per request and moved to the edge, so the size difference costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum TreeAnswer<J, T> {
    Json(J),
    Tree(T),
    Pprof(Profile),
}

/// A stored profile by its id.
#[derive(Clone, Debug)]
pub struct ProfileRequest {
    pub tenant: String,
    /// Hex, 32 characters.
    pub profile_id: String,
    /// Which of the profile's types, when it was sent with several.
    pub profile_type: Option<String>,
    pub max_nodes: usize,
    pub output: TreeOutput,
}

#[derive(Clone, Debug)]
pub struct TimeseriesRequest {
    pub scope: ScopeRequest,
    /// Bucket width; without one, the smallest whole number of seconds giving at most 1000
    /// buckets over the range.
    pub step_nanos: Option<i64>,
    pub group_by: Vec<GroupKey>,
    pub aggregation: Aggregation,
}

#[derive(Clone, Debug)]
pub struct TopRequest {
    pub scope: ScopeRequest,
    pub limit: usize,
}

#[derive(Clone, Debug)]
pub struct EventsRequest {
    pub scope: ScopeRequest,
    /// Page size asked for; 0: the default.
    pub limit: usize,
    pub cursor: Option<String>,
}

/// Two selections of one profile type compared.
#[derive(Clone, Debug)]
pub struct DiffRequest {
    pub tenant: String,
    pub profile_type: Option<String>,
    pub baseline: SideRequest,
    pub comparison: SideRequest,
    pub max_nodes: usize,
    pub output: TreeOutput,
}

/// One side of a diff.
#[derive(Clone, Debug, Default)]
pub struct SideRequest {
    pub selector: Option<String>,
    pub range: RangeRequest,
}

/// A catalog listing over a range.
#[derive(Clone, Debug)]
pub struct ListingRequest {
    pub tenant: String,
    pub range: RangeRequest,
}

impl QueryEngine {
    /// `GET /api/v1/flamegraph` and `/traces/{id}/flamegraph`.
    pub async fn read_flamegraph(
        &self,
        r: &FlamegraphRequest,
    ) -> Result<TreeAnswer<FlamegraphJson, Flamegraph>, QueryError> {
        self.bounded("flamegraph", async {
            let max_nodes = self.max_nodes(r.max_nodes)?;
            let scope = self.resolve_scope(&r.scope).await?;
            let query = FlamegraphQuery {
                scope,
                group_by: r.group_by.clone(),
                max_nodes,
            };
            Ok(match r.output {
                TreeOutput::Pprof => TreeAnswer::Pprof(self.pprof(&PprofQuery::Scope(query.scope)).await?),
                TreeOutput::Json => TreeAnswer::Json(self.flamegraph_json(&query).await?),
                TreeOutput::Tree => TreeAnswer::Tree(self.flamegraph(&query).await?),
            })
        })
        .await
    }

    /// `GET /api/v1/profiles/{id}`: its metadata with its flamegraph (`Json`), the tree, or
    /// its samples as pprof.
    pub async fn read_profile(
        &self,
        r: &ProfileRequest,
    ) -> Result<TreeAnswer<ProfileDetail, Flamegraph>, QueryError> {
        self.bounded("profile", async {
            let profile_id = super::hex_id::<16>("profile_id", &r.profile_id)?;
            let profile_type = r.profile_type.as_deref().map(parse_profile_type).transpose()?;
            let max_nodes = self.max_nodes(r.max_nodes)?;
            let (meta, scope) = self
                .find_profile(&r.tenant, profile_id, profile_type.as_ref())
                .await?;
            if r.output == TreeOutput::Pprof {
                return Ok(TreeAnswer::Pprof(self.pprof(&PprofQuery::Scope(scope)).await?));
            }
            let query = FlamegraphQuery {
                scope,
                group_by: Vec::new(),
                max_nodes,
            };
            let flamegraph = self.flamegraph(&query).await?;
            Ok(match r.output {
                TreeOutput::Json => TreeAnswer::Json(ProfileDetail { meta, flamegraph }),
                _ => TreeAnswer::Tree(flamegraph),
            })
        })
        .await
    }

    /// `GET /api/v1/timeseries`.
    pub async fn read_timeseries(&self, r: &TimeseriesRequest) -> Result<Timeseries, QueryError> {
        self.bounded("timeseries", async {
            let scope = self.resolve_scope(&r.scope).await?;
            let step_nanos = r.step_nanos.unwrap_or_else(|| default_step_nanos(scope.range));
            let query = TimeseriesQuery {
                scope,
                step_nanos,
                group_by: r.group_by.clone(),
                aggregation: r.aggregation,
            };
            self.timeseries(&query).await
        })
        .await
    }

    /// `GET /api/v1/top`.
    pub async fn read_top(&self, r: &TopRequest) -> Result<Top, QueryError> {
        self.bounded("top", async {
            let scope = self.resolve_scope(&r.scope).await?;
            self.top(&TopQuery {
                scope,
                limit: r.limit,
            })
            .await
        })
        .await
    }

    /// `GET /api/v1/events`.
    pub async fn read_events(&self, r: &EventsRequest) -> Result<EventsPage, QueryError> {
        self.bounded("events", async {
            let limit = self.events_limit(r.limit)?;
            let scope = self.resolve_scope(&r.scope).await?;
            self.events(&EventsQuery {
                scope,
                limit,
                cursor: r.cursor.clone(),
            })
            .await
        })
        .await
    }

    /// `GET /api/v1/diff`.
    pub async fn read_diff(&self, r: &DiffRequest) -> Result<TreeAnswer<Diff, Diff>, QueryError> {
        self.bounded("diff", async {
            let max_nodes = self.max_nodes(r.max_nodes)?;
            let (baseline, comparison) = self.diff_scopes(r).await?;
            if r.output == TreeOutput::Pprof {
                let query = PprofQuery::Diff { baseline, comparison };
                return Ok(TreeAnswer::Pprof(self.pprof(&query).await?));
            }
            let diff = self
                .diff(&DiffQuery::new(baseline, comparison, max_nodes))
                .await?;
            Ok(match r.output {
                TreeOutput::Json => TreeAnswer::Json(diff),
                _ => TreeAnswer::Tree(diff),
            })
        })
        .await
    }

    /// `(baseline, comparison)`.
    async fn diff_scopes(&self, r: &DiffRequest) -> Result<(Scope, Scope), QueryError> {
        let side_range = |side: &str, range: &RangeRequest| {
            self.resolve_range(range).map_err(|e| match e {
                QueryError::BadRequest(message) => QueryError::BadRequest(format!("{side}: {message}")),
                e => e,
            })
        };
        let baseline_range = side_range("baseline", &r.baseline.range)?;
        let comparison_range = side_range("comparison", &r.comparison.range)?;
        let baseline_selector = selector("baseline_selector", r.baseline.selector.as_deref())?;
        let comparison_selector = selector("comparison_selector", r.comparison.selector.as_deref())?;
        let profile_type = self
            .known_profile_type(&r.tenant, r.profile_type.as_deref())
            .await?;
        let baseline = Scope {
            selector: baseline_selector,
            ..Scope::new(&r.tenant, profile_type.clone(), baseline_range)
        };
        let comparison = Scope {
            selector: comparison_selector,
            ..Scope::new(&r.tenant, profile_type, comparison_range)
        };
        Ok((baseline, comparison))
    }

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

/// The smallest whole number of seconds, at least one, that divides `range` into at most
/// [`DEFAULT_BUCKETS`] buckets.
pub fn default_step_nanos(range: TimeRange) -> i64 {
    let span = (range.end as i128 - range.start as i128).max(0) as u128;
    let per_bucket = span.div_ceil(DEFAULT_BUCKETS as u128);
    let secs = per_bucket.div_ceil(NANOS_PER_SEC as u128).max(1);
    i64::try_from(secs * NANOS_PER_SEC as u128).unwrap_or(i64::MAX / NANOS_PER_SEC * NANOS_PER_SEC)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_step_keeps_at_most_1000_buckets_in_whole_seconds() {
        let hour = TimeRange {
            start: 0,
            end: 3600 * NANOS_PER_SEC,
        };
        // 3600 s / 1000 = 3.6 s, rounded up to whole seconds.
        assert_eq!(default_step_nanos(hour), 4 * NANOS_PER_SEC);
        let exact = TimeRange {
            start: 5,
            end: 5 + 2000 * NANOS_PER_SEC,
        };
        assert_eq!(default_step_nanos(exact), 2 * NANOS_PER_SEC);
        let short = TimeRange { start: 0, end: 10 };
        assert_eq!(default_step_nanos(short), NANOS_PER_SEC);
        let all = TimeRange {
            start: i64::MIN,
            end: i64::MAX,
        };
        let step = default_step_nanos(all);
        assert!(step > 0 && step % NANOS_PER_SEC == 0);
        assert!((all.end as i128 - all.start as i128) / step as i128 <= 1000);
    }
}
