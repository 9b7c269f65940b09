//! `SELECT stack_id, SUM(value) ... GROUP BY stack_id`, the scan every ungrouped call tree
//! starts from, summed here instead of by DataFusion's aggregation.
//!
//! DataFusion still plans and runs the scan (catalog-pruned files, predicate pushdown);
//! only the grouping differs. Stack ids are 16-byte content hashes, which DataFusion's
//! grouping hashes again, compares column-wise and groups twice (partial, then final).
//! Here each scan partition adds its rows into one map keyed by the id as a `u128`, and
//! the partitions' maps are merged once. The maps draw on the query's memory pool like
//! any DataFusion operator, so the memory budget still bounds a scan of many stacks.

use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::datatypes::Int64Type;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryPool, MemoryReservation};
use datafusion::logical_expr::col;
use datafusion::physical_plan::{SendableRecordBatchStream, execute_stream_partitioned};
use futures::TryStreamExt;
use stackhouse_storage::model::{FastMap, SymbolId};
use stackhouse_storage::schema::samples;
use tokio::task::JoinSet;

use super::QueryEngine;
use super::aggregate::{Row, scan_stats};
use super::plan::Plan;
use crate::error::QueryError;
use crate::types::ScanStats;

/// Stack id (its bytes read little-endian) → summed value.
type Sums = FastMap<u128, i64>;

/// A partition's sums and the reservation that accounts for them.
type Part = (Sums, MemoryReservation);

/// Bytes a map entry is charged to the memory pool: key, value and the table's control byte.
const ENTRY_BYTES: usize = size_of::<(u128, i64)>() + 1;

impl QueryEngine {
    /// One row per stack id the plan's rows have, with the sum of their values (wrapping,
    /// as DataFusion's `SUM` over `Int64`).
    pub(crate) async fn sum_by_stack(&self, plan: &Plan) -> Result<(Vec<Row>, ScanStats), QueryError> {
        let df = self
            .samples(plan)?
            .select(vec![col(samples::STACK_ID), col(samples::VALUE)])?;
        let task = Arc::new(df.task_ctx());
        let physical = df.create_physical_plan().await?;
        let partitions = execute_stream_partitioned(physical.clone(), task.clone())?;
        // One task per partition: the scan decodes on whichever thread polls it. A join set
        // aborts its tasks when dropped, so a cancelled query (a timeout) stops its scans.
        let mut tasks = JoinSet::new();
        for stream in partitions {
            tasks.spawn(sum_partition(stream, task.memory_pool().clone()));
        }
        let mut merged: Option<Part> = None;
        while let Some(part) = tasks.join_next().await {
            let part = part.map_err(|e| QueryError::Internal(format!("stack sum task failed: {e}")))??;
            merged = Some(match merged {
                Some(merged) => merge(merged, part)?,
                None => part,
            });
        }
        let rows = merged
            .map(|(sums, _)| sums)
            .unwrap_or_default()
            .into_iter()
            .map(|(id, value)| Row {
                stack_id: SymbolId(id.to_le_bytes()),
                value,
                ..Row::default()
            })
            .collect();
        Ok((rows, scan_stats(plan, &physical)))
    }
}

async fn sum_partition(
    mut stream: SendableRecordBatchStream,
    pool: Arc<dyn MemoryPool>,
) -> Result<Part, QueryError> {
    let reservation = MemoryConsumer::new("stack sums").register(&pool);
    let mut sums = Sums::default();
    while let Some(batch) = stream.try_next().await? {
        add_batch(&batch, &mut sums)?;
        reservation.try_resize(sums.capacity() * ENTRY_BYTES)?;
    }
    Ok((sums, reservation))
}

fn add_batch(batch: &RecordBatch, sums: &mut Sums) -> Result<(), QueryError> {
    let unexpected = || QueryError::Internal(format!("unexpected stack sum input {:?}", batch.schema()));
    let stacks = batch
        .column(0)
        .as_fixed_size_binary_opt()
        .filter(|a| a.value_length() == 16)
        .ok_or_else(unexpected)?;
    let values = batch
        .column(1)
        .as_primitive_opt::<Int64Type>()
        .ok_or_else(unexpected)?;
    let key = |bytes: &[u8]| u128::from_le_bytes(bytes.try_into().expect("16-byte ids"));
    if stacks.null_count() == 0 && values.null_count() == 0 {
        for (id, &value) in stacks.value_data().chunks_exact(16).zip(values.values()) {
            add(sums, key(id), value);
        }
        return Ok(());
    }
    // The schema has neither null, but a file could: as in SQL, a null value adds nothing
    // (its stack still gets a row) and a null stack is the empty one.
    for i in 0..batch.num_rows() {
        let id = if stacks.is_null(i) {
            0
        } else {
            key(stacks.value(i))
        };
        add(sums, id, if values.is_null(i) { 0 } else { values.value(i) });
    }
    Ok(())
}

/// Wrapping, as DataFusion's `SUM` over `Int64`.
fn add(sums: &mut Sums, id: u128, value: i64) {
    let sum = sums.entry(id).or_default();
    *sum = sum.wrapping_add(value);
}

/// Two partitions' sums in the larger map of the two, its reservation grown to match.
fn merge(a: Part, b: Part) -> Result<Part, QueryError> {
    let (mut larger, smaller) = if a.0.len() >= b.0.len() { (a, b) } else { (b, a) };
    for (id, value) in smaller.0 {
        add(&mut larger.0, id, value);
    }
    larger.1.try_resize(larger.0.capacity() * ENTRY_BYTES)?;
    Ok(larger)
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{FixedSizeBinaryArray, Int64Array};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::execution::memory_pool::UnboundedMemoryPool;

    use super::*;

    fn batch(ids: Vec<Option<[u8; 16]>>, values: Vec<Option<i64>>) -> RecordBatch {
        let schema = Schema::new(vec![
            Field::new(samples::STACK_ID, DataType::FixedSizeBinary(16), true),
            Field::new(samples::VALUE, DataType::Int64, true),
        ]);
        let ids = FixedSizeBinaryArray::try_from_sparse_iter_with_size(ids.into_iter(), 16).unwrap();
        RecordBatch::try_new(
            Arc::new(schema),
            vec![Arc::new(ids), Arc::new(Int64Array::from(values))],
        )
        .unwrap()
    }

    fn id(byte: u8) -> [u8; 16] {
        let mut id = [0; 16];
        id[0] = byte;
        id[15] = 0xf0 | byte;
        id
    }

    fn sorted(sums: &Sums) -> Vec<([u8; 16], i64)> {
        let mut out: Vec<_> = sums.iter().map(|(k, v)| (k.to_le_bytes(), *v)).collect();
        out.sort();
        out
    }

    #[test]
    fn rows_add_up_per_stack_in_slices_and_across_partitions() {
        let (a, b, c) = (id(1), id(2), id(3));
        let whole = batch(
            [a, b, a, c, a, b].map(Some).to_vec(),
            [1, 2, 3, 4, 5, i64::MAX].map(Some).to_vec(),
        );
        let mut sums = Sums::default();
        // A sliced batch starts its ids at an offset into the shared buffer.
        add_batch(&whole.slice(2, 4), &mut sums).unwrap();
        assert_eq!(sorted(&sums), [(a, 8), (b, i64::MAX), (c, 4)]);

        let pool: Arc<dyn MemoryPool> = Arc::new(UnboundedMemoryPool::default());
        let part = |rows: &RecordBatch| {
            let mut sums = Sums::default();
            add_batch(rows, &mut sums).unwrap();
            (sums, MemoryConsumer::new("test").register(&pool))
        };
        let (merged, reservation) = merge(part(&whole.slice(0, 2)), part(&whole.slice(2, 4))).unwrap();
        // SUM over Int64 wraps, as DataFusion's does.
        assert_eq!(
            sorted(&merged),
            [(a, 9), (b, 2i64.wrapping_add(i64::MAX)), (c, 4)]
        );
        assert!(reservation.size() >= merged.len() * ENTRY_BYTES);
    }

    #[test]
    fn null_values_add_nothing_and_null_stacks_are_the_empty_stack() {
        let a = id(1);
        let rows = batch(
            vec![Some(a), None, Some(a), Some(id(2))],
            vec![Some(5), Some(7), None, None],
        );
        let mut sums = Sums::default();
        add_batch(&rows, &mut sums).unwrap();
        assert_eq!(sorted(&sums), [([0; 16], 7), (a, 5), (id(2), 0)]);
    }

    #[test]
    fn other_columns_are_refused() {
        let schema = Schema::new(vec![
            Field::new("a", DataType::Int64, false),
            Field::new("b", DataType::Int64, false),
        ]);
        let rows = RecordBatch::try_new(
            Arc::new(schema),
            vec![
                Arc::new(Int64Array::from(vec![1])),
                Arc::new(Int64Array::from(vec![2])),
            ],
        )
        .unwrap();
        let err = add_batch(&rows, &mut Sums::default()).unwrap_err();
        assert!(err.to_string().contains("unexpected stack sum input"), "{err}");
    }
}
