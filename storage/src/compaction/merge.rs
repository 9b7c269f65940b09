//! Rewriting segments: many into one (compaction), one split at a time (retention), or one
//! listed again with rollups added or objects left out. Samples stay Arrow from the old
//! objects to the new ones.

use arrow::array::{AsArray, BooleanArray, RecordBatch};
use arrow::compute::{concat_batches, filter_record_batch};
use arrow::datatypes::Int64Type;
use futures::{StreamExt, TryStreamExt};

use super::plan::TOP_LEVEL;
use crate::catalog::{ObjectMeta, SegmentMeta, TableKind};
use crate::rollup::{Resolution, write_rollups};
use crate::schema::{self, samples as col};
use crate::segment::{read_samples, sort_samples, write_samples};
use crate::store::{Store, StoreError, blocking};

/// Samples objects fetched at once while merging.
const READ_CONCURRENCY: usize = 4;

/// Reads the samples of `segments` and writes them sorted as one new segment of `level`
/// created at `created_at_nanos`, an hour block ([`TOP_LEVEL`]) with its rollups. `None`
/// when they hold no samples.
pub async fn rewrite(
    store: &Store,
    tenant: &str,
    segments: &[SegmentMeta],
    level: i32,
    created_at_nanos: i64,
) -> Result<Option<SegmentMeta>, StoreError> {
    let table = read_sorted(store, segments).await?;
    if table.num_rows() == 0 {
        return Ok(None);
    }
    let rollups: &[Resolution] = if level == TOP_LEVEL {
        &Resolution::ROLLUPS
    } else {
        &[]
    };
    write_block(store, tenant, level, created_at_nanos, table, rollups)
        .await
        .map(Some)
}

/// The samples of `segments` as one table sorted by (series, time, stack).
pub(crate) async fn read_sorted(store: &Store, segments: &[SegmentMeta]) -> Result<RecordBatch, StoreError> {
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
    blocking("merging samples", move || -> Result<RecordBatch, StoreError> {
        let table = concat_batches(&schema::SAMPLES, &batches)?;
        drop(batches);
        sort_samples(&table)
    })
    .await
}

/// The rows of a samples or rollup table whose (series id, time) `keep` accepts, in their
/// order.
pub(crate) fn filter_rows(
    table: &RecordBatch,
    keep: impl Fn(i64, i64) -> bool,
) -> Result<RecordBatch, StoreError> {
    let column = |name: &str| {
        table
            .column(table.schema().index_of(name).expect("samples or rollup schema"))
            .as_primitive::<Int64Type>()
    };
    let (series, times) = (column(col::SERIES_ID), column(col::TIME));
    let mask: BooleanArray = series
        .values()
        .iter()
        .zip(times.values())
        .map(|(&s, &t)| Some(keep(s, t)))
        .collect();
    Ok(filter_record_batch(table, &mask)?)
}

/// Writes a non-empty samples table sorted by (series, time, stack) as a new segment of
/// `level` created at `created_at_nanos`, with the rollups of `rollups` beside it.
pub(crate) async fn write_block(
    store: &Store,
    tenant: &str,
    level: i32,
    created_at_nanos: i64,
    table: RecordBatch,
    rollups: &[Resolution],
) -> Result<SegmentMeta, StoreError> {
    let id = uuid::Uuid::now_v7().to_string();
    let (mut segment, rollups) = futures::future::try_join(
        write_samples(store, tenant, &id, level, created_at_nanos, table.clone()),
        write_rollups(store, tenant, &id, &table, rollups),
    )
    .await?;
    segment.objects.extend(rollups);
    Ok(segment)
}

/// `segment` as a new segment of the same extent, level and series, created at
/// `created_at_nanos`: its objects of the resolutions in `kept` are listed again (not
/// rewritten), and the rollups of `computed` are computed from its samples and written.
pub(crate) async fn relist(
    store: &Store,
    segment: &SegmentMeta,
    created_at_nanos: i64,
    kept: &[Resolution],
    computed: &[Resolution],
) -> Result<SegmentMeta, StoreError> {
    let id = uuid::Uuid::now_v7().to_string();
    let mut objects: Vec<ObjectMeta> = segment
        .objects
        .iter()
        .filter(|o| Resolution::of_kind(o.kind).is_some_and(|r| kept.contains(&r)))
        .cloned()
        .collect();
    if !computed.is_empty() {
        // Every samples object is written sorted, so it is read as it is.
        let samples = match segment.object(TableKind::Samples) {
            Some(object) => read_samples(store, object).await?,
            None => Vec::new(),
        };
        let table = concat_batches(&schema::SAMPLES, &samples)?;
        if table.num_rows() == 0 {
            return Err(StoreError::EmptySegment);
        }
        objects.extend(write_rollups(store, &segment.tenant, &id, &table, computed).await?);
    }
    objects.sort_by_key(|o| Resolution::of_kind(o.kind));
    Ok(SegmentMeta {
        id,
        created_at_nanos,
        objects,
        ..segment.clone()
    })
}
