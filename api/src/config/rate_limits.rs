//! The flags of the per-tenant ingestion rates ([`stackhouse_ingest::limits::RateLimiter`]):
//! a request over its tenant's rate is refused as overloaded with the time until there is
//! enough (429 + `Retry-After`, RESOURCE_EXHAUSTED + RetryInfo), and one larger than the
//! whole burst is refused for good (413 / RESOURCE_EXHAUSTED without RetryInfo).

use clap::Args;
use stackhouse_ingest::limits::RateLimits;

use super::{PerTenant, parse_size, tenant_override, tenant_value};

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

impl RateLimitArgs {
    /// The rates these flags set.
    pub fn limits(&self) -> RateLimits {
        RateLimits {
            samples: PerTenant::new(self.ingest_rate_samples, &self.tenant_ingest_rate_samples),
            bytes: PerTenant::new(self.ingest_rate_bytes, &self.tenant_ingest_rate_bytes),
            burst_seconds: self.ingest_burst_seconds,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use clap::Parser;
    use stackhouse_ingest::limits::RateLimiter;

    use super::*;
    use crate::error::{ApiError, ErrorKind};

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: RateLimitArgs,
    }

    /// The limiter of `args`, refusing with the API's errors.
    struct Limiter(RateLimiter);

    impl Limiter {
        fn admit_at(&self, tenant: &str, samples: usize, bytes: usize, now: Instant) -> Result<(), ApiError> {
            Ok(self.0.admit_at(tenant, samples, bytes, now)?)
        }
    }

    fn limiter(args: &[&str]) -> Limiter {
        let cli = Cli::try_parse_from(std::iter::once("x").chain(args.iter().copied())).unwrap();
        Limiter(RateLimiter::new(cli.args.limits()))
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
