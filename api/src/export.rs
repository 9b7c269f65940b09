//! One export path for every receiver (OTLP of any layout, v1experimental, Pyroscope,
//! pprof, JFR, ...): normalize the converted request, hand it to the group-commit writer,
//! wait until durable, report what was rejected by conversion and by normalization.

use std::sync::Arc;
use std::time::Duration;

use stackhouse_ingest::convert::Conversion;
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
    /// The ingest memory budget is full; nothing was stored, the sender should retry after
    /// `retry_after` (HTTP 429 with `Retry-After`, gRPC RESOURCE_EXHAUSTED with RetryInfo).
    #[error("{message}")]
    Overloaded { message: String, retry_after: Duration },
    /// The request alone needs more than the whole ingest memory budget; retrying it
    /// cannot succeed (HTTP 413, gRPC RESOURCE_EXHAUSTED without RetryInfo).
    #[error("{0}")]
    TooLarge(String),
}

impl ExportError {
    /// `Retry-After` seconds: the delay rounded up, at least 1.
    pub fn retry_after_secs(retry_after: Duration) -> u64 {
        retry_after.as_secs_f64().ceil().max(1.0) as u64
    }
}

/// What one export stored and refused.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Exported {
    pub stored_profiles: usize,
    pub stored_samples: usize,
    /// Refused by conversion plus refused by normalization.
    pub rejected_profiles: usize,
    /// Conversion's messages first, then normalization's, in request order.
    pub errors: Vec<String>,
}

impl Exported {
    /// OTLP's answer: `partial_success` only when something was refused.
    pub fn response(&self) -> ExportProfilesServiceResponse {
        let partial_success = (self.rejected_profiles > 0).then(|| ExportProfilesPartialSuccess {
            rejected_profiles: self.rejected_profiles as i64,
            error_message: self.errors.join("; "),
        });
        ExportProfilesServiceResponse { partial_success }
    }
}

/// An OTLP request that needed no conversion.
pub fn unconverted(request: ExportProfilesServiceRequest) -> Conversion {
    Conversion {
        request,
        rejected_profiles: 0,
        errors: Vec::new(),
    }
}

pub struct Exporter {
    writer: Arc<Writer>,
}

impl Exporter {
    pub fn new(writer: Arc<Writer>) -> Exporter {
        Exporter { writer }
    }

    pub async fn export(&self, tenant: String, conversion: Conversion) -> Result<Exported, ExportError> {
        let received_at = now_nanos();
        let Conversion {
            request,
            rejected_profiles,
            mut errors,
        } = conversion;
        // Normalizing is CPU work proportional to the request; keep it off the I/O threads.
        let normalized = tokio::task::spawn_blocking(move || normalize(&tenant, &request, received_at))
            .await
            .map_err(|e| ExportError::Unavailable(format!("normalization task failed: {e}")))?
            .map_err(|e| {
                let mut all = errors.clone();
                all.push(e.to_string());
                ExportError::InvalidArgument(all.join("; "))
            })?;
        let stored_samples = normalized.batch.samples.len();
        if !normalized.batch.is_empty() {
            self.writer.write(normalized.batch).await.map_err(|e| match e {
                WriteError::Unavailable(_) | WriteError::ShuttingDown => {
                    ExportError::Unavailable(e.to_string())
                }
                WriteError::Overloaded { retry_after, .. } => ExportError::Overloaded {
                    message: e.to_string(),
                    retry_after,
                },
                WriteError::TooLarge { .. } => ExportError::TooLarge(e.to_string()),
            })?;
        }
        errors.extend(normalized.errors);
        Ok(Exported {
            stored_profiles: normalized.accepted_profiles,
            stored_samples,
            rejected_profiles: rejected_profiles + normalized.rejected_profiles,
            errors,
        })
    }
}
