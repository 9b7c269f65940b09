//! `--debuginfo-*` and `--debuginfod-*`: uploaded debug files and debuginfod servers.

use std::time::Duration;

use clap::Args;

use super::size::parse_size;

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
