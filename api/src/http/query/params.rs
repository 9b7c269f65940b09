//! Query parameters of the query API, parsed in one place.
//!
//! Each `*Params` struct is both what a handler reads from the query string (raw, as sent)
//! and, through `IntoParams`, what the OpenAPI document says it reads; a unit test checks
//! that the names read and the names documented are the same. Converting the raw values
//! (validation, defaults, limits) is separate, so every name is read before any error.

use std::collections::BTreeSet;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use serde::Serialize;
use stackhouse_query::{Aggregation, GroupKey, QueryEngine, Scope, parse_group_by, parse_selector};
use stackhouse_storage::model::{ProfileType, TimeRange};
use utoipa::{IntoParams, ToSchema};

use crate::error::ApiError;
use crate::http::AppState;
use crate::time_param::{now_nanos, parse_range};

/// Functions listed by `top` without `limit`.
pub const DEFAULT_TOP_LIMIT: usize = 100;
/// Buckets a time series gets at most when no `step` is given.
const DEFAULT_BUCKETS: i64 = 1000;
const NANOS_PER_SEC: i64 = 1_000_000_000;

/// The query string as name/value pairs in order; a name may repeat.
#[derive(Debug, Default)]
pub struct QueryMap {
    pairs: Vec<(String, String)>,
    /// Names looked up, so tests can compare them with the documented parameters.
    #[cfg(test)]
    read: std::sync::Mutex<BTreeSet<String>>,
}

impl QueryMap {
    pub fn parse(raw: Option<&str>) -> QueryMap {
        QueryMap {
            pairs: url::form_urlencoded::parse(raw.unwrap_or("").as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
            #[cfg(test)]
            read: Default::default(),
        }
    }

    fn values<'a>(&'a self, name: &str) -> impl Iterator<Item = &'a str> {
        #[cfg(test)]
        self.read.lock().unwrap().insert(name.to_string());
        self.pairs
            .iter()
            .filter(move |(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// A parameter given at most once; an empty value counts as absent.
    pub fn one(&self, name: &str) -> Result<Option<String>, ApiError> {
        let mut values = self.values(name).filter(|v| !v.trim().is_empty());
        let first = values.next();
        if values.next().is_some() {
            return Err(ApiError::invalid(format!(
                "parameter {name} given more than once"
            )));
        }
        Ok(first.map(str::to_string))
    }

    /// A list parameter: every occurrence, each split at commas, empty items dropped.
    pub fn list(&self, name: &str) -> Vec<String> {
        self.values(name)
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
            .collect()
    }

    #[cfg(test)]
    pub fn names_read(&self) -> BTreeSet<String> {
        self.read.lock().unwrap().clone()
    }
}

impl<S: Send + Sync> FromRequestParts<S> for QueryMap {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(QueryMap::parse(parts.uri.query()))
    }
}

/// Output format of a tree (flamegraph, profile, diff).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// The tree as JSON.
    #[default]
    Json,
    /// Folded stacks, `a;b;c VALUE` per line (a diff: `a;b;c BASELINE COMPARISON`).
    Folded,
    /// Pyroscope's flamebearer JSON.
    Flamebearer,
    /// A gzipped pprof profile, untruncated.
    Pprof,
}

impl Format {
    fn parse(value: Option<&str>) -> Result<Format, ApiError> {
        Ok(match value {
            None | Some("json") => Format::Json,
            Some("folded") => Format::Folded,
            Some("flamebearer") => Format::Flamebearer,
            Some("pprof") => Format::Pprof,
            Some(other) => {
                return Err(ApiError::invalid(format!(
                    "invalid format {other:?}: expected json, folded, flamebearer or pprof"
                )));
            }
        })
    }
}

/// The tenant header, documented on every query endpoint.
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Header)]
pub struct TenantHeader {
    /// Tenant; `anonymous` when absent. 1 to 150 characters of `[A-Za-z0-9_.-]`.
    #[param(rename = "X-Scope-OrgID")]
    pub tenant: Option<String>,
}

pub use crate::tenant::from_headers as tenant_of;

/// A time range alone.
#[derive(Debug, Default, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RangeParams {
    /// Start (inclusive): unix nanoseconds, RFC 3339, `now` or `now-<duration>` such as
    /// `now-1h`. Default: one hour before `to`.
    pub from: Option<String>,
    /// End (exclusive), in the same forms. Default: now.
    pub to: Option<String>,
}

impl RangeParams {
    pub fn from_query(q: &QueryMap) -> Result<RangeParams, ApiError> {
        Ok(RangeParams {
            from: q.one("from")?,
            to: q.one("to")?,
        })
    }

    pub fn range(&self) -> Result<TimeRange, ApiError> {
        range(self.from.as_deref(), self.to.as_deref())
    }
}

fn range(from: Option<&str>, to: Option<&str>) -> Result<TimeRange, ApiError> {
    parse_range(from, to, now_nanos()).map_err(ApiError::invalid)
}

/// What a query selects: profile type, series, time range, span and profile ids.
#[derive(Debug, Default, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ScopeParams {
    /// `sample_type:sample_unit:period_type:period_unit`, one of `/api/v1/profile-types`.
    #[param(required = true, value_type = String, example = "samples:count:cpu:nanoseconds")]
    pub profile_type: Option<String>,
    /// Series and sample attribute matchers: `{key="v", key!="v", key=~"re", key!~"re"}`.
    /// Default `{}`, everything.
    #[param(example = "{service.name=\"api\"}")]
    pub selector: Option<String>,
    /// Start (inclusive): unix nanoseconds, RFC 3339, `now` or `now-<duration>` such as
    /// `now-1h`. Default: one hour before `to`.
    pub from: Option<String>,
    /// End (exclusive), in the same forms. Default: now.
    pub to: Option<String>,
    /// Only samples linked to one of these spans (16 hex characters each); comma-separated
    /// and/or repeated.
    #[param(value_type = Option<Vec<String>>, style = Form, explode)]
    pub span_id: Vec<String>,
    /// Only samples of one of these profiles (32 hex characters each); comma-separated
    /// and/or repeated.
    #[param(value_type = Option<Vec<String>>, style = Form, explode)]
    pub profile_id: Vec<String>,
}

impl ScopeParams {
    pub fn from_query(q: &QueryMap) -> Result<ScopeParams, ApiError> {
        let profile_type = q.one("profile_type");
        let selector = q.one("selector");
        let from = q.one("from");
        let to = q.one("to");
        Ok(ScopeParams {
            profile_type: profile_type?,
            selector: selector?,
            from: from?,
            to: to?,
            span_id: q.list("span_id"),
            profile_id: q.list("profile_id"),
        })
    }

    /// The scope these parameters select, plus the given trace ids. The profile type must
    /// be one the tenant stored.
    pub async fn scope(
        &self,
        state: &AppState,
        tenant: &str,
        trace_ids: Vec<[u8; 16]>,
    ) -> Result<Scope, ApiError> {
        let range = range(self.from.as_deref(), self.to.as_deref())?;
        let selector = selector("selector", self.selector.as_deref())?;
        let span_ids = hex_ids::<8>("span_id", &self.span_id)?;
        let profile_ids = hex_ids::<16>("profile_id", &self.profile_id)?;
        let profile_type = known_profile_type(state, tenant, self.profile_type.as_deref()).await?;
        Ok(Scope {
            selector,
            trace_ids,
            span_ids,
            profile_ids,
            ..Scope::new(tenant, profile_type, range)
        })
    }
}

/// The trace filter, separate from [`ScopeParams`] because `/traces/{trace_id}/…` takes
/// the trace from its path.
#[derive(Debug, Default, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TraceIdParams {
    /// Only samples linked to one of these traces (32 hex characters each);
    /// comma-separated and/or repeated.
    #[param(value_type = Option<Vec<String>>, style = Form, explode)]
    pub trace_id: Vec<String>,
}

impl TraceIdParams {
    pub fn from_query(q: &QueryMap) -> Result<TraceIdParams, ApiError> {
        Ok(TraceIdParams {
            trace_id: q.list("trace_id"),
        })
    }

    pub fn trace_ids(&self) -> Result<Vec<[u8; 16]>, ApiError> {
        hex_ids::<16>("trace_id", &self.trace_id)
    }
}

/// The profile type of `/profiles/{profile_id}`, optional there.
#[derive(Debug, Default, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ProfileTypeParams {
    /// Which profile type of the profile to show, when it was sent with several.
    #[param(example = "samples:count:cpu:nanoseconds")]
    pub profile_type: Option<String>,
}

impl ProfileTypeParams {
    pub fn from_query(q: &QueryMap) -> Result<ProfileTypeParams, ApiError> {
        Ok(ProfileTypeParams {
            profile_type: q.one("profile_type")?,
        })
    }

    pub fn profile_type(&self) -> Result<Option<ProfileType>, ApiError> {
        self.profile_type.as_deref().map(parse_profile_type).transpose()
    }
}

/// How a tree is grouped.
#[derive(Debug, Default, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct GroupByParams {
    /// Comma-separated keys (labels, sample attributes, or `trace_id`, `span_id`,
    /// `profile_id`); puts one level of `key=value` nodes under the root.
    #[param(example = "thread.name")]
    pub group_by: Option<String>,
}

impl GroupByParams {
    pub fn from_query(q: &QueryMap) -> Result<GroupByParams, ApiError> {
        Ok(GroupByParams {
            group_by: q.one("group_by")?,
        })
    }

    pub fn group_by(&self) -> Result<Vec<GroupKey>, ApiError> {
        group_by(self.group_by.as_deref())
    }
}

fn group_by(value: Option<&str>) -> Result<Vec<GroupKey>, ApiError> {
    parse_group_by(value.unwrap_or("")).map_err(ApiError::from)
}

/// Size and format of a tree.
#[derive(Debug, Default, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TreeParams {
    /// Node budget: the smallest nodes fold into `other` nodes, totals stay exact.
    /// Default 8192; at most the server's `--query-max-nodes`. Not applied to pprof.
    #[param(value_type = Option<u64>, minimum = 1)]
    pub max_nodes: Option<String>,
    /// Response format. Default `json`.
    #[param(value_type = Option<Format>)]
    pub format: Option<String>,
}

impl TreeParams {
    pub fn from_query(q: &QueryMap) -> Result<TreeParams, ApiError> {
        let max_nodes = q.one("max_nodes");
        let format = q.one("format");
        Ok(TreeParams {
            max_nodes: max_nodes?,
            format: format?,
        })
    }

    /// The node budget asked for, checked by the engine against `--query-max-nodes` before
    /// anything else is looked at.
    pub fn max_nodes(&self, engine: &QueryEngine) -> Result<usize, ApiError> {
        Ok(engine.max_nodes(self.asked_max_nodes()?)?)
    }

    /// `max_nodes` as given; 0 when absent.
    fn asked_max_nodes(&self) -> Result<usize, ApiError> {
        self.max_nodes
            .as_deref()
            .map_or(Ok(0), |value| positive("max_nodes", value))
    }

    pub fn format(&self) -> Result<Format, ApiError> {
        Format::parse(self.format.as_deref())
    }
}

/// Bucketing of a time series.
#[derive(Debug, Default, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TimeseriesParams {
    /// Bucket width: seconds (`15`, `0.5`) or a duration (`30s`, `1m`). Default: the
    /// smallest whole number of seconds giving at most 1000 buckets.
    #[param(example = "15")]
    pub step: Option<String>,
    /// Comma-separated keys; one series per distinct combination of their values.
    #[param(example = "thread.name")]
    pub group_by: Option<String>,
    /// `sum` (default): the sum of the values in a bucket; `avg`: that sum divided by the
    /// number of (series, timestamp) points in the bucket.
    #[param(value_type = Option<Aggregation>)]
    pub aggregation: Option<String>,
}

impl TimeseriesParams {
    pub fn from_query(q: &QueryMap) -> Result<TimeseriesParams, ApiError> {
        let step = q.one("step");
        let group_by = q.one("group_by");
        let aggregation = q.one("aggregation");
        Ok(TimeseriesParams {
            step: step?,
            group_by: group_by?,
            aggregation: aggregation?,
        })
    }

    /// The step in nanoseconds, when given; without one, see [`default_step_nanos`].
    pub fn step_nanos(&self) -> Result<Option<i64>, ApiError> {
        self.step.as_deref().map(parse_step).transpose()
    }

    pub fn group_by(&self) -> Result<Vec<GroupKey>, ApiError> {
        group_by(self.group_by.as_deref())
    }

    pub fn aggregation(&self) -> Result<Aggregation, ApiError> {
        match self.aggregation.as_deref() {
            None => Ok(Aggregation::Sum),
            Some(value) => Aggregation::parse(value).ok_or_else(|| {
                ApiError::invalid(format!("invalid aggregation {value:?}: expected sum or avg"))
            }),
        }
    }
}

/// `step`: a number of seconds or a humantime duration; must be positive.
pub fn parse_step(value: &str) -> Result<i64, ApiError> {
    let invalid = || {
        ApiError::invalid(format!(
            "invalid step {value:?}: expected a positive number of seconds (15, 0.5) or a duration (30s, 1m)"
        ))
    };
    let nanos = if let Ok(secs) = value.parse::<f64>() {
        if !secs.is_finite() {
            return Err(invalid());
        }
        let nanos = (secs * NANOS_PER_SEC as f64).round();
        // Comparing as f64 keeps the cast below in range.
        if nanos >= i64::MAX as f64 {
            return Err(invalid());
        }
        nanos as i64
    } else {
        let d = humantime::parse_duration(value).map_err(|_| invalid())?;
        i64::try_from(d.as_nanos()).map_err(|_| invalid())?
    };
    if nanos <= 0 {
        return Err(invalid());
    }
    Ok(nanos)
}

/// The smallest whole number of seconds, at least one, that divides `range` into at most
/// [`DEFAULT_BUCKETS`] buckets.
pub fn default_step_nanos(range: TimeRange) -> i64 {
    let span = (range.end as i128 - range.start as i128).max(0) as u128;
    let per_bucket = span.div_ceil(DEFAULT_BUCKETS as u128);
    let secs = per_bucket.div_ceil(NANOS_PER_SEC as u128).max(1);
    i64::try_from(secs * NANOS_PER_SEC as u128).unwrap_or(i64::MAX / NANOS_PER_SEC * NANOS_PER_SEC)
}

/// Size of the top table.
#[derive(Debug, Default, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TopParams {
    /// Most functions returned. Default 100.
    #[param(value_type = Option<u64>, minimum = 1)]
    pub limit: Option<String>,
}

impl TopParams {
    pub fn from_query(q: &QueryMap) -> Result<TopParams, ApiError> {
        Ok(TopParams {
            limit: q.one("limit")?,
        })
    }

    pub fn limit(&self) -> Result<usize, ApiError> {
        match self.limit.as_deref() {
            None => Ok(DEFAULT_TOP_LIMIT),
            Some(value) => positive("limit", value),
        }
    }
}

/// Paging of events.
#[derive(Debug, Default, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventsParams {
    /// Page size. Default 1000; at most the server's `--query-max-events`.
    #[param(value_type = Option<u64>, minimum = 1)]
    pub limit: Option<String>,
    /// `next_cursor` of the previous page; absent for the first page.
    pub cursor: Option<String>,
}

impl EventsParams {
    pub fn from_query(q: &QueryMap) -> Result<EventsParams, ApiError> {
        let limit = q.one("limit");
        let cursor = q.one("cursor");
        Ok(EventsParams {
            limit: limit?,
            cursor: cursor?,
        })
    }

    /// The page size asked for, checked by the engine against `--query-max-events` before
    /// anything else is looked at.
    pub fn limit(&self, engine: &QueryEngine) -> Result<usize, ApiError> {
        Ok(engine.events_limit(self.asked_limit()?)?)
    }

    /// `limit` as given; 0 when absent.
    fn asked_limit(&self) -> Result<usize, ApiError> {
        self.limit
            .as_deref()
            .map_or(Ok(0), |value| positive("limit", value))
    }
}

/// The two sides of a diff, of one profile type.
#[derive(Debug, Default, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DiffParams {
    /// `sample_type:sample_unit:period_type:period_unit` of both sides.
    #[param(required = true, value_type = String, example = "samples:count:cpu:nanoseconds")]
    pub profile_type: Option<String>,
    /// Selector of the baseline. Default `{}`.
    pub baseline_selector: Option<String>,
    /// Start of the baseline (same forms as `from`). Default: one hour before
    /// `baseline_to`.
    pub baseline_from: Option<String>,
    /// End of the baseline. Default: now.
    pub baseline_to: Option<String>,
    /// Selector of the comparison. Default `{}`.
    pub comparison_selector: Option<String>,
    /// Start of the comparison. Default: one hour before `comparison_to`.
    pub comparison_from: Option<String>,
    /// End of the comparison. Default: now.
    pub comparison_to: Option<String>,
}

impl DiffParams {
    pub fn from_query(q: &QueryMap) -> Result<DiffParams, ApiError> {
        let profile_type = q.one("profile_type");
        let baseline_selector = q.one("baseline_selector");
        let baseline_from = q.one("baseline_from");
        let baseline_to = q.one("baseline_to");
        let comparison_selector = q.one("comparison_selector");
        let comparison_from = q.one("comparison_from");
        let comparison_to = q.one("comparison_to");
        Ok(DiffParams {
            profile_type: profile_type?,
            baseline_selector: baseline_selector?,
            baseline_from: baseline_from?,
            baseline_to: baseline_to?,
            comparison_selector: comparison_selector?,
            comparison_from: comparison_from?,
            comparison_to: comparison_to?,
        })
    }

    /// `(baseline, comparison)`.
    pub async fn scopes(&self, state: &AppState, tenant: &str) -> Result<(Scope, Scope), ApiError> {
        let baseline_range = range(self.baseline_from.as_deref(), self.baseline_to.as_deref())
            .map_err(|e| ApiError::invalid(format!("baseline: {}", e.message)))?;
        let comparison_range = range(self.comparison_from.as_deref(), self.comparison_to.as_deref())
            .map_err(|e| ApiError::invalid(format!("comparison: {}", e.message)))?;
        let baseline_selector = selector("baseline_selector", self.baseline_selector.as_deref())?;
        let comparison_selector = selector("comparison_selector", self.comparison_selector.as_deref())?;
        let profile_type = known_profile_type(state, tenant, self.profile_type.as_deref()).await?;
        let baseline = Scope {
            selector: baseline_selector,
            ..Scope::new(tenant, profile_type.clone(), baseline_range)
        };
        let comparison = Scope {
            selector: comparison_selector,
            ..Scope::new(tenant, profile_type, comparison_range)
        };
        Ok((baseline, comparison))
    }
}

fn selector(name: &str, value: Option<&str>) -> Result<stackhouse_query::Selector, ApiError> {
    parse_selector(value.unwrap_or("")).map_err(|e| ApiError::invalid(format!("invalid {name}: {e}")))
}

fn positive(name: &str, value: &str) -> Result<usize, ApiError> {
    value
        .trim()
        .parse::<usize>()
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| ApiError::invalid(format!("invalid {name} {value:?}: expected a positive integer")))
}

fn parse_profile_type(value: &str) -> Result<ProfileType, ApiError> {
    ProfileType::parse(value).ok_or_else(|| {
        ApiError::invalid(format!(
            "invalid profile_type {value:?}: expected sample_type:sample_unit:period_type:period_unit"
        ))
    })
}

/// A required profile type the tenant has stored; otherwise 400 listing the stored ones.
async fn known_profile_type(
    state: &AppState,
    tenant: &str,
    value: Option<&str>,
) -> Result<ProfileType, ApiError> {
    let value = value
        .ok_or_else(|| ApiError::invalid("missing parameter profile_type (see /api/v1/profile-types)"))?;
    let profile_type = parse_profile_type(value)?;
    if let Err(stored) = state.engine.stored_profile_type(tenant, &profile_type).await? {
        let ids: Vec<String> = stored.iter().map(ProfileType::id).collect();
        return Err(ApiError::invalid(format!(
            "unknown profile_type {value:?}; stored types: {}",
            if ids.is_empty() {
                "none".to_string()
            } else {
                ids.join(", ")
            }
        )));
    }
    Ok(profile_type)
}

/// Ids of `N` bytes written as `2N` hex characters; duplicates dropped, order kept.
pub fn hex_ids<const N: usize>(name: &str, values: &[String]) -> Result<Vec<[u8; N]>, ApiError> {
    let mut seen = BTreeSet::new();
    let mut ids = Vec::new();
    for value in values {
        let id = hex_id::<N>(name, value)?;
        if seen.insert(id) {
            ids.push(id);
        }
    }
    Ok(ids)
}

pub fn hex_id<const N: usize>(name: &str, value: &str) -> Result<[u8; N], ApiError> {
    let mut id = [0u8; N];
    hex::decode_to_slice(value, &mut id).map_err(|_| {
        ApiError::invalid(format!(
            "invalid {name} {value:?}: expected {} hex characters",
            2 * N
        ))
    })?;
    Ok(id)
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;
    use utoipa::openapi::path::ParameterIn;

    use super::*;

    fn documented<P: IntoParams>() -> BTreeSet<String> {
        P::into_params(|| Some(ParameterIn::Query))
            .into_iter()
            .map(|p| p.name)
            .collect()
    }

    /// Every parameter a handler reads is documented, and nothing else is.
    #[test]
    fn names_read_are_the_names_documented() {
        fn check<P: IntoParams>(read: impl Fn(&QueryMap) -> Result<P, ApiError>) {
            let q = QueryMap::parse(None);
            let _ = read(&q);
            assert_eq!(
                q.names_read(),
                documented::<P>(),
                "{}",
                std::any::type_name::<P>()
            );
        }
        check(RangeParams::from_query);
        check(ScopeParams::from_query);
        check(TraceIdParams::from_query);
        check(ProfileTypeParams::from_query);
        check(GroupByParams::from_query);
        check(TreeParams::from_query);
        check(TimeseriesParams::from_query);
        check(TopParams::from_query);
        check(EventsParams::from_query);
        check(DiffParams::from_query);
    }

    #[test]
    fn lists_are_comma_separated_and_repeated() {
        let q = QueryMap::parse(Some("trace_id=a,b&x=1&trace_id=c&trace_id=&trace_id=d,%20e,"));
        assert_eq!(q.list("trace_id"), ["a", "b", "c", "d", "e"]);
        assert_eq!(q.one("x").unwrap().as_deref(), Some("1"));
        assert_eq!(q.one("missing").unwrap(), None);
        let e = QueryMap::parse(Some("x=1&x=2")).one("x").unwrap_err();
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
        assert!(e.message.contains("x given more than once"), "{}", e.message);
        // An empty value is the same as none, as HTML forms send unset fields.
        assert_eq!(
            QueryMap::parse(Some("x=&x=3")).one("x").unwrap().as_deref(),
            Some("3")
        );
    }

    #[test]
    fn ids_are_hex_of_the_right_length() {
        let trace = "0102030405060708090a0b0c0d0e0f10";
        let ids = hex_ids::<16>("trace_id", &[trace.into(), trace.to_uppercase(), "ff".repeat(16)]).unwrap();
        assert_eq!(ids.len(), 2, "duplicates (in any case) are dropped");
        assert_eq!(ids[0][0], 1);
        assert_eq!(ids[0][15], 16);
        assert_eq!(ids[1], [0xff; 16]);
        for bad in [
            "0102",
            "zz02030405060708090a0b0c0d0e0f10",
            "0102030405060708090a0b0c0d0e0f1011",
        ] {
            let e = hex_ids::<16>("trace_id", &[bad.to_string()]).unwrap_err();
            assert_eq!(e.status(), StatusCode::BAD_REQUEST);
            assert!(
                e.message.contains("trace_id") && e.message.contains(bad),
                "{}",
                e.message
            );
            assert!(e.message.contains("32 hex"), "{}", e.message);
        }
        let e = hex_ids::<8>("span_id", &["0102030405060708aa".to_string()]).unwrap_err();
        assert!(
            e.message.contains("span_id") && e.message.contains("16 hex"),
            "{}",
            e.message
        );
    }

    #[test]
    fn steps() {
        assert_eq!(parse_step("15").unwrap(), 15 * NANOS_PER_SEC);
        assert_eq!(parse_step("0.5").unwrap(), NANOS_PER_SEC / 2);
        assert_eq!(parse_step("30s").unwrap(), 30 * NANOS_PER_SEC);
        assert_eq!(parse_step("1m").unwrap(), 60 * NANOS_PER_SEC);
        assert_eq!(parse_step("250ms").unwrap(), NANOS_PER_SEC / 4);
        for bad in ["0", "-1", "0s", "NaN", "inf", "1e300", "soon", "", "0.0000000001"] {
            let e = parse_step(bad).unwrap_err();
            assert_eq!(e.status(), StatusCode::BAD_REQUEST, "{bad}");
            assert!(e.message.contains("step"), "{}", e.message);
        }
    }

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

    #[test]
    fn max_nodes_and_limits() {
        let tree = |v: &str| TreeParams {
            max_nodes: Some(v.to_string()),
            format: None,
        };
        assert_eq!(TreeParams::default().asked_max_nodes().unwrap(), 0);
        assert_eq!(tree("101").asked_max_nodes().unwrap(), 101);
        for bad in ["0", "-3", "many"] {
            assert_eq!(
                tree(bad).asked_max_nodes().unwrap_err().status(),
                StatusCode::BAD_REQUEST
            );
        }

        let events = |v: Option<&str>| EventsParams {
            limit: v.map(str::to_string),
            cursor: None,
        };
        assert_eq!(events(None).asked_limit().unwrap(), 0);
        assert_eq!(events(Some("51")).asked_limit().unwrap(), 51);
        assert_eq!(
            events(Some("0")).asked_limit().unwrap_err().status(),
            StatusCode::BAD_REQUEST
        );

        let top = |v: &str| TopParams {
            limit: Some(v.to_string()),
        };
        assert_eq!(TopParams::default().limit().unwrap(), 100);
        assert_eq!(top("7").limit().unwrap(), 7);
        assert_eq!(top("0").limit().unwrap_err().status(), StatusCode::BAD_REQUEST);
    }

    #[test]
    fn formats_and_aggregations() {
        assert_eq!(Format::parse(None).unwrap(), Format::Json);
        for (s, f) in [
            ("json", Format::Json),
            ("folded", Format::Folded),
            ("flamebearer", Format::Flamebearer),
            ("pprof", Format::Pprof),
        ] {
            assert_eq!(Format::parse(Some(s)).unwrap(), f);
            assert_eq!(
                serde_json::to_value(f).unwrap(),
                s,
                "the documented name is the parsed one"
            );
        }
        let e = Format::parse(Some("svg")).unwrap_err();
        assert!(e.message.contains("svg") && e.message.contains("format"));

        let agg = |v: Option<&str>| TimeseriesParams {
            aggregation: v.map(str::to_string),
            ..TimeseriesParams::default()
        };
        assert_eq!(agg(None).aggregation().unwrap(), Aggregation::Sum);
        assert_eq!(agg(Some("avg")).aggregation().unwrap(), Aggregation::Avg);
        assert_eq!(
            agg(Some("max")).aggregation().unwrap_err().status(),
            StatusCode::BAD_REQUEST
        );
        let keys = TimeseriesParams {
            group_by: Some("thread.name,span_id".into()),
            ..TimeseriesParams::default()
        };
        assert_eq!(
            keys.group_by().unwrap(),
            vec![GroupKey::Label("thread.name".into()), GroupKey::SpanId]
        );
        let e = GroupByParams {
            group_by: Some("a,a".into()),
        }
        .group_by()
        .unwrap_err();
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
    }
}
