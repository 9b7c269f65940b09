//! `usage`: what each usage group of a tenant stores in a range, read from the catalog:
//! per group, its series, their samples, and the bytes of the segments holding them, each
//! segment's objects shared out among its series by samples (the remainder of the
//! division to the segment's last series, so groups that do not overlap add up to the
//! bytes of the segments exactly). A segment that overlaps the range counts whole;
//! symbol tables, kept once per tenant, are not shared out. The query API reads it as
//! `GET /api/v1/usage`.

use std::collections::{BTreeMap, HashMap, HashSet};

use stackhouse_storage::model::TimeRange;
use stackhouse_storage::selector::Selector;

use crate::engine::QueryEngine;
use crate::error::QueryError;
use crate::request::ListingRequest;

/// The group of the series no group selects.
pub const OTHER: &str = "other";

/// One group's stored data in the range.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupUsage {
    pub series: u64,
    pub samples: u64,
    pub bytes: u64,
}

impl QueryEngine {
    /// `GET /api/v1/usage`: per group of `groups` (name and selector), and [`OTHER`].
    pub async fn read_usage(
        &self,
        r: &ListingRequest,
        groups: &[(String, Selector)],
    ) -> Result<BTreeMap<String, GroupUsage>, QueryError> {
        self.bounded("usage", async {
            let range = self.resolve_range(&r.range)?;
            // Every series a segment of the range holds, also those without samples in the
            // range itself (the segment counts whole).
            let series = self.catalog.series(&r.tenant, TimeRange::ALL).await?;
            let segments = self.catalog.segments(&r.tenant, range).await?;
            let mut names_of: HashMap<i64, Vec<&str>> = HashMap::with_capacity(series.len());
            let mut out: BTreeMap<String, GroupUsage> = BTreeMap::new();
            for s in &series {
                let mut names: Vec<&str> = groups
                    .iter()
                    .filter(|(_, selector)| selector.selects(|n| s.labels.get(n).map(String::as_str)))
                    .map(|(name, _)| name.as_str())
                    .collect();
                if names.is_empty() {
                    names.push(OTHER);
                }
                names_of.insert(s.id, names);
            }
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
                    for name in names_of.get(&s.series_id).map_or(&[OTHER][..], Vec::as_slice) {
                        let group = out.entry((*name).to_string()).or_default();
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
