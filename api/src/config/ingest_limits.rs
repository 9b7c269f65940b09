//! The flags of the per-tenant bounds on what is stored, beyond the rates: how many series
//! a tenant may have, how many labels a series may have, how deep a stack may be. The
//! bounds themselves are ingest's ([`stackhouse_ingest::limits`]).

use std::sync::Arc;

use clap::Args;
use stackhouse_ingest::limits::IngestLimits;
use stackhouse_ingest::relabel::Rules;
use stackhouse_ingest::usage::{MAX_GROUPS, UsageGroups};

use super::{PerTenant, tenant_override, tenant_value};

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

    /// Relabel rules applied to every series' labels before the series limit counts it, a
    /// JSON list of Prometheus `relabel_config`s (`source_labels`, `separator`, `regex`,
    /// `target_label`, `replacement`, `modulus`, `action`: replace, keep, drop, hashmod,
    /// labeldrop, labelkeep, labelmap); `__profile_type__` holds the profile type. In the
    /// config file, a YAML list of such maps. A bad rule stops the server naming it.
    #[arg(long, env = "STACKHOUSE_INGEST_RELABEL_RULES", value_name = "JSON", default_value = "[]", value_parser = relabel_rules)]
    pub ingest_relabel_rules: Arc<Rules>,

    /// One tenant's `--ingest-relabel-rules` (replacing the default's), `tenant=JSON`;
    /// repeatable.
    #[arg(long, env = "STACKHOUSE_TENANT_INGEST_RELABEL_RULES", value_name = "JSON", value_parser = tenant_relabel_rules)]
    pub tenant_ingest_relabel_rules: Vec<(String, Arc<Rules>)>,

    /// Usage groups: a JSON map of group names to label selectors, or to `{"selector": …,
    /// "sample_rate": R}` to keep only a share R of the group's profiles (chosen by profile
    /// id; kept values divided by R). Samples and bytes per group are counted on /metrics
    /// and at /api/v1/usage; at most 50 groups. In the config file, a YAML map.
    #[arg(long, env = "STACKHOUSE_USAGE_GROUPS", value_name = "JSON", default_value = "{}", value_parser = usage_groups)]
    pub usage_groups: Arc<UsageGroups>,

    /// One tenant's `--usage-groups` (replacing the default's), `tenant=JSON`; repeatable.
    #[arg(long, env = "STACKHOUSE_TENANT_USAGE_GROUPS", value_name = "JSON", value_parser = tenant_usage_groups)]
    pub tenant_usage_groups: Vec<(String, Arc<UsageGroups>)>,

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
            relabel: PerTenant::new(
                self.ingest_relabel_rules.clone(),
                &self.tenant_ingest_relabel_rules,
            ),
            usage: PerTenant::new(self.usage_groups.clone(), &self.tenant_usage_groups),
        }
    }
}

fn relabel_rules(json: &str) -> Result<Arc<Rules>, String> {
    Rules::from_json(json).map(Arc::new)
}

fn usage_groups(json: &str) -> Result<Arc<UsageGroups>, String> {
    UsageGroups::from_json(json, MAX_GROUPS).map(Arc::new)
}

fn tenant_usage_groups(s: &str) -> Result<(String, Arc<UsageGroups>), String> {
    let (tenant, json) = tenant_override(s)?;
    let groups = usage_groups(json).map_err(|e| format!("tenant {tenant}: {e}"))?;
    Ok((tenant.to_string(), groups))
}

fn tenant_relabel_rules(s: &str) -> Result<(String, Arc<Rules>), String> {
    let (tenant, json) = tenant_override(s)?;
    let rules = relabel_rules(json).map_err(|e| format!("tenant {tenant}: {e}"))?;
    Ok((tenant.to_string(), rules))
}
