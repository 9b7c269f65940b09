//! Canonical tables, segments on object storage, and the catalog that indexes them.

// Every dependency of the library is used by the library; test-only crates are dev-dependencies.
// (Not in [workspace.lints]: there it would flag each integration test and binary for the
// package dependencies only the library uses.)
#![cfg_attr(not(test), deny(unused_crate_dependencies))]

pub mod catalog;
pub mod cleanup;
pub mod clock;
pub mod compaction;
pub mod maintenance;
pub mod model;
pub mod per_tenant;
pub mod retention;
pub mod rollup;
pub mod schema;
pub mod segment;
pub mod stack_table;
pub mod store;
pub mod symbols;
pub mod writer;
