//! Fuzz targets of every decoder and of the HTTP API, as plain functions: the libFuzzer
//! binaries (`fuzz_targets/`, feature `libfuzzer`) call them, and so does `cargo test` over
//! the seeds and every input a campaign found (`tests/regressions.rs`).

// The feature's dependency is for the binaries; the library is built with it for them.
#[cfg(feature = "libfuzzer")]
use libfuzzer_sys as _;

pub mod http_api;
pub mod targets;
