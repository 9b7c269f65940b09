//! What a query selects, shared by every endpoint: profile type, selector, time range,
//! and optionally trace, span and profile ids; and how results are grouped.

use std::fmt;
use std::sync::Arc;

use stackhouse_storage::model::{ProfileType, TimeRange};

use crate::error::QueryError;
use crate::frames::FrameView;
use crate::selector::Selector;

#[derive(Clone, Debug)]
pub struct Scope {
    pub tenant: String,
    pub profile_type: ProfileType,
    pub selector: Selector,
    pub range: TimeRange,
    /// Samples linked to any of these traces; empty means no trace filter.
    pub trace_ids: Vec<[u8; 16]>,
    /// Samples linked to any of these spans; empty means no span filter.
    pub span_ids: Vec<[u8; 8]>,
    /// Samples of any of these profiles; empty means no profile filter.
    pub profile_ids: Vec<[u8; 16]>,
    /// Only these segments (as the catalog located a profile id); `None` means every
    /// segment the time range and series select.
    pub segments: Option<Vec<String>>,
    /// Also select the series that count samples of this (time) type's period
    /// ([`ProfileType::counted`]), each sample worth its series' period: CPU time as
    /// Pyroscope shows the eBPF profiler's sample counts. Totals stay exact integers:
    /// each row is multiplied by its series' period before it is summed.
    pub in_time: bool,
    /// How frames are named and which stacks and frames are kept.
    pub frames: Arc<FrameView>,
}

impl Scope {
    /// Everything of one profile type in a range.
    pub fn new(tenant: impl Into<String>, profile_type: ProfileType, range: TimeRange) -> Scope {
        Scope {
            tenant: tenant.into(),
            profile_type,
            selector: Selector::default(),
            range,
            trace_ids: Vec::new(),
            span_ids: Vec::new(),
            profile_ids: Vec::new(),
            segments: None,
            in_time: false,
            frames: Arc::default(),
        }
    }

    /// The stored types the scope selects.
    pub fn profile_types(&self) -> Vec<ProfileType> {
        let counted = self.in_time.then(|| self.profile_type.counted()).flatten();
        std::iter::once(self.profile_type.clone())
            .chain(counted)
            .collect()
    }
}

/// One `group_by` key: a label, or one of the link columns. As for selector matchers, a
/// key is read from the series labels when the series carries it, and from the sample
/// attributes otherwise.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum GroupKey {
    Label(String),
    TraceId,
    SpanId,
    ProfileId,
}

impl GroupKey {
    pub fn name(&self) -> &str {
        match self {
            GroupKey::Label(name) => name,
            GroupKey::TraceId => "trace_id",
            GroupKey::SpanId => "span_id",
            GroupKey::ProfileId => "profile_id",
        }
    }
}

impl fmt::Display for GroupKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Parses `key[,key…]`; `trace_id`, `span_id` and `profile_id` name the link columns.
/// Empty input means no grouping. Keys must be distinct and not empty.
pub fn parse_group_by(value: &str) -> Result<Vec<GroupKey>, QueryError> {
    let mut keys = Vec::new();
    if value.trim().is_empty() {
        return Ok(keys);
    }
    for part in value.split(',') {
        let part = part.trim();
        let key = match part {
            "" => {
                return Err(QueryError::InvalidArgument(format!(
                    "invalid group_by {value:?}: empty key"
                )));
            }
            "trace_id" => GroupKey::TraceId,
            "span_id" => GroupKey::SpanId,
            "profile_id" => GroupKey::ProfileId,
            name => GroupKey::Label(name.to_string()),
        };
        if keys.contains(&key) {
            return Err(QueryError::InvalidArgument(format!(
                "invalid group_by {value:?}: key {part:?} given twice"
            )));
        }
        keys.push(key);
    }
    Ok(keys)
}

/// The name of a group node or series: `key=value` per key, joined by `,`. A sample
/// without the key contributes `key=`.
pub(crate) fn group_name(keys: &[GroupKey], values: &[String]) -> String {
    keys.iter()
        .zip(values)
        .map(|(k, v)| format!("{}={v}", k.name()))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_by_parses_labels_and_link_columns() {
        assert_eq!(parse_group_by("").unwrap(), vec![]);
        assert_eq!(
            parse_group_by("thread.name, span_id").unwrap(),
            vec![GroupKey::Label("thread.name".into()), GroupKey::SpanId]
        );
        assert!(parse_group_by("a,,b").is_err());
        assert!(parse_group_by("a,a").is_err());
        let keys = parse_group_by("thread.name,span_id").unwrap();
        assert_eq!(
            group_name(&keys, &["main".into(), "".into()]),
            "thread.name=main,span_id="
        );
    }
}
