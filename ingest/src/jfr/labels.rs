//! Pyroscope's `LabelsSnapshot` (multipart part `labels`): the dynamic labels that
//! Pyroscope's async-profiler build attaches to events through their `contextId` field.

use std::collections::BTreeMap;

/// `message Context { map<int64, int64> labels = 1; }`: label name → value, both as ids
/// into [`LabelsSnapshot::strings`].
#[derive(Clone, PartialEq, prost::Message)]
pub struct Context {
    #[prost(btree_map = "int64, int64", tag = "1")]
    pub labels: BTreeMap<i64, i64>,
}

/// `message LabelsSnapshot { map<int64, Context> contexts = 1; map<int64, string> strings = 2; }`
#[derive(Clone, PartialEq, prost::Message)]
pub struct LabelsSnapshot {
    #[prost(btree_map = "int64, message", tag = "1")]
    pub contexts: BTreeMap<i64, Context>,
    #[prost(btree_map = "int64, string", tag = "2")]
    pub strings: BTreeMap<i64, String>,
}

impl LabelsSnapshot {
    /// The labels of a context as (name, value) pairs sorted by name; ids without a string
    /// are left out (Pyroscope ignores them too).
    pub fn labels(&self, context_id: i64) -> Vec<(&str, &str)> {
        let Some(context) = self.contexts.get(&context_id) else {
            return Vec::new();
        };
        let mut out: Vec<(&str, &str)> = context
            .labels
            .iter()
            .filter_map(|(k, v)| Some((self.strings.get(k)?.as_str(), self.strings.get(v)?.as_str())))
            .collect();
        out.sort_unstable();
        out
    }

    pub fn string(&self, id: i64) -> Option<&str> {
        self.strings.get(&id).map(String::as_str)
    }
}
