//! A compactor SIGKILLed mid-pass while it holds a tenant's compaction lease: the other
//! compactor process, sharing its Postgres catalog and object store, compacts that tenant
//! again once the lease's TTL has passed since the dead holder's last heartbeat (within
//! `--compaction-lease-ttl` plus one `--compaction-interval`), not after the two minutes a
//! lease used to last.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use prost::Message;
use ui_api_tests::client::Api;
use ui_api_tests::load::stored_value;
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

/// A transaction holding `segments` in SHARE mode: reads go on, every write waits. A
/// compaction pass that gets to its commit then waits too, holding its lease, as during a
/// long rewrite. Ends when dropped.
struct SegmentsLocked(Child);

impl SegmentsLocked {
    fn take(db: &PostgresDb) -> SegmentsLocked {
        let mut psql = Command::new("psql")
            .arg(&db.url)
            .args(["-q", "-v", "ON_ERROR_STOP=1"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("psql is required for the Postgres tests");
        psql.stdin
            .as_mut()
            .unwrap()
            .write_all(b"BEGIN;\nLOCK TABLE segments IN SHARE MODE;\n")
            .unwrap();
        let locked = SegmentsLocked(psql);
        let deadline = Instant::now() + Duration::from_secs(30);
        while db.query(
            "SELECT COUNT(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation \
             WHERE c.relname = 'segments' AND l.mode = 'ShareLock' AND l.granted",
        ) != ["1"]
        {
            assert!(Instant::now() < deadline, "no SHARE lock on segments after 30 s");
            std::thread::sleep(Duration::from_millis(20));
        }
        locked
    }
}

impl Drop for SegmentsLocked {
    fn drop(&mut self) {
        // Closing stdin ends psql, and its session's transaction with it.
        drop(self.0.stdin.take());
        let _ = self.0.wait();
    }
}

/// Sessions waiting for a lock on `segments`: with ingest idle, compaction commits.
fn waiting_for_segments(db: &PostgresDb) -> u64 {
    db.query(
        "SELECT COUNT(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation \
         WHERE c.relname = 'segments' AND NOT l.granted",
    )[0]
    .parse()
    .unwrap()
}

/// One acknowledged request in its own level-0 segment. Returns its value.
async fn send_one(api: &Api, value: i64) -> i64 {
    let mut p = profile(now_nanos() as u64, 1 + (value % 2) as i32, value);
    p.profile_id = rand::random::<[u8; 16]>().to_vec();
    let body = request(SERVICE, vec![p], dictionary()).encode_to_vec();
    let (status, _, body) = api.post_otlp("application/x-protobuf", false, body).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    value
}

async fn poll<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < limit, "{what}: not after {limit:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sigkilled_compactors_tenant_is_compacted_again_within_the_lease_ttl() {
    let db = PostgresDb::create();
    let objects = tempfile::tempdir().unwrap();
    let storage = format!("file://{}", objects.path().display());
    let ttl = format!("{}s", TTL.as_secs());
    let interval = format!("{}s", INTERVAL.as_secs());
    // Level-0 segments wait 5 s for their merge, time to lock the table after the burst.
    let compactor = [
        "--role",
        "compactor",
        "--compaction-lease-ttl",
        &ttl,
        "--compaction-interval",
        &interval,
        "--compaction-l0-age",
        "5s",
    ];
    let ingest = Server::start(options(&db, &storage, &["--role", "ingest,query"])).await;
    let mut a = Server::start(options(&db, &storage, &compactor)).await;
    let api = Api::new(ingest.http());
    let mut acknowledged = 0;
    for value in 1..=6 {
        acknowledged += send_one(&api, value).await;
    }
    let burst = level0(&db);
    assert!(burst > 1, "the burst landed as {burst} level-0 segments");

    // A, the only compactor yet, merges the burst and then waits at its commit, renewing
    // its lease all the while (a waiting pass starts no other, so a later expiry is a
    // heartbeat's).
    let locked = SegmentsLocked::take(&db);
    poll("A's pass waiting at its commit", Duration::from_secs(30), || {
        (waiting_for_segments(&db) > 0).then_some(())
    })
    .await;
    let first = lease_row(&db).expect("A holds the lease while its pass waits");
    let renewed = poll("A renewing its lease while it waits", 2 * TTL, || {
        lease_row(&db).filter(|row| row.0 == first.0 && row.1 > first.1)
    })
    .await;
    let _b = Server::start(options(&db, &storage, &compactor)).await;
    let still = lease_row(&db).expect("A's lease");
    assert_eq!(still.0, renewed.0, "A holds the lease while B starts");
    assert!(still.1 >= renewed.1);

    a.kill();
    let killed = Instant::now();
    let killed_nanos = now_nanos();
    let at_kill = lease_row(&db).expect("A's lease at the kill");
    assert_eq!(at_kill.0, first.0, "A held the lease when it was killed");
    // Postgres notices a dead client only when it next talks to it: end the session A
    // left waiting, so none of A's statements runs once the lock is gone.
    let ended = db.query(
        "SELECT pg_terminate_backend(l.pid) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation \
         WHERE c.relname = 'segments' AND NOT l.granted",
    );
    assert!(!ended.is_empty(), "A's commit was waiting");
    drop(locked);
    assert!(level0(&db) > 0, "A's pass committed nothing");

    // B takes the tenant over once A's unrenewed lease expires; noted is when the row
    // first differs from the one A left.
    let mut changed = None;
    let compacted = loop {
        // Level 0 first: B changes the row before it compacts, so a row read after an
        // empty level 0 has changed.
        let done = level0(&db) == 0;
        if changed.is_none() && lease_row(&db).as_ref() != Some(&at_kill) {
            changed = Some(now_nanos());
        }
        if done {
            break killed.elapsed();
        }
        assert!(
            killed.elapsed() < Duration::from_secs(120),
            "the tenant still has level-0 segments 120 s after its compactor was killed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let changed = changed.expect("B took the lease over");
    let expiry = Duration::from_nanos((at_kill.1 - killed_nanos).max(0) as u64);
    println!(
        "compactor A SIGKILLed mid-pass holding the lease; the lease expired {:.1} s later; \
         compactor B had compacted the tenant ({burst} level-0 segments) {:.1} s after the kill \
         (TTL {TTL:?}, interval {INTERVAL:?})",
        expiry.as_secs_f64(),
        compacted.as_secs_f64()
    );
    assert!(
        changed >= at_kill.1,
        "the dead holder's lease changed hands {} ms before it expired",
        (at_kill.1 - changed) / 1_000_000
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
}
