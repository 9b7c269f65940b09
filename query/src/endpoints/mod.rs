//! One module per endpoint: its request, how it runs on the engine, and its result.

pub mod diff;
pub mod events;
pub mod export;
pub mod flamegraph;
pub mod profile;
pub mod timeseries;
pub mod top;
