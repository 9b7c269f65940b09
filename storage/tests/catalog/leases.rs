//! Leases, and the compaction lease kept alive by its holder's heartbeat.

use std::sync::Arc;
use std::time::{Duration, Instant};

use stackhouse_storage::catalog::Catalog;
use stackhouse_storage::clock::{self, Clock, ManualClock, SharedClock};
use stackhouse_storage::compaction::{
    CompactMode, CompactionConfig, CompactionError, CompactionReport, Compactor, Lease, heartbeat_period,
    tenant_lease,
};
use stackhouse_storage::store::Store;

use crate::fixtures::open;

suite!(
    leases_exclude_other_holders,
    a_heartbeating_holder_keeps_its_lease_and_a_dead_one_loses_it,
    a_heartbeat_that_finds_another_holder_stops_commits,
    a_dead_compactors_lease_is_taken_over_once_the_clock_passes_its_ttl,
);

async fn leases_exclude_other_holders(url: String) {
    let cat = open(&url).await;
    let clock = ManualClock::at(1_700_000_000_000_000_000);
    let now = || clock.now_nanos();
    let ttl = std::time::Duration::from_secs(2);
    let step = std::time::Duration::from_millis(1_200);
    assert!(cat.acquire_lease("compact", "h1", now(), ttl).await.unwrap());
    assert!(!cat.acquire_lease("compact", "h2", now(), ttl).await.unwrap());
    // Leases are per name.
    assert!(cat.acquire_lease("retention", "h2", now(), ttl).await.unwrap());
    // Releasing someone else's lease does nothing.
    cat.release_lease("compact", "h2").await.unwrap();
    assert!(!cat.acquire_lease("compact", "h2", now(), ttl).await.unwrap());

    clock.advance(step);
    assert!(
        cat.acquire_lease("compact", "h1", now(), ttl).await.unwrap(),
        "the holder renews"
    );
    clock.advance(step);
    // Past the first expiry but not the renewed one.
    assert!(!cat.acquire_lease("compact", "h2", now(), ttl).await.unwrap());
    clock.advance(step);
    assert!(
        cat.acquire_lease("compact", "h2", now(), ttl).await.unwrap(),
        "an expired lease goes to the next asker"
    );
    assert!(!cat.acquire_lease("compact", "h1", now(), ttl).await.unwrap());
    cat.release_lease("compact", "h2").await.unwrap();
    assert!(cat.acquire_lease("compact", "h1", now(), ttl).await.unwrap());
}

/// Long enough that a renewal (one catalog write) on a loaded machine fits a heartbeat
/// period many times over.
const TTL: Duration = Duration::from_millis(1_500);

/// A catalog at `url` and h1's lease on tenant `t` by the system clock (the heartbeat
/// renews in real time), with the lease's name.
async fn leased(url: &str) -> (Arc<dyn Catalog>, Lease, String) {
    let cat = open(url).await;
    let lease = Lease::acquire(cat.clone(), clock::system(), "t", "h1", TTL)
        .await
        .unwrap()
        .expect("a free lease is taken");
    let name = lease.name().to_string();
    (cat, lease, name)
}

async fn a_heartbeating_holder_keeps_its_lease_and_a_dead_one_loses_it(url: String) {
    let (cat, lease, name) = leased(&url).await;
    // Three TTLs in which the holder itself never renews: only its heartbeat keeps it.
    let start = Instant::now();
    while start.elapsed() < 3 * TTL {
        assert!(
            !cat.acquire_lease(&name, "h2", now(), TTL).await.unwrap(),
            "the lease of a live holder was taken {:?} after it was acquired",
            start.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    lease.check().expect("still held after three TTLs");

    // The holder dies: its heartbeat stops and nothing releases the lease.
    drop(lease);
    let died = Instant::now();
    assert!(
        !cat.acquire_lease(&name, "h2", now(), TTL).await.unwrap(),
        "a dead holder's lease lasts its TTL"
    );
    let taken = loop {
        if cat.acquire_lease(&name, "h2", now(), TTL).await.unwrap() {
            break died.elapsed();
        }
        assert!(
            died.elapsed() < TTL + Duration::from_secs(2),
            "a dead holder's lease was not free {:?} after it stopped renewing (TTL {TTL:?})",
            died.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // Its last renewal started at most one heartbeat period (plus that renewal's own
    // round trip) before it died.
    assert!(
        taken + heartbeat_period(TTL) + Duration::from_millis(500) >= TTL,
        "taken {taken:?} after the holder died, before its last renewal could have expired"
    );
    println!(
        "a dead holder's lease went to the next holder {taken:?} after its last heartbeat stopped (TTL {TTL:?})"
    );
}

async fn a_heartbeat_that_finds_another_holder_stops_commits(url: String) {
    let (cat, lease, name) = leased(&url).await;
    lease.check().unwrap();
    // Another holder gets the lease behind h1's back, as after h1 stalled for a TTL; for
    // long enough that it is still h2's at the end, however slow the machine.
    cat.release_lease(&name, "h1").await.unwrap();
    assert!(
        cat.acquire_lease(&name, "h2", now(), Duration::from_secs(60))
            .await
            .unwrap()
    );
    let start = Instant::now();
    while lease.check().is_ok() {
        assert!(
            start.elapsed() < heartbeat_period(TTL) + Duration::from_secs(1),
            "no heartbeat noticed the other holder"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(matches!(lease.check(), Err(CompactionError::LeaseLost(t)) if t == "t"));
    assert!(
        matches!(lease.renew().await, Err(CompactionError::LeaseLost(_))),
        "an explicit renewal finds it taken too"
    );
    // Releasing a lost lease leaves the new holder's alone.
    lease.release().await;
    assert!(!cat.acquire_lease(&name, "h3", now(), TTL).await.unwrap());
    assert!(cat.acquire_lease(&name, "h2", now(), TTL).await.unwrap());
}

/// Wall-clock nanoseconds, as a holder on the system clock asks with.
fn now() -> i64 {
    clock::system().now_nanos()
}

/// A compactor over `cat` on `clock` whose lease lasts [`COMPACTOR_TTL`], and what it needs
/// to keep its store alive.
fn compactor(cat: &Arc<dyn Catalog>, clock: SharedClock) -> (tempfile::TempDir, Compactor) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&format!("file://{}", dir.path().display())).unwrap();
    let config = CompactionConfig {
        lease_ttl: COMPACTOR_TTL,
        ..CompactionConfig::default()
    };
    (dir, Compactor::new(store, cat.clone(), config, clock))
}

/// Long next to the test's own run time, so the holder's real-time heartbeat (every third
/// of it) and its own sense of holding never come into play.
const COMPACTOR_TTL: Duration = Duration::from_secs(600);

/// Both compactors and the catalog read one manual clock: a holder that stopped without
/// releasing keeps its tenant for exactly one TTL, and an explicit renewal moves the
/// expiry by the same clock, all without waiting the TTL out.
async fn a_dead_compactors_lease_is_taken_over_once_the_clock_passes_its_ttl(url: String) {
    let cat = open(&url).await;
    let clock = ManualClock::at(1_700_000_000_000_000_000);
    let (_dir, next) = compactor(&cat, clock.clone());
    let busy = |result: Result<CompactionReport, CompactionError>| matches!(result, Err(CompactionError::Busy(t)) if t == "t");
    let holder = Lease::acquire(cat.clone(), clock.clone(), "t", "h1", COMPACTOR_TTL)
        .await
        .unwrap()
        .expect("a free lease is taken");
    assert!(busy(next.compact_tenant("t", CompactMode::Due).await));

    // The holder renews two thirds in: its lease now runs a TTL from then.
    clock.advance(COMPACTOR_TTL * 2 / 3);
    holder.renew().await.unwrap();
    clock.advance(COMPACTOR_TTL / 2);
    assert!(
        busy(next.compact_tenant("t", CompactMode::Due).await),
        "past the first expiry, the renewed lease still holds"
    );

    // The holder dies: nothing renews or releases its lease.
    drop(holder);
    clock.advance(COMPACTOR_TTL / 2 - Duration::from_nanos(1));
    assert!(
        busy(next.compact_tenant("t", CompactMode::Due).await),
        "a nanosecond before its expiry the lease is still the dead holder's"
    );
    clock.advance(Duration::from_nanos(1));
    let report = next.compact_tenant("t", CompactMode::Due).await.unwrap();
    assert_eq!(
        report,
        CompactionReport::default(),
        "the tenant has nothing to compact"
    );
    // The pass released what it took: another holder may have the tenant at once.
    assert!(
        cat.acquire_lease(&tenant_lease("t"), "h3", clock.now_nanos(), COMPACTOR_TTL)
            .await
            .unwrap()
    );
}
