//! Flamegraph queries: the selector language, planning and running the scan of the
//! `samples` table with DataFusion, symbolizing stacks into a call tree, and rendering it.

pub mod engine;
pub mod error;
pub mod render;
pub mod scan;
pub mod selection;
pub mod selector;
pub mod symbolize;
pub mod tree;

pub use engine::{FlamegraphQuery, QueryConfig, QueryEngine};
pub use error::QueryError;
pub use render::folded;
pub use selector::{MatchOp, Matcher, Selector, SelectorError, parse_selector};
pub use tree::{DEFAULT_MAX_NODES, Flamegraph, Node};
