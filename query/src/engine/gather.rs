//! Aggregates that query workers can share. DataFusion plans a `GROUP BY` over one input
//! partition as one single-step aggregate, and over several as partial sums hash-shuffled
//! to a partitioned final step; the distributed planner spreads neither over the workers
//! (seen on the time series: with 3 or 4 workers every row was summed in the coordinator).
//! On a coordinator, both become partial sums gathered to one final step, as the flamegraph's
//! stack sums are: the gather is the stage boundary the planner hands to the workers, and
//! what crosses it is one row per group and task. The queries that take this path group
//! by time bucket or by a few labels, so the groups that meet in the coordinator are few.

use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode, TreeNodeRecursion};
use datafusion::error::Result as DfResult;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;

#[derive(Debug, Default)]
pub(crate) struct GatherPartialAggregates;

impl PhysicalOptimizerRule for GatherPartialAggregates {
    fn name(&self) -> &str {
        "gather_partial_aggregates"
    }

    fn schema_check(&self) -> bool {
        true
    }

    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        plan.transform_down(|node| {
            let Some(agg) = node.downcast_ref::<AggregateExec>() else {
                return Ok(Transformed::no(node));
            };
            let partial = match agg.mode() {
                AggregateMode::Single | AggregateMode::SinglePartitioned => partial_of(agg)?,
                AggregateMode::FinalPartitioned => match partial_under(agg) {
                    Some(partial) => partial.clone(),
                    None => return Ok(Transformed::no(node)),
                },
                _ => return Ok(Transformed::no(node)),
            };
            let gathered = Arc::new(CoalescePartitionsExec::new(partial.clone()));
            let last = AggregateExec::try_new(
                AggregateMode::Final,
                partial
                    .downcast_ref::<AggregateExec>()
                    .expect("a partial aggregate")
                    .group_expr()
                    .as_final(),
                agg.aggr_expr().to_vec(),
                agg.filter_expr().to_vec(),
                gathered,
                agg.input_schema(),
            )?;
            Ok(Transformed::new(Arc::new(last), true, TreeNodeRecursion::Jump))
        })
        .data()
    }
}

/// The partial step of a single-step aggregate, over its input.
fn partial_of(agg: &AggregateExec) -> DfResult<Arc<dyn ExecutionPlan>> {
    Ok(Arc::new(AggregateExec::try_new(
        AggregateMode::Partial,
        agg.group_expr().clone(),
        agg.aggr_expr().to_vec(),
        agg.filter_expr().to_vec(),
        agg.input().clone(),
        agg.input_schema(),
    )?))
}

/// The first aggregate under a final step `top`, if only repartitioning or coalescing
/// nodes lie between them and it is a partial one.
pub(crate) fn partial_under(top: &AggregateExec) -> Option<&Arc<dyn ExecutionPlan>> {
    let mut below = top.input();
    loop {
        if let Some(agg) = below.downcast_ref::<AggregateExec>() {
            return (*agg.mode() == AggregateMode::Partial).then_some(below);
        }
        match below.children().as_slice() {
            [only] if below.name().contains("Repartition") || below.name().contains("Coalesce") => {
                below = *only;
            }
            _ => return None,
        }
    }
}
