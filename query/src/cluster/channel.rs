//! Connections from a coordinator to its workers, one per worker URL, with the timeouts
//! that turn a dead or frozen worker into an error instead of a wait.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use datafusion::common::DataFusionError;
use datafusion_distributed::grpc::{BoxCloneSyncChannel, create_worker_client};
use datafusion_distributed::{ChannelResolver, WorkerChannel};
use http::HeaderValue;
use tonic::transport::Endpoint;
use tower::ServiceExt;
use url::Url;

use super::SECRET_HEADER;

/// A worker that does not accept a connection within this long is down.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// HTTP/2 pings on every connection, idle or not: a worker that stops answering them (a
/// frozen process, a partitioned node) fails its streams after interval + timeout, well
/// within a query's timeout, where TCP alone would wait for minutes.
const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(1);
const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(3);

/// One lazily connected channel per worker URL; every request on them carries the
/// cluster's secret, whichever call it is (datafusion-distributed passes extra headers on
/// some calls only).
#[derive(Clone)]
pub(crate) struct Channels {
    secret: HeaderValue,
    by_url: Arc<Mutex<HashMap<Url, BoxCloneSyncChannel>>>,
}

impl Channels {
    pub(crate) fn new(secret: HeaderValue) -> Channels {
        Channels {
            secret,
            by_url: Arc::default(),
        }
    }

    fn channel(&self, url: &Url) -> Result<BoxCloneSyncChannel, DataFusionError> {
        let mut by_url = self.by_url.lock().expect("channels lock");
        if let Some(channel) = by_url.get(url) {
            return Ok(channel.clone());
        }
        let endpoint = Endpoint::from_shared(url.to_string())
            .map_err(|e| DataFusionError::Configuration(format!("query worker url {url}: {e}")))?
            .connect_timeout(CONNECT_TIMEOUT)
            .http2_keep_alive_interval(KEEP_ALIVE_INTERVAL)
            .keep_alive_timeout(KEEP_ALIVE_TIMEOUT)
            .keep_alive_while_idle(true)
            .tcp_nodelay(true);
        // Lazy: connects on first use and again after a failure, so a worker that comes back
        // is used again without a new channel.
        let secret = self.secret.clone();
        let channel = BoxCloneSyncChannel::new(endpoint.connect_lazy().map_request(
            move |mut request: http::Request<tonic::body::Body>| {
                request.headers_mut().insert(SECRET_HEADER, secret.clone());
                request
            },
        ));
        by_url.insert(url.clone(), channel.clone());
        Ok(channel)
    }
}

#[async_trait]
impl ChannelResolver for Channels {
    async fn get_worker_client_for_url(&self, url: &Url) -> Result<Box<dyn WorkerChannel>, DataFusionError> {
        self.channel(url).map(create_worker_client)
    }
}
