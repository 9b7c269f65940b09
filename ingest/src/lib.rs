//! Receivers' shared pipeline: request bodies in, normalized [`stackhouse_storage::model::Batch`]es
//! out. Knows wire formats, never Parquet or the catalog.

pub mod body;
pub mod otlp;
