//! What one request stored and refused, and OTLP's answer for it.

use stackhouse_proto::otlp_collector::{ExportProfilesPartialSuccess, ExportProfilesServiceResponse};

use crate::convert::Converted;
use crate::usage::UsageReport;

/// What one ingest stored and refused.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Exported {
    /// Stored by this request: without the profiles left out as stored before.
    pub stored_profiles: usize,
    pub stored_samples: usize,
    /// Acknowledged but left out, because they were stored before (a retried export).
    pub repeated_profiles: usize,
    /// Refused by conversion plus refused by normalization.
    pub rejected_profiles: usize,
    /// Conversion's messages first, then normalization's, in request order.
    pub errors: Vec<String>,
    /// What was stored other than sent (stacks cut to the depth limit).
    pub warnings: Vec<String>,
    pub truncated_stacks: usize,
    /// The part of `rejected_profiles` the tenant's relabel rules dropped.
    pub relabeled_profiles: usize,
    /// Profiles sampling left out (acknowledged, neither stored nor rejected).
    pub sampled_out_profiles: usize,
    /// Per usage group, when the tenant has groups.
    pub usage: Option<UsageReport>,
    /// What conversion produced, as the format counts it (Pyroscope's answer).
    pub converted: Converted,
    /// The part of `rejected_profiles` that conversion refused.
    pub conversion_rejected: usize,
}

impl Exported {
    /// OTLP's answer: `partial_success` when something was refused, or with
    /// `rejected_profiles: 0` when all was stored but not quite as sent (OTLP's warnings).
    pub fn response(&self) -> ExportProfilesServiceResponse {
        let partial_success =
            (self.rejected_profiles > 0 || !self.warnings.is_empty()).then(|| ExportProfilesPartialSuccess {
                rejected_profiles: self.rejected_profiles as i64,
                error_message: self
                    .errors
                    .iter()
                    .chain(&self.warnings)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("; "),
            });
        ExportProfilesServiceResponse { partial_success }
    }
}
