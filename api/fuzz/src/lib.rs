//! Fuzz targets of every decoder and of the HTTP API, as plain functions: the libFuzzer
//! binaries (`fuzz_targets/`, feature `libfuzzer`) call them, and so does `cargo test` over
//! the seeds and every input a campaign found (`tests/regressions.rs`).

pub mod http_api;
pub mod targets;
