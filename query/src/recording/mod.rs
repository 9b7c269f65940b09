//! Recording rules ("metrics from profiles", as Grafana Pyroscope names them): a rule
//! selects a profile type and series, optionally only the stacks through one function,
//! and records the selection's total per minute as a Prometheus series per group. This
//! module holds what a rule is ([`RuleDefinition`], checked as Pyroscope checks it) and
//! how its points are computed ([`QueryEngine::record`]); storing rules and pushing the
//! points are the catalog's and the API's.
//!
//! [`QueryEngine::record`]: crate::QueryEngine::record

mod definition;
mod evaluate;

pub use definition::{METRIC_PREFIX, RULE_ID_LABEL, RuleDefinition};
pub use evaluate::{Recorded, RecordedSeries, STEP_NANOS, Step};
