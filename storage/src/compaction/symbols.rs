//! Symbol objects: every flush that met new symbols wrote a few small objects; merging them
//! size-tier by size-tier keeps the count small while each symbol is rewritten only a
//! logarithmic number of times.
//!
//! After a purge removed samples, the next merge is a collection instead: every symbol
//! object merged into one that keeps only what the remaining segments use. Writers leave
//! out of their segments the symbols they take as stored, so the collection moves the
//! tenant's symbol epoch first (commits listed before are refused from then on, and
//! writers bring every symbol they use until it ends), then lists what is used, and ends
//! in the transaction that swaps the objects.

use std::collections::BTreeMap;

use arrow::array::{Array, AsArray, RecordBatch};
use futures::{StreamExt, TryStreamExt};

use super::{CompactMode, CompactionError, CompactionReport, Compactor, Lease};
use crate::catalog::{CatalogError, ObjectMeta, TableKind};
use crate::model::{SymbolId, TimeRange};
use crate::rollup::Resolution;
use crate::schema::samples as col;
use crate::segment::{SymbolTables, Tier, read_columns, read_symbols, write_symbols};
use crate::symbols::{MissingSymbol, Reach, SymbolIndex};

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
    if compactor.catalog().symbol_epoch(tenant).await?.collect {
        return collect(compactor, tenant, lease).await;
    }
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
    let index = read_all(compactor, objects).await?;
    swap(compactor, tenant, objects, &index, None, lease).await
}

async fn read_all(compactor: &Compactor, objects: &[ObjectMeta]) -> Result<SymbolIndex, CompactionError> {
    let reads: Vec<_> = objects
        .iter()
        .map(|o| read_symbols(compactor.store(), o))
        .collect();
    Ok(futures::stream::iter(reads)
        .buffered(4)
        .try_fold(SymbolIndex::default(), |mut acc, part| async move {
            acc.merge(part);
            Ok(acc)
        })
        .await?)
}

/// Merges every symbol object of `tenant` into one holding only what its segments use.
async fn collect(
    compactor: &Compactor,
    tenant: &str,
    lease: &Lease,
) -> Result<CompactionReport, CompactionError> {
    let catalog = compactor.catalog();
    let mut epoch = 0;
    lease
        .commit(async {
            epoch = catalog.begin_symbol_collection(tenant).await?;
            Ok(())
        })
        .await?;
    // Both listed after the epoch moved: every segment committed without bringing its
    // symbols is among these segments, and its symbols among these objects.
    let objects = catalog.symbol_objects(tenant).await?;
    let all = read_all(compactor, &objects).await?;
    let sources = [SymbolTables::from(&all)];
    let mut reach = Reach::new(&sources);
    let mut missing = 0usize;
    for segment in catalog.segments(tenant, TimeRange::ALL).await? {
        lease.renew().await?;
        // Coarser tiers were summed from the finest; attribute sets live in raw rows only.
        let Some(&finest) = segment.resolutions().first() else {
            continue;
        };
        let object = segment
            .object(finest.kind())
            .expect("a listed resolution has its object");
        let columns: &'static [&'static str] = match finest {
            Resolution::Raw => &[col::STACK_ID, col::ATTR_SET_ID],
            _ => &[col::STACK_ID],
        };
        for batch in read_columns(compactor.store(), finest.kind(), object, Some(columns)).await? {
            // Not this collection's to repair: what it cannot find it cannot keep.
            if let Err(e) = take_ids(&mut reach, &batch, &mut missing) {
                tracing::warn!(%tenant, segment = %segment.id, error = %e, "a segment uses a symbol no symbol object holds");
            }
        }
    }
    let kept = reach.into_index();
    let before = all.sizes();
    let after = kept.sizes();
    let mut report = swap(compactor, tenant, &objects, &kept, Some(epoch), lease).await?;
    if report.conflicts == 0 {
        report.symbols_collected = before.iter().zip(after).map(|(b, a)| b - a).sum();
        metrics::counter!("stackhouse_symbols_collected_total").increment(report.symbols_collected as u64);
        tracing::info!(%tenant, collected = report.symbols_collected, kept = after.iter().sum::<usize>(), missing, "unused symbols collected");
    }
    Ok(report)
}

/// Takes every id of `batch`'s id columns into `reach` (which skips what it holds
/// already); counts in `missing` the ids no symbol object holds, and returns the last such.
fn take_ids(reach: &mut Reach<'_>, batch: &RecordBatch, missing: &mut usize) -> Result<(), MissingSymbol> {
    let mut last = Ok(());
    for name in [col::STACK_ID, col::ATTR_SET_ID] {
        let Ok(i) = batch.schema().index_of(name) else {
            continue;
        };
        let ids = batch.column(i).as_fixed_size_binary();
        for r in (0..ids.len()).filter(|&r| ids.is_valid(r)) {
            let Some(id) = SymbolId::from_slice(ids.value(r)) else {
                continue;
            };
            let taken = match name {
                col::STACK_ID => reach.stack(id),
                _ => reach.attr_set(id),
            };
            if let Err(e) = taken {
                *missing += 1;
                last = Err(e);
            }
        }
    }
    last
}

/// Writes `index` as one object set in place of `objects` (ending the collection begun at
/// `collection`, if any). Another compactor's swap first is a conflict, not an error.
async fn swap(
    compactor: &Compactor,
    tenant: &str,
    objects: &[ObjectMeta],
    index: &SymbolIndex,
    collection: Option<i64>,
    lease: &Lease,
) -> Result<CompactionReport, CompactionError> {
    let store = compactor.store();
    let added = match index.is_empty() {
        true => Vec::new(),
        false => {
            let id = uuid::Uuid::now_v7().to_string();
            write_symbols(store, tenant, &id, Tier::Compacted, SymbolTables::from(index)).await?
        }
    };
    debug_assert!(added.iter().all(|o| o.kind != TableKind::Samples));
    let removed: Vec<String> = objects.iter().map(|o| o.key.clone()).collect();
    let delete_after = compactor.deletion_deadline();
    let catalog = compactor.catalog();
    let committed = lease
        .commit(async {
            match collection {
                Some(epoch) => {
                    catalog
                        .collect_symbols(tenant, &removed, &added, delete_after, epoch)
                        .await
                }
                None => {
                    catalog
                        .replace_symbols(tenant, &removed, &added, delete_after)
                        .await
                }
            }
        })
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
