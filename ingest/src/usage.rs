//! Usage groups: a tenant's series named by selectors (`{service.name=~"checkout.*"}`), so
//! that what each team or service sends and stores can be counted and charged. A series
//! counts in every group whose selector matches its labels (after relabeling), and in
//! `other` when it matches none; groups that do not overlap add up to the tenant's total.
//!
//! Ingest counts samples received (valid, after relabeling, before the series limit and
//! sampling) and stored (acknowledged and not left out), and the bytes the flush wrote for
//! them (a segment's objects shared out by samples), on `/metrics`; the usage endpoint
//! reads what is stored now (after compaction) from the catalog, with the same groups.

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;
pub use stackhouse_storage::groups::OTHER;
use stackhouse_storage::groups::{MAX_SELECTORS, Membership};
use stackhouse_storage::model::{FastMap, Labels};
use stackhouse_storage::selector::{Selector, parse_selector};

/// The most groups a tenant may have: every group is a few metric series per tenant.
pub const MAX_GROUPS: usize = 50;
const _: () = assert!(MAX_GROUPS <= MAX_SELECTORS);

/// How samples are sampled in a group, off by default (`rate` 1).
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    pub name: String,
    pub selector: Selector,
    /// The share of profiles kept, in (0, 1]; see [`crate::sampling`].
    pub sample_rate: f64,
}

/// A group as configured: a selector alone, or with a sampling rate.
#[derive(Deserialize)]
#[serde(untagged)]
enum GroupConfig {
    Selector(String),
    Full {
        selector: String,
        #[serde(default)]
        sample_rate: Option<f64>,
    },
}

/// No groups, for a tenant state that lives as long as the program.
pub static NO_GROUPS: UsageGroups = UsageGroups::NONE;

/// A tenant's groups, in name order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UsageGroups(Vec<Group>);

impl UsageGroups {
    pub const NONE: UsageGroups = UsageGroups(Vec::new());

    /// Groups from a JSON map of name to selector, or to `{"selector": …, "sample_rate":
    /// …}`; at most `max` of them. Errors name the group.
    pub fn from_json(json: &str, max: usize) -> Result<UsageGroups, String> {
        let configs: BTreeMap<String, GroupConfig> = serde_json::from_str(json).map_err(|e| {
            format!(
                "usage groups are a JSON map of group names to selectors \
                 (or to {{\"selector\": …, \"sample_rate\": …}}): {e}"
            )
        })?;
        if configs.len() > max {
            return Err(format!(
                "{} usage groups, more than the limit of {max} per tenant",
                configs.len()
            ));
        }
        let mut groups = Vec::with_capacity(configs.len());
        for (name, config) in configs {
            if name.is_empty() || name == OTHER {
                return Err(format!("usage group name {name:?} is reserved or empty"));
            }
            let (selector, rate) = match config {
                GroupConfig::Selector(s) => (s, None),
                GroupConfig::Full {
                    selector,
                    sample_rate,
                } => (selector, sample_rate),
            };
            let selector = parse_selector(&selector).map_err(|e| format!("usage group {name:?}: {e}"))?;
            let sample_rate = rate.unwrap_or(1.0);
            if !(sample_rate > 0.0 && sample_rate <= 1.0) {
                return Err(format!(
                    "usage group {name:?}: sample_rate {sample_rate} is not in (0, 1]"
                ));
            }
            groups.push(Group {
                name,
                selector,
                sample_rate,
            });
        }
        Ok(UsageGroups(groups))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn groups(&self) -> &[Group] {
        &self.0
    }

    /// The groups whose selectors select a series of `labels`.
    pub fn membership(&self, labels: &Labels) -> Membership {
        Membership::of(self.0.iter().map(|g| &g.selector), labels)
    }

    /// The groups of `membership`.
    pub fn of(&self, membership: Membership) -> impl Iterator<Item = &Group> {
        membership.groups().filter_map(|i| self.0.get(i))
    }

    /// The names a series of `membership` counts under ([`OTHER`] when in no group).
    pub fn names(&self, membership: Membership) -> impl Iterator<Item = &str> {
        membership.names(|i| self.0.get(i).map_or(OTHER, |g| g.name.as_str()))
    }
}

/// One series' groups and the rows a request brought it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SeriesUsage {
    pub membership: Membership,
    pub samples: u64,
}

/// What one request brought to one group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupUsage {
    pub received_samples: u64,
    pub stored_samples: u64,
    /// The flushed segment's bytes shared out by stored samples.
    pub stored_bytes: u64,
    pub sampled_out_profiles: u64,
    pub sampled_out_samples: u64,
}

/// What one request of a tenant with usage groups brought to each group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UsageReport {
    pub tenant: String,
    pub groups: BTreeMap<String, GroupUsage>,
}

impl UsageReport {
    /// Per group of `groups`: the samples of each series of `series` counted as received,
    /// and as stored but for what the write left out (`left_out`: series → samples), with
    /// `bytes_per_sample` of the flushed segment.
    pub fn of(
        tenant: &str,
        groups: &UsageGroups,
        series: &FastMap<i64, SeriesUsage>,
        left_out: &HashMap<i64, u64>,
        bytes_per_sample: f64,
    ) -> UsageReport {
        let mut report = UsageReport {
            tenant: tenant.to_string(),
            groups: BTreeMap::new(),
        };
        for (id, usage) in series {
            let received = usage.samples;
            let stored = received.saturating_sub(left_out.get(id).copied().unwrap_or(0));
            for name in groups.names(usage.membership) {
                let group = report.groups.entry(name.to_string()).or_default();
                group.received_samples += received;
                group.stored_samples += stored;
                group.stored_bytes += (stored as f64 * bytes_per_sample).round() as u64;
            }
        }
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn series_count_in_every_matching_group_or_in_other() {
        let groups = UsageGroups::from_json(
            r#"{"checkout": "{service.name=~\"checkout.*\"}",
                "eu": {"selector": "{region=\"eu\"}", "sample_rate": 0.5}}"#,
            10,
        )
        .unwrap();
        assert_eq!(groups.groups()[1].sample_rate, 0.5);
        let a = labels(&[("service.name", "checkout-api"), ("region", "eu")]);
        let b = labels(&[("service.name", "cart"), ("region", "us")]);
        let c = labels(&[("service.name", "checkout"), ("region", "us")]);
        let names = |l: &Labels| {
            groups
                .names(groups.membership(l))
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&a), ["checkout", "eu"]);
        assert_eq!(names(&b), [OTHER]);
        let left_out = HashMap::from([(3, 7)]);
        let series: FastMap<i64, SeriesUsage> = [(1, a, 10), (2, b, 5), (3, c, 7)]
            .into_iter()
            .map(|(id, l, samples)| {
                let membership = groups.membership(&l);
                (id, SeriesUsage { membership, samples })
            })
            .collect();
        let report = UsageReport::of("t", &groups, &series, &left_out, 2.0);
        let got: Vec<(&str, u64, u64, u64)> = report
            .groups
            .iter()
            .map(|(n, g)| (n.as_str(), g.received_samples, g.stored_samples, g.stored_bytes))
            .collect();
        assert_eq!(
            got,
            [("checkout", 17, 10, 20), ("eu", 10, 10, 20), (OTHER, 5, 5, 10)]
        );
    }

    #[test]
    fn bad_groups_are_named_and_the_limit_holds() {
        let too_many = r#"{"a": "{}", "b": "{}", "c": "{}"}"#;
        assert!(
            UsageGroups::from_json(too_many, 2)
                .unwrap_err()
                .contains("more than the limit of 2")
        );
        let bad = UsageGroups::from_json(r#"{"x": "{service.name=}"}"#, 5).unwrap_err();
        assert!(bad.starts_with("usage group \"x\": invalid selector"), "{bad}");
        let rate = UsageGroups::from_json(r#"{"x": {"selector": "{}", "sample_rate": 0}}"#, 5).unwrap_err();
        assert!(rate.contains("sample_rate 0 is not in (0, 1]"), "{rate}");
        assert!(
            UsageGroups::from_json(r#"{"other": "{}"}"#, 5)
                .unwrap_err()
                .contains("reserved")
        );
    }
}
