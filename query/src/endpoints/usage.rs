//! `usage`: what each usage group of a tenant stores in a range, read from the catalog:
//! per group, its series, their samples, and the bytes of the segments holding them, each
//! segment's objects shared out among its series by samples (the remainder of the
//! division to the segment's last series, so groups that do not overlap add up to the
//! bytes of the segments exactly). A segment that overlaps the range counts whole;
//! symbol tables, kept once per tenant, are not shared out. The query API reads it as
//! `GET /api/v1/usage`.

use std::collections::{BTreeMap, HashMap, HashSet};

use stackhouse_storage::groups::Membership;
use stackhouse_storage::model::{TimeRange, is_union};
use stackhouse_storage::selector::Selector;

use crate::engine::QueryEngine;
use crate::error::QueryError;
use crate::request::ListingRequest;

/// One group's stored data in the range.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupUsage {
    pub series: u64,
    pub samples: u64,
    pub bytes: u64,
}

impl QueryEngine {
    /// `GET /api/v1/usage`: per group of `groups` (name and selector), and [`OTHER`](stackhouse_storage::groups::OTHER).
    pub async fn read_usage(
        &self,
        r: &ListingRequest,
        groups: &[(String, Selector)],
    ) -> Result<BTreeMap<String, GroupUsage>, QueryError> {
        self.bounded("usage", async {
            if is_union(&r.tenant) {
                return Err(QueryError::InvalidArgument(format!(
                    "usage is counted per tenant; X-Scope-OrgID {:?} names several",
                    r.tenant
                )));
            }
            let range = self.resolve_range(&r.range)?;
            // Every series a segment of the range holds, also those without samples in the
            // range itself (the segment counts whole).
            let series = self.catalog.series(&r.tenant, TimeRange::ALL).await?;
            let segments = self.catalog.segments(&r.tenant, range).await?;
            let selectors = || groups.iter().map(|(_, selector)| selector);
            let membership: HashMap<i64, Membership> = series
                .iter()
                .map(|s| (s.id, Membership::of(selectors(), &s.labels)))
                .collect();
            let mut out: BTreeMap<String, GroupUsage> = BTreeMap::new();
            let mut seen: HashSet<i64> = HashSet::new();
            for segment in &segments {
                let total: u64 = segment.series.iter().map(|s| s.samples).sum();
                let bytes: u64 = segment.objects.iter().map(|o| o.size_bytes).sum();
                let mut shared = 0;
                for (i, s) in segment.series.iter().enumerate() {
                    let share = if i + 1 == segment.series.len() {
                        bytes - shared
                    } else if total == 0 {
                        0
                    } else {
                        (u128::from(bytes) * u128::from(s.samples) / u128::from(total)) as u64
                    };
                    shared += share;
                    let first = seen.insert(s.series_id);
                    let member = membership.get(&s.series_id).copied().unwrap_or_default();
                    for name in member.names(|i| groups[i].0.as_str()) {
                        let group = out.entry(name.to_string()).or_default();
                        group.series += u64::from(first);
                        group.samples += s.samples;
                        group.bytes += share;
                    }
                }
            }
            Ok(out)
        })
        .await
    }
}
