//! The flamegraph tree: its model, building it from call paths, and truncating it to a
//! node budget without losing value: one choice of the nodes kept (`select`), whether the
//! tree is cut while it is laid out (`cut`) or once built ([`truncate_tree`]).
//! Output bytes are written by [`crate::render`].

mod build;
mod children;
mod cut;
mod diff;
mod model;
mod select;
#[cfg(test)]
pub(crate) mod testing;
mod truncate;

pub use build::TreeBuilder;
pub(crate) use build::{Interner, NameTable, PathTree};
pub(crate) use children::Children;
pub(crate) use cut::{Cut, cut};
pub use diff::{Diff, DiffNode};
pub use model::{DEFAULT_MAX_NODES, Flamegraph, Node, OTHER_NAME, ROOT_NAME, TreeNode, count_nodes};
pub(crate) use select::RankedTree;
pub use truncate::truncate_tree;

/// Also here, next to the [`Flamegraph`] it writes, where callers have long named it.
pub use crate::render::json::FlamegraphJson;
