//! Many ingesters, still exact: three `serve --role ingest` processes share one Postgres
//! catalog and one object store, eight senders spread OTLP/HTTP exports over them and retry
//! each export on the next ingester until it is acknowledged, while ingesters are killed
//! (SIGKILL) and restarted on their ports. Some exports are stored and then killed before
//! their answer, or answered too late for the sender's timeout and sent again elsewhere at
//! once: the catalog stores each profile once, so in the end the store holds exactly what
//! the senders got acknowledged.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceResponse;
use opentelemetry_proto::tonic::profiles::v1development::Sample;
use prost::Message;
use serde_json::Value;
use ui_api_tests::client::Api;
use ui_api_tests::requests::{PROFILE_TYPE, dictionary, profile, request};
use ui_api_tests::server::{Options, Server};
use ui_api_tests::services::PostgresDb;

const SENDERS: usize = 8;
/// Each sender sends at least this many, and goes on until the last kill is over: on a
/// fast machine a fixed count was all acknowledged before the last kill.
const EXPORTS_PER_SENDER: usize = 50;
const INGESTERS: usize = 3;
const KILLS: usize = 5;
const SECOND: u64 = 1_000_000_000;

fn role(role: &str, catalog: &str, storage: &str) -> Options {
    Options {
        catalog: Some(catalog.to_string()),
        storage: Some(storage.to_string()),
        extra_args: vec!["--role".to_string(), role.to_string()],
        ..Options::default()
    }
}

/// Export `n`: one profile with its own id and three samples whose values only it has.
fn export(n: usize, time: u64) -> (Vec<u8>, i64) {
    let base = (n as i64 + 1) * 10;
    let mut p = profile(time, 1, base + 1);
    p.samples.push(Sample {
        stack_index: 2,
        values: vec![base + 2],
        attribute_indices: vec![1],
        ..Default::default()
    });
    p.samples.push(Sample {
        stack_index: 1,
        values: vec![base + 3],
        ..Default::default()
    });
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(b"manyingt");
    id[8..].copy_from_slice(&(n as u64).to_be_bytes());
    p.profile_id = id.to_vec();
    let sum = p.samples.iter().flat_map(|s| &s.values).sum();
    (request("many", vec![p], dictionary()).encode_to_vec(), sum)
}

/// Sends one export until an ingester acknowledges all of it, starting at `first` and
/// moving to the next ingester after any failure. The timeout starts short, so some
/// attempts give up while their ingester still stores them and the retry races it.
async fn send_until_acknowledged(
    client: &reqwest::Client,
    ingesters: &[String],
    first: usize,
    body: Vec<u8>,
    retries: &AtomicUsize,
) {
    for attempt in 0.. {
        let target = &ingesters[(first + attempt) % ingesters.len()];
        let timeout = Duration::from_millis(300 * (attempt as u64 + 1)).min(Duration::from_secs(10));
        let sent = client
            .post(format!("{target}/v1development/profiles"))
            .header("Content-Type", "application/x-protobuf")
            .timeout(timeout)
            .body(body.clone())
            .send()
            .await;
        if let Ok(resp) = sent
            && resp.status().as_u16() == 200
            && let Ok(bytes) = resp.bytes().await
        {
            let answer = ExportProfilesServiceResponse::decode(bytes).expect("an OTLP answer");
            if let Some(partial) = answer.partial_success {
                assert_eq!(
                    partial.rejected_profiles, 0,
                    "nothing is over a limit here: {}",
                    partial.error_message
                );
            }
            return;
        }
        retries.fetch_add(1, Ordering::Relaxed);
        assert!(attempt < 500, "an export was not acknowledged after 500 attempts");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn killed_ingesters_lose_nothing_and_store_nothing_twice() {
    let db = PostgresDb::create();
    let objects = tempfile::tempdir().unwrap();
    let storage = format!("file://{}", objects.path().display());
    let mut ingesters = Vec::new();
    for _ in 0..INGESTERS {
        ingesters.push(Server::start(role("ingest", &db.url, &storage)).await);
    }
    let query = Server::start(role("query", &db.url, &storage)).await;
    let urls: Arc<Vec<String>> = Arc::new(ingesters.iter().map(Server::http).collect());

    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64;
    let time = now - 30 * SECOND;
    let client = reqwest::Client::new();
    let retries = Arc::new(AtomicUsize::new(0));
    let killing = Arc::new(AtomicBool::new(true));
    let mut senders = Vec::new();
    for sender in 0..SENDERS {
        let (client, urls, retries, killing) =
            (client.clone(), urls.clone(), retries.clone(), killing.clone());
        senders.push(tokio::spawn(async move {
            let (mut acknowledged, mut sent) = (0, 0);
            while sent < EXPORTS_PER_SENDER || killing.load(Ordering::Relaxed) {
                // Numbered across senders, so that every export is its own.
                let n = sent * SENDERS + sender;
                let (body, sum) = export(n, time);
                send_until_acknowledged(&client, &urls, n, body, &retries).await;
                acknowledged += sum;
                sent += 1;
            }
            (acknowledged, sent)
        }));
    }

    // Meanwhile: kill one ingester without warning and start it again on its ports.
    let mut kills_while_sending = 0;
    for k in 0..KILLS {
        tokio::time::sleep(Duration::from_millis(700)).await;
        if senders.iter().any(|s| !s.is_finished()) {
            kills_while_sending += 1;
        }
        let victim = &mut ingesters[k % INGESTERS];
        victim.kill();
        tokio::time::sleep(Duration::from_millis(200)).await;
        victim.restart().await;
    }
    killing.store(false, Ordering::Relaxed);
    let (mut acknowledged, mut exports) = (0, 0);
    for sender in senders {
        let (sum, sent) = sender.await.unwrap();
        acknowledged += sum;
        exports += sent;
    }
    eprintln!(
        "{exports} exports acknowledged after {} failed or timed-out attempts",
        retries.load(Ordering::Relaxed)
    );
    assert_eq!(
        kills_while_sending, KILLS,
        "every kill should hit ingesters while exports are sent"
    );

    // Everything acknowledged, once: the query process sums the samples of every segment
    // the ingesters committed.
    let api = Api::new(query.http());
    let from = (time - 60 * SECOND) as i64;
    let to = (now + 60 * SECOND) as i64;
    let folded = api.folded(PROFILE_TYPE, "{}", from, to).await;
    let stored: i64 = folded.values().sum();
    assert_eq!(
        stored, acknowledged,
        "stored samples sum to what was acknowledged: {folded:?}"
    );
    let stats: Value = api.stats().await;
    assert_eq!(
        stats["tables"]["samples"]["rows"].as_u64(),
        Some(3 * exports as u64),
        "three sample rows per export: {stats}"
    );
    // And each profile id stored once.
    let rows =
        db.query("SELECT COUNT(*), COUNT(DISTINCT profile_id) FROM profiles WHERE tenant = 'anonymous'");
    assert_eq!(rows, vec![format!("{exports}|{exports}")]);
}
