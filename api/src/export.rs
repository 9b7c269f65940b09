//! One export path for every receiver (OTLP of any layout, v1experimental, Pyroscope,
//! pprof, JFR, ...): normalize the converted request, hand it to the group-commit writer,
//! wait until durable, report what was rejected by conversion and by normalization.

use std::sync::Arc;

use stackhouse_ingest::convert::Conversion;
use stackhouse_ingest::otlp::layout::Layout;
use stackhouse_ingest::otlp::{TimeWindow, normalize_within};
use stackhouse_proto::otlp_collector::{
    ExportProfilesPartialSuccess, ExportProfilesServiceRequest, ExportProfilesServiceResponse,
};
use stackhouse_storage::retention::RetentionConfig;
use stackhouse_storage::writer::Writer;

use crate::error::ApiError;
use crate::monitoring::{self, Protocol};
use crate::rate_limit::RateLimiter;
use crate::time_param::now_nanos;

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

/// The layout a sender declared (`value` of the `OTLP-Profiles-Development-Version` header
/// or metadata, named `what` in errors), if it declared one.
pub fn declared_layout(value: Option<&[u8]>, what: &str) -> Result<Option<Layout>, ApiError> {
    let Some(value) = value else {
        return Ok(None);
    };
    let value =
        std::str::from_utf8(value).map_err(|_| ApiError::invalid(format!("invalid {what}: not ASCII")))?;
    Layout::from_header(value)
        .map(Some)
        .map_err(|e| ApiError::invalid(format!("invalid {what} {value:?}: {e}")))
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
    limiter: Option<Arc<RateLimiter>>,
    /// Retention per tenant and how far ahead of now a time may be; `None` accepts any time.
    window: Option<(RetentionConfig, i64)>,
}

impl Exporter {
    /// An exporter without ingestion rate limits, accepting any time.
    pub fn new(writer: Arc<Writer>) -> Exporter {
        Exporter {
            writer,
            limiter: None,
            window: None,
        }
    }

    /// Profiles older than their tenant's retention or more than `max_future` ahead of the
    /// server's clock are refused (in partial_success), instead of being acknowledged and
    /// then deleted by the next retention run.
    pub fn with_time_window(
        mut self,
        retention: RetentionConfig,
        max_future: std::time::Duration,
    ) -> Exporter {
        let max_future = i64::try_from(max_future.as_nanos()).unwrap_or(i64::MAX);
        self.window = Some((retention, max_future));
        self
    }

    fn window(&self, tenant: &str, now: i64) -> TimeWindow {
        let Some((retention, max_future)) = &self.window else {
            return TimeWindow::ANY;
        };
        let kept = i64::try_from(retention.of(tenant).as_nanos()).unwrap_or(i64::MAX);
        TimeWindow {
            // Zero retention keeps everything.
            oldest: if kept == 0 {
                i64::MIN
            } else {
                now.saturating_sub(kept)
            },
            newest: now.saturating_add(*max_future),
        }
    }

    /// Requests over a tenant's rate are refused before anything is stored.
    pub fn with_rate_limiter(mut self, limiter: Arc<RateLimiter>) -> Exporter {
        self.limiter = Some(limiter);
        self
    }

    /// Stores what `conversion` holds; `bytes` is the request's size as sent, for metrics.
    pub async fn export(
        &self,
        tenant: String,
        conversion: Conversion,
        protocol: Protocol,
        bytes: usize,
    ) -> Result<Exported, ApiError> {
        let received_at = now_nanos();
        let Conversion {
            request,
            rejected_profiles,
            mut errors,
        } = conversion;
        let limited = self.limiter.clone().map(|limiter| (limiter, tenant.clone()));
        let window = self.window(&tenant, received_at);
        // Normalizing is CPU work proportional to the request; keep it off the I/O threads.
        let normalized =
            tokio::task::spawn_blocking(move || normalize_within(&tenant, &request, received_at, window))
                .await?
                .map_err(|e| {
                    let mut all = errors.clone();
                    all.push(e.to_string());
                    ApiError::invalid(all.join("; "))
                })?;
        let stored_samples = normalized.batch.samples.len();
        if let Some((limiter, tenant)) = limited {
            limiter.admit(&tenant, stored_samples, bytes)?;
        }
        if !normalized.batch.is_empty() {
            self.writer.write(normalized.batch).await?;
        }
        errors.extend(normalized.errors);
        let exported = Exported {
            stored_profiles: normalized.accepted_profiles,
            stored_samples,
            rejected_profiles: rejected_profiles + normalized.rejected_profiles,
            errors,
        };
        monitoring::ingest_volume(protocol, bytes, &exported);
        Ok(exported)
    }
}
