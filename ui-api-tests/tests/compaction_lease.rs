//! A compactor SIGKILLed while it holds a tenant's compaction lease: the other compactor
//! process, sharing its Postgres catalog and object store, compacts that tenant again once
//! the lease's TTL has passed since the dead holder's last heartbeat (`--compaction-lease-ttl`
//! plus one `--compaction-interval`), not after the two minutes a lease used to last.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use prost::Message;
use ui_api_tests::client::Api;
use ui_api_tests::load::{Load, stored_value};
use ui_api_tests::requests::{dictionary, profile, request};
use ui_api_tests::server::{Options, Server};
use ui_api_tests::services::PostgresDb;

const TTL: Duration = Duration::from_secs(3);
const INTERVAL: Duration = Duration::from_secs(1);
/// Room for a loaded 2-core machine: the compacting pass itself, polling, slow catalog
/// calls. Still far below the 120 s a dead holder's lease used to block its tenant.
const SLACK: Duration = Duration::from_secs(10);
const SERVICE: &str = "lease";
/// Requests without a token belong to this tenant.
const LEASE: &str = "compaction/anonymous";
const ATTEMPTS: usize = 10;

fn options(db: &PostgresDb, storage: &str, flags: &[&str]) -> Options {
    Options {
        catalog: Some(db.url.clone()),
        storage: Some(storage.to_string()),
        extra_args: flags.iter().map(|s| s.to_string()).collect(),
        ..Options::default()
    }
}

fn now_nanos() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as i64
}

/// The tenant's lease row: holder and expiry (unix nanos, the catalog writer's clock, which
/// on this one machine is the test's).
fn lease_row(db: &PostgresDb) -> Option<(String, i64)> {
    let rows = db.query(&format!(
        "SELECT holder, expires_at_nanos FROM leases WHERE name = '{LEASE}'"
    ));
    rows.first().map(|row| {
        let (holder, expires) = row.split_once('|').expect("holder|expires");
        (holder.to_string(), expires.parse().expect("expires_at_nanos"))
    })
}

/// Level-0 segments of the tenant: what a flush wrote and no compactor has merged yet.
fn level0(db: &PostgresDb) -> u64 {
    db.query("SELECT COUNT(*) FROM segments WHERE tenant = 'anonymous' AND level = 0")[0]
        .parse()
        .unwrap()
}

/// Returns as soon as a compaction pass holds the tenant's lease. Postgres polls itself
/// (every 2 ms, each query with a fresh snapshot) so the kill follows within milliseconds.
fn wait_for_lease(db: &PostgresDb) {
    tokio::task::block_in_place(|| {
        db.query(&format!(
            "SET statement_timeout = '60s'; DO $$ BEGIN \
             WHILE NOT EXISTS (SELECT 1 FROM leases WHERE name = '{LEASE}') LOOP \
             PERFORM pg_sleep(0.002); END LOOP; END $$"
        ))
    });
}

/// One acknowledged request, so the tenant has a level-0 segment only a live compactor
/// can merge. Returns its value.
async fn send_one(api: &Api) -> i64 {
    let value = 7;
    let mut p = profile(now_nanos() as u64, 1, value);
    p.profile_id = rand::random::<[u8; 16]>().to_vec();
    let body = request(SERVICE, vec![p], dictionary()).encode_to_vec();
    let (status, _, body) = api.post_otlp("application/x-protobuf", false, body).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    value
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sigkilled_compactors_tenant_is_compacted_again_within_the_lease_ttl() {
    let db = PostgresDb::create();
    let objects = tempfile::tempdir().unwrap();
    let storage = format!("file://{}", objects.path().display());
    let ttl = format!("{}s", TTL.as_secs());
    let interval = format!("{}s", INTERVAL.as_secs());
    let compactor = [
        "--role",
        "compactor",
        "--compaction-lease-ttl",
        &ttl,
        "--compaction-interval",
        &interval,
        "--compaction-l0-age",
        "1s",
    ];
    let ingest = Server::start(options(&db, &storage, &["--role", "ingest,query"])).await;
    let mut a = Server::start(options(&db, &storage, &compactor)).await;
    let _b = Server::start(options(&db, &storage, &compactor)).await;
    let api = Api::new(ingest.http());
    let mut acknowledged = 0;

    for attempt in 1..=ATTEMPTS {
        // A steady stream of small segments keeps both compactors' passes coming.
        let load = Load::start(&ingest.http(), SERVICE, 4);
        wait_for_lease(&db);
        a.kill();
        let killed = Instant::now();
        let killed_nanos = now_nanos();
        // The lease row as A left it, if the pass that held it was A's.
        let at_kill = lease_row(&db);
        let sent = load.stop().await;
        assert!(sent.refused.is_empty(), "refused: {:?}", sent.refused);
        assert_eq!(sent.abandoned, 0, "{sent:?}");
        acknowledged += sent.acknowledged_value + send_one(&api).await;

        // Until the tenant's level 0 is merged again, noting when the lease row first
        // differs from the one left at the kill.
        let mut changed = None;
        let compacted = loop {
            if changed.is_none() && lease_row(&db) != at_kill {
                changed = Some(now_nanos());
            }
            if level0(&db) == 0 {
                break killed.elapsed();
            }
            assert!(
                killed.elapsed() < Duration::from_secs(120),
                "the tenant still has level-0 segments 120 s after its compactor was killed"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        // A live holder renews every TTL/3 or releases, so its row changes well before it
        // expires; a row left untouched until its expiry was the dead A's.
        let dead_holders_expiry = match (&at_kill, changed) {
            (Some((_, expires)), Some(changed)) if changed >= *expires => Some(*expires),
            _ => None,
        };
        let Some(expires) = dead_holders_expiry else {
            eprintln!(
                "attempt {attempt}: A held no lease at the kill (row then {at_kill:?}, changed at {changed:?}); again"
            );
            a.restart().await;
            continue;
        };
        let expiry = Duration::from_nanos((expires - killed_nanos).max(0) as u64);
        println!(
            "compactor A SIGKILLed holding the lease (attempt {attempt}); its lease expired {:.1} s later; \
             compactor B had compacted the tenant {:.1} s after the kill (TTL {TTL:?}, interval {INTERVAL:?})",
            expiry.as_secs_f64(),
            compacted.as_secs_f64()
        );
        assert!(
            expiry <= TTL,
            "the dead holder's lease outlived the TTL: {expiry:?}"
        );
        assert!(
            compacted <= TTL + INTERVAL + SLACK,
            "compacted {compacted:?} after the kill; want within TTL + interval + {SLACK:?}"
        );
        // A's half-done pass left nothing visible: every acknowledged value once.
        assert_eq!(stored_value(&api, SERVICE).await, acknowledged);
        return;
    }
    panic!("in {ATTEMPTS} attempts no kill caught A holding the tenant's lease");
}
