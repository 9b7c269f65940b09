//! How the plan nodes of ours that DataFusion cannot serialize cross to a worker.

use std::sync::Arc;

use datafusion::common::{Result as DfResult, internal_err};
use datafusion::execution::TaskContext;
use datafusion::physical_plan::ExecutionPlan;
use datafusion_proto::physical_plan::{PhysicalExtensionCodec, PhysicalProtoConverterExtension};

use crate::engine::stack_sums::{StackSumExec, SumMode};

/// The one byte a [`StackSumExec`] needs besides its input: its mode. Its schema is fixed.
#[derive(Debug, Default)]
pub struct StackhouseCodec;

const PARTIAL: u8 = 1;
const FINAL: u8 = 2;

impl PhysicalExtensionCodec for StackhouseCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn ExecutionPlan>],
        _ctx: &TaskContext,
        _proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let mode = match buf {
            [PARTIAL] => SumMode::Partial,
            [FINAL] => SumMode::Final,
            other => return internal_err!("unknown stackhouse plan node {other:?}"),
        };
        match inputs {
            [input] => Ok(Arc::new(StackSumExec::new(mode, input.clone()))),
            _ => internal_err!("StackSumExec takes one input, got {}", inputs.len()),
        }
    }

    fn try_encode(
        &self,
        node: Arc<dyn ExecutionPlan>,
        buf: &mut Vec<u8>,
        _proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> DfResult<()> {
        let Some(sum) = node.downcast_ref::<StackSumExec>() else {
            return internal_err!("stackhouse codec cannot encode {}", node.name());
        };
        buf.push(match sum.mode() {
            SumMode::Partial => PARTIAL,
            SumMode::Final => FINAL,
        });
        Ok(())
    }
}
