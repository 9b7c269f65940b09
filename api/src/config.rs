//! Server configuration: flags, each also settable through a `STACKHOUSE_*` variable.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
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

    /// Flush a tenant early once this many samples wait.
    #[arg(long, env = "STACKHOUSE_MAX_PENDING_SAMPLES", default_value_t = 1_000_000)]
    pub max_pending_samples: usize,

    #[arg(long, env = "STACKHOUSE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

impl ServeArgs {
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
        match &self.catalog {
            Some(url) => Ok(url.clone()),
            None => Ok(format!(
                "sqlite://{}",
                absolute(&self.data_dir.join("catalog.db"))?.display()
            )),
        }
    }
}

fn absolute(path: &std::path::Path) -> anyhow::Result<PathBuf> {
    Ok(std::path::absolute(path)?)
}
