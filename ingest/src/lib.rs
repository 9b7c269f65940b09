//! The write path: request bodies in, durable batches out. Receivers hand a request to
//! [`pipeline::Pipeline::ingest`], which converts it with its [`formats::WireFormat`] (every
//! format other than OTLP v1development converts into an OTLP request first, [`convert`]),
//! holds it to the tenant's [`limits`], normalizes it and waits for the storage writer.
//! Knows wire formats, never Parquet.

pub mod body;
pub mod convert;
pub mod folded;
pub mod formats;
pub mod jfr;
pub mod limits;
pub mod otlp;
pub mod pipeline;
pub mod pprof;
pub mod pyroscope;
pub mod relabel;
pub mod sampling;
pub mod speedscope;
pub mod usage;
