//! Per-tenant bounds on what is stored: how many series a tenant may have, how many labels
//! a series may have, how deep a stack may be ([`IngestLimits`], [`SeriesCounter`]), and
//! how fast a tenant may send ([`RateLimiter`]). A profile over a bound is refused alone
//! (OTLP partial_success naming the bound); a too deep stack is kept, cut to its root-most
//! frames below a marker frame; a request over the rate is refused whole.

mod rate;
mod series;

pub use rate::{RateLimiter, RateLimits};
pub use series::SeriesCounter;
use std::sync::Arc;

use stackhouse_storage::per_tenant::PerTenant;

use crate::relabel::Rules;
use crate::usage::UsageGroups;

/// The bounds of what one tenant stores, resolved per tenant (`0`: no limit).
#[derive(Clone, Debug, Default)]
pub struct IngestLimits {
    pub max_series: PerTenant<usize>,
    pub max_label_names: PerTenant<usize>,
    pub max_stack_depth: PerTenant<usize>,
    /// Rules applied to each series' labels before it is counted ([`crate::relabel`]).
    pub relabel: PerTenant<Arc<Rules>>,
    /// Usage groups, with their sampling rates ([`crate::usage`]).
    pub usage: PerTenant<Arc<UsageGroups>>,
}
