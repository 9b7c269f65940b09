//! Queries: the selector language, planning and running scans of the `samples` table with
//! DataFusion, symbolizing stacks into call trees, and the result shapes and renderers of
//! every endpoint (flamegraph, diff, top, time series, events, single profiles, and the
//! catalog listings: labels, series, profile types, settings, stats).
//!
//! `engine` is the machinery every query shares; `endpoints` has one module per endpoint
//! (its query, how it runs, its result, its REST request and its Connect method);
//! `request` and `pyroscope` hold what those share of the query API's and Pyroscope's
//! dialects; `render` turns results into wire formats.

// Unit tests share the package's dev-dependencies with its integration tests.
#![cfg_attr(test, allow(unused_crate_dependencies))]

mod call_paths;
pub mod cluster;
pub mod debuginfo;
pub mod endpoints;
mod engine;
mod error;
pub mod frames;
mod limits;
pub mod native;
pub mod pyroscope;
pub mod recording;
pub mod render;
pub mod request;
use stackhouse_storage::selector;
mod stack_filter;
mod symbolize;
pub mod tree;
mod types;

// The endpoints' queries and results at the crate root, as the API, its benches and the
// tests name them; a new endpoint's are named by its module (`endpoints::<name>::…`).
pub use endpoints::diff::DiffQuery;
pub use endpoints::events::{DEFAULT_EVENTS_LIMIT, Event, EventsPage, EventsQuery};
pub use endpoints::exemplars::{
    EXEMPLARS_PER_POINT, Exemplar, ExemplarGroup, ExemplarId, ExemplarKind, Exemplars, ExemplarsQuery,
};
pub use endpoints::export::PprofQuery;
pub use endpoints::flamegraph::FlamegraphQuery;
pub use endpoints::heatmap::{Heatmap, HeatmapGroup, HeatmapSlot, Y_BUCKETS, heatmap};
pub use endpoints::profile::{ProfileDetail, ProfileMeta};
pub use endpoints::timeseries::{Aggregation, Timeseries, TimeseriesGroup, TimeseriesQuery};
pub use endpoints::top::{Top, TopFunction, TopQuery};
pub use tree::{Diff, DiffNode};

pub use engine::scope::{GroupKey, Scope, parse_group_by};
pub use engine::{
    DEFAULT_DELETION_CANCEL_PERIOD, DEFAULT_MEMORY_BUDGET, DEFAULT_PATH_CACHE_ENTRIES, QueryConfig,
    QueryEngine,
};
pub use error::QueryError;
pub use limits::QueryLimits;
pub use render::{folded, folded_diff};
pub use selector::{MatchOp, Matcher, Selector, SelectorError, parse_promql_selector, parse_selector};
pub use stack_filter::{FrameMatch, StackFilter};
pub use tree::{DEFAULT_MAX_NODES, Flamegraph, FlamegraphJson, Node};
pub use types::{ProfileTypeInfo, ScanStats};
