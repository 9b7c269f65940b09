//! One module per endpoint: its query, how it runs on the engine, its result, its query
//! API request with the `QueryEngine::read_*` method that answers it, and its Pyroscope
//! `querier.v1` method(s). Each read, REST or Connect, is one engine request; the catalog
//! listings (labels, series, profile types, settings, stats) are endpoints too, so every
//! read the API serves runs under the same timeout, limits and metrics.
//!
//! What several endpoints share stays out of here: the query API's scope, ranges and tree
//! outputs in [`crate::request`], Pyroscope's naming and what its requests share in
//! [`crate::pyroscope`]. A new endpoint is a module here and its line below; the API adds
//! its handler.

pub mod deletes;
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
pub mod usage;
