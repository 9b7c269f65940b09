//! Query failures, split into the caller's fault (HTTP 400) and ours (HTTP 500).

use datafusion::error::DataFusionError;
use stackhouse_storage::catalog::CatalogError;
use stackhouse_storage::symbols::SymbolError;

use crate::selector::SelectorError;

#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// The request is malformed (bad range, bad selector…): report 400.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A request parameter is malformed; the message names it and is the whole answer.
    #[error("{0}")]
    BadRequest(String),
    #[error(transparent)]
    Selector(#[from] SelectorError),
    /// The query needed more memory than the budget (shared by all running queries) had
    /// left: report 503. `budget` is the configured budget in bytes, `None` when the
    /// error came from elsewhere than the memory pool (DataFusion's spill limit).
    #[error("{}", resources_message(*budget, detail))]
    ResourcesExhausted { budget: Option<usize>, detail: String },
    /// The request asks for more than a configured limit allows: report 422. `limit` is
    /// the name of the [`crate::limits::QueryLimits`] field.
    #[error("{message} (limit {limit})")]
    LimitExceeded { limit: &'static str, message: String },
    /// The query ran longer than the configured timeout.
    #[error("query exceeded its time limit of {0:?} (limit timeout); narrow the time range or selector")]
    Timeout(std::time::Duration),
    /// The thing asked for (a profile id) is not stored: report 404.
    #[error("{0}")]
    NotFound(String),
    /// What is asked conflicts with the state of what it names: report 409.
    #[error("{0}")]
    Conflict(String),
    /// The query needs raw samples (links, sample attributes, single samples) where raw
    /// retention left only the rollup tiers: an answer from them would be partial.
    #[error("{0}")]
    RawGone(String),
    #[error("catalog: {0}")]
    Catalog(#[from] CatalogError),
    #[error("symbols: {0}")]
    Symbols(#[from] SymbolError),
    /// A query worker could not be reached or failed mid-query (it died, froze or was
    /// cut off): report 503; the same query may succeed on the workers that remain.
    #[error("a query worker failed; retry the query: {0}")]
    WorkerUnavailable(String),
    #[error("query execution: {0}")]
    Execution(DataFusionError),
    #[error("internal error: {0}")]
    Internal(String),
}

impl QueryError {
    /// A malformed request parameter, `message` naming it.
    pub fn bad_request(message: impl Into<String>) -> QueryError {
        QueryError::BadRequest(message.into())
    }

    /// Whether the caller can fix the error by changing the request (HTTP 4xx).
    pub fn is_client_error(&self) -> bool {
        matches!(
            self,
            QueryError::InvalidArgument(_)
                | QueryError::BadRequest(_)
                | QueryError::Conflict(_)
                | QueryError::Selector(_)
                | QueryError::LimitExceeded { .. }
                | QueryError::Timeout(_)
                | QueryError::RawGone(_)
        )
    }
}

impl QueryError {
    /// Whether the catalog or the object store could not be reached: the same query may
    /// succeed once they are back.
    pub fn is_transient(&self) -> bool {
        match self {
            QueryError::Catalog(e) | QueryError::Symbols(SymbolError::Catalog(e)) => e.is_transient(),
            QueryError::Symbols(SymbolError::Store(e)) => e.is_transient(),
            QueryError::WorkerUnavailable(_) => true,
            _ => false,
        }
    }

    /// Whether the request was well formed but asks for more than the limits allow (HTTP
    /// 422 rather than 400).
    pub fn is_limit(&self) -> bool {
        matches!(
            self,
            QueryError::LimitExceeded { .. } | QueryError::Timeout(_) | QueryError::RawGone(_)
        )
    }
}

impl From<DataFusionError> for QueryError {
    fn from(e: DataFusionError) -> Self {
        match e.find_root() {
            DataFusionError::ResourcesExhausted(msg) => QueryError::ResourcesExhausted {
                budget: None,
                detail: msg.clone(),
            },
            _ if is_worker_failure(&e) => QueryError::WorkerUnavailable(first_line(&e)),
            _ => QueryError::Execution(e),
        }
    }
}

/// Whether `e` came from reaching a worker rather than from running the plan: a gRPC status
/// that is not a worker's own DataFusion error (those are decoded back into what they
/// were), or datafusion-distributed's failure to connect.
fn is_worker_failure(e: &DataFusionError) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if err.downcast_ref::<tonic::Status>().is_some()
            || err.downcast_ref::<tonic::transport::Error>().is_some()
            || err.to_string().contains("Distributed DataFusion worker")
        {
            return true;
        }
        source = err.source();
    }
    false
}

/// Transport errors nest their causes into long multi-line texts; the answer keeps the
/// first line and the log keeps all.
fn first_line(e: &DataFusionError) -> String {
    tracing::warn!(error = %e, "query worker failed");
    let text = e.to_string();
    text.lines().next().unwrap_or_default().to_string()
}

fn resources_message(budget: Option<usize>, detail: &str) -> String {
    match budget {
        Some(budget) => format!(
            "query exceeded the memory budget of {budget} bytes; narrow the time range or selector ({detail})"
        ),
        None => format!("query exceeded its resource limits; narrow the time range or selector ({detail})"),
    }
}
