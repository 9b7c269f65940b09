//! The scope of a query API read as sent (text), and how the engine resolves it: the range
//! with its defaults from the engine's clock, the selector, the ids, and a profile type the
//! tenant stored; a catalog listing's scope is its tenant and range.

use std::sync::Arc;

use stackhouse_storage::model::{ProfileType, TimeRange};

use super::{hex_ids, parse_range};
use crate::engine::QueryEngine;
use crate::engine::scope::Scope;
use crate::error::QueryError;
use crate::frames::FrameRequest;
use crate::selector::{Selector, parse_selector};

/// What a read selects, as the query API's parameters spell it.
#[derive(Clone, Debug, Default)]
pub struct ScopeRequest {
    pub tenant: String,
    /// `sample_type:sample_unit:period_type:period_unit`; required.
    pub profile_type: Option<String>,
    /// `{key="v", …}`; everything when absent.
    pub selector: Option<String>,
    pub range: RangeRequest,
    /// Hex, 32 characters each.
    pub trace_ids: Vec<String>,
    /// Hex, 16 characters each.
    pub span_ids: Vec<String>,
    /// Hex, 32 characters each.
    pub profile_ids: Vec<String>,
    /// Frame rules and granularity.
    pub frames: FrameRequest,
}

/// `from` and `to` as sent: unix nanoseconds, RFC 3339, `now` or `now-<duration>`; `to`
/// defaults to now and `from` to an hour before `to`.
#[derive(Clone, Debug, Default)]
pub struct RangeRequest {
    pub from: Option<String>,
    pub to: Option<String>,
}

/// A catalog listing over a range.
#[derive(Clone, Debug)]
pub struct ListingRequest {
    pub tenant: String,
    pub range: RangeRequest,
}

impl QueryEngine {
    /// The range a request names, "now" read from the engine's clock.
    pub(crate) fn resolve_range(&self, r: &RangeRequest) -> Result<TimeRange, QueryError> {
        parse_range(r.from.as_deref(), r.to.as_deref(), self.now_nanos()).map_err(QueryError::BadRequest)
    }

    /// The scope a request names. Its profile type must be one the tenant stored.
    pub(crate) async fn resolve_scope(&self, r: &ScopeRequest) -> Result<Scope, QueryError> {
        let trace_ids = hex_ids::<16>("trace_id", &r.trace_ids)?;
        let range = self.resolve_range(&r.range)?;
        let selector = selector("selector", r.selector.as_deref())?;
        let span_ids = hex_ids::<8>("span_id", &r.span_ids)?;
        let profile_ids = hex_ids::<16>("profile_id", &r.profile_ids)?;
        let frames = Arc::new(r.frames.resolve()?);
        let profile_type = self
            .known_profile_type(&r.tenant, r.profile_type.as_deref())
            .await?;
        Ok(Scope {
            selector,
            trace_ids,
            span_ids,
            profile_ids,
            frames,
            ..Scope::new(&r.tenant, profile_type, range)
        })
    }

    /// A required profile type the tenant has stored; otherwise an error listing the stored
    /// ones.
    pub(crate) async fn known_profile_type(
        &self,
        tenant: &str,
        value: Option<&str>,
    ) -> Result<ProfileType, QueryError> {
        let value = value.ok_or_else(|| {
            QueryError::bad_request("missing parameter profile_type (see /api/v1/profile-types)")
        })?;
        let profile_type = parse_profile_type(value)?;
        if let Err(stored) = self.stored_profile_type(tenant, &profile_type).await? {
            let ids: Vec<String> = stored.iter().map(ProfileType::id).collect();
            return Err(QueryError::bad_request(format!(
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
}

/// A selector parameter; `name` says which one in the error.
pub(crate) fn selector(name: &str, value: Option<&str>) -> Result<Selector, QueryError> {
    parse_selector(value.unwrap_or("")).map_err(|e| QueryError::bad_request(format!("invalid {name}: {e}")))
}

/// `sample_type:sample_unit:period_type:period_unit`.
pub fn parse_profile_type(value: &str) -> Result<ProfileType, QueryError> {
    ProfileType::parse(value).ok_or_else(|| {
        QueryError::bad_request(format!(
            "invalid profile_type {value:?}: expected sample_type:sample_unit:period_type:period_unit"
        ))
    })
}
