//! Symbol objects: every flush that met new symbols wrote a few small objects; merging them
//! size-tier by size-tier keeps the count small while each symbol is rewritten only a
//! logarithmic number of times.

use std::collections::BTreeMap;

use futures::{StreamExt, TryStreamExt};

use super::{CompactMode, CompactionError, CompactionReport, Compactor, Lease};
use crate::catalog::{CatalogError, ObjectMeta, TableKind};
use crate::segment::{SymbolTables, Tier, read_symbols, write_symbols};
use crate::symbols::SymbolIndex;

/// Objects in one tier are within 4× of each other in size.
fn tier(size: u64) -> u32 {
    // 4 KiB and below share the first tier.
    (size.max(4096) / 4096).ilog2() / 2
}

pub(super) async fn compact(
    compactor: &Compactor,
    tenant: &str,
    mode: CompactMode,
    lease: &Lease,
) -> Result<CompactionReport, CompactionError> {
    let objects = compactor.catalog().symbol_objects(tenant).await?;
    let mut groups: BTreeMap<(&'static str, u32), Vec<ObjectMeta>> = BTreeMap::new();
    for o in objects {
        let tier = if mode == CompactMode::Full {
            0
        } else {
            tier(o.size_bytes)
        };
        groups.entry((o.kind.as_str(), tier)).or_default().push(o);
    }
    let needed = match mode {
        CompactMode::Full => 2,
        CompactMode::Due => compactor.config().symbol_tier_objects.max(2),
    };
    let mut report = CompactionReport::default();
    for group in groups.into_values().filter(|g| g.len() >= needed) {
        lease.renew().await?;
        report.add_from(merge(compactor, tenant, &group, lease).await?);
    }
    Ok(report)
}

async fn merge(
    compactor: &Compactor,
    tenant: &str,
    objects: &[ObjectMeta],
    lease: &Lease,
) -> Result<CompactionReport, CompactionError> {
    let store = compactor.store();
    let reads: Vec<_> = objects.iter().map(|o| read_symbols(store, o)).collect();
    let index = futures::stream::iter(reads)
        .buffered(4)
        .try_fold(SymbolIndex::default(), |mut acc, part| async move {
            acc.merge(part);
            Ok(acc)
        })
        .await?;
    let id = uuid::Uuid::now_v7().to_string();
    let added = write_symbols(store, tenant, &id, Tier::Compacted, SymbolTables::from(&index)).await?;
    debug_assert!(added.iter().all(|o| o.kind != TableKind::Samples));
    let removed: Vec<String> = objects.iter().map(|o| o.key.clone()).collect();
    let delete_after = compactor.deletion_deadline();
    let committed = lease
        .commit(
            compactor
                .catalog()
                .replace_symbols(tenant, &removed, &added, delete_after),
        )
        .await;
    match committed {
        Ok(()) => Ok(CompactionReport {
            merges: 1,
            symbol_objects_removed: removed.len(),
            symbol_objects_added: added.len(),
            ..Default::default()
        }),
        Err(e) => {
            for o in &added {
                let _ = store.delete(&o.key).await;
            }
            match e {
                CompactionError::Catalog(CatalogError::Conflict(_)) => Ok(CompactionReport {
                    conflicts: 1,
                    ..Default::default()
                }),
                e => Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::tier;

    #[test]
    fn tiers_grow_by_four() {
        assert_eq!(tier(0), 0);
        assert_eq!(tier(4096), 0);
        assert_eq!(tier(4 * 4096 - 1), 0);
        assert_eq!(tier(4 * 4096), 1);
        assert_eq!(tier(16 * 4096), 2);
    }
}
