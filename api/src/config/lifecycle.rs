//! The flags of the storage lifecycle (roles, compaction, retention, cleanup), resolved
//! into the storage crate's [`MaintenanceConfig`].

use std::time::Duration;

use clap::Args;
use stackhouse_storage::compaction::{CompactionConfig, MIN_LEASE_TTL, Policy};
use stackhouse_storage::maintenance::MaintenanceConfig;
use stackhouse_storage::retention::RetentionConfig;

use super::roles::{Role, Roles};
use super::tenants::{PerTenant, tenant_override};

#[derive(Args, Debug, Clone)]
pub struct LifecycleArgs {
    /// Roles of this process, comma-separated: ingest, query, compactor, all.
    #[arg(long, env = "STACKHOUSE_ROLE", value_delimiter = ',', default_value = "all")]
    pub role: Vec<Role>,

    /// How often the compactor looks for segments to merge.
    #[arg(long, env = "STACKHOUSE_COMPACTION_INTERVAL", default_value = "5s", value_parser = humantime::parse_duration)]
    pub compaction_interval: Duration,

    /// Freshly flushed segments older than this are merged even while their minute is open;
    /// with the interval this bounds how long a burst of small segments lives.
    #[arg(long, env = "STACKHOUSE_COMPACTION_L0_AGE", default_value = "10s", value_parser = humantime::parse_duration)]
    pub compaction_l0_age: Duration,

    /// A window with this many segments below a level is merged at once.
    #[arg(long, env = "STACKHOUSE_COMPACTION_MAX_SEGMENTS", default_value_t = 16)]
    pub compaction_max_segments: usize,

    /// How long after an hour ends its segments are merged into one block.
    #[arg(long, env = "STACKHOUSE_COMPACTION_SETTLE", default_value = "60s", value_parser = humantime::parse_duration)]
    pub compaction_settle: Duration,

    /// Largest block compaction writes, in samples (bounds compaction memory).
    #[arg(
        long,
        env = "STACKHOUSE_COMPACTION_MAX_BLOCK_SAMPLES",
        default_value_t = 50_000_000
    )]
    pub compaction_max_block_samples: u64,

    /// How long a compactor's lease on a tenant outlives its last renewal: the holder renews
    /// it every third of this while it works, so a crashed holder's tenants are free again
    /// this long after it died. At least 3s.
    #[arg(long, env = "STACKHOUSE_COMPACTION_LEASE_TTL", default_value = "30s", value_parser = parse_lease_ttl)]
    pub compaction_lease_ttl: Duration,

    /// How long a deletion request (`/api/v1/admin/deletes`) may be cancelled; its purge
    /// starts after it.
    #[arg(long, env = "STACKHOUSE_DELETION_CANCEL_PERIOD", default_value = "24h", value_parser = humantime::parse_duration)]
    pub deletion_cancel_period: Duration,

    /// How long replaced objects stay readable, so queries that listed them finish.
    #[arg(long, env = "STACKHOUSE_DELETION_GRACE", default_value = "5m", value_parser = humantime::parse_duration)]
    pub deletion_grace: Duration,

    /// How long samples are kept (the raw tier); `0` keeps them forever. Older samples
    /// are refused at ingest; what retention removes stays summed in the rollup tiers
    /// (`--retention-1m`, `--retention-1h`).
    #[arg(long, env = "STACKHOUSE_RETENTION", default_value = "7d", value_parser = parse_retention)]
    pub retention: Duration,

    /// Raw retention of one tenant, `tenant=duration` (`0` keeps forever); repeatable.
    #[arg(long = "tenant-retention", env = "STACKHOUSE_TENANT_RETENTION", value_delimiter = ',', value_parser = parse_tenant_retention)]
    pub tenant_retention: Vec<(String, Duration)>,

    /// How long the per-minute rollups of the samples are kept; `0` keeps them forever.
    #[arg(long = "retention-1m", env = "STACKHOUSE_RETENTION_1M", default_value = "30d", value_parser = parse_retention)]
    pub retention_1m: Duration,

    /// Minute-rollup retention of one tenant, `tenant=duration` (`0` keeps forever);
    /// repeatable.
    #[arg(long = "tenant-retention-1m", env = "STACKHOUSE_TENANT_RETENTION_1M", value_delimiter = ',', value_parser = parse_tenant_retention)]
    pub tenant_retention_1m: Vec<(String, Duration)>,

    /// How long the per-hour rollups of the samples are kept; `0` keeps them forever.
    #[arg(long = "retention-1h", env = "STACKHOUSE_RETENTION_1H", default_value = "400d", value_parser = parse_retention)]
    pub retention_1h: Duration,

    /// Hour-rollup retention of one tenant, `tenant=duration` (`0` keeps forever);
    /// repeatable.
    #[arg(long = "tenant-retention-1h", env = "STACKHOUSE_TENANT_RETENTION_1H", value_delimiter = ',', value_parser = parse_tenant_retention)]
    pub tenant_retention_1h: Vec<(String, Duration)>,

    /// How often retention runs.
    #[arg(long, env = "STACKHOUSE_RETENTION_INTERVAL", default_value = "1m", value_parser = humantime::parse_duration)]
    pub retention_interval: Duration,

    /// How often replaced objects past their grace period are deleted.
    #[arg(long, env = "STACKHOUSE_CLEANUP_INTERVAL", default_value = "30s", value_parser = humantime::parse_duration)]
    pub cleanup_interval: Duration,

    /// How often the store is listed for objects no catalog row refers to.
    #[arg(long, env = "STACKHOUSE_ORPHAN_INTERVAL", default_value = "1h", value_parser = humantime::parse_duration)]
    pub orphan_interval: Duration,

    /// Unreferenced objects younger than this are left alone (a writer may be committing).
    #[arg(long, env = "STACKHOUSE_ORPHAN_GRACE", default_value = "1h", value_parser = humantime::parse_duration)]
    pub orphan_grace: Duration,
}

fn parse_lease_ttl(s: &str) -> Result<Duration, String> {
    let ttl = humantime::parse_duration(s).map_err(|e| e.to_string())?;
    if ttl < MIN_LEASE_TTL {
        return Err(format!(
            "must be at least {}: the holder renews its lease every third of it, one catalog round trip each",
            humantime::format_duration(MIN_LEASE_TTL)
        ));
    }
    Ok(ttl)
}

fn parse_tenant_retention(s: &str) -> Result<(String, Duration), String> {
    let (tenant, duration) = tenant_override(s)?;
    let duration = parse_retention(duration).map_err(|e| format!("bad duration in {s:?}: {e}"))?;
    Ok((tenant.to_string(), duration))
}

/// A duration, or `0` for no retention limit.
fn parse_retention(s: &str) -> Result<Duration, String> {
    if s.trim() == "0" {
        return Ok(Duration::ZERO);
    }
    humantime::parse_duration(s).map_err(|e| e.to_string())
}

impl LifecycleArgs {
    pub fn roles(&self) -> Roles {
        Roles::from_flags(&self.role)
    }

    pub fn maintenance(&self) -> MaintenanceConfig {
        let defaults = MaintenanceConfig::default();
        MaintenanceConfig {
            compaction: CompactionConfig {
                interval: self.compaction_interval,
                policy: Policy {
                    l0_max_age: self.compaction_l0_age,
                    max_segments: self.compaction_max_segments,
                    settle: self.compaction_settle,
                    max_block_rows: self.compaction_max_block_samples,
                    ..defaults.compaction.policy
                },
                deletion_grace: self.deletion_grace,
                lease_ttl: self.compaction_lease_ttl,
                ..defaults.compaction
            },
            retention: RetentionConfig {
                raw: PerTenant::new(self.retention, &self.tenant_retention),
                minute: PerTenant::new(self.retention_1m, &self.tenant_retention_1m),
                hour: PerTenant::new(self.retention_1h, &self.tenant_retention_1h),
            },
            retention_interval: self.retention_interval,
            cleanup_interval: self.cleanup_interval,
            orphan_interval: self.orphan_interval,
            orphan_grace: self.orphan_grace,
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: LifecycleArgs,
    }

    #[test]
    fn roles_and_retention_parse() {
        let cli = Cli::try_parse_from(["x"]).unwrap();
        assert_eq!(cli.args.roles(), Roles::ALL);
        assert_eq!(cli.args.maintenance().retention, RetentionConfig::default());
        assert_eq!(
            cli.args.maintenance().retention.raw.default,
            Duration::from_secs(7 * 86400)
        );
        let cli =
            Cli::try_parse_from(["x", "--role", "ingest,query", "--tenant-retention", "a=7d,b=1h"]).unwrap();
        assert_eq!(
            cli.args.roles(),
            Roles {
                ingest: true,
                query: true,
                compactor: false
            }
        );
        let m = cli.args.maintenance();
        assert_eq!(m.retention.raw.of("a"), Duration::from_secs(7 * 86400));
        assert_eq!(m.retention.raw.of("b"), Duration::from_secs(3600));
        assert_eq!(m.retention.raw.of("c"), Duration::from_secs(7 * 86400));
        assert!(Cli::try_parse_from(["x", "--role", "reader"]).is_err());
        assert!(Cli::try_parse_from(["x", "--tenant-retention", "a"]).is_err());
        let forever = Cli::try_parse_from(["x", "--retention", "0", "--tenant-retention", "a=7d"]).unwrap();
        let m = forever.args.maintenance();
        assert_eq!(m.retention.raw.cutoff("b", 1_000), None);
        assert_eq!(
            m.retention.raw.cutoff("a", 7 * 86_400 * 1_000_000_000 + 5),
            Some(5)
        );
    }

    #[test]
    fn rollup_retentions_parse_per_tier_and_tenant() {
        let cli = Cli::try_parse_from([
            "x",
            "--retention-1m",
            "10d",
            "--tenant-retention-1m",
            "a=90d,b=0",
            "--retention-1h",
            "0",
            "--tenant-retention-1h",
            "a=2y",
        ])
        .unwrap();
        let r = cli.args.maintenance().retention;
        assert_eq!(r.raw.of("a"), Duration::from_secs(7 * 86400));
        assert_eq!(r.minute.of("a"), Duration::from_secs(90 * 86400));
        assert_eq!(r.minute.of("b"), Duration::ZERO);
        assert_eq!(r.minute.of("c"), Duration::from_secs(10 * 86400));
        assert_eq!(r.hour.of("c"), Duration::ZERO);
        assert!(r.hour.of("a") > Duration::from_secs(700 * 86400));
        let defaults = Cli::try_parse_from(["x"]).unwrap().args.maintenance().retention;
        assert_eq!(defaults.minute.of("a"), Duration::from_secs(30 * 86400));
        assert_eq!(defaults.hour.of("a"), Duration::from_secs(400 * 86400));
        assert!(Cli::try_parse_from(["x", "--retention-1h", "soon"]).is_err());
    }

    #[test]
    fn lease_ttl_defaults_to_30s_and_refuses_less_than_3s() {
        let ttl = |args: &[&str]| {
            Cli::try_parse_from(std::iter::once("x").chain(args.iter().copied()))
                .map(|cli| cli.args.maintenance().compaction.lease_ttl)
        };
        assert_eq!(ttl(&[]).unwrap(), Duration::from_secs(30));
        assert_eq!(
            ttl(&["--compaction-lease-ttl", "3s"]).unwrap(),
            Duration::from_secs(3)
        );
        let err = ttl(&["--compaction-lease-ttl", "2999ms"])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--compaction-lease-ttl") && err.contains("must be at least 3s"),
            "{err}"
        );
        assert!(ttl(&["--compaction-lease-ttl", "soon"]).is_err());
    }
}
