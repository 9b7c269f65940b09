//! A segment's Parquet objects: writing a batch's tables, reading symbol tables back.

use crate::catalog::SegmentMeta;
use crate::model::Batch;
use crate::store::{Store, StoreError};
use crate::symbols::SymbolIndex;

/// Object key of one table of a segment, relative to the store root.
pub fn object_key(tenant: &str, segment_id: &str, kind: crate::catalog::TableKind) -> String {
    format!("tenants/{tenant}/segments/{segment_id}/{}.parquet", kind.as_str())
}

/// Writes `batch.samples` (sorted by series, then time) and every non-empty symbol table of
/// `batch` as Parquet objects, and returns the segment's metadata (not yet committed).
pub async fn write_segment(
    store: &Store,
    batch: &Batch,
    segment_id: &str,
    level: i32,
) -> Result<SegmentMeta, StoreError> {
    let _ = (store, batch, segment_id, level);
    todo!("storage helper")
}

/// Reads the symbol objects of one segment.
pub async fn read_symbols(store: &Store, segment: &SegmentMeta) -> Result<SymbolIndex, StoreError> {
    let _ = (store, segment);
    todo!("storage helper")
}
