//! Where the query workers are, and which of them answer: a fixed list, or a DNS name (a
//! headless Service, which lists ready pods only) looked up again every few seconds; each
//! known worker is asked for its version every second, and only those that answer are
//! handed tasks. A query that a worker fails asks for a probe at once ([`Workers::reprobe`])
//! and runs again over the workers that still answer; with none left it runs in the
//! coordinator itself.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use datafusion::common::DataFusionError;
use datafusion_distributed::{ChannelResolver, GetWorkerInfoRequest, WorkerResolver};
use url::Url;

use super::channel::Channels;

/// How often a DNS name of workers is looked up again.
pub const DNS_REFRESH: Duration = Duration::from_secs(5);
/// How often every worker is asked whether it is there.
const PROBE_INTERVAL: Duration = Duration::from_secs(1);
/// A worker that takes longer to answer a probe is left out until it answers in time.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// Where the workers are configured to be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WorkerSource {
    /// `host:port` addresses.
    Fixed(Vec<String>),
    /// `name:port`, every address the name resolves to.
    Dns(String),
}

/// The workers that answered the last probe; the planner reads them synchronously, so
/// the lookups and probes run in a background task that replaces the list.
#[derive(Clone)]
pub struct Workers {
    probed: Arc<Probed>,
    /// Stops the probes when the last handle goes.
    _probes: Arc<AbortOnDrop>,
}

struct Probed {
    live: RwLock<Vec<Url>>,
    /// Every worker the source names, answering or not: what a probe asks.
    known: RwLock<Vec<Url>>,
    channels: Channels,
}

struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Workers {
    /// Probes the workers once, then every [`PROBE_INTERVAL`] in the background. A failed
    /// DNS lookup keeps the previous addresses: a DNS hiccup does not empty the cluster.
    pub(crate) async fn start(source: WorkerSource, channels: Channels) -> Result<Workers, String> {
        let found = match &source {
            WorkerSource::Fixed(addrs) => addrs
                .iter()
                .map(|a| worker_url(a))
                .collect::<Result<Vec<_>, _>>()?,
            WorkerSource::Dns(name) => lookup(name).await.unwrap_or_else(|e| {
                tracing::warn!(workers = %name, error = %e, "looking up query workers failed");
                Vec::new()
            }),
        };
        let live = probe_all(&found, &channels).await;
        record(&found, &live);
        let probed = Arc::new(Probed {
            live: RwLock::new(live),
            known: RwLock::new(found),
            channels,
        });
        let probing = probed.clone();
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(PROBE_INTERVAL);
            tick.tick().await;
            let lookups_every = (DNS_REFRESH.as_secs() / PROBE_INTERVAL.as_secs()).max(1);
            for round in 1u64.. {
                tick.tick().await;
                if let WorkerSource::Dns(name) = &source
                    && round % lookups_every == 0
                {
                    match lookup(name).await {
                        Ok(found) => *probing.known.write().expect("workers lock") = found,
                        Err(e) => {
                            tracing::warn!(workers = %name, error = %e, "looking up query workers failed");
                        }
                    }
                }
                probing.reprobe().await;
            }
        });
        Ok(Workers {
            probed,
            _probes: Arc::new(AbortOnDrop(task.abort_handle())),
        })
    }

    /// Asks every known worker now and keeps those that answer: after a query lost a
    /// worker, the next plan goes to the others without waiting for the next round.
    pub async fn reprobe(&self) {
        self.probed.reprobe().await;
    }

    /// The workers that answered the last probe.
    pub fn urls(&self) -> Vec<Url> {
        self.probed.live.read().expect("workers lock").clone()
    }
}

impl Probed {
    async fn reprobe(&self) {
        let known = self.known.read().expect("workers lock").clone();
        let answered = probe_all(&known, &self.channels).await;
        record(&known, &answered);
        let mut live = self.live.write().expect("workers lock");
        if *live != answered {
            tracing::info!(workers = ?answered.iter().map(Url::as_str).collect::<Vec<_>>(), "query workers changed");
            *live = answered;
        }
    }
}

impl WorkerResolver for Workers {
    fn get_urls(&self) -> Result<Vec<Url>, DataFusionError> {
        Ok(self.urls())
    }
}

/// Operators alert on workers that stop answering, and tests wait on the count to know
/// when the planner stopped handing tasks to a worker they stopped.
fn record(known: &[Url], answered: &[Url]) {
    metrics::gauge!("stackhouse_query_workers_known").set(known.len() as f64);
    metrics::gauge!("stackhouse_query_workers_answering").set(answered.len() as f64);
}

/// The workers of `known` that answer within [`PROBE_TIMEOUT`], in `known`'s order.
async fn probe_all(known: &[Url], channels: &Channels) -> Vec<Url> {
    let answers = futures::future::join_all(known.iter().map(|url| async move {
        let probe = async {
            let mut client = channels.get_worker_client_for_url(url).await?;
            client.get_worker_info(GetWorkerInfoRequest {}).await
        };
        match tokio::time::timeout(PROBE_TIMEOUT, probe).await {
            Ok(Ok(_)) => true,
            Ok(Err(e)) => {
                tracing::debug!(worker = %url, error = %e, "query worker did not answer");
                false
            }
            Err(_) => false,
        }
    }))
    .await;
    known
        .iter()
        .zip(answers)
        .filter(|(_, up)| *up)
        .map(|(url, _)| url.clone())
        .collect()
}

fn worker_url(addr: &str) -> Result<Url, String> {
    let with_scheme = if addr.contains("://") {
        addr.to_string()
    } else {
        format!("http://{addr}")
    };
    let url = Url::parse(&with_scheme).map_err(|e| format!("query worker address {addr:?}: {e}"))?;
    if url.port().is_none() || url.host().is_none() {
        return Err(format!("query worker address {addr:?} needs a host and a port"));
    }
    Ok(url)
}

async fn lookup(name_port: &str) -> Result<Vec<Url>, String> {
    let mut addrs: Vec<_> = tokio::net::lookup_host(name_port)
        .await
        .map_err(|e| format!("{name_port}: {e}"))?
        .collect();
    // A stable order, so that the probes' list only changes when the workers do.
    addrs.sort();
    addrs.dedup();
    addrs.into_iter().map(|a| worker_url(&a.to_string())).collect()
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    #[test]
    fn addresses_become_urls() {
        assert_eq!(
            worker_url("127.0.0.1:7001").unwrap().as_str(),
            "http://127.0.0.1:7001/"
        );
        assert_eq!(
            worker_url("http://q-1.q:7001").unwrap().as_str(),
            "http://q-1.q:7001/"
        );
        let err = worker_url("nohost").unwrap_err();
        assert!(err.contains("nohost"), "{err}");
    }

    #[tokio::test]
    async fn a_dns_name_lists_every_address_it_resolves_to() {
        let urls = lookup("localhost:7001").await.unwrap();
        assert!(!urls.is_empty(), "localhost resolved to nothing");
        assert!(urls.iter().all(|u| u.port() == Some(7001)), "{urls:?}");
    }

    #[tokio::test]
    async fn workers_that_do_not_answer_are_left_out() {
        // Bound and closed: nothing listens there.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let channels = Channels::new(HeaderValue::from_static("secret"));
        let workers = Workers::start(WorkerSource::Fixed(vec![format!("127.0.0.1:{port}")]), channels)
            .await
            .unwrap();
        assert!(workers.urls().is_empty());
        let err = Workers::start(
            WorkerSource::Fixed(vec!["nohost".into()]),
            Channels::new(HeaderValue::from_static("s")),
        )
        .await
        .err()
        .unwrap();
        assert!(err.contains("needs a host and a port"), "{err}");
    }
}
