//! One export path for every receiver (OTLP of any layout, v1experimental, Pyroscope,
//! pprof, JFR, ...): normalize the converted request, hand it to the group-commit writer,
//! wait until durable, report what was rejected by conversion and by normalization.

use std::sync::Arc;

use stackhouse_ingest::convert::Conversion;
use stackhouse_ingest::otlp::layout::Layout;
use stackhouse_ingest::otlp::{
    AnySeries, Dictionary, Limits, SeriesAdmission, Tenant, TimeWindow, normalize_within,
};
use stackhouse_proto::otlp_collector::{
    ExportProfilesPartialSuccess, ExportProfilesServiceRequest, ExportProfilesServiceResponse,
};
use stackhouse_storage::retention::RetentionConfig;
use stackhouse_storage::writer::Writer;

use crate::error::ApiError;
use crate::ingest_limits::{IngestLimits, SeriesCounter};
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
    /// What was stored other than sent (stacks cut to the depth limit).
    pub warnings: Vec<String>,
    pub truncated_stacks: usize,
}

impl Exported {
    /// OTLP's answer: `partial_success` when something was refused, or with
    /// `rejected_profiles: 0` when all was stored but not quite as sent (OTLP's warnings).
    pub fn response(&self) -> ExportProfilesServiceResponse {
        let partial_success =
            (self.rejected_profiles > 0 || !self.warnings.is_empty()).then(|| ExportProfilesPartialSuccess {
                rejected_profiles: self.rejected_profiles as i64,
                error_message: self
                    .errors
                    .iter()
                    .chain(&self.warnings)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("; "),
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
        ..Conversion::default()
    }
}

/// An OTLP request decoded with its dictionary flat (`layout::decode_protobuf_flat`).
pub fn unconverted_flat((request, dictionary): (ExportProfilesServiceRequest, Dictionary)) -> Conversion {
    Conversion {
        request,
        dictionary: Some(dictionary),
        ..Conversion::default()
    }
}

pub struct Exporter {
    writer: Arc<Writer>,
    limiter: Option<Arc<RateLimiter>>,
    /// Retention per tenant and how far ahead of now a time may be; `None` accepts any time.
    window: Option<(RetentionConfig, i64)>,
    limits: IngestLimits,
    /// Counts series for `limits.max_series`; `None`: no series limit.
    series: Option<SeriesCounter>,
}

impl Exporter {
    /// An exporter without ingestion rate limits, accepting any time.
    pub fn new(writer: Arc<Writer>) -> Exporter {
        Exporter {
            writer,
            limiter: None,
            window: None,
            limits: IngestLimits::default(),
            series: None,
        }
    }

    /// Holds each tenant to its series, label and stack depth bounds.
    pub fn with_limits(mut self, limits: IngestLimits, series: SeriesCounter) -> Exporter {
        self.limits = limits;
        self.series = Some(series);
        self
    }

    async fn series_gate(&self, tenant: &str) -> Result<Box<dyn SeriesAdmission + Send>, ApiError> {
        match &self.series {
            Some(counter) => Ok(counter.gate(tenant, self.limits.max_series.of(tenant)).await?),
            None => Ok(Box::new(AnySeries)),
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
            dictionary,
            rejected_profiles,
            mut errors,
        } = conversion;
        let limited = self.limiter.clone().map(|limiter| (limiter, tenant.clone()));
        let limits = Limits {
            window: self.window(&tenant, received_at),
            max_stack_depth: self.limits.max_stack_depth.of(&tenant),
            max_label_names: self.limits.max_label_names.of(&tenant),
        };
        let mut series = self.series_gate(&tenant).await?;
        let known = self.writer.known(&tenant);
        // Normalizing is CPU work proportional to the request; keep it off the I/O threads.
        let normalized = tokio::task::spawn_blocking(move || {
            let state = Tenant {
                limits: &limits,
                series: series.as_mut(),
                known: &known,
            };
            let dictionary = dictionary.unwrap_or_else(|| Dictionary::of(&request));
            normalize_within(&tenant, &request, &dictionary, received_at, state)
        })
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
        let mut warnings = Vec::new();
        if normalized.truncated_stacks > 0 {
            warnings.push(format!(
                "{} stacks deeper than {} frames (--ingest-max-stack-depth) were stored cut to \
                 their root-most frames below a marker frame",
                normalized.truncated_stacks, limits.max_stack_depth
            ));
        }
        let exported = Exported {
            stored_profiles: normalized.accepted_profiles,
            stored_samples,
            rejected_profiles: rejected_profiles + normalized.rejected_profiles,
            errors,
            warnings,
            truncated_stacks: normalized.truncated_stacks,
        };
        monitoring::ingest_volume(protocol, bytes, &exported);
        Ok(exported)
    }
}
