//! Leases.

use crate::fixtures::open;

suite!(leases_exclude_other_holders,);

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
