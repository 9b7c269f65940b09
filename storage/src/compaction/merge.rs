//! Rewriting segments: many into one (compaction), or one without its expired samples
//! (retention). Samples stay Arrow from the old objects to the new one.

use arrow::array::{AsArray, BooleanArray, RecordBatch};
use arrow::compute::{concat_batches, filter_record_batch};
use arrow::datatypes::Int64Type;
use futures::{StreamExt, TryStreamExt};

use crate::catalog::{SegmentMeta, TableKind};
use crate::schema::{self, samples as col};
use crate::segment::{read_samples, sort_samples, write_samples};
use crate::store::{Store, StoreError, blocking};

/// Samples objects fetched at once while merging.
const READ_CONCURRENCY: usize = 4;

/// Reads the samples of `segments`, keeps those at or after `keep_from`, and writes them
/// sorted as one new segment of `level`. `None` when nothing is left to write.
pub async fn rewrite(
    store: &Store,
    tenant: &str,
    segments: &[SegmentMeta],
    level: i32,
    keep_from: Option<i64>,
) -> Result<Option<SegmentMeta>, StoreError> {
    let objects: Vec<_> = segments
        .iter()
        .filter_map(|s| s.object(TableKind::Samples).cloned())
        .collect();
    let reads: Vec<_> = objects.iter().map(|o| read_samples(store, o)).collect();
    let parts: Vec<Vec<RecordBatch>> = futures::stream::iter(reads)
        .buffered(READ_CONCURRENCY)
        .try_collect()
        .await?;
    let batches: Vec<RecordBatch> = parts.into_iter().flatten().collect();
    let table = blocking("merging samples", move || -> Result<RecordBatch, StoreError> {
        let mut table = concat_batches(&schema::SAMPLES, &batches)?;
        drop(batches);
        if let Some(cutoff) = keep_from {
            let times = table
                .column(table.schema().index_of(col::TIME).expect("samples schema"))
                .as_primitive::<Int64Type>();
            let keep: BooleanArray = times.values().iter().map(|&t| Some(t >= cutoff)).collect();
            table = filter_record_batch(&table, &keep)?;
        }
        sort_samples(&table)
    })
    .await?;
    if table.num_rows() == 0 {
        return Ok(None);
    }
    let id = uuid::Uuid::now_v7().to_string();
    write_samples(store, tenant, &id, level, table).await.map(Some)
}
