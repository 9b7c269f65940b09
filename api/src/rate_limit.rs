//! Per-tenant ingestion rates: a token bucket of samples and one of bytes per tenant, each
//! holding up to `rate × --ingest-burst-seconds`. A request takes from both or from neither;
//! one that finds too little is refused as overloaded with the time until there is enough
//! (429 + `Retry-After`, RESOURCE_EXHAUSTED + RetryInfo), and one larger than the whole burst
//! is refused for good (413 / RESOURCE_EXHAUSTED without RetryInfo).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use clap::Args;

use crate::config::{PerTenant, parse_size, tenant_override, tenant_value};
use crate::error::{ApiError, ErrorKind};

#[derive(Args, Debug, Clone)]
pub struct RateLimitArgs {
    /// Samples per second each tenant may send; `0` is no limit.
    #[arg(long, env = "STACKHOUSE_INGEST_RATE_SAMPLES", default_value_t = 0)]
    pub ingest_rate_samples: u64,

    /// Bytes per second (as sent) each tenant may send, a size such as `10MiB`; `0` is no limit.
    #[arg(long, env = "STACKHOUSE_INGEST_RATE_BYTES", default_value = "0", value_parser = parse_size)]
    pub ingest_rate_bytes: usize,

    /// A tenant may send this many seconds' worth of its rates at once after a quiet spell.
    #[arg(long, env = "STACKHOUSE_INGEST_BURST_SECONDS", default_value_t = 10)]
    pub ingest_burst_seconds: u64,

    /// One tenant's samples per second, `tenant=N` (`0`: no limit); repeatable.
    #[arg(long, env = "STACKHOUSE_TENANT_INGEST_RATE_SAMPLES", value_delimiter = ',', value_parser = tenant_value::<u64>)]
    pub tenant_ingest_rate_samples: Vec<(String, u64)>,

    /// One tenant's bytes per second, `tenant=SIZE` (`0`: no limit); repeatable.
    #[arg(long, env = "STACKHOUSE_TENANT_INGEST_RATE_BYTES", value_delimiter = ',', value_parser = parse_size_override)]
    pub tenant_ingest_rate_bytes: Vec<(String, usize)>,
}

fn parse_size_override(s: &str) -> Result<(String, usize), String> {
    let (tenant, value) = tenant_override(s)?;
    Ok((tenant.to_string(), parse_size(value)?))
}

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

impl RateLimiter {
    pub fn new(args: &RateLimitArgs) -> RateLimiter {
        RateLimiter {
            samples: PerTenant::new(args.ingest_rate_samples, &args.tenant_ingest_rate_samples),
            bytes: PerTenant::new(args.ingest_rate_bytes, &args.tenant_ingest_rate_bytes),
            burst_seconds: args.ingest_burst_seconds.max(1) as f64,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes `samples` and `bytes` from `tenant`'s buckets, or refuses without taking any.
    pub fn admit(&self, tenant: &str, samples: usize, bytes: usize) -> Result<(), ApiError> {
        self.admit_at(tenant, samples, bytes, Instant::now())
    }

    fn admit_at(&self, tenant: &str, samples: usize, bytes: usize, now: Instant) -> Result<(), ApiError> {
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
                return Err(ApiError::new(
                    ErrorKind::TooLarge,
                    format!(
                        "request of {wanted} {what} is more than tenant {tenant:?} may send at once ({} {what}: \
                         {flag} × --ingest-burst-seconds); split it",
                        burst(rate)
                    ),
                ));
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
            return Err(ApiError::new(
                ErrorKind::Overloaded(delay),
                format!(
                    "tenant {tenant:?} is over its ingestion rate ({} samples/s, {} bytes/s; 0 is no limit); \
                     retry in {} s",
                    rates.samples,
                    rates.bytes,
                    delay.as_secs()
                ),
            ));
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

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: RateLimitArgs,
    }

    fn limiter(args: &[&str]) -> RateLimiter {
        RateLimiter::new(
            &Cli::try_parse_from(std::iter::once("x").chain(args.iter().copied()))
                .unwrap()
                .args,
        )
    }

    #[test]
    fn buckets_fill_at_the_rate_up_to_the_burst() {
        let l = limiter(&["--ingest-rate-samples", "100", "--ingest-burst-seconds", "2"]);
        let t0 = Instant::now();
        l.admit_at("a", 150, 0, t0).unwrap();
        // 50 left: 60 more waits for 10 samples, a tenth of a second, rounded up to 1 s.
        let error = l.admit_at("a", 60, 0, t0).unwrap_err();
        assert_eq!(error.kind, ErrorKind::Overloaded(Duration::from_secs(1)));
        // A refusal takes nothing; another tenant has its own bucket.
        l.admit_at("a", 50, 0, t0).unwrap();
        l.admit_at("b", 200, 0, t0).unwrap();
        // After 1.5 s: 150 back.
        l.admit_at("a", 150, 0, t0 + Duration::from_millis(1500)).unwrap();
        // Never more than the burst, however long the quiet.
        let later = t0 + Duration::from_secs(3600);
        assert_eq!(
            l.admit_at("a", 201, 0, later).unwrap_err().kind,
            ErrorKind::TooLarge
        );
        l.admit_at("a", 200, 0, later).unwrap();
        assert!(matches!(
            l.admit_at("a", 1, 0, later).unwrap_err().kind,
            ErrorKind::Overloaded(_)
        ));
    }

    #[test]
    fn bytes_and_per_tenant_overrides() {
        let l = limiter(&[
            "--ingest-rate-bytes",
            "1KiB",
            "--ingest-burst-seconds",
            "1",
            "--tenant-ingest-rate-bytes",
            "big=0",
            "--tenant-ingest-rate-samples",
            "slow=1,big=5",
        ]);
        let t0 = Instant::now();
        l.admit_at("a", 1_000_000, 1024, t0).unwrap();
        let error = l.admit_at("a", 0, 512, t0).unwrap_err();
        assert_eq!(error.kind, ErrorKind::Overloaded(Duration::from_secs(1)));
        assert!(error.message.contains("\"a\""), "{}", error.message);
        // `big` has no byte limit but five samples a second; `slow` keeps the byte limit.
        l.admit_at("big", 5, 1 << 30, t0).unwrap();
        assert_eq!(l.admit_at("big", 6, 0, t0).unwrap_err().kind, ErrorKind::TooLarge);
        assert_eq!(
            l.admit_at("slow", 1, 2048, t0).unwrap_err().kind,
            ErrorKind::TooLarge
        );
        // Unlimited by default.
        let open = limiter(&[]);
        open.admit_at("a", usize::MAX, usize::MAX, t0).unwrap();
    }
}
