//! `flamegraph`: the call tree of the selected samples, optionally grouped.

use crate::engine::QueryEngine;
use crate::engine::scope::{GroupKey, Scope};
use crate::error::QueryError;
use crate::stack_filter::StackFilter;
use crate::tree::{Flamegraph, FlamegraphJson};

#[derive(Clone, Debug)]
pub struct FlamegraphQuery {
    pub scope: Scope,
    /// Puts one level of `key=value` nodes under the root.
    pub group_by: Vec<GroupKey>,
    /// Node budget of the tree; 0 means [`crate::DEFAULT_MAX_NODES`].
    pub max_nodes: usize,
}

impl QueryEngine {
    /// The call tree of the selected samples, values summed per call path. Selecting
    /// nothing is not an error: the result has total 0.
    pub async fn flamegraph(&self, q: &FlamegraphQuery) -> Result<Flamegraph, QueryError> {
        self.filtered_flamegraph(q, &StackFilter::default()).await
    }

    /// [`QueryEngine::flamegraph`] as JSON, written while the tree is cut.
    pub async fn flamegraph_json(&self, q: &FlamegraphQuery) -> Result<FlamegraphJson, QueryError> {
        self.bounded("flamegraph", async {
            let max_nodes = self.max_nodes(q.max_nodes)?;
            self.tree_json(&q.scope, &q.group_by, max_nodes).await
        })
        .await
    }

    /// [`QueryEngine::flamegraph`] of only the stacks `stacks` keeps.
    pub async fn filtered_flamegraph(
        &self,
        q: &FlamegraphQuery,
        stacks: &StackFilter,
    ) -> Result<Flamegraph, QueryError> {
        self.bounded("flamegraph", async {
            let max_nodes = self.max_nodes(q.max_nodes)?;
            // An ungrouped tree is cut to its call site while it is built, so a subtree
            // costs what its own stacks cost.
            let call_site: &[String] = if q.group_by.is_empty() {
                &stacks.call_site
            } else {
                &[]
            };
            if stacks.is_empty() || stacks.only_call_site() && !call_site.is_empty() {
                let mut flamegraph = self
                    .tree(&q.scope, &q.group_by, Some(max_nodes), call_site)
                    .await?;
                // Already cut while building: cutting again would fold kept nodes in favour
                // of the `other` nodes the first cut made.
                flamegraph.max_nodes = Some(max_nodes);
                return Ok(flamegraph);
            }
            // Filtering needs every node: truncation would have folded some into `other`.
            let mut flamegraph = self.tree(&q.scope, &q.group_by, None, call_site).await?;
            flamegraph.root = stacks.apply(flamegraph.root);
            flamegraph.total = flamegraph.root.total;
            flamegraph.truncate(max_nodes);
            Ok(flamegraph)
        })
        .await
    }
}
