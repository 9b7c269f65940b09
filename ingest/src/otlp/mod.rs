//! OTLP profiles (v1development, opentelemetry-proto v1.10 layout): decode, validate,
//! normalize.

mod attributes;
pub mod decode;
pub mod dictionary;
pub mod experimental;
pub mod layout;
pub mod normalize;
mod samples;
pub mod v1_7;
mod validate;
mod wire;

pub use decode::{DecodeError, decode_json, decode_protobuf};
pub use dictionary::Dictionary;
pub use normalize::{AnySeries, Normalized, SeriesAdmission, Tenant, normalize, normalize_within};
pub use samples::Samples;
pub use validate::{Limits, ProfileError, RequestError, TRUNCATED_FRAME, TimeWindow};
