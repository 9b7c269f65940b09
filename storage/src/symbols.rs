//! Symbol tables held in memory per tenant: the writer asks which ids are already stored,
//! queries turn stack ids into frames.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::OwnedRwLockReadGuard;

use crate::catalog::Catalog;
use crate::model::{AttributeSet, Batch, Function, Location, Mapping, StackNode, SymbolId};
use crate::store::{Store, StoreError};

#[derive(Clone, Debug, Default)]
pub struct SymbolIndex {
    pub stacks: HashMap<SymbolId, StackNode>,
    pub locations: HashMap<SymbolId, Location>,
    pub functions: HashMap<SymbolId, Function>,
    pub mappings: HashMap<SymbolId, Mapping>,
    pub attr_sets: HashMap<SymbolId, AttributeSet>,
}

impl SymbolIndex {
    /// Adds every symbol of `batch`.
    pub fn extend_from_batch(&mut self, batch: &Batch) {
        let _ = batch;
        todo!("storage helper")
    }

    /// Removes from `batch` every symbol already in `self`, leaving only what still has to
    /// be written.
    pub fn retain_new(&self, batch: &mut Batch) {
        let _ = batch;
        todo!("storage helper")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SymbolError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Catalog(#[from] crate::catalog::CatalogError),
}

/// Per-tenant [`SymbolIndex`], loaded lazily from the symbol objects of committed segments
/// and kept up to date by the writer of this process.
pub struct SymbolCache {
    store: Store,
    catalog: Arc<dyn Catalog>,
}

impl SymbolCache {
    pub fn new(store: Store, catalog: Arc<dyn Catalog>) -> SymbolCache {
        SymbolCache { store, catalog }
    }

    /// Loads the symbols of committed segments not loaded yet, then returns the index.
    pub async fn read(&self, tenant: &str) -> Result<OwnedRwLockReadGuard<SymbolIndex>, SymbolError> {
        let _ = (tenant, &self.store, &self.catalog);
        todo!("storage helper")
    }

    /// Records the symbols of a segment this process just committed, so they are not read
    /// back from the store.
    pub async fn record(&self, tenant: &str, segment_id: &str, batch: &Batch) {
        let _ = (tenant, segment_id, batch);
        todo!("storage helper")
    }
}
