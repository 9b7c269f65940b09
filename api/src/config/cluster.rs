//! `--query-worker-addr`, `--query-workers`, `--query-workers-dns`,
//! `--query-distribute-bytes` and `--query-cluster-secret`: query processes that share
//! large scans.

use std::net::SocketAddr;

use anyhow::{Context, bail};
use clap::Args;
use stackhouse_query::cluster::{ClusterConfig, DEFAULT_DISTRIBUTE_BYTES, WorkerSource};

use super::size::parse_size;

/// Query workers: every query process can serve as one, and a coordinator hands the scan
/// stages of large queries to them.
#[derive(Args, Debug, Clone)]
pub struct ClusterArgs {
    /// Serve the query worker endpoint (gRPC) here, for coordinators to send scan stages
    /// to; query role only. Keep it inside the cluster: it needs `--query-cluster-secret`.
    #[arg(long, env = "STACKHOUSE_QUERY_WORKER_ADDR")]
    pub query_worker_addr: Option<SocketAddr>,

    /// Query workers to hand large scans to, `host:port` of their `--query-worker-addr`
    /// (comma-separated in the variable). Without workers every query runs in-process.
    #[arg(
        long,
        env = "STACKHOUSE_QUERY_WORKERS",
        value_delimiter = ',',
        conflicts_with = "query_workers_dns"
    )]
    pub query_workers: Vec<String>,

    /// A DNS name (`name:port`) whose addresses are the query workers, looked up every 5s:
    /// the Helm chart's headless Service, which lists ready pods only.
    #[arg(long, env = "STACKHOUSE_QUERY_WORKERS_DNS")]
    pub query_workers_dns: Option<String>,

    /// Size of `samples` objects per worker task: a query over less runs in-process with
    /// no network hop; one over N times as much runs as N tasks, at most one per worker.
    /// A size like `--ingest-memory-budget`.
    #[arg(long, env = "STACKHOUSE_QUERY_DISTRIBUTE_BYTES", default_value = "256MiB", value_parser = parse_size)]
    pub query_distribute_bytes: usize,

    /// The secret shared by coordinators and workers: sent with every call to a worker,
    /// which refuses calls without it. Required with workers or a worker address.
    #[arg(long, env = "STACKHOUSE_QUERY_CLUSTER_SECRET", hide_env_values = true)]
    pub query_cluster_secret: Option<String>,
}

impl ClusterArgs {
    /// The secret, required once this process serves or uses workers.
    pub fn secret(&self) -> anyhow::Result<Option<&str>> {
        let uses_workers = !self.query_workers.is_empty() || self.query_workers_dns.is_some();
        match (
            &self.query_cluster_secret,
            uses_workers || self.query_worker_addr.is_some(),
        ) {
            (Some(secret), _) => Ok(Some(secret)),
            (None, true) => bail!(
                "--query-cluster-secret is required with --query-worker-addr, --query-workers or --query-workers-dns"
            ),
            (None, false) => Ok(None),
        }
    }

    /// Where this process's queries go: `None` when it has no workers.
    pub async fn config(&self) -> anyhow::Result<Option<ClusterConfig>> {
        let secret = self.secret()?;
        let source = if let Some(dns) = &self.query_workers_dns {
            WorkerSource::Dns(dns.clone())
        } else if !self.query_workers.is_empty() {
            WorkerSource::Fixed(self.query_workers.clone())
        } else {
            return Ok(None);
        };
        let secret = secret.context("checked above")?;
        let config = ClusterConfig::start(source, self.query_distribute_bytes as u64, secret)
            .await
            .map_err(anyhow::Error::msg)?;
        Ok(Some(config))
    }
}

const _: () = assert!(
    DEFAULT_DISTRIBUTE_BYTES == 256 << 20,
    "keep the flag's default in step"
);

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        cluster: ClusterArgs,
    }

    #[tokio::test]
    async fn workers_need_the_secret() {
        let cli = Cli::try_parse_from(["stackhouse"]).unwrap();
        assert!(cli.cluster.config().await.unwrap().is_none());
        assert_eq!(cli.cluster.query_distribute_bytes, 256 << 20);

        let cli = Cli::try_parse_from(["stackhouse", "--query-workers", "a:1,b:2"]).unwrap();
        let err = cli.cluster.config().await.unwrap_err().to_string();
        assert!(err.contains("--query-cluster-secret is required"), "{err}");

        let cli = Cli::try_parse_from(["stackhouse", "--query-worker-addr", "127.0.0.1:7001"]).unwrap();
        assert!(cli.cluster.secret().is_err());

        let cli = Cli::try_parse_from([
            "stackhouse",
            "--query-workers",
            "a:1,b:2",
            "--query-cluster-secret",
            "s",
            "--query-distribute-bytes",
            "1MiB",
        ])
        .unwrap();
        let config = cli.cluster.config().await.unwrap().unwrap();
        // Nothing listens at a:1 or b:2, so no worker is live and queries stay local.
        let shown = format!("{config:?}");
        assert!(
            shown.contains("live_workers: []") && shown.contains("1048576"),
            "{shown}"
        );

        let both = Cli::try_parse_from([
            "stackhouse",
            "--query-workers",
            "a:1",
            "--query-workers-dns",
            "q:1",
        ]);
        assert!(both.is_err(), "a list and a DNS name conflict");
    }
}
