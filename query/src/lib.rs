//! Queries: the selector language, planning and running scans of the `samples` table with
//! DataFusion, symbolizing stacks into call trees, and the result shapes and renderers of
//! every endpoint (flamegraph, diff, top, time series, events, single profiles).

pub mod diff;
pub mod engine;
pub mod error;
pub mod events;
pub mod limits;
pub mod profile;
pub mod render;
pub mod scan;
pub mod scope;
pub mod selection;
pub mod selector;
pub mod symbolize;
pub mod timeseries;
pub mod top;
pub mod tree;
pub mod types;

pub use diff::{Diff, DiffNode};
pub use engine::{
    DiffQuery, EventsQuery, FlamegraphQuery, PprofQuery, QueryConfig, QueryEngine, TimeseriesQuery, TopQuery,
};
pub use error::QueryError;
pub use events::{Event, EventsPage};
pub use limits::QueryLimits;
pub use profile::{ProfileDetail, ProfileMeta};
pub use render::{folded, folded_diff};
pub use scope::{GroupKey, Scope, parse_group_by};
pub use selector::{MatchOp, Matcher, Selector, SelectorError, parse_selector};
pub use timeseries::{Aggregation, Timeseries, TimeseriesGroup};
pub use top::{Top, TopFunction};
pub use tree::{DEFAULT_MAX_NODES, Flamegraph, Node};
pub use types::{ProfileTypeInfo, ScanStats};
