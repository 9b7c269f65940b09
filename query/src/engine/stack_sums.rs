//! `SELECT stack_id, SUM(value) ... GROUP BY stack_id`, the scan every ungrouped call tree
//! starts from, summed by [`StackSumExec`] instead of DataFusion's aggregation.
//!
//! Stack ids are 16-byte content hashes, which DataFusion's grouping hashes again, compares
//! column-wise and groups twice (partial, then final). Here each input partition adds its
//! rows into one map keyed by the id as a `u128`. The query is still planned as DataFusion's
//! aggregate; [`StackSumRule`] swaps the aggregate's partial/final pair for
//! `StackSumExec(partial)` per scan partition under one `StackSumExec(final)` that merges
//! them. That pair is what the distributed planner cuts between workers and the
//! coordinator: each worker ships one row per distinct stack, not its scanned rows. The
//! maps draw on the query's memory pool like any DataFusion operator, so the memory budget
//! still bounds a scan of many stacks.

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, FixedSizeBinaryArray, Int64Array, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{DataFusionError, Result as DfResult, internal_err};
use datafusion::config::ConfigOptions;
use datafusion::execution::memory_pool::MemoryConsumer;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{EquivalenceProperties, Partitioning, PhysicalExpr};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{BaselineMetrics, ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, Distribution, ExecutionPlan, ExecutionPlanProperties, PlanProperties,
};
use futures::TryStreamExt;
use stackhouse_storage::model::FastMap;
use stackhouse_storage::schema::samples;

use super::gather::partial_under;

/// Stack id (its bytes read little-endian) → summed value.
type Sums = FastMap<u128, i64>;

/// Bytes a map entry is charged to the memory pool: key, value and the table's control byte.
const ENTRY_BYTES: usize = size_of::<(u128, i64)>() + 1;

/// Which half of the sum a node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SumMode {
    /// One map per input partition, next to the scan (on a worker when distributed).
    Partial,
    /// One map over every partial's rows, on the coordinator.
    Final,
}

/// `(stack_id, value)` rows in, one `(stack_id, SUM(value))` row per distinct stack out, per
/// output partition. The sum wraps, as DataFusion's `SUM` over `Int64` does, so the order
/// in which partials are merged never changes the answer.
#[derive(Debug)]
pub(crate) struct StackSumExec {
    mode: SumMode,
    input: Arc<dyn ExecutionPlan>,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

/// The output (and input) schema: the stack id and its value.
pub(crate) fn sum_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new(samples::STACK_ID, DataType::FixedSizeBinary(16), false),
        Field::new(samples::VALUE, DataType::Int64, false),
    ]))
}

impl StackSumExec {
    pub(crate) fn new(mode: SumMode, input: Arc<dyn ExecutionPlan>) -> StackSumExec {
        let partitions = match mode {
            SumMode::Partial => input.output_partitioning().partition_count(),
            SumMode::Final => 1,
        };
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(sum_schema()),
            Partitioning::UnknownPartitioning(partitions),
            // Nothing is known of a stack's sum before the input ends.
            EmissionType::Final,
            Boundedness::Bounded,
        ));
        StackSumExec {
            mode,
            input,
            properties,
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    pub(crate) fn mode(&self) -> SumMode {
        self.mode
    }

    /// Whether the input is the local coalescing of a single partial's partition (a
    /// distributed plan gathers partials over the network instead).
    fn gathers_one_partial(&self) -> bool {
        self.input
            .downcast_ref::<CoalescePartitionsExec>()
            .is_some_and(|coalesce| {
                coalesce
                    .input()
                    .downcast_ref::<StackSumExec>()
                    .is_some_and(|partial| {
                        partial.mode == SumMode::Partial
                            && partial.properties.partitioning.partition_count() == 1
                    })
            })
    }
}

impl DisplayAs for StackSumExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StackSumExec: mode={:?}", self.mode)
    }
}

impl ExecutionPlan for StackSumExec {
    fn name(&self) -> &str {
        "StackSumExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn required_input_distribution(&self) -> Vec<Distribution> {
        match self.mode {
            SumMode::Partial => vec![Distribution::UnspecifiedDistribution],
            SumMode::Final => vec![Distribution::SinglePartition],
        }
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DfResult<TreeNodeRecursion>,
    ) -> DfResult<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        match <[_; 1]>::try_from(children) {
            Ok([input]) => Ok(Arc::new(StackSumExec::new(self.mode, input))),
            Err(children) => internal_err!("StackSumExec takes one input, got {}", children.len()),
        }
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> DfResult<SendableRecordBatchStream> {
        let input = self.input.execute(partition, context.clone())?;
        if self.mode == SumMode::Final && self.gathers_one_partial() {
            // One partial's rows are already one per stack.
            return Ok(input);
        }
        let baseline = BaselineMetrics::new(&self.metrics, partition);
        let reservation =
            MemoryConsumer::new(format!("StackSumExec[{partition}]")).register(context.memory_pool());
        let batch_size = context.session_config().batch_size();
        let sums = async move {
            let mut input = input;
            let mut sums = Sums::default();
            while let Some(batch) = input.try_next().await? {
                if sums.is_empty() {
                    // Stacks repeat far less within a batch than across a scan: sized for
                    // the first batch's rows, the map skips most of the doublings (and
                    // their rehashing) it would go through growing from empty.
                    sums.reserve(batch.num_rows());
                }
                add_batch(&batch, &mut sums)?;
                reservation.try_resize(sums.capacity() * ENTRY_BYTES)?;
            }
            let batches = to_batches(sums, batch_size)?;
            drop(reservation);
            Ok::<_, DataFusionError>(futures::stream::iter(
                batches.into_iter().map(Ok::<_, DataFusionError>),
            ))
        };
        let stream = futures::stream::once(sums)
            .try_flatten()
            .inspect_ok(move |batch| baseline.record_output(batch.num_rows()));
        Ok(Box::pin(RecordBatchStreamAdapter::new(sum_schema(), stream)))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}

fn add_batch(batch: &RecordBatch, sums: &mut Sums) -> DfResult<()> {
    let unexpected = || DataFusionError::Internal(format!("unexpected stack sum input {:?}", batch.schema()));
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
        // `value_data` starts at the array's offset, so a sliced batch reads its own rows.
        let ids = &stacks.value_data()[..stacks.len() * 16];
        for (id, &value) in ids.chunks_exact(16).zip(values.values()) {
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

fn to_batches(sums: Sums, batch_size: usize) -> DfResult<Vec<RecordBatch>> {
    let schema = sum_schema();
    let entries: Vec<(u128, i64)> = sums.into_iter().collect();
    entries
        .chunks(batch_size.max(1))
        .map(|chunk| {
            let mut bytes = Vec::with_capacity(chunk.len() * 16);
            for (id, _) in chunk {
                bytes.extend_from_slice(&id.to_le_bytes());
            }
            let ids = FixedSizeBinaryArray::try_new(16, bytes.into(), None)?;
            let values = Int64Array::from_iter_values(chunk.iter().map(|&(_, v)| v));
            Ok(RecordBatch::try_new(
                schema.clone(),
                vec![Arc::new(ids), Arc::new(values)],
            )?)
        })
        .collect()
}

/// Replaces DataFusion's aggregate of `SUM(value) GROUP BY stack_id` (and nothing else)
/// with `StackSumExec(final) ← coalesce ← StackSumExec(partial)` over the aggregate's input.
#[derive(Debug, Default)]
pub(crate) struct StackSumRule;

impl PhysicalOptimizerRule for StackSumRule {
    fn name(&self) -> &str {
        "stack_sum"
    }

    fn schema_check(&self) -> bool {
        // The aggregate's `value` column is nullable (a SUM over no rows); ours is not.
        false
    }

    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        plan.transform_down(|node| {
            let Some((group, value, input)) = stack_sum_input(&node) else {
                return Ok(Transformed::no(node));
            };
            let projected: Arc<dyn ExecutionPlan> = Arc::new(ProjectionExec::try_new(
                vec![
                    (group, samples::STACK_ID.to_string()),
                    (value, samples::VALUE.to_string()),
                ],
                input,
            )?);
            let partial = Arc::new(StackSumExec::new(SumMode::Partial, projected));
            let gathered = Arc::new(CoalescePartitionsExec::new(partial));
            let merged: Arc<dyn ExecutionPlan> = Arc::new(StackSumExec::new(SumMode::Final, gathered));
            Ok(Transformed::new(merged, true, TreeNodeRecursion::Jump))
        })
        .map(|t| t.data)
    }
}

type Expr = Arc<dyn PhysicalExpr>;

/// For the top aggregate of a stack sum: its group expression, its summed expression and the
/// plan under its partial aggregate (or under itself when it runs in a single step).
fn stack_sum_input(node: &Arc<dyn ExecutionPlan>) -> Option<(Expr, Expr, Arc<dyn ExecutionPlan>)> {
    let top = node.downcast_ref::<AggregateExec>()?;
    if *top.mode() == AggregateMode::Partial || !is_stack_sum(top) {
        return None;
    }
    let first = match top.mode() {
        AggregateMode::Single | AggregateMode::SinglePartitioned => top,
        _ => partial_under(top)?
            .downcast_ref::<AggregateExec>()
            .filter(|agg| is_stack_sum(agg))?,
    };
    let (group, _) = first.group_expr().expr().first()?;
    let value = first.aggr_expr().first()?.expressions().into_iter().next()?;
    Some((group.clone(), value, first.input().clone()))
}

fn is_stack_sum(agg: &AggregateExec) -> bool {
    let group = agg.group_expr();
    let aggr = agg.aggr_expr();
    !group.has_grouping_set()
        && matches!(group.expr(), [(_, name)] if name == samples::STACK_ID)
        && matches!(aggr, [sum] if sum.fun().name() == "sum" && sum.name() == samples::VALUE && sum.expressions().len() == 1)
        && agg.filter_expr().iter().all(Option::is_none)
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{FixedSizeBinaryArray, Int64Array};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};

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
    fn rows_add_up_per_stack_in_slices_and_across_partials() {
        let (a, b, c) = (id(1), id(2), id(3));
        let whole = batch(
            [a, b, a, c, a, b].map(Some).to_vec(),
            [1, 2, 3, 4, 5, i64::MAX].map(Some).to_vec(),
        );
        let mut sums = Sums::default();
        // A sliced batch starts its ids at an offset into the shared buffer.
        add_batch(&whole.slice(2, 4), &mut sums).unwrap();
        assert_eq!(sorted(&sums), [(a, 8), (b, i64::MAX), (c, 4)]);

        // A final sum over two partials' output rows.
        let partial = |rows: &RecordBatch| {
            let mut sums = Sums::default();
            add_batch(rows, &mut sums).unwrap();
            to_batches(sums, 1).unwrap()
        };
        let mut merged = Sums::default();
        for out in partial(&whole.slice(0, 2))
            .iter()
            .chain(&partial(&whole.slice(2, 4)))
        {
            assert_eq!(out.num_rows(), 1);
            add_batch(out, &mut merged).unwrap();
        }
        // SUM over Int64 wraps, as DataFusion's does.
        assert_eq!(
            sorted(&merged),
            [(a, 9), (b, 2i64.wrapping_add(i64::MAX)), (c, 4)]
        );
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
