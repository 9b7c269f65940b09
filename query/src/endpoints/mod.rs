//! One module per endpoint: its request, how it runs on the engine, and its result. The
//! catalog listings (labels, series, profile types, settings, stats) are endpoints too, so
//! every read the API serves runs under the same timeout, limits and metrics.

pub mod diff;
pub mod events;
pub mod exemplars;
pub mod export;
pub mod flamegraph;
pub mod heatmap;
pub mod labels;
pub mod profile;
pub mod profile_types;
pub mod series;
pub mod settings;
pub mod stats;
pub mod timeseries;
pub mod top;
