//! Server configuration, in one place: the `serve` flags (each also settable through a
//! `STACKHOUSE_*` variable), grouped by what they configure; the config file layered under
//! them ([`file`], [`example`]); and per-tenant exceptions ([`tenants`]), each resolving to
//! one [`PerTenant`]. The rest of the crate reads configuration from here; nothing here
//! reads the rest of the crate. The ingest rate and limit flags build the types whose
//! checks live in `stackhouse_ingest::limits`.

mod auth;
mod cluster;
mod debuginfo;
pub mod example;
pub mod file;
mod ingest_limits;
mod lifecycle;
mod query_limits;
mod rate_limits;
mod recording_rules;
mod roles;
mod size;
mod tenants;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Command, ValueEnum};
use stackhouse_ingest::jfr::FrameNames;

pub use auth::AuthMode;
pub use cluster::ClusterArgs;
pub use debuginfo::DebugInfoArgs;
pub use ingest_limits::IngestLimitArgs;
pub use lifecycle::LifecycleArgs;
pub use query_limits::{QueryLimitArgs, limit_flag};
pub use rate_limits::RateLimitArgs;
pub use recording_rules::{Provisioned, RecordingRuleArgs, RecordingRuleConfig};
pub use roles::{Role, Roles};
pub use size::parse_size;
pub use tenants::{PerTenant, tenant_override, tenant_value};

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

    /// Whether queries read the per-minute and per-hour rollups where they answer exactly
    /// (`true`), or raw samples only (`false`: the same answers, more rows read; for
    /// checking the tiers or measuring scans).
    #[arg(long, env = "STACKHOUSE_QUERY_ROLLUPS", default_value_t = true, action = clap::ArgAction::Set)]
    pub query_rollups: bool,

    #[arg(long, env = "STACKHOUSE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// `required`: every ingest and query request needs a tenant token (`stackhouse tenant
    /// token create`); health, metrics and the web UI's files stay open.
    #[arg(long, env = "STACKHOUSE_AUTH", value_enum, default_value_t = AuthMode::Off)]
    pub auth: AuthMode,

    /// Profiles with times further ahead of the server's clock than this are refused (in
    /// partial_success), as are times older than the tenant's `--retention`.
    #[arg(long, env = "STACKHOUSE_INGEST_MAX_FUTURE", default_value = "10m", value_parser = humantime::parse_duration)]
    pub ingest_max_future: Duration,

    /// How JFR frames are named: `pyroscope` as Pyroscope names them
    /// (`kafka/network/Processor.poll`, lambdas merged into `$$Lambda_`), `jdk` in the
    /// JDK's dotted style (`kafka.network.Processor.poll`).
    #[arg(long, env = "STACKHOUSE_JFR_FRAME_NAMES", default_value_t = FrameNames::Pyroscope)]
    pub jfr_frame_names: FrameNames,

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
    pub rate_limits: RateLimitArgs,

    #[command(flatten)]
    pub ingest_limits: IngestLimitArgs,

    #[command(flatten)]
    pub lifecycle: LifecycleArgs,

    #[command(flatten)]
    pub debuginfo: DebugInfoArgs,

    #[command(flatten)]
    pub cluster: ClusterArgs,

    #[command(flatten)]
    pub recording_rules: RecordingRuleArgs,
}

/// The `serve` flags as a command, for reading a config file against them.
pub fn serve_command() -> Command {
    ServeArgs::augment_args(Command::new("serve"))
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
        ServeArgs::from_arg_matches(&serve_command().try_get_matches_from(argv)?)
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

/// The catalog `--catalog` names, else the SQLite file under `--data-dir`.
pub fn catalog_url(catalog: Option<&str>, data_dir: &Path) -> anyhow::Result<String> {
    match catalog {
        Some(url) => Ok(url.to_string()),
        None => Ok(format!(
            "sqlite://{}",
            absolute(&data_dir.join("catalog.db"))?.display()
        )),
    }
}

fn absolute(path: &Path) -> anyhow::Result<PathBuf> {
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
}
