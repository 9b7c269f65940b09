//! Deleting objects nothing refers to: those compaction and retention replaced (after their
//! grace period), and orphans a crash left between writing an object and committing it.

use std::time::Duration;

use futures::TryStreamExt;

use crate::catalog::{CatalogError, DeletionQueue};
use crate::clock::Clock;
use crate::store::{Store, StoreError};

/// Keys handled per catalog round trip.
const CHUNK: usize = 1000;

#[derive(Debug, thiserror::Error)]
pub enum CleanupError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Catalog(#[from] CatalogError),
}

impl From<object_store::Error> for CleanupError {
    fn from(e: object_store::Error) -> Self {
        CleanupError::Store(e.into())
    }
}

/// Deletes the queued objects whose grace period is over; returns how many.
pub async fn delete_due(
    store: &Store,
    catalog: &dyn DeletionQueue,
    clock: &dyn Clock,
) -> Result<usize, CleanupError> {
    let mut deleted = 0;
    loop {
        let keys = catalog.due_deletions(clock.now_nanos(), CHUNK as i64).await?;
        if keys.is_empty() {
            return Ok(deleted);
        }
        for key in &keys {
            store.delete(key).await?;
        }
        catalog.forget_deletions(&keys).await?;
        deleted += keys.len();
        if keys.len() < CHUNK {
            return Ok(deleted);
        }
    }
}

/// Deletes every object under `tenants/` older than `grace` that no catalog row refers to.
/// The grace period covers a writer between its upload and its commit.
pub async fn delete_orphans(
    store: &Store,
    catalog: &dyn DeletionQueue,
    grace: Duration,
    clock: &dyn Clock,
) -> Result<Vec<String>, CleanupError> {
    let now = chrono::DateTime::from_timestamp_nanos(clock.now_nanos());
    let cutoff = now - chrono::Duration::from_std(grace).unwrap_or(chrono::Duration::MAX);
    let root = store.path("");
    let prefix = store.path("tenants");
    let mut listing = store.object_store().list(Some(&prefix));
    let mut candidates = Vec::new();
    let mut removed = Vec::new();
    while let Some(meta) = listing.try_next().await? {
        if meta.last_modified >= cutoff {
            continue;
        }
        let Some(key) = meta.location.prefix_match(&root).map(|parts| {
            parts
                .map(|p| p.as_ref().to_string())
                .collect::<Vec<_>>()
                .join("/")
        }) else {
            continue;
        };
        candidates.push(key);
        if candidates.len() == CHUNK {
            removed.extend(remove_unreferenced(store, catalog, std::mem::take(&mut candidates)).await?);
        }
    }
    removed.extend(remove_unreferenced(store, catalog, candidates).await?);
    Ok(removed)
}

async fn remove_unreferenced(
    store: &Store,
    catalog: &dyn DeletionQueue,
    keys: Vec<String>,
) -> Result<Vec<String>, CleanupError> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let orphans = catalog.unreferenced(&keys).await?;
    for key in &orphans {
        tracing::info!(%key, "deleting an object no catalog row refers to");
        store.delete(key).await?;
    }
    Ok(orphans)
}
