//! The flags of the per-tenant bounds on what is stored, beyond the rates: how many series
//! a tenant may have, how many labels a series may have, how deep a stack may be. The
//! bounds themselves are ingest's ([`stackhouse_ingest::limits`]).

use clap::Args;
use stackhouse_ingest::limits::IngestLimits;

use super::{PerTenant, tenant_value};

#[derive(Args, Debug, Clone)]
pub struct IngestLimitArgs {
    /// Most series a tenant may have stored; a profile that would add one more is refused.
    /// `0`: no limit.
    #[arg(long, env = "STACKHOUSE_INGEST_MAX_SERIES", default_value_t = 100_000)]
    pub ingest_max_series: usize,

    /// Most labels (resource, scope and profile attributes together) of one series; a
    /// profile with more is refused. `0`: no limit.
    #[arg(long, env = "STACKHOUSE_INGEST_MAX_LABEL_NAMES", default_value_t = 64)]
    pub ingest_max_label_names: usize,

    /// Deepest stack stored whole; a deeper one keeps its root-most frames below a
    /// `[truncated: …]` frame. `0`: no limit.
    #[arg(long, env = "STACKHOUSE_INGEST_MAX_STACK_DEPTH", default_value_t = 1024)]
    pub ingest_max_stack_depth: usize,

    /// One tenant's `--ingest-max-series`, `tenant=N`; repeatable.
    #[arg(long, env = "STACKHOUSE_TENANT_INGEST_MAX_SERIES", value_delimiter = ',', value_parser = tenant_value::<usize>)]
    pub tenant_ingest_max_series: Vec<(String, usize)>,

    /// One tenant's `--ingest-max-label-names`, `tenant=N`; repeatable.
    #[arg(long, env = "STACKHOUSE_TENANT_INGEST_MAX_LABEL_NAMES", value_delimiter = ',', value_parser = tenant_value::<usize>)]
    pub tenant_ingest_max_label_names: Vec<(String, usize)>,

    /// One tenant's `--ingest-max-stack-depth`, `tenant=N`; repeatable.
    #[arg(long, env = "STACKHOUSE_TENANT_INGEST_MAX_STACK_DEPTH", value_delimiter = ',', value_parser = tenant_value::<usize>)]
    pub tenant_ingest_max_stack_depth: Vec<(String, usize)>,
}

impl IngestLimitArgs {
    pub fn limits(&self) -> IngestLimits {
        IngestLimits {
            max_series: PerTenant::new(self.ingest_max_series, &self.tenant_ingest_max_series),
            max_label_names: PerTenant::new(self.ingest_max_label_names, &self.tenant_ingest_max_label_names),
            max_stack_depth: PerTenant::new(self.ingest_max_stack_depth, &self.tenant_ingest_max_stack_depth),
        }
    }
}
