//! Grafana Pyroscope's dialect over the engine: its label names (`service_name`,
//! sanitized names, the labels derived from a profile type), its 5-part profile type ids,
//! its series filtering, and every `querier.v1.QuerierService` method as one engine
//! request. The API edge decodes a method's message, calls one function here, and encodes
//! the answer.

mod exemplars;
mod heatmap;
pub mod names;
mod pprof;
pub mod profile_type;
mod querier;
mod render;

pub use heatmap::select_heatmap;
pub use names::{Matchers, Names};
pub use querier::{
    analyze_query, diff, get_profile_stats, label_names, label_values, profile_types, select_merge_profile,
    select_merge_span_profile, select_merge_stacktraces, select_scope, select_series, series,
};
pub use render::{RenderQuery, RenderRequest, Rendered, render, render_diff, render_graph};

/// Times on Pyroscope's wire are Unix milliseconds.
pub const NANOS_PER_MILLI: i64 = 1_000_000;

/// What a method knows of its caller besides the message.
#[derive(Clone, Debug)]
pub struct Caller {
    pub tenant: String,
    /// Whether label names may be served as stored (`allow-utf8-labelnames=true`).
    pub utf8_names: bool,
}
