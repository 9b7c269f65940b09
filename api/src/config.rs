//! Server configuration: flags, each also settable through a `STACKHOUSE_*` variable.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};
use stackhouse_query::QueryLimits;

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// A YAML file of these flags (keys without the leading --); the environment and the
    /// command line override it. `stackhouse config example` prints one.
    #[arg(long, env = "STACKHOUSE_CONFIG")]
    pub config: Option<PathBuf>,

    /// Folder for the embedded defaults (Parquet objects and the SQLite catalog).
    #[arg(long, env = "STACKHOUSE_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,

    /// HTTP listen address: OTLP/HTTP, the query API, health.
    #[arg(long, env = "STACKHOUSE_HTTP_ADDR", default_value = "0.0.0.0:4040")]
    pub http_addr: SocketAddr,

    /// OTLP gRPC listen address.
    #[arg(long, env = "STACKHOUSE_GRPC_ADDR", default_value = "0.0.0.0:4317")]
    pub grpc_addr: SocketAddr,

    /// Object storage URL: `file:///abs/dir` or `s3://bucket/prefix` (AWS_* variables,
    /// AWS_ENDPOINT_URL included). Default: `<data-dir>/objects`.
    #[arg(long, env = "STACKHOUSE_STORAGE")]
    pub storage: Option<String>,

    /// Catalog URL: `sqlite:///abs/file.db` or `postgres://user@host/db`.
    /// Default: SQLite at `<data-dir>/catalog.db`.
    #[arg(long, env = "STACKHOUSE_CATALOG")]
    pub catalog: Option<String>,

    /// How long the writer gathers requests into one segment before making it durable.
    #[arg(long, env = "STACKHOUSE_FLUSH_INTERVAL", default_value = "1s", value_parser = humantime::parse_duration)]
    pub flush_interval: Duration,

    /// Largest accepted request, in bytes after decompression (gRPC message and HTTP body).
    #[arg(long, env = "STACKHOUSE_MAX_MESSAGE_BYTES", default_value_t = 64 << 20)]
    pub max_message_bytes: usize,

    /// A flush that has not stored its segment after this long fails: the requests waiting
    /// for it are answered 503 / UNAVAILABLE (retry) instead of waiting out an outage.
    #[arg(long, env = "STACKHOUSE_FLUSH_TIMEOUT", default_value = "30s", value_parser = humantime::parse_duration)]
    pub flush_timeout: Duration,

    /// Flush a tenant early once this many samples wait.
    #[arg(long, env = "STACKHOUSE_MAX_PENDING_SAMPLES", default_value_t = 1_000_000)]
    pub max_pending_samples: usize,

    /// Memory for ingested data accepted but not yet stored (estimated); a request that
    /// would go over it is answered 429 / RESOURCE_EXHAUSTED with a retry delay. A size:
    /// bytes, or with a unit such as `512MiB`, `2GiB`, `100MB`.
    #[arg(long, env = "STACKHOUSE_INGEST_MEMORY_BUDGET", default_value = "512MiB", value_parser = parse_size)]
    pub ingest_memory_budget: usize,

    /// Memory all running queries may use together (DataFusion's memory pool); a query
    /// that needs more fails with 503 naming the budget. A size like `--ingest-memory-budget`.
    #[arg(long, env = "STACKHOUSE_QUERY_MEMORY_BUDGET", default_value = "2GiB", value_parser = parse_size)]
    pub query_memory_budget: usize,

    #[arg(long, env = "STACKHOUSE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// `required`: every ingest and query request needs a tenant token (`stackhouse tenant
    /// token create`); health, metrics and the web UI's files stay open.
    #[arg(long, env = "STACKHOUSE_AUTH", value_enum, default_value_t = crate::auth::AuthMode::Off)]
    pub auth: crate::auth::AuthMode,

    /// Profiles with times further ahead of the server's clock than this are refused (in
    /// partial_success), as are times older than the tenant's `--retention`.
    #[arg(long, env = "STACKHOUSE_INGEST_MAX_FUTURE", default_value = "10m", value_parser = humantime::parse_duration)]
    pub ingest_max_future: Duration,

    /// PEM certificate chain: serve HTTPS and gRPC over TLS (with `--tls-key-file`).
    #[arg(long, env = "STACKHOUSE_TLS_CERT_FILE")]
    pub tls_cert_file: Option<PathBuf>,

    /// PEM private key of `--tls-cert-file`.
    #[arg(long, env = "STACKHOUSE_TLS_KEY_FILE")]
    pub tls_key_file: Option<PathBuf>,

    /// How long a valid token is trusted before the catalog is asked again: a revoked token
    /// stops working within this time. `0s` asks every time.
    #[arg(long, env = "STACKHOUSE_AUTH_CACHE_TTL", default_value = "10s", value_parser = humantime::parse_duration)]
    pub auth_cache_ttl: Duration,

    #[command(flatten)]
    pub query_limits: QueryLimitArgs,

    #[command(flatten)]
    pub rate_limits: crate::rate_limit::RateLimitArgs,

    #[command(flatten)]
    pub ingest_limits: crate::ingest_limits::IngestLimitArgs,

    #[command(flatten)]
    pub lifecycle: crate::lifecycle::LifecycleArgs,

    #[command(flatten)]
    pub debuginfo: DebugInfoArgs,
}

/// Debug files that name native frames (`/api/v1/debuginfo`, debuginfod).
#[derive(Args, Debug, Clone)]
pub struct DebugInfoArgs {
    /// Largest debug file accepted by `PUT /api/v1/debuginfo/{build_id}` or taken from a
    /// debuginfod server. A size like `--ingest-memory-budget`.
    #[arg(long, env = "STACKHOUSE_DEBUGINFO_MAX_FILE_BYTES", default_value = "512MiB", value_parser = parse_size)]
    pub debuginfo_max_file_bytes: usize,

    /// Memory for parsed debug files, counted by the sizes of their files; the least
    /// recently used are dropped first.
    #[arg(long, env = "STACKHOUSE_DEBUGINFO_CACHE_BYTES", default_value = "1GiB", value_parser = parse_size)]
    pub debuginfo_cache_bytes: usize,

    /// A debuginfod server (`https://debuginfod.example.org`) asked for the build ids no
    /// upload covers; repeatable (comma-separated in the variable), asked in order.
    #[arg(long = "debuginfod-url", env = "STACKHOUSE_DEBUGINFOD_URLS", value_delimiter = ',', value_parser = parse_debuginfod_url)]
    pub debuginfod_urls: Vec<url::Url>,

    /// How long a build id no debuginfod server has is not asked for again.
    #[arg(long, env = "STACKHOUSE_DEBUGINFOD_NEGATIVE_TTL", default_value = "10m", value_parser = humantime::parse_duration)]
    pub debuginfod_negative_ttl: Duration,

    /// Longest a debuginfod request may take.
    #[arg(long, env = "STACKHOUSE_DEBUGINFOD_TIMEOUT", default_value = "60s", value_parser = humantime::parse_duration)]
    pub debuginfod_timeout: Duration,
}

impl DebugInfoArgs {
    pub fn config(&self) -> stackhouse_query::debuginfo::DebugInfoConfig {
        stackhouse_query::debuginfo::DebugInfoConfig {
            max_file_bytes: self.debuginfo_max_file_bytes,
            cache_bytes: self.debuginfo_cache_bytes,
            debuginfod_urls: self.debuginfod_urls.clone(),
            debuginfod_negative_ttl: self.debuginfod_negative_ttl,
            debuginfod_timeout: self.debuginfod_timeout,
        }
    }
}

fn parse_debuginfod_url(s: &str) -> Result<url::Url, String> {
    let url = url::Url::parse(s).map_err(|e| format!("invalid debuginfod url {s:?}: {e}"))?;
    match url.scheme() {
        "http" | "https" => Ok(url),
        other => Err(format!(
            "invalid debuginfod url {s:?}: scheme {other:?}, want http or https"
        )),
    }
}

/// Guard rails of the query API; a query over one is refused with 422 naming the limit.
#[derive(Args, Debug, Clone)]
pub struct QueryLimitArgs {
    /// Longest time a query may cover, counted over the part of its range that holds the
    /// tenant's data (`from=0` over a store of one day counts as a day).
    #[arg(long, env = "STACKHOUSE_QUERY_MAX_RANGE", default_value = "31d", value_parser = humantime::parse_duration)]
    pub query_max_range: Duration,

    /// Most series one query may select.
    #[arg(long, env = "STACKHOUSE_QUERY_MAX_SERIES", default_value_t = 100_000)]
    pub query_max_series: usize,

    /// Largest `max_nodes` a client may ask for.
    #[arg(long, env = "STACKHOUSE_QUERY_MAX_NODES", default_value_t = 65_536)]
    pub query_max_nodes: usize,

    /// Most groups a `group_by` may produce.
    #[arg(long, env = "STACKHOUSE_QUERY_MAX_GROUPS", default_value_t = 1_000)]
    pub query_max_groups: usize,

    /// Most points per series of a time series (range / step).
    #[arg(long, env = "STACKHOUSE_QUERY_MAX_POINTS", default_value_t = 11_000)]
    pub query_max_points: usize,

    /// Largest page of events.
    #[arg(long, env = "STACKHOUSE_QUERY_MAX_EVENTS", default_value_t = 10_000)]
    pub query_max_events: usize,

    /// Most trace, span and profile ids in one query.
    #[arg(long, env = "STACKHOUSE_QUERY_MAX_IDS", default_value_t = 1_000)]
    pub query_max_ids: usize,

    /// Longest a query may run before it is cancelled.
    #[arg(long, env = "STACKHOUSE_QUERY_TIMEOUT", default_value = "60s", value_parser = humantime::parse_duration)]
    pub query_timeout: Duration,
}

impl QueryLimitArgs {
    pub fn limits(&self) -> QueryLimits {
        QueryLimits {
            max_range: self.query_max_range,
            max_series: self.query_max_series,
            max_nodes: self.query_max_nodes,
            max_groups: self.query_max_groups,
            max_points: self.query_max_points,
            max_events: self.query_max_events,
            max_ids: self.query_max_ids,
            timeout: self.query_timeout,
        }
    }
}

/// The flag that raises a limit, by the name of its [`QueryLimits`] field (as
/// `QueryError::LimitExceeded` names it).
pub fn limit_flag(limit: &str) -> Option<&'static str> {
    Some(match limit {
        "max_range" => "--query-max-range",
        "max_series" => "--query-max-series",
        "max_nodes" => "--query-max-nodes",
        "max_groups" => "--query-max-groups",
        "max_points" => "--query-max-points",
        "max_events" => "--query-max-events",
        "max_ids" => "--query-max-ids",
        "timeout" => "--query-timeout",
        _ => return None,
    })
}

/// A byte size: a whole number, optionally followed by a unit `B`, `KiB`, `MiB`, `GiB`,
/// `TiB` (powers of 1024) or `KB`, `MB`, `GB`, `TB` (powers of 1000), case-insensitive.
pub fn parse_size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("invalid size {text:?}: expected a number such as 512MiB"))?;
    let multiplier: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        other => {
            return Err(format!(
                "invalid size unit {other:?} in {text:?}: use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB"
            ));
        }
    };
    number
        .checked_mul(multiplier)
        .and_then(|bytes| usize::try_from(bytes).ok())
        .ok_or_else(|| format!("size {text:?} is too large"))
}

impl ServeArgs {
    /// `serve`'s flags from `flags` (no program name first), the environment and defaults:
    /// for embedding a server's services without its command line.
    pub fn from_flags<T: Into<std::ffi::OsString> + Clone>(
        flags: impl IntoIterator<Item = T>,
    ) -> Result<ServeArgs, clap::Error> {
        use clap::FromArgMatches;
        let argv =
            std::iter::once(std::ffi::OsString::from("serve")).chain(flags.into_iter().map(Into::into));
        ServeArgs::from_arg_matches(&crate::config_file::serve_command().try_get_matches_from(argv)?)
    }

    pub fn storage_url(&self) -> anyhow::Result<String> {
        match &self.storage {
            Some(url) => Ok(url.clone()),
            None => Ok(format!(
                "file://{}",
                absolute(&self.data_dir.join("objects"))?.display()
            )),
        }
    }

    pub fn catalog_url(&self) -> anyhow::Result<String> {
        catalog_url(self.catalog.as_deref(), &self.data_dir)
    }
}

/// A per-tenant flag value, `tenant=value`: the tenant and the value, unparsed.
pub fn tenant_override(s: &str) -> Result<(&str, &str), String> {
    let (tenant, value) = s
        .split_once('=')
        .ok_or_else(|| format!("expected tenant=value, got {s:?}"))?;
    if tenant.is_empty() {
        return Err(format!("empty tenant in {s:?}"));
    }
    Ok((tenant, value))
}

/// A `tenant=N` flag value, the number parsed.
pub fn tenant_value<T: std::str::FromStr>(s: &str) -> Result<(String, T), String> {
    let (tenant, value) = tenant_override(s)?;
    let value = value.parse().map_err(|_| format!("bad number in {s:?}"))?;
    Ok((tenant.to_string(), value))
}

pub use stackhouse_storage::per_tenant::PerTenant;

/// The catalog `--catalog` names, else the SQLite file under `--data-dir`.
pub fn catalog_url(catalog: Option<&str>, data_dir: &std::path::Path) -> anyhow::Result<String> {
    match catalog {
        Some(url) => Ok(url.to_string()),
        None => Ok(format!(
            "sqlite://{}",
            absolute(&data_dir.join("catalog.db"))?.display()
        )),
    }
}

fn absolute(path: &std::path::Path) -> anyhow::Result<PathBuf> {
    Ok(std::path::absolute(path)?)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        serve: ServeArgs,
    }

    #[test]
    fn limit_defaults_match_the_engine_defaults() {
        let cli = Cli::try_parse_from(["stackhouse"]).unwrap();
        let ours = cli.serve.query_limits.limits();
        let engine = QueryLimits::default();
        assert_eq!(format!("{ours:?}"), format!("{engine:?}"));
    }

    #[test]
    fn limits_are_configurable() {
        let cli = Cli::try_parse_from([
            "stackhouse",
            "--query-max-range",
            "2h",
            "--query-max-points",
            "50",
            "--query-timeout",
            "1500ms",
        ])
        .unwrap();
        let limits = cli.serve.query_limits.limits();
        assert_eq!(limits.max_range, Duration::from_secs(7200));
        assert_eq!(limits.max_points, 50);
        assert_eq!(limits.timeout, Duration::from_millis(1500));
        assert_eq!(limits.max_nodes, 65_536);
    }

    #[test]
    fn tenant_values_and_overrides() {
        assert_eq!(tenant_value::<u64>("a=5"), Ok(("a".to_string(), 5)));
        assert!(tenant_value::<u64>("a=x").is_err());
        assert!(tenant_value::<u64>("=5").is_err());
        assert!(tenant_value::<u64>("5").is_err());
        let limits = PerTenant::new(10, &[("big".to_string(), 100)]);
        assert_eq!(limits.of("big"), 100);
        assert_eq!(limits.of("other"), 10);
    }

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("2gib"), Ok(2 << 30));
        assert_eq!(parse_size("100MB"), Ok(100_000_000));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("1 KiB"), Ok(1024));
        for bad in ["", "MiB", "1.5GiB", "12 parsecs", "-1", "99999999999TiB"] {
            assert!(parse_size(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn memory_budgets_have_defaults_and_flags() {
        let cli = Cli::try_parse_from(["stackhouse"]).unwrap();
        assert_eq!(cli.serve.ingest_memory_budget, 512 << 20);
        assert_eq!(cli.serve.query_memory_budget, 2 << 30);
        let cli = Cli::try_parse_from([
            "stackhouse",
            "--ingest-memory-budget",
            "64MiB",
            "--query-memory-budget",
            "1GB",
        ])
        .unwrap();
        assert_eq!(cli.serve.ingest_memory_budget, 64 << 20);
        assert_eq!(cli.serve.query_memory_budget, 1_000_000_000);
    }

    #[test]
    fn every_limit_has_a_flag() {
        let help = format!("{:?}", QueryLimits::default());
        for field in [
            "max_range",
            "max_series",
            "max_nodes",
            "max_groups",
            "max_points",
            "max_events",
            "max_ids",
            "timeout",
        ] {
            assert!(
                help.contains(&format!("{field}:")),
                "{field} is not a QueryLimits field"
            );
            assert!(limit_flag(field).is_some(), "{field} has no flag");
        }
        assert_eq!(limit_flag("nonsense"), None);
    }
}
