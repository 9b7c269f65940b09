//! Grafana Pyroscope's dialect over the engine: its label names (`service_name`,
//! sanitized names, the labels derived from a profile type), its 5-part profile type ids,
//! its series filtering, what its `querier.v1.QuerierService` requests share (`scope`),
//! exemplars and pprof as it spells them, and its legacy `/render`. Each `querier.v1`
//! method lives with its endpoint in [`crate::endpoints`], one engine request each: the
//! API edge decodes a method's message, calls that function, and encodes the answer.

pub(crate) mod exemplars;
pub mod names;
pub(crate) mod pprof;
pub mod profile_type;
mod render;
pub(crate) mod scope;

pub use names::{Matchers, Names};
pub use render::{RenderQuery, RenderRequest, Rendered, render, render_diff, render_graph};
pub use scope::select_scope;

/// Times on Pyroscope's wire are Unix milliseconds.
pub const NANOS_PER_MILLI: i64 = 1_000_000;

/// What a method knows of its caller besides the message.
#[derive(Clone, Debug)]
pub struct Caller {
    pub tenant: String,
    /// Whether label names may be served as stored (`allow-utf8-labelnames=true`).
    pub utf8_names: bool,
}

/// A flamebearer layout's rows as `querier.v1` sends them, one `Level` a row.
pub(crate) fn wire_levels(levels: Vec<Vec<i64>>) -> Vec<stackhouse_proto::pyroscope_querier::Level> {
    levels
        .into_iter()
        .map(|values| stackhouse_proto::pyroscope_querier::Level { values })
        .collect()
}
