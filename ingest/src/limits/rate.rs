//! Per-tenant ingestion rates: a token bucket of samples and one of bytes per tenant, each
//! holding up to `rate × --ingest-burst-seconds`. A request takes from both or from neither;
//! one that finds too little is refused as overloaded with the time until there is enough,
//! and one larger than the whole burst is refused for good.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use stackhouse_storage::per_tenant::PerTenant;

use crate::pipeline::error::IngestError;

/// One kind of bucket's rate per second; `0` is no limit.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Rates {
    samples: f64,
    bytes: f64,
}

struct Bucket {
    samples: f64,
    bytes: f64,
    updated: Instant,
}

pub struct RateLimiter {
    samples: PerTenant<u64>,
    bytes: PerTenant<usize>,
    burst_seconds: f64,
    buckets: Mutex<HashMap<String, Bucket>>,
}

/// Each tenant's rates per second (`0`: no limit) and the seconds' worth it may send at once.
#[derive(Clone, Debug, Default)]
pub struct RateLimits {
    pub samples: PerTenant<u64>,
    pub bytes: PerTenant<usize>,
    pub burst_seconds: u64,
}

impl RateLimiter {
    pub fn new(limits: RateLimits) -> RateLimiter {
        RateLimiter {
            samples: limits.samples,
            bytes: limits.bytes,
            burst_seconds: limits.burst_seconds.max(1) as f64,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes `samples` and `bytes` from `tenant`'s buckets, or refuses without taking any.
    pub fn admit(&self, tenant: &str, samples: usize, bytes: usize) -> Result<(), IngestError> {
        self.admit_at(tenant, samples, bytes, Instant::now())
    }

    /// [`RateLimiter::admit`] at `now`.
    pub fn admit_at(
        &self,
        tenant: &str,
        samples: usize,
        bytes: usize,
        now: Instant,
    ) -> Result<(), IngestError> {
        let rates = Rates {
            samples: self.samples.of(tenant) as f64,
            bytes: self.bytes.of(tenant) as f64,
        };
        if rates.samples == 0.0 && rates.bytes == 0.0 {
            return Ok(());
        }
        let (samples, bytes) = (samples as f64, bytes as f64);
        let burst = |rate: f64| rate * self.burst_seconds;
        for (what, rate, wanted, flag) in [
            ("samples", rates.samples, samples, "--ingest-rate-samples"),
            ("bytes", rates.bytes, bytes, "--ingest-rate-bytes"),
        ] {
            if rate > 0.0 && wanted > burst(rate) {
                return Err(IngestError::TooLarge(format!(
                    "request of {wanted} {what} is more than tenant {tenant:?} may send at once ({} {what}: \
                         {flag} × --ingest-burst-seconds); split it",
                    burst(rate)
                )));
            }
        }
        let mut buckets = self.buckets.lock().expect("rate limiter lock");
        let bucket = buckets.entry(tenant.to_string()).or_insert_with(|| Bucket {
            samples: burst(rates.samples),
            bytes: burst(rates.bytes),
            updated: now,
        });
        let elapsed = now.saturating_duration_since(bucket.updated).as_secs_f64();
        bucket.samples = (bucket.samples + elapsed * rates.samples).min(burst(rates.samples));
        bucket.bytes = (bucket.bytes + elapsed * rates.bytes).min(burst(rates.bytes));
        bucket.updated = now;
        // Seconds until each bucket holds enough.
        let wait = |have: f64, rate: f64, wanted: f64| match rate > 0.0 && have < wanted {
            true => (wanted - have) / rate,
            false => 0.0,
        };
        let seconds =
            wait(bucket.samples, rates.samples, samples).max(wait(bucket.bytes, rates.bytes, bytes));
        if seconds > 0.0 {
            let delay = Duration::from_secs(seconds.ceil().max(1.0) as u64);
            return Err(IngestError::Overloaded {
                retry_after: delay,
                message: format!(
                    "tenant {tenant:?} is over its ingestion rate ({} samples/s, {} bytes/s; 0 is no limit); \
                     retry in {} s",
                    rates.samples,
                    rates.bytes,
                    delay.as_secs()
                ),
            });
        }
        if rates.samples > 0.0 {
            bucket.samples -= samples;
        }
        if rates.bytes > 0.0 {
            bucket.bytes -= bytes;
        }
        Ok(())
    }
}
