//! Canonical tables, segments on object storage, and the catalog that indexes them.

pub mod catalog;
pub mod cleanup;
pub mod clock;
pub mod compaction;
pub mod groups;
pub mod maintenance;
pub mod model;
pub mod per_tenant;
pub mod purge;
pub mod retention;
pub mod rollup;
pub mod schema;
pub mod segment;
pub mod selector;
pub mod stack_table;
pub mod store;
pub mod symbols;
pub mod writer;
