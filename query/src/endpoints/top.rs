//! `top`: functions by self and total value. The query API reads it as `GET /api/v1/top`.

use serde::Serialize;
use utoipa::ToSchema;

use crate::call_paths::PathSums;
use crate::engine::QueryEngine;
use crate::engine::scope::Scope;
use crate::engine::stack_tree::TreeOut;
use crate::error::QueryError;
use crate::request::ScopeRequest;
use crate::tree::{Node, ROOT_NAME};
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
            let (sums, built) = self.tree_as::<FunctionSums>(&q.scope, &[], None, &[]).await?;
            let head = built.flamegraph(Node::leaf(ROOT_NAME, sums.total));
            let mut functions = sums.functions;
            functions.truncate(q.limit);
            Ok(Top {
                kind: head.kind,
                unit: head.unit,
                total: head.total,
                functions,
                stats: head.stats,
            })
        })
        .await
    }
}

/// Every function of a scope's stacks by self value, and the value of all stacks.
struct FunctionSums {
    /// Sorted by self value, largest first, then by total and name.
    functions: Vec<TopFunction>,
    total: i64,
}

impl TreeOut for FunctionSums {
    fn build(sums: PathSums<'_>, _max_nodes: Option<usize>) -> Self {
        let (names, total) = sums.name_sums();
        let mut functions: Vec<TopFunction> = names
            .into_iter()
            .map(|n| TopFunction {
                name: n.name.to_string(),
                self_value: n.self_value,
                total: n.total,
            })
            .collect();
        functions.sort_by(|a, b| {
            (b.self_value, b.total)
                .cmp(&(a.self_value, a.total))
                .then_with(|| a.name.cmp(&b.name))
        });
        FunctionSums { functions, total }
    }

    fn empty() -> Self {
        FunctionSums {
            functions: Vec::new(),
            total: 0,
        }
    }
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
