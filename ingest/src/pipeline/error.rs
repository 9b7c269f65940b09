//! Why an ingest request was refused as a whole. The edges give each variant its status per
//! protocol; the messages are the ones senders see.

use std::time::Duration;

use stackhouse_storage::catalog::CatalogError;
use stackhouse_storage::writer::WriteError;

use crate::convert::ConvertError;
use crate::otlp::DecodeError;

#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// The request is malformed, or every profile in it was refused; sending it again
    /// cannot succeed.
    #[error("{0}")]
    Invalid(String),
    /// The request alone is larger than a limit allows; retrying it cannot succeed.
    #[error("{0}")]
    TooLarge(String),
    /// The tenant is over its ingestion rate; the same request may succeed after the delay.
    #[error("{message}")]
    Overloaded { retry_after: Duration, message: String },
    /// Reading the tenant's series for the series limit failed.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// The writer did not make the request durable.
    #[error(transparent)]
    Write(#[from] WriteError),
    /// The conversion or normalization task panicked or was cancelled.
    #[error(transparent)]
    Task(#[from] tokio::task::JoinError),
}

impl IngestError {
    pub fn invalid(message: impl ToString) -> IngestError {
        IngestError::Invalid(message.to_string())
    }
}

impl From<DecodeError> for IngestError {
    fn from(e: DecodeError) -> IngestError {
        IngestError::invalid(e)
    }
}

impl From<ConvertError> for IngestError {
    fn from(e: ConvertError) -> IngestError {
        match e {
            ConvertError::TooLarge { .. } => IngestError::TooLarge(e.to_string()),
            ConvertError::Invalid { .. } => IngestError::invalid(e),
        }
    }
}
