//! Every non-OTLP format converts into one OTLP request (v1.10 layout) through
//! [`RequestBuilder`]; the OTLP validation and normalization then produce the stored model,
//! so storage and query never see a format.

pub mod builder;

pub use builder::{FrameLine, MappingSpec, RequestBuilder};

/// Resource attribute key of the service (OpenTelemetry's), which Pyroscope's application
/// name and Push's `service_name` label become.
pub const SERVICE_NAME: &str = "service.name";

/// What the transport says about a profile that the format itself may not carry: the
/// Pyroscope `/ingest` query, a Push series' labels, or `stackhouse import`'s flags.
#[derive(Clone, Debug, Default)]
pub struct Source {
    /// Resource attributes of every converted profile: `service.name` and the tags.
    pub resource: Vec<(String, String)>,
    /// Instrumentation scope name, e.g. Pyroscope's `spyName`; "" for none.
    pub scope: String,
    /// Profile start when the format has none (Pyroscope's `from`), unix nanoseconds.
    pub time_nanos: Option<i64>,
    /// Profile duration when the format has none (`until - from`), nanoseconds.
    pub duration_nanos: Option<i64>,
    /// Samples per second (Pyroscope's `sampleRate`) for formats whose values are counts.
    pub sample_rate: Option<u32>,
    /// Pyroscope's `units` (`samples`, `objects`, `bytes`, `goroutines`, `lock_samples`,
    /// `lock_nanoseconds`).
    pub units: Option<String>,
    /// Pyroscope's `aggregationType` (`sum` or `average`).
    pub aggregation: Option<String>,
    /// The profile type named by the application name's suffix (`app.cpu` → `cpu`).
    pub type_hint: Option<String>,
}

/// What one conversion added to the builder.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Converted {
    pub profiles: usize,
    pub samples: usize,
}

impl std::ops::AddAssign for Converted {
    fn add_assign(&mut self, other: Converted) {
        self.profiles += other.profiles;
        self.samples += other.samples;
    }
}

/// Why an input could not be converted; the message names the format and the problem.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    #[error("invalid {format}: {message}")]
    Invalid { format: &'static str, message: String },
    #[error("{format} input exceeds the limit of {limit} bytes")]
    TooLarge { format: &'static str, limit: usize },
}

impl ConvertError {
    pub fn invalid(format: &'static str, message: impl std::fmt::Display) -> ConvertError {
        ConvertError::Invalid {
            format,
            message: message.to_string(),
        }
    }
}

/// A whole request converted from another format, with the profiles conversion refused
/// (counted and named, like OTLP's partial success).
#[derive(Debug, Default)]
pub struct Conversion {
    pub request: stackhouse_proto::otlp_collector::ExportProfilesServiceRequest,
    /// The request's dictionary when the receiver decoded it flat from the wire (the
    /// request's own `dictionary` is then empty); `None`: the request holds it.
    pub dictionary: Option<crate::otlp::Dictionary>,
    pub rejected_profiles: usize,
    pub errors: Vec<String>,
    /// Profiles and samples as the format counts them (a sample with several timestamps is
    /// one sample), for answers that report them.
    pub converted: Converted,
}
