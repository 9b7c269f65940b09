//! One module per endpoint: its request, how it runs on the engine, and its result. The
//! catalog listings (labels, series, profile types, settings, stats) are endpoints too, so
//! every read the API serves runs under the same timeout, limits and metrics.

pub(crate) mod diff;
pub(crate) mod events;
pub(crate) mod exemplars;
pub(crate) mod export;
pub(crate) mod flamegraph;
pub(crate) mod heatmap;
pub(crate) mod labels;
pub(crate) mod profile;
pub(crate) mod profile_types;
pub(crate) mod series;
pub(crate) mod settings;
pub(crate) mod stats;
pub(crate) mod timeseries;
pub(crate) mod top;
