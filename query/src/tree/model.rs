//! The flamegraph model: [`Node`] trees and the [`Flamegraph`] a query answers with.

use serde::Serialize;
use stackhouse_storage::model::ProfileType;
use utoipa::ToSchema;

use crate::types::{ProfileTypeInfo, ScanStats};

/// Node budget when a query does not ask for one (as Pyroscope's `max_nodes`).
pub const DEFAULT_MAX_NODES: usize = 8192;
/// Name of the synthetic root every call path hangs from.
pub const ROOT_NAME: &str = "total";
/// Name of the node that stands for the siblings truncation folded away.
pub const OTHER_NAME: &str = "other";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct Node {
    pub name: String,
    /// Value of samples whose stack ends exactly here.
    #[serde(rename = "self")]
    pub self_value: i64,
    /// `self_value` plus the totals of all children.
    pub total: i64,
    /// Sorted by total, largest first, then by name.
    #[schema(no_recursion)]
    pub children: Vec<Node>,
}

impl Node {
    pub fn leaf(name: impl Into<String>, value: i64) -> Node {
        Node {
            name: name.into(),
            self_value: value,
            total: value,
            children: Vec::new(),
        }
    }

    /// Nodes in this subtree, this one included.
    pub fn count(&self) -> usize {
        count_nodes(self)
    }

    /// The child with this name, if any.
    pub fn child(&self, name: &str) -> Option<&Node> {
        self.children.iter().find(|c| c.name == name)
    }
}

impl TreeNode for Node {
    fn weight(&self) -> i64 {
        self.total
    }

    fn children(&self) -> &[Node] {
        &self.children
    }

    fn children_mut(&mut self) -> &mut Vec<Node> {
        &mut self.children
    }

    fn other(folded: &[Node]) -> Node {
        Node::leaf(OTHER_NAME, folded.iter().map(|n| n.total).sum())
    }

    fn sort_children(&mut self) {
        self.children
            .sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.name.cmp(&b.name)));
    }
}

/// A built tree whose children are kept in sibling order (larger weights first, then by
/// name): the flamegraph and the diff, which `truncate_tree` cuts alike.
pub trait TreeNode: Sized {
    /// What truncation ranks nodes by: larger weights are kept first.
    fn weight(&self) -> i64;
    fn children(&self) -> &[Self];
    fn children_mut(&mut self) -> &mut Vec<Self>;
    /// The leaf that stands for `folded`, siblings truncation dropped: it carries their
    /// summed totals so that its parent's total stays exact.
    fn other(folded: &[Self]) -> Self;
    /// Restores the children's order after an `other` node was added.
    fn sort_children(&mut self);
}

/// Nodes in the subtree of `node`, `node` included.
pub fn count_nodes<T: TreeNode>(node: &T) -> usize {
    1 + node.children().iter().map(count_nodes).sum::<usize>()
}

/// A query's result: the call tree plus what a client needs to read its values.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct Flamegraph {
    #[serde(flatten)]
    pub kind: ProfileTypeInfo,
    /// The sample unit of the profile type: what `self` and `total` count.
    pub unit: String,
    /// The largest sampling period of the selected series, in `period_unit`.
    pub period: i64,
    pub total: i64,
    /// The node budget applied by [`Flamegraph::truncate`]; absent before truncation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_nodes: Option<usize>,
    /// The `group_by` keys of the first level under the root, when grouped.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub group_by: Vec<String>,
    pub root: Node,
    /// What the query read; absent for results not built by a scan.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stats: Option<ScanStats>,
}

impl Flamegraph {
    pub fn new(profile_type: ProfileType, period: i64, root: Node) -> Flamegraph {
        Flamegraph {
            unit: profile_type.sample_unit.clone(),
            kind: ProfileTypeInfo::from(&profile_type),
            period,
            total: root.total,
            max_nodes: None,
            group_by: Vec::new(),
            root,
            stats: None,
        }
    }

    pub fn profile_type(&self) -> ProfileType {
        self.kind.to_profile_type()
    }

    /// A flamegraph of nothing: total 0, a root without children.
    pub fn empty(profile_type: ProfileType, period: i64) -> Flamegraph {
        Flamegraph::new(profile_type, period, Node::leaf(ROOT_NAME, 0))
    }

    /// See [`Node::truncate`]; the root total never changes.
    pub fn truncate(&mut self, max_nodes: usize) {
        self.root.truncate(max_nodes);
        self.max_nodes = Some(max_nodes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::testing::sample_tree;

    #[test]
    fn flamegraph_truncation_records_the_budget() {
        let pt = ProfileType::parse("samples:count:cpu:nanoseconds").unwrap();
        let mut fg = Flamegraph::new(pt, 10, sample_tree());
        assert_eq!((fg.unit.as_str(), fg.total, fg.max_nodes), ("count", 102, None));
        fg.truncate(3);
        assert_eq!((fg.total, fg.root.total, fg.max_nodes), (102, 102, Some(3)));
        let empty = Flamegraph::empty(ProfileType::default(), 0);
        assert_eq!((empty.total, empty.root.name.as_str()), (0, ROOT_NAME));
    }
}
