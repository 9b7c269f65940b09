//! Symbol tables held in memory per tenant: the writer asks which ids are already stored,
//! queries turn stack ids into frames.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use futures::{StreamExt, TryStreamExt};
use tokio::sync::{OwnedRwLockReadGuard, RwLock};

use crate::catalog::{ObjectMeta, SymbolCatalog};
use crate::model::{
    AttributeSet, Batch, FastMap, Function, IdMap, Location, Mapping, StackNode, SymbolId, is_union,
    member_tenants,
};
use crate::segment::read_symbols;
use crate::store::{Store, StoreError};

/// How many segments' symbol objects are fetched at once when a tenant is loaded.
const LOAD_CONCURRENCY: usize = 8;

#[derive(Clone, Debug, Default)]
pub struct SymbolIndex {
    pub stacks: IdMap<StackNode>,
    pub locations: IdMap<Location>,
    pub functions: IdMap<Function>,
    pub mappings: IdMap<Mapping>,
    pub attr_sets: IdMap<AttributeSet>,
}

impl SymbolIndex {
    /// Adds every symbol of `batch`.
    pub fn extend_from_batch(&mut self, batch: &Batch) {
        extend_cloned(&mut self.stacks, &batch.stacks);
        extend_cloned(&mut self.locations, &batch.locations);
        extend_cloned(&mut self.functions, &batch.functions);
        extend_cloned(&mut self.mappings, &batch.mappings);
        extend_cloned(&mut self.attr_sets, &batch.attr_sets);
    }

    /// Moves every symbol of `batch` into `self`, leaving its symbol tables empty: what
    /// the writer does with a batch once committed, where cloning every location and
    /// function again cost more than building them.
    pub fn take_from_batch(&mut self, batch: &mut Batch) {
        self.stacks.extend(batch.stacks.drain());
        self.locations.extend(batch.locations.drain());
        self.functions.extend(batch.functions.drain());
        self.mappings.extend(batch.mappings.drain());
        self.attr_sets.extend(batch.attr_sets.drain());
    }

    /// Adds the symbols of `other` that `self` lacks, cloning only those.
    fn extend_missing(&mut self, other: &SymbolIndex) {
        fn missing<V: Clone>(into: &mut IdMap<V>, from: &IdMap<V>) {
            for (id, value) in from {
                into.entry(*id).or_insert_with(|| value.clone());
            }
        }
        missing(&mut self.stacks, &other.stacks);
        missing(&mut self.locations, &other.locations);
        missing(&mut self.functions, &other.functions);
        missing(&mut self.mappings, &other.mappings);
        missing(&mut self.attr_sets, &other.attr_sets);
    }

    fn sizes(&self) -> [usize; 5] {
        [
            self.stacks.len(),
            self.locations.len(),
            self.functions.len(),
            self.mappings.len(),
            self.attr_sets.len(),
        ]
    }

    /// Moves every symbol of `other` into `self`.
    pub fn merge(&mut self, other: SymbolIndex) {
        self.stacks.extend(other.stacks);
        self.locations.extend(other.locations);
        self.functions.extend(other.functions);
        self.mappings.extend(other.mappings);
        self.attr_sets.extend(other.attr_sets);
    }

    /// Removes from `batch` every symbol already in `self`, leaving only what still has to
    /// be written.
    pub fn retain_new(&self, batch: &mut Batch) {
        batch.stacks.retain(|id, _| !self.stacks.contains_key(id));
        batch.locations.retain(|id, _| !self.locations.contains_key(id));
        batch.functions.retain(|id, _| !self.functions.contains_key(id));
        batch.mappings.retain(|id, _| !self.mappings.contains_key(id));
        batch.attr_sets.retain(|id, _| !self.attr_sets.contains_key(id));
    }

    pub fn is_empty(&self) -> bool {
        self.stacks.is_empty()
            && self.locations.is_empty()
            && self.functions.is_empty()
            && self.mappings.is_empty()
            && self.attr_sets.is_empty()
    }
}

fn extend_cloned<V: Clone>(into: &mut IdMap<V>, from: &IdMap<V>) {
    into.extend(from.iter().map(|(id, v)| (*id, v.clone())));
}

/// Whether a batch carries any symbol, i.e. whether its segment gets symbol objects.
pub fn has_symbols(batch: &Batch) -> bool {
    !(batch.stacks.is_empty()
        && batch.locations.is_empty()
        && batch.functions.is_empty()
        && batch.mappings.is_empty()
        && batch.attr_sets.is_empty())
}

#[derive(Debug, thiserror::Error)]
pub enum SymbolError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Catalog(#[from] crate::catalog::CatalogError),
}

/// Entries [`KnownSymbols`] keeps per tenant and kind (about 48 MiB each at most): the
/// ones met first are the popular ones, and one not kept only costs hashing it again.
const MAX_KNOWN: usize = 1 << 20;

/// Symbols of a tenant that are committed, by keys ingest computes from a request in one
/// hash each: call paths by [`path_key`](crate::model::path_key) to their leaf node, and
/// locations by the hash of their content as sent. Fleets send the same stacks over and
/// over; a request whose stacks are all known brings no symbols and hashes one key per
/// stack and per location instead of one id per frame, function and mapping.
///
/// Only the writer adds entries, after their commit, and the index rebuild clears them with
/// the index, so an entry found here always has its symbols in storage.
#[derive(Default)]
pub struct KnownSymbols(std::sync::RwLock<KnownMaps>);

#[derive(Default)]
struct KnownMaps {
    paths: FastMap<u128, SymbolId>,
    locations: FastMap<u128, SymbolId>,
}

impl KnownSymbols {
    fn maps(&self) -> std::sync::RwLockReadGuard<'_, KnownMaps> {
        self.0.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Lookups under one read lock: a request looks up a few thousand keys, and taking the
    /// lock for each was two atomic operations per key.
    pub fn reader(&self) -> KnownReader<'_> {
        KnownReader(self.maps())
    }

    /// Known call paths and locations.
    pub fn len(&self) -> (usize, usize) {
        let maps = self.maps();
        (maps.paths.len(), maps.locations.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == (0, 0)
    }

    fn extend(&self, batch: &Batch) {
        let mut maps = self.0.write().unwrap_or_else(|e| e.into_inner());
        extend_capped(&mut maps.paths, &batch.path_keys);
        extend_capped(&mut maps.locations, &batch.location_keys);
    }

    fn clear(&self) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = KnownMaps::default();
    }
}

/// [`KnownSymbols`] held for reading. The writer records a flush only once no reader
/// holds it, so hold it for one request, not across waits.
pub struct KnownReader<'a>(std::sync::RwLockReadGuard<'a, KnownMaps>);

impl KnownReader<'_> {
    pub fn path(&self, key: u128) -> Option<SymbolId> {
        self.0.paths.get(&key).copied()
    }

    pub fn location(&self, key: u128) -> Option<SymbolId> {
        self.0.locations.get(&key).copied()
    }
}

fn extend_capped(into: &mut FastMap<u128, SymbolId>, from: &FastMap<u128, SymbolId>) {
    let room = MAX_KNOWN.saturating_sub(into.len());
    into.extend(from.iter().take(room).map(|(k, v)| (*k, *v)));
}

#[derive(Default)]
struct TenantSymbols {
    index: Arc<RwLock<SymbolIndex>>,
    known: Arc<KnownSymbols>,
    /// Serializes loading and recording, so one object is never fetched twice at once and
    /// `loaded` always describes what `index` holds.
    loaded: tokio::sync::Mutex<HashSet<String>>,
    /// How often `index` was rebuilt from a newer listing (symbols dropped, not only added).
    rebuilds: std::sync::atomic::AtomicU64,
    /// Of a union of tenants: its members' rebuild counts and index sizes it holds.
    built_from: tokio::sync::Mutex<Vec<(u64, [usize; 5])>>,
}

/// Per-tenant [`SymbolIndex`], loaded lazily from the tenant's committed symbol objects
/// and kept up to date by the writer of this process.
pub struct SymbolCache {
    store: Store,
    catalog: Arc<dyn SymbolCatalog>,
    tenants: Mutex<HashMap<String, Arc<TenantSymbols>>>,
}

impl SymbolCache {
    pub fn new(store: Store, catalog: Arc<dyn SymbolCatalog>) -> SymbolCache {
        SymbolCache {
            store,
            catalog,
            tenants: Mutex::default(),
        }
    }

    fn tenant(&self, tenant: &str) -> Arc<TenantSymbols> {
        let mut tenants = self.tenants.lock().unwrap_or_else(|e| e.into_inner());
        tenants.entry(tenant.to_string()).or_default().clone()
    }

    /// Loads the tenant's committed symbol objects not loaded yet, then returns the index.
    ///
    /// When an object loaded earlier is no longer in the catalog (compaction merged it), the
    /// index is rebuilt from what is listed now, so it only ever holds what storage holds
    /// and the writer never skips a symbol that is gone.
    pub async fn read(&self, tenant: &str) -> Result<OwnedRwLockReadGuard<SymbolIndex>, SymbolError> {
        if is_union(tenant) {
            return self.read_union(tenant).await;
        }
        self.read_one(tenant).await
    }

    async fn read_one(&self, tenant: &str) -> Result<OwnedRwLockReadGuard<SymbolIndex>, SymbolError> {
        let entry = self.tenant(tenant);
        {
            let mut loaded = entry.loaded.lock().await;
            let objects = self.catalog.symbol_objects(tenant).await?;
            let listed: HashSet<&str> = objects.iter().map(|o| o.key.as_str()).collect();
            let rebuild = loaded.iter().any(|key| !listed.contains(key.as_str()));
            let missing: Vec<_> = objects
                .iter()
                .filter(|o| rebuild || !loaded.contains(&o.key))
                .collect();
            if rebuild || !missing.is_empty() {
                // Collected first: a lazy `map` closure here makes the future not `Send`
                // for the compiler (higher-ranked lifetime inference).
                let reads: Vec<_> = missing.iter().map(|o| read_symbols(&self.store, o)).collect();
                let fresh = futures::stream::iter(reads)
                    .buffer_unordered(LOAD_CONCURRENCY)
                    .try_fold(SymbolIndex::default(), |mut acc, index| async move {
                        acc.merge(index);
                        Ok(acc)
                    })
                    .await?;
                let mut index = entry.index.write().await;
                if rebuild {
                    entry.rebuilds.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    *index = SymbolIndex::default();
                    entry.known.clear();
                    loaded.clear();
                }
                index.merge(fresh);
                loaded.extend(missing.iter().map(|o| o.key.clone()));
            }
        }
        Ok(entry.index.clone().read_owned().await)
    }

    /// [`SymbolCache::read`] of several tenants at once (a read over `a|b`): each member
    /// read, then their union.
    async fn read_union(&self, tenants: &str) -> Result<OwnedRwLockReadGuard<SymbolIndex>, SymbolError> {
        let mut members = Vec::new();
        for member in member_tenants(tenants) {
            let index = self.read_one(member).await?;
            members.push((self.rebuilds(member), index));
        }
        Ok(self.unite(tenants, members).await)
    }

    /// How often `tenant`'s index was rebuilt. Rebuilds happen under the index's write
    /// lock, so while a read guard of it is held this is the count it was built under.
    fn rebuilds(&self, tenant: &str) -> u64 {
        self.tenant(tenant)
            .rebuilds
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The union of the members' indexes. Symbol ids are hashes of content, so an id names
    /// the same symbol in every tenant and one index holds them all. Between rebuilds a
    /// member's index only grows: the union then takes in only the symbols it lacks, and is
    /// built afresh only after a member was rebuilt.
    async fn unite(
        &self,
        tenants: &str,
        members: Vec<(u64, OwnedRwLockReadGuard<SymbolIndex>)>,
    ) -> OwnedRwLockReadGuard<SymbolIndex> {
        let seen: Vec<(u64, [usize; 5])> = members.iter().map(|(r, index)| (*r, index.sizes())).collect();
        let entry = self.tenant(tenants);
        let mut built_from = entry.built_from.lock().await;
        if *built_from != seen {
            let grown_only = built_from.len() == seen.len()
                && built_from.iter().zip(&seen).all(|(was, now)| was.0 == now.0);
            let mut union = entry.index.write().await;
            if !grown_only {
                *union = SymbolIndex::default();
            }
            for (_, member) in &members {
                union.extend_missing(member);
            }
            *built_from = seen;
        }
        entry.index.clone().read_owned().await
    }

    /// The index as the last [`SymbolCache::read`] left it, without asking the catalog:
    /// for a query whose plan read it after listing its segments, so it already holds
    /// their symbols (an index is only ever rebuilt whole, from a newer listing).
    /// Of a union, the union of what its members' last reads left.
    pub async fn loaded(&self, tenant: &str) -> OwnedRwLockReadGuard<SymbolIndex> {
        if !is_union(tenant) {
            return self.tenant(tenant).index.clone().read_owned().await;
        }
        let mut members = Vec::new();
        for member in member_tenants(tenant) {
            let index = self.tenant(member).index.clone().read_owned().await;
            members.push((self.rebuilds(member), index));
        }
        self.unite(tenant, members).await
    }

    /// Records the symbols this process just committed in `objects`, so they are not read
    /// back from the store; they are moved out of `batch`.
    pub async fn record(&self, tenant: &str, objects: &[ObjectMeta], batch: &mut Batch) {
        let entry = self.tenant(tenant);
        let mut loaded = entry.loaded.lock().await;
        entry.index.write().await.take_from_batch(batch);
        entry.known.extend(batch);
        loaded.extend(objects.iter().map(|o| o.key.clone()));
    }

    /// What of the tenant is committed, for ingest to look stacks and locations up in.
    pub fn known(&self, tenant: &str) -> Arc<KnownSymbols> {
        self.tenant(tenant).known.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Function;

    #[test]
    fn retain_new_drops_known_symbols_only() {
        let mut old = Batch::new("t");
        let f = old.add_function(Function {
            name: "a".into(),
            ..Default::default()
        });
        let mut index = SymbolIndex::default();
        index.extend_from_batch(&old);

        let mut next = Batch::new("t");
        next.add_function(Function {
            name: "a".into(),
            ..Default::default()
        });
        let g = next.add_function(Function {
            name: "b".into(),
            ..Default::default()
        });
        index.retain_new(&mut next);
        assert!(!next.functions.contains_key(&f));
        assert!(next.functions.contains_key(&g));
        assert!(has_symbols(&next));
    }
}
