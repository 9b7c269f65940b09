//! Canonical tables, segments on object storage, and the catalog that indexes them.

pub mod catalog;
pub mod model;
pub mod schema;
pub mod segment;
pub mod store;
pub mod symbols;
pub mod writer;
