//! Receivers' shared pipeline: request bodies in, normalized [`stackhouse_storage::model::Batch`]es
//! out. Knows wire formats, never Parquet or the catalog. Every format other than OTLP
//! v1development converts into an OTLP request first ([`convert`]).

pub mod body;
pub mod convert;
pub mod folded;
pub mod jfr;
pub mod otlp;
pub mod pprof;
pub mod pyroscope;
pub mod speedscope;
