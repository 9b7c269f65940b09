//! Sustained ingest from many senders, each retrying every export until it is acknowledged
//! as a collector's retry queue does, and counting exactly what was acknowledged: the fault
//! tests compare that with what the query API finds stored afterwards.
//!
//! Every export is one OTLP/HTTP protobuf request (built with the independent
//! `opentelemetry-proto` types) of one CPU profile with its own random profile id, so a
//! retry whose first attempt was stored is recognized and not stored twice.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceResponse;
use prost::Message;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tokio::task::JoinHandle;

use crate::client::Api;
use crate::requests::{PROFILE_TYPE, dictionary, profile, request};

/// How long a sender keeps retrying its last export once the load is stopped.
const PATIENCE: Duration = Duration::from_secs(120);

/// What the senders sent and heard.
#[derive(Debug, Default, Clone)]
pub struct Sent {
    pub acknowledged_requests: usize,
    /// Sum of the sample values of every acknowledged export.
    pub acknowledged_value: i64,
    pub attempts: usize,
    /// Answers that asked for a retry, by HTTP status; 0 counts failed connections.
    pub retried: BTreeMap<u16, usize>,
    /// Answers that refused an export for good: none is expected. Status and body.
    pub refused: Vec<String>,
    /// Exports still not acknowledged when the senders gave up.
    pub abandoned: usize,
}

impl Sent {
    fn add(&mut self, other: Sent) {
        self.acknowledged_requests += other.acknowledged_requests;
        self.acknowledged_value += other.acknowledged_value;
        self.attempts += other.attempts;
        for (status, n) in other.retried {
            *self.retried.entry(status).or_default() += n;
        }
        self.refused.extend(other.refused);
        self.abandoned += other.abandoned;
    }

    /// Retries answered with one of `statuses`.
    pub fn retried_with(&self, statuses: &[u16]) -> usize {
        statuses.iter().filter_map(|s| self.retried.get(s)).sum()
    }
}

pub struct Load {
    stop: Arc<AtomicBool>,
    senders: Vec<JoinHandle<Sent>>,
    pub service: String,
}

impl Load {
    /// `senders` tasks exporting to the server at `base` under `service.name = service`.
    pub fn start(base: &str, service: &str, senders: usize) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let senders = (0..senders)
            .map(|i| {
                let (base, service, stop) = (base.to_string(), service.to_string(), stop.clone());
                tokio::spawn(async move { send(base, service, stop, i as u64).await })
            })
            .collect();
        Load {
            stop,
            senders,
            service: service.to_string(),
        }
    }

    /// Stops sending new exports and waits until each sender's last one is acknowledged.
    pub async fn stop(self) -> Sent {
        self.stop.store(true, Ordering::SeqCst);
        let mut total = Sent::default();
        for sender in self.senders {
            total.add(sender.await.expect("sender task"));
        }
        total
    }
}

/// The sum of every stored sample value of `service`, read through the query API.
pub async fn stored_value(api: &Api, service: &str) -> i64 {
    let now = now_nanos();
    let hour = 3_600_000_000_000;
    api.folded(
        PROFILE_TYPE,
        &format!("{{service.name=\"{service}\"}}"),
        now - hour,
        now + hour,
    )
    .await
    .values()
    .sum()
}

fn now_nanos() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as i64
}

enum Answer {
    Acknowledged,
    Retry(u16),
    Refused(String),
}

async fn send(base: String, service: String, stop: Arc<AtomicBool>, seed: u64) -> Sent {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .expect("http client");
    let url = format!("{base}/v1development/profiles");
    let mut rng = SmallRng::seed_from_u64(seed ^ now_nanos() as u64);
    let mut sent = Sent::default();
    while !stop.load(Ordering::SeqCst) {
        let value = rng.random_range(1..=100);
        let mut p = profile(now_nanos() as u64, rng.random_range(1..=2), value);
        p.profile_id = rng.random::<[u8; 16]>().to_vec();
        let body = request(&service, vec![p], dictionary()).encode_to_vec();
        let mut given_up_at = None;
        loop {
            sent.attempts += 1;
            match export(&client, &url, body.clone()).await {
                Answer::Acknowledged => {
                    sent.acknowledged_requests += 1;
                    sent.acknowledged_value += value;
                    break;
                }
                Answer::Refused(why) => {
                    sent.refused.push(why);
                    break;
                }
                Answer::Retry(status) => *sent.retried.entry(status).or_default() += 1,
            }
            if stop.load(Ordering::SeqCst) {
                let deadline = *given_up_at.get_or_insert_with(|| Instant::now() + PATIENCE);
                if Instant::now() > deadline {
                    sent.abandoned += 1;
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    sent
}

async fn export(client: &reqwest::Client, url: &str, body: Vec<u8>) -> Answer {
    let response = match client
        .post(url)
        .header("content-type", "application/x-protobuf")
        .body(body)
        .send()
        .await
    {
        Ok(response) => response,
        Err(_) => return Answer::Retry(0),
    };
    let status = response.status().as_u16();
    let Ok(bytes) = response.bytes().await else {
        return Answer::Retry(0);
    };
    match status {
        200 => match ExportProfilesServiceResponse::decode(bytes.as_ref()) {
            Ok(r)
                if r.partial_success
                    .as_ref()
                    .is_none_or(|p| p.rejected_profiles == 0) =>
            {
                Answer::Acknowledged
            }
            Ok(r) => Answer::Refused(format!("partial success: {:?}", r.partial_success)),
            Err(e) => Answer::Refused(format!("200 with an unreadable body: {e}")),
        },
        // OTLP/HTTP's retryable statuses.
        429 | 502 | 503 | 504 => Answer::Retry(status),
        _ => Answer::Refused(format!("{status}: {}", String::from_utf8_lossy(&bytes))),
    }
}
