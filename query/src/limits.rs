//! Guard rails: how much one query may ask for. Every limit is configurable; exceeding one
//! is the caller's to fix and names the limit.

use std::time::Duration;

use crate::error::QueryError;

#[derive(Clone, Debug)]
pub struct QueryLimits {
    /// Longest `[from, to)` a query may span.
    pub max_range: Duration,
    /// Most series one query may select (after selector matching).
    pub max_series: usize,
    /// Largest `max_nodes` a client may ask for.
    pub max_nodes: usize,
    /// Most groups a `group_by` may produce.
    pub max_groups: usize,
    /// Most points per series of a time series (`range / step`).
    pub max_points: usize,
    /// Largest page of events.
    pub max_events: usize,
    /// Most trace, span and profile ids in one query.
    pub max_ids: usize,
    /// Longest a query may run before it is cancelled.
    pub timeout: Duration,
}

impl Default for QueryLimits {
    fn default() -> Self {
        QueryLimits {
            max_range: Duration::from_secs(31 * 24 * 3600),
            max_series: 100_000,
            max_nodes: 65_536,
            max_groups: 1_000,
            max_points: 11_000,
            max_events: 10_000,
            max_ids: 1_000,
            timeout: Duration::from_secs(60),
        }
    }
}

/// The error for a request over `limit` (the name of the [`QueryLimits`] field).
pub(crate) fn exceeded(limit: &'static str, message: impl Into<String>) -> QueryError {
    QueryError::LimitExceeded {
        limit,
        message: message.into(),
    }
}

/// A size the caller asked for (`param`), checked against the limit `limit` of at most
/// `max`: 0 asks for `default`, capped at `max`.
pub(crate) fn size(
    limit: &'static str,
    param: &str,
    asked: usize,
    default: usize,
    max: usize,
) -> Result<usize, QueryError> {
    match asked {
        0 => Ok(default.min(max)),
        n if n > max => Err(exceeded(limit, format!("{param} {n} is more than {max} allowed"))),
        n => Ok(n),
    }
}
