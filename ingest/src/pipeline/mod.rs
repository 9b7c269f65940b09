//! The write path every receiver calls: [`Pipeline::ingest`] converts a request of any wire
//! format, checks it against the tenant's time window and limits, normalizes it, hands it
//! to the group-commit writer and waits until it is durable.

pub(crate) mod error;
mod exported;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

pub use error::IngestError;
pub use exported::Exported;
use stackhouse_storage::clock::SharedClock;
use stackhouse_storage::per_tenant::PerTenant;
use stackhouse_storage::writer::{RefusedSeries, Repeated, Writer};

use crate::convert::Conversion;
use crate::formats::{Body, Params, WireFormat};
use crate::jfr::FrameNames;
use crate::limits::{IngestLimits, RateLimiter, SeriesCounter};
use crate::otlp::{AnySeries, Dictionary, Limits, SeriesAdmission, Tenant, TimeWindow, normalize_within};
use crate::usage::{UsageGroups, UsageReport};

/// One request as a receiver hands it over: transport undone (body read, gunzipped,
/// multipart split), the format chosen.
pub struct Payload {
    pub format: &'static dyn WireFormat,
    pub body: Body,
    pub params: Params,
    /// The request's size as sent, what the byte rate counts.
    pub sent_bytes: usize,
}

pub struct Pipeline {
    writer: Arc<Writer>,
    clock: SharedClock,
    limiter: Option<Arc<RateLimiter>>,
    /// Raw retention per tenant and how far ahead of now a time may be; `None` accepts any
    /// time.
    window: Option<(PerTenant<Duration>, i64)>,
    limits: IngestLimits,
    /// Counts series for `limits.max_series`; `None`: no series limit.
    series: Option<SeriesCounter>,
    jfr_frame_names: FrameNames,
}

impl Pipeline {
    /// A pipeline without limits, accepting any time; `clock` stamps the receive time.
    pub fn new(writer: Arc<Writer>, clock: SharedClock) -> Pipeline {
        Pipeline {
            writer,
            clock,
            limiter: None,
            window: None,
            limits: IngestLimits::default(),
            series: None,
            jfr_frame_names: FrameNames::default(),
        }
    }

    /// How frames of JFR recordings are named (Pyroscope's way by default).
    pub fn with_jfr_frame_names(mut self, names: FrameNames) -> Pipeline {
        self.jfr_frame_names = names;
        self
    }

    /// Holds each tenant to its series, label and stack depth bounds.
    pub fn with_limits(mut self, limits: IngestLimits, series: SeriesCounter) -> Pipeline {
        self.limits = limits;
        self.series = Some(series);
        self
    }

    /// Profiles older than their tenant's raw retention (`raw`, the samples' tier) or more
    /// than `max_future` ahead of the clock are refused (in partial_success), instead of
    /// being acknowledged and then deleted by the next retention run. So no samples arrive
    /// for hours whose samples retention has already reduced to rollups.
    pub fn with_time_window(mut self, raw: PerTenant<Duration>, max_future: Duration) -> Pipeline {
        let max_future = i64::try_from(max_future.as_nanos()).unwrap_or(i64::MAX);
        self.window = Some((raw, max_future));
        self
    }

    /// Requests over a tenant's rate are refused before anything is stored.
    pub fn with_rate_limiter(mut self, limiter: Arc<RateLimiter>) -> Pipeline {
        self.limiter = Some(limiter);
        self
    }

    /// The usage groups of `tenant`.
    pub fn usage_groups(&self, tenant: &str) -> Arc<UsageGroups> {
        self.limits.usage.of(tenant)
    }

    /// Converts, checks, normalizes and stores one request of `tenant`; returns once it is
    /// durable.
    pub async fn ingest(&self, tenant: String, payload: Payload) -> Result<Exported, IngestError> {
        let Payload {
            format,
            body,
            mut params,
            sent_bytes,
        } = payload;
        params.jfr_frame_names = self.jfr_frame_names;
        // Decoding is CPU work proportional to the request; keep it off the I/O threads.
        let conversion = tokio::task::spawn_blocking(move || format.convert(&body, &params)).await??;
        self.store(tenant, conversion, sent_bytes).await
    }

    async fn series_gate(&self, tenant: &str) -> Result<Box<dyn SeriesAdmission + Send>, IngestError> {
        match &self.series {
            Some(counter) => Ok(counter.gate(tenant, self.limits.max_series.of(tenant)).await?),
            None => Ok(Box::new(AnySeries)),
        }
    }

    fn window(&self, tenant: &str, now: i64) -> TimeWindow {
        let Some((raw, max_future)) = &self.window else {
            return TimeWindow::ANY;
        };
        TimeWindow {
            // No cutoff: zero retention keeps everything.
            oldest: raw.cutoff(tenant, now).unwrap_or(i64::MIN),
            newest: now.saturating_add(*max_future),
        }
    }

    async fn store(
        &self,
        tenant: String,
        conversion: Conversion,
        sent_bytes: usize,
    ) -> Result<Exported, IngestError> {
        let received_at = self.clock.now_nanos();
        let Conversion {
            request,
            dictionary,
            rejected_profiles,
            mut errors,
            converted,
        } = conversion;
        let limited = self.limiter.clone().map(|limiter| (limiter, tenant.clone()));
        let limits = Limits {
            window: self.window(&tenant, received_at),
            max_stack_depth: self.limits.max_stack_depth.of(&tenant),
            max_label_names: self.limits.max_label_names.of(&tenant),
        };
        let mut series = self.series_gate(&tenant).await?;
        let max_series = self.limits.max_series.of(&tenant);
        let tenant_name = tenant.clone();
        let known = self.writer.known(&tenant);
        let relabel = self.limits.relabel.of(&tenant);
        let usage = self.limits.usage.of(&tenant);
        let usage_in_closure = usage.clone();
        // Normalizing is CPU work proportional to the request; keep it off the I/O threads.
        let normalized = tokio::task::spawn_blocking(move || {
            let state = Tenant {
                limits: &limits,
                series: series.as_mut(),
                relabel: &relabel,
                usage: &usage_in_closure,
                known: &known,
            };
            let dictionary = dictionary.unwrap_or_else(|| Dictionary::of(&request));
            normalize_within(&tenant, &request, &dictionary, received_at, state)
        })
        .await?
        .map_err(|e| {
            let mut all = errors.clone();
            all.push(e.to_string());
            IngestError::Invalid(all.join("; "))
        })?;
        let samples = normalized.batch.samples.len();
        if let Some((limiter, tenant)) = limited {
            limiter.admit(&tenant, samples, sent_bytes)?;
        }
        // The gate above counted with this process's view; the catalog counts at commit,
        // across every ingester, and may refuse series the gate let through.
        let (refused, repeated, bytes_per_sample) = if normalized.batch.is_empty() {
            (RefusedSeries::default(), Repeated::default(), 0.0)
        } else {
            let receipt = self.writer.write_within(normalized.batch, max_series).await?;
            (receipt.refused, receipt.repeated, receipt.bytes_per_sample)
        };
        // What the write left out is taken off what normalize counted per series.
        let usage = (!usage.is_empty()).then(|| {
            let series = &normalized.series_usage;
            let mut left_out: HashMap<i64, u64> = HashMap::new();
            for &(id, rows) in &repeated.by_series {
                *left_out.entry(id).or_insert(0) += rows as u64;
            }
            for id in &refused.series {
                left_out.insert(*id, series.get(id).map_or(0, |s| s.samples));
            }
            let mut report = UsageReport::of(&tenant_name, &usage, series, &left_out, bytes_per_sample);
            for (group, (profiles, samples)) in &normalized.sampled_out {
                let g = report.groups.entry(group.clone()).or_default();
                g.sampled_out_profiles += profiles;
                g.sampled_out_samples += samples;
                g.received_samples += samples;
            }
            report
        });
        errors.extend(normalized.errors);
        if !refused.is_empty() {
            if let Some(counter) = &self.series {
                counter.refused_at_commit(&tenant_name, &refused.series);
            }
            errors.push(series_refused_at_commit(&tenant_name, max_series, &refused));
        }
        let mut warnings = Vec::new();
        if normalized.truncated_stacks > 0 {
            warnings.push(format!(
                "{} stacks deeper than {} frames (--ingest-max-stack-depth) were stored cut to \
                 their root-most frames below a marker frame",
                normalized.truncated_stacks, limits.max_stack_depth
            ));
        }
        Ok(Exported {
            stored_profiles: normalized
                .accepted_profiles
                .saturating_sub(refused.profiles + repeated.profiles),
            stored_samples: samples.saturating_sub(refused.samples + repeated.samples),
            repeated_profiles: repeated.profiles,
            rejected_profiles: rejected_profiles + normalized.rejected_profiles + refused.profiles,
            errors,
            warnings,
            truncated_stacks: normalized.truncated_stacks,
            relabeled_profiles: normalized.relabeled_profiles,
            sampled_out_profiles: normalized.sampled_out.values().map(|(p, _)| *p as usize).sum(),
            usage,
            converted,
            conversion_rejected: rejected_profiles,
        })
    }
}

/// Why the profiles of series the catalog refused at commit were not stored.
fn series_refused_at_commit(tenant: &str, max_series: usize, refused: &RefusedSeries) -> String {
    format!(
        "{} profiles ({} samples) of {} new series were refused: tenant {tenant:?} has reached its \
         limit of {max_series} series (--ingest-max-series), counted across all ingesters",
        refused.profiles,
        refused.samples,
        refused.series.len(),
    )
}

#[cfg(test)]
mod tests;
