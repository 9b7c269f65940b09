//! Deletion requests: the samples of the series a selector matches in a time range, hidden
//! from every read from the moment their row is committed, cancellable for a while, then
//! purged from the stored objects by compaction.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::CatalogResult;
use super::backend::{SqlCatalog, on_either};
use crate::model::{Series, TimeRange};
use crate::selector::{SelectorError, parse_selector};

/// Where a deletion request stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeleteState {
    /// Hidden from reads; may still be cancelled until its cancel period ends.
    Pending,
    /// Hidden, past its cancel period: compaction is rewriting the objects that hold it.
    Purging,
    /// No stored object holds a matched sample any more.
    Purged,
    /// Cancelled during its period: nothing is hidden any more.
    Cancelled,
}

impl DeleteState {
    pub const ALL: [DeleteState; 4] = [
        DeleteState::Pending,
        DeleteState::Purging,
        DeleteState::Purged,
        DeleteState::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DeleteState::Pending => "pending",
            DeleteState::Purging => "purging",
            DeleteState::Purged => "purged",
            DeleteState::Cancelled => "cancelled",
        }
    }

    fn parse(s: &str) -> DeleteState {
        // Rows are only written through `as_str`; anything else reads as hiding data, the
        // safe side of a deletion.
        DeleteState::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .unwrap_or(DeleteState::Pending)
    }

    /// Whether reads must leave the request's samples out.
    pub fn hides(self) -> bool {
        self != DeleteState::Cancelled
    }
}

/// One deletion request of a tenant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteRequest {
    pub id: String,
    /// The series selector, as written by the requester (checked before it is stored).
    pub selector: String,
    /// The range deleted, `[from, to)`, in Unix nanoseconds.
    pub from_nanos: i64,
    pub to_nanos: i64,
    pub created_at_millis: i64,
    /// Until when it may be cancelled.
    pub cancel_until_millis: i64,
    pub state: DeleteState,
    /// What the request matched when it was made: series, and their samples in the range.
    pub matched_series: i64,
    pub matched_samples: i64,
}

impl DeleteRequest {
    /// The range it deletes.
    pub fn range(&self) -> TimeRange {
        TimeRange {
            start: self.from_nanos,
            end: self.to_nanos,
        }
    }

    /// The ids of those of `series` its selector matches. The selector was checked when the
    /// request was made; one that no longer parses is a row written by something else.
    pub fn matched_ids(&self, series: &[Series]) -> Result<Vec<i64>, SelectorError> {
        let selector = parse_selector(&self.selector)?;
        Ok(series
            .iter()
            .filter(|s| selector.selects(|name| s.labels.get(name).map(String::as_str)))
            .map(|s| s.id)
            .collect())
    }
}

/// What cancelling a request did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cancelled {
    /// Cancelled now; reads show its samples again.
    Now,
    /// It was cancelled before.
    Already,
    /// Its cancel period is over (or its purge has begun): it stays.
    TooLate { cancel_until_millis: i64 },
    /// The tenant has no request of this id.
    Unknown,
}

#[async_trait]
pub trait DeleteRequestCatalog: Send + Sync {
    /// Commits a new request of `tenant`; from then on reads leave its samples out.
    async fn add_delete_request(&self, tenant: &str, request: &DeleteRequest) -> CatalogResult<()>;

    /// The requests of `tenant`, oldest first, cancelled ones included.
    async fn delete_requests(&self, tenant: &str) -> CatalogResult<Vec<DeleteRequest>>;

    /// One request of `tenant`, `None` when it has none of this id.
    async fn delete_request(&self, tenant: &str, id: &str) -> CatalogResult<Option<DeleteRequest>>;

    /// Cancels a pending request whose period has not ended at `now_millis`.
    async fn cancel_delete_request(
        &self,
        tenant: &str,
        id: &str,
        now_millis: i64,
    ) -> CatalogResult<Cancelled>;

    /// Moves a request from state `from` to `to`; false when it was not in `from`.
    async fn move_delete_request(
        &self,
        tenant: &str,
        id: &str,
        from: DeleteState,
        to: DeleteState,
    ) -> CatalogResult<bool>;
}

const ADD: &str = "INSERT INTO delete_requests (tenant, id, selector, from_nanos, to_nanos,
    created_at_millis, cancel_until_millis, state, matched_series, matched_samples)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)";

const LIST: &str = "SELECT id, selector, from_nanos, to_nanos, created_at_millis,
    cancel_until_millis, state, matched_series, matched_samples
    FROM delete_requests WHERE tenant = $1 ORDER BY created_at_millis, id";

const ONE: &str = "SELECT id, selector, from_nanos, to_nanos, created_at_millis,
    cancel_until_millis, state, matched_series, matched_samples
    FROM delete_requests WHERE tenant = $1 AND id = $2";

/// One statement, so a cancel and the compactor's start of the purge cannot both win.
const CANCEL: &str = "UPDATE delete_requests SET state = 'cancelled'
    WHERE tenant = $1 AND id = $2 AND state = 'pending' AND cancel_until_millis > $3 RETURNING id";

const MOVE: &str = "UPDATE delete_requests SET state = $4
    WHERE tenant = $1 AND id = $2 AND state = $3 RETURNING id";

type Row = (String, String, i64, i64, i64, i64, String, i64, i64);

fn request(
    (id, selector, from_nanos, to_nanos, created, cancel_until, state, series, samples): Row,
) -> DeleteRequest {
    DeleteRequest {
        id,
        selector,
        from_nanos,
        to_nanos,
        created_at_millis: created,
        cancel_until_millis: cancel_until,
        state: DeleteState::parse(&state),
        matched_series: series,
        matched_samples: samples,
    }
}

#[async_trait]
impl DeleteRequestCatalog for SqlCatalog {
    async fn add_delete_request(&self, tenant: &str, r: &DeleteRequest) -> CatalogResult<()> {
        on_either!(self, |pool| {
            sqlx::query(ADD)
                .bind(tenant)
                .bind(r.id.as_str())
                .bind(r.selector.as_str())
                .bind(r.from_nanos)
                .bind(r.to_nanos)
                .bind(r.created_at_millis)
                .bind(r.cancel_until_millis)
                .bind(r.state.as_str())
                .bind(r.matched_series)
                .bind(r.matched_samples)
                .execute(pool)
                .await?;
        });
        Ok(())
    }

    async fn delete_requests(&self, tenant: &str) -> CatalogResult<Vec<DeleteRequest>> {
        let rows: Vec<Row> = on_either!(self, |pool| sqlx::query_as(LIST)
            .bind(tenant)
            .fetch_all(pool)
            .await?);
        Ok(rows.into_iter().map(request).collect())
    }

    async fn delete_request(&self, tenant: &str, id: &str) -> CatalogResult<Option<DeleteRequest>> {
        let row: Option<Row> = on_either!(self, |pool| sqlx::query_as(ONE)
            .bind(tenant)
            .bind(id)
            .fetch_optional(pool)
            .await?);
        Ok(row.map(request))
    }

    async fn cancel_delete_request(
        &self,
        tenant: &str,
        id: &str,
        now_millis: i64,
    ) -> CatalogResult<Cancelled> {
        let row: Option<(String,)> = on_either!(self, |pool| sqlx::query_as(CANCEL)
            .bind(tenant)
            .bind(id)
            .bind(now_millis)
            .fetch_optional(pool)
            .await?);
        if row.is_some() {
            return Ok(Cancelled::Now);
        }
        Ok(match self.delete_request(tenant, id).await? {
            None => Cancelled::Unknown,
            Some(r) if r.state == DeleteState::Cancelled => Cancelled::Already,
            Some(r) => Cancelled::TooLate {
                cancel_until_millis: r.cancel_until_millis,
            },
        })
    }

    async fn move_delete_request(
        &self,
        tenant: &str,
        id: &str,
        from: DeleteState,
        to: DeleteState,
    ) -> CatalogResult<bool> {
        let row: Option<(String,)> = on_either!(self, |pool| sqlx::query_as(MOVE)
            .bind(tenant)
            .bind(id)
            .bind(from.as_str())
            .bind(to.as_str())
            .fetch_optional(pool)
            .await?);
        Ok(row.is_some())
    }
}
