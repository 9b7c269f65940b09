//! One export path for every OTLP receiver: normalize, hand to the group-commit writer,
//! wait until durable, report what was rejected.

use std::sync::Arc;

use stackhouse_ingest::otlp::normalize::normalize;
use stackhouse_proto::otlp_collector::{
    ExportProfilesPartialSuccess, ExportProfilesServiceRequest, ExportProfilesServiceResponse,
};
use stackhouse_storage::writer::{WriteError, Writer};

use crate::time_param::now_nanos;

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The request as a whole is invalid; retrying it cannot succeed.
    #[error("{0}")]
    InvalidArgument(String),
    /// Nothing was stored; the sender should retry.
    #[error("{0}")]
    Unavailable(String),
}

pub struct Exporter {
    writer: Arc<Writer>,
}

impl Exporter {
    pub fn new(writer: Arc<Writer>) -> Exporter {
        Exporter { writer }
    }

    pub async fn export(
        &self,
        tenant: String,
        request: ExportProfilesServiceRequest,
    ) -> Result<ExportProfilesServiceResponse, ExportError> {
        let received_at = now_nanos();
        // Normalizing is CPU work proportional to the request; keep it off the I/O threads.
        let normalized = tokio::task::spawn_blocking(move || normalize(&tenant, &request, received_at))
            .await
            .map_err(|e| ExportError::Unavailable(format!("normalization task failed: {e}")))?
            .map_err(|e| ExportError::InvalidArgument(e.to_string()))?;
        if !normalized.batch.is_empty() {
            self.writer.write(normalized.batch).await.map_err(|e| match e {
                WriteError::Unavailable(_) | WriteError::ShuttingDown => {
                    ExportError::Unavailable(e.to_string())
                }
            })?;
        }
        let partial_success = (normalized.rejected_profiles > 0).then(|| ExportProfilesPartialSuccess {
            rejected_profiles: normalized.rejected_profiles as i64,
            error_message: normalized.errors.join("; "),
        });
        Ok(ExportProfilesServiceResponse { partial_success })
    }
}
