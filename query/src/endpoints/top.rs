//! `top`: functions by self and total value. The query API reads it as `GET /api/v1/top`.

use std::collections::HashMap;

use serde::Serialize;
use utoipa::ToSchema;

use crate::engine::QueryEngine;
use crate::engine::scope::Scope;
use crate::error::QueryError;
use crate::request::ScopeRequest;
use crate::tree::Node;
use crate::types::{ProfileTypeInfo, ScanStats};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct TopFunction {
    /// The frame name, as in the flamegraph.
    pub name: String,
    /// Value of samples whose leaf frame is this function.
    #[serde(rename = "self")]
    pub self_value: i64,
    /// Value of samples with this function anywhere on the stack (recursion counted once).
    pub total: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct Top {
    #[serde(flatten)]
    pub kind: ProfileTypeInfo,
    pub unit: String,
    /// Value of every selected sample.
    pub total: i64,
    /// Sorted by self value, largest first, then by total and name; at most `limit`.
    pub functions: Vec<TopFunction>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stats: Option<ScanStats>,
}

#[derive(Clone, Debug)]
pub struct TopQuery {
    pub scope: Scope,
    /// Most functions returned.
    pub limit: usize,
}

impl QueryEngine {
    /// Functions by self value.
    pub async fn top(&self, q: &TopQuery) -> Result<Top, QueryError> {
        self.bounded("top", async {
            if q.limit == 0 {
                return Err(QueryError::InvalidArgument("limit must be at least 1".into()));
            }
            let flamegraph = self.tree(&q.scope, &[], None, &[]).await?;
            let mut functions = top_functions(&flamegraph.root);
            functions.truncate(q.limit);
            Ok(Top {
                kind: flamegraph.kind,
                unit: flamegraph.unit,
                total: flamegraph.total,
                functions,
                stats: flamegraph.stats,
            })
        })
        .await
    }
}

/// Functions of an untruncated tree by self value. A function's total counts each call
/// path once even when the function recurses: only its outermost occurrence adds.
pub(crate) fn top_functions(root: &Node) -> Vec<TopFunction> {
    fn walk<'n>(
        node: &'n Node,
        on_path: &mut HashMap<&'n str, usize>,
        out: &mut HashMap<&'n str, (i64, i64)>,
    ) {
        let entry = out.entry(&node.name).or_default();
        entry.0 += node.self_value;
        let depth = on_path.entry(&node.name).or_default();
        if *depth == 0 {
            entry.1 += node.total;
        }
        *depth += 1;
        for child in &node.children {
            walk(child, on_path, out);
        }
        *on_path.get_mut(node.name.as_str()).expect("pushed above") -= 1;
    }
    let mut out = HashMap::new();
    let mut on_path = HashMap::new();
    for child in &root.children {
        walk(child, &mut on_path, &mut out);
    }
    let mut functions: Vec<TopFunction> = out
        .into_iter()
        .map(|(name, (self_value, total))| TopFunction {
            name: name.to_string(),
            self_value,
            total,
        })
        .collect();
    functions.sort_by(|a, b| {
        (b.self_value, b.total)
            .cmp(&(a.self_value, a.total))
            .then_with(|| a.name.cmp(&b.name))
    });
    functions
}

#[derive(Clone, Debug)]
pub struct TopRequest {
    pub scope: ScopeRequest,
    pub limit: usize,
}

impl QueryEngine {
    /// `GET /api/v1/top`.
    pub async fn read_top(&self, r: &TopRequest) -> Result<Top, QueryError> {
        self.bounded("top", async {
            let scope = self.resolve_scope(&r.scope).await?;
            self.top(&TopQuery {
                scope,
                limit: r.limit,
            })
            .await
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::TreeBuilder;

    #[test]
    fn top_counts_recursion_once_in_total() {
        let mut b = TreeBuilder::new();
        b.add_path(&["main", "f", "f", "g"], 5);
        b.add_path(&["main", "f"], 2);
        b.add_path(&["main", "g"], 3);
        b.add_path(&["main"], 1);
        let top = top_functions(&b.build());
        let get = |name: &str| {
            let f = top.iter().find(|f| f.name == name).unwrap();
            (f.self_value, f.total)
        };
        assert_eq!(get("g"), (8, 8));
        assert_eq!(get("f"), (2, 7));
        assert_eq!(get("main"), (1, 11));
        assert_eq!(top[0].name, "g");
        assert_eq!(top.len(), 3);
    }
}
