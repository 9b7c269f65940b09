//! Leases, and the compaction lease kept alive by its holder's heartbeat.

use std::time::{Duration, Instant};

use stackhouse_storage::compaction::{CompactionError, Lease, heartbeat_period};

use crate::fixtures::open;

suite!(
    leases_exclude_other_holders,
    a_heartbeating_holder_keeps_its_lease_and_a_dead_one_loses_it,
    a_heartbeat_that_finds_another_holder_stops_commits,
);

async fn leases_exclude_other_holders(url: String) {
    let cat = open(&url).await;
    let ttl = std::time::Duration::from_secs(2);
    let step = std::time::Duration::from_millis(1_200);
    assert!(cat.acquire_lease("compact", "h1", ttl).await.unwrap());
    assert!(!cat.acquire_lease("compact", "h2", ttl).await.unwrap());
    // Leases are per name.
    assert!(cat.acquire_lease("retention", "h2", ttl).await.unwrap());
    // Releasing someone else's lease does nothing.
    cat.release_lease("compact", "h2").await.unwrap();
    assert!(!cat.acquire_lease("compact", "h2", ttl).await.unwrap());

    tokio::time::sleep(step).await;
    assert!(
        cat.acquire_lease("compact", "h1", ttl).await.unwrap(),
        "the holder renews"
    );
    tokio::time::sleep(step).await;
    // Past the first expiry but not the renewed one.
    assert!(!cat.acquire_lease("compact", "h2", ttl).await.unwrap());
    tokio::time::sleep(step).await;
    assert!(
        cat.acquire_lease("compact", "h2", ttl).await.unwrap(),
        "an expired lease goes to the next asker"
    );
    assert!(!cat.acquire_lease("compact", "h1", ttl).await.unwrap());
    cat.release_lease("compact", "h2").await.unwrap();
    assert!(cat.acquire_lease("compact", "h1", ttl).await.unwrap());
}

/// Long enough that a renewal (one catalog write) on a loaded machine fits a heartbeat
/// period many times over.
const TTL: Duration = Duration::from_millis(1_500);

/// A catalog at `url` and h1's lease on tenant `t`, with the lease's name.
async fn leased(
    url: &str,
) -> (
    std::sync::Arc<dyn stackhouse_storage::catalog::Catalog>,
    Lease,
    String,
) {
    let cat = open(url).await;
    let lease = Lease::acquire(cat.clone(), "t", "h1", TTL)
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
            !cat.acquire_lease(&name, "h2", TTL).await.unwrap(),
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
        !cat.acquire_lease(&name, "h2", TTL).await.unwrap(),
        "a dead holder's lease lasts its TTL"
    );
    let taken = loop {
        if cat.acquire_lease(&name, "h2", TTL).await.unwrap() {
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
        cat.acquire_lease(&name, "h2", Duration::from_secs(60))
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
    assert!(!cat.acquire_lease(&name, "h3", TTL).await.unwrap());
    assert!(cat.acquire_lease(&name, "h2", TTL).await.unwrap());
}
