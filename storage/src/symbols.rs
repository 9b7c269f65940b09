//! Symbol tables held in memory per tenant: the writer asks which ids are already stored,
//! queries turn stack ids into frames.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::{StreamExt, TryStreamExt};
use tokio::sync::{OwnedRwLockReadGuard, RwLock};

use crate::catalog::{ObjectMeta, SymbolCatalog};
use crate::model::{
    AttributeSet, Batch, FastMap, Function, IdMap, Location, Mapping, StackNode, SymbolId, is_union,
    member_tenants,
};
use crate::segment::{SymbolTables, read_symbols};
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

    pub(crate) fn sizes(&self) -> [usize; 5] {
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

    /// Takes out of `batch` every symbol already in `self`, leaving only what still has to
    /// be written, and returns what it took: a commit refused for a stale symbol epoch puts
    /// it back, since those symbols may be gone by then.
    pub fn retain_new(&self, batch: &mut Batch) -> SymbolIndex {
        fn take<V>(from: &mut IdMap<V>, stored: &IdMap<V>) -> IdMap<V> {
            from.extract_if(|id, _| stored.contains_key(id)).collect()
        }
        SymbolIndex {
            stacks: take(&mut batch.stacks, &self.stacks),
            locations: take(&mut batch.locations, &self.locations),
            functions: take(&mut batch.functions, &self.functions),
            mappings: take(&mut batch.mappings, &self.mappings),
            attr_sets: take(&mut batch.attr_sets, &self.attr_sets),
        }
    }

    /// Adds to `batch` every symbol its samples use that it lacks, from `self`: what a
    /// writer does when it cannot trust that the tenant still stores them (a collection of
    /// unused symbols under way, or its known-symbol lookups older than its index).
    pub fn complete(&self, batch: &mut Batch) -> Result<(), MissingSymbol> {
        let reached = {
            let sources = [SymbolTables::from(&*batch), SymbolTables::from(self)];
            let mut reach = Reach::new(&sources);
            for sample in &batch.samples {
                reach.stack(sample.stack_id)?;
                reach.attr_set(sample.attr_set_id)?;
            }
            reach.into_index()
        };
        reached.move_into(batch);
        Ok(())
    }

    /// Moves every symbol of `self` into `batch`.
    pub fn move_into(self, batch: &mut Batch) {
        batch.stacks.extend(self.stacks);
        batch.locations.extend(self.locations);
        batch.functions.extend(self.functions);
        batch.mappings.extend(self.mappings);
        batch.attr_sets.extend(self.attr_sets);
    }

    pub fn is_empty(&self) -> bool {
        self.stacks.is_empty()
            && self.locations.is_empty()
            && self.functions.is_empty()
            && self.mappings.is_empty()
            && self.attr_sets.is_empty()
    }
}

/// A symbol that something uses and no table at hand holds.
#[derive(Debug, thiserror::Error)]
#[error("{kind} {id} is used but held by no symbol table at hand")]
pub struct MissingSymbol {
    pub kind: &'static str,
    pub id: SymbolId,
}

/// The symbols some stacks and attribute sets reach, copied out of `sources` (looked up in
/// turn): each stack's nodes up to its root, their locations, and those locations'
/// functions and mappings.
pub struct Reach<'s> {
    sources: &'s [SymbolTables<'s>],
    reached: SymbolIndex,
}

impl<'s> Reach<'s> {
    pub fn new(sources: &'s [SymbolTables<'s>]) -> Reach<'s> {
        Reach {
            sources,
            reached: SymbolIndex::default(),
        }
    }

    fn find<V: Clone + 's>(
        &self,
        kind: &'static str,
        id: SymbolId,
        table: impl Fn(&SymbolTables<'s>) -> &'s IdMap<V>,
    ) -> Result<V, MissingSymbol> {
        self.sources
            .iter()
            .find_map(|t| table(t).get(&id))
            .cloned()
            .ok_or(MissingSymbol { kind, id })
    }

    /// Takes in the stack whose leaf node is `id` (nothing for the empty stack).
    pub fn stack(&mut self, mut id: SymbolId) -> Result<(), MissingSymbol> {
        while !id.is_zero() && !self.reached.stacks.contains_key(&id) {
            let node = self.find("stack node", id, |t| t.stacks)?;
            self.location(node.location_id)?;
            self.reached.stacks.insert(id, node);
            id = node.parent_id;
        }
        Ok(())
    }

    fn location(&mut self, id: SymbolId) -> Result<(), MissingSymbol> {
        if id.is_zero() || self.reached.locations.contains_key(&id) {
            return Ok(());
        }
        let location = self.find("location", id, |t| t.locations)?;
        if !location.mapping_id.is_zero() && !self.reached.mappings.contains_key(&location.mapping_id) {
            let mapping = self.find("mapping", location.mapping_id, |t| t.mappings)?;
            self.reached.mappings.insert(location.mapping_id, mapping);
        }
        for line in &location.lines {
            let f = line.function_id;
            if !f.is_zero() && !self.reached.functions.contains_key(&f) {
                let function = self.find("function", f, |t| t.functions)?;
                self.reached.functions.insert(f, function);
            }
        }
        self.reached.locations.insert(id, location);
        Ok(())
    }

    /// Takes in the attribute set `id` (nothing for the empty set).
    pub fn attr_set(&mut self, id: SymbolId) -> Result<(), MissingSymbol> {
        if !id.is_zero() && !self.reached.attr_sets.contains_key(&id) {
            let set = self.find("attribute set", id, |t| t.attr_sets)?;
            self.reached.attr_sets.insert(id, set);
        }
        Ok(())
    }

    pub fn into_index(self) -> SymbolIndex {
        self.reached
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
    /// How often the maps were cleared: a batch built from older lookups may use symbols
    /// the index no longer holds ([`Batch::known_generation`]).
    generation: u64,
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
        let mut maps = self.0.write().unwrap_or_else(|e| e.into_inner());
        *maps = KnownMaps {
            generation: maps.generation + 1,
            ..KnownMaps::default()
        };
    }

    pub fn generation(&self) -> u64 {
        self.maps().generation
    }
}

/// [`KnownSymbols`] held for reading. The writer records a flush only once no reader
/// holds it, so hold it for one request, not across waits.
pub struct KnownReader<'a>(std::sync::RwLockReadGuard<'a, KnownMaps>);

impl KnownReader<'_> {
    pub fn generation(&self) -> u64 {
        self.0.generation
    }

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
    rebuilds: AtomicU64,
    /// Of a union of tenants: its members' rebuild counts and index sizes it holds.
    built_from: tokio::sync::Mutex<Vec<(u64, [usize; 5])>>,
    /// The tenant's symbol epoch read before the listing `index` was last brought up to
    /// date with by [`SymbolCache::read_for_write`]; changed only under the index's write
    /// lock, so it goes with the index a read guard holds.
    epoch: AtomicI64,
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
        self.read_one(tenant, false).await
    }

    /// [`SymbolCache::read`] of one tenant for its writer, with the symbol epoch read before
    /// the listing: a commit made at that epoch may leave out what the index holds.
    pub async fn read_for_write(
        &self,
        tenant: &str,
    ) -> Result<(OwnedRwLockReadGuard<SymbolIndex>, i64), SymbolError> {
        let index = self.read_one(tenant, true).await?;
        let epoch = self.tenant(tenant).epoch.load(Ordering::Relaxed);
        Ok((index, epoch))
    }

    async fn read_one(
        &self,
        tenant: &str,
        with_epoch: bool,
    ) -> Result<OwnedRwLockReadGuard<SymbolIndex>, SymbolError> {
        let entry = self.tenant(tenant);
        {
            let mut loaded = entry.loaded.lock().await;
            // Before the listing: a collection committed in between leaves this epoch
            // stale (the commit is refused), never the listing older than the epoch.
            let epoch = match with_epoch {
                true => Some(self.catalog.symbol_epoch(tenant).await?.epoch),
                false => None,
            };
            let objects = self.catalog.symbol_objects(tenant).await?;
            let listed: HashSet<&str> = objects.iter().map(|o| o.key.as_str()).collect();
            let rebuild = loaded.iter().any(|key| !listed.contains(key.as_str()));
            let missing: Vec<_> = objects
                .iter()
                .filter(|o| rebuild || !loaded.contains(&o.key))
                .collect();
            let epoch_moved = epoch.is_some_and(|e| e != entry.epoch.load(Ordering::Relaxed));
            if rebuild || !missing.is_empty() || epoch_moved {
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
                    entry.rebuilds.fetch_add(1, Ordering::Relaxed);
                    *index = SymbolIndex::default();
                    entry.known.clear();
                    loaded.clear();
                }
                index.merge(fresh);
                loaded.extend(missing.iter().map(|o| o.key.clone()));
                if let Some(epoch) = epoch {
                    entry.epoch.store(epoch, Ordering::Relaxed);
                }
            }
        }
        Ok(entry.index.clone().read_owned().await)
    }

    /// [`SymbolCache::read`] of several tenants at once (a read over `a|b`): each member
    /// read, then their union.
    async fn read_union(&self, tenants: &str) -> Result<OwnedRwLockReadGuard<SymbolIndex>, SymbolError> {
        let mut members = Vec::new();
        for member in member_tenants(tenants) {
            let index = self.read_one(member, false).await?;
            members.push((self.rebuilds(member), index));
        }
        Ok(self.unite(tenants, members).await)
    }

    /// How often `tenant`'s index was rebuilt. Rebuilds happen under the index's write
    /// lock, so while a read guard of it is held this is the count it was built under.
    fn rebuilds(&self, tenant: &str) -> u64 {
        self.tenant(tenant).rebuilds.load(Ordering::Relaxed)
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

    /// A stack of two frames (the leaf mapped, inlined into two functions) used by one
    /// sample with an attribute set, built in `into`; returns the leaf's id.
    fn two_frames(into: &mut Batch) -> SymbolId {
        use crate::model::{AttributeSet, Line, Location, Mapping, SampleRow};
        let mapping_id = into.add_mapping(Mapping {
            filename: "/bin/app".into(),
            ..Default::default()
        });
        let function = |b: &mut Batch, name: &str| {
            b.add_function(Function {
                name: name.into(),
                ..Default::default()
            })
        };
        let (f, g, h) = (function(into, "f"), function(into, "g"), function(into, "main"));
        let line = |function_id| Line {
            function_id,
            line: 1,
            column: 0,
        };
        let leaf = into.add_location(Location {
            mapping_id,
            address: 0x10,
            lines: vec![line(f), line(g)],
        });
        let root = into.add_location(Location {
            mapping_id: SymbolId::ZERO,
            address: 0x20,
            lines: vec![line(h)],
        });
        let stack_id = into.add_stack(&[leaf, root]);
        let attr_set_id = into.add_attr_set(AttributeSet::new(vec![("thread.name".into(), "main".into())]));
        into.samples.push(SampleRow {
            time_nanos: 1,
            series_id: 1,
            stack_id,
            value: 1,
            attr_set_id,
            trace_id: None,
            span_id: None,
            profile_id: None,
        });
        stack_id
    }

    #[test]
    fn complete_brings_every_symbol_a_batch_uses_from_the_index() {
        let mut stored = Batch::new("t");
        two_frames(&mut stored);
        let mut index = SymbolIndex::default();
        index.extend_from_batch(&stored);
        // Another batch using the same stack and set, built from known lookups: ids only.
        let mut next = Batch::new("t");
        next.samples = stored.samples.clone();
        index.complete(&mut next).unwrap();
        assert_eq!(next.stacks.len(), 2);
        assert_eq!(next.locations.len(), 2);
        assert_eq!(next.functions.len(), 3);
        assert_eq!(next.mappings.len(), 1);
        assert_eq!(next.attr_sets.len(), 1);
        assert_eq!(next.stacks, stored.stacks);
        assert_eq!(next.functions, stored.functions);

        // Nothing holds the root's location: named, not papered over.
        let mut lacking = index.clone();
        let root = lacking
            .stacks
            .values()
            .find(|n| n.parent_id.is_zero())
            .unwrap()
            .location_id;
        lacking.locations.remove(&root);
        let mut next = Batch::new("t");
        next.samples = stored.samples.clone();
        let err = lacking.complete(&mut next).unwrap_err();
        assert_eq!((err.kind, err.id), ("location", root));
    }

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
