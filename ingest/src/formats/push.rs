//! Pyroscope's Connect Push (`push.v1.PusherService/Push`): each series' labels become the
//! resource, each sample's `raw_profile` is a pprof. A malformed sample is refused alone
//! and named, so that a client neither loses the good profiles nor retries the bad ones.

use stackhouse_proto::pyroscope_push::PushRequest;

use super::{Body, Params, WireFormat};
use crate::convert::{Conversion, ConvertError, RequestBuilder, SERVICE_NAME, Source};
use crate::pipeline::error::IngestError;
use crate::pprof::{self, PprofOptions};

pub struct Push;

impl WireFormat for Push {
    fn name(&self) -> &'static str {
        "pyroscope-push"
    }

    fn convert(&self, body: &Body, params: &Params) -> Result<Conversion, IngestError> {
        match body {
            Body::Push(request) => Ok(convert(request, params.limit)),
            _ => Err(ConvertError::invalid(self.name(), "not a decoded PushRequest").into()),
        }
    }
}

/// Every sample converted on its own; a failure refuses that sample only.
fn convert(request: &PushRequest, limit: usize) -> Conversion {
    let mut builder = RequestBuilder::new();
    let mut rejected_profiles = 0;
    let mut errors = Vec::new();
    for (i, series) in request.series.iter().enumerate() {
        let source = source_from_labels(series.labels.iter().map(|l| (l.name.as_str(), l.value.as_str())));
        for (j, sample) in series.samples.iter().enumerate() {
            if let Err(e) = pprof::convert(
                &sample.raw_profile,
                &PprofOptions::default(),
                &source,
                limit,
                &mut builder,
            ) {
                rejected_profiles += 1;
                errors.push(format!("series[{i}].samples[{j}]: {e}"));
            }
        }
    }
    Conversion {
        request: builder.finish(),
        rejected_profiles,
        errors,
        ..Conversion::default()
    }
}

/// A Push series' labels: `service_name` → `service.name`, `__name__` → the type hint,
/// other `__`-prefixed labels dropped (Pyroscope's internal ones), the rest resource
/// attributes. Without `service_name` the service is `unknown_service`, as OpenTelemetry
/// names it.
fn source_from_labels<'a>(labels: impl IntoIterator<Item = (&'a str, &'a str)>) -> Source {
    let mut source = Source::default();
    let mut service = None;
    let mut rest = Vec::new();
    for (name, value) in labels {
        match name {
            "service_name" => service = Some(value.to_string()),
            "__name__" => source.type_hint = (!value.is_empty()).then(|| value.to_string()),
            n if n.starts_with("__") => {}
            n => rest.push((n.to_string(), value.to_string())),
        }
    }
    let service = service
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown_service".to_string());
    source.resource = vec![(SERVICE_NAME.to_string(), service)];
    source.resource.extend(rest);
    source
}

#[cfg(test)]
mod tests {
    use stackhouse_proto::pyroscope_push::{RawProfileSeries, RawSample};
    use stackhouse_proto::pyroscope_types::LabelPair;

    use super::*;

    #[test]
    fn a_bad_sample_is_refused_alone_and_named() {
        let request = PushRequest {
            series: vec![RawProfileSeries {
                labels: vec![LabelPair {
                    name: "service_name".into(),
                    value: "py-app".into(),
                }],
                samples: vec![RawSample {
                    raw_profile: b"not a profile".to_vec(),
                    id: "0b1e".into(),
                }],
            }],
        };
        let conversion = convert(&request, 1 << 20);
        assert_eq!(conversion.rejected_profiles, 1);
        assert!(
            conversion.errors[0].starts_with("series[0].samples[0]: "),
            "{:?}",
            conversion.errors
        );
    }

    #[test]
    fn push_labels() {
        let s = source_from_labels([
            ("__name__", "process_cpu"),
            ("service_name", "checkout"),
            ("__delta__", "false"),
            ("pod", "p-1"),
        ]);
        assert_eq!(s.resource, tags(&[("service.name", "checkout"), ("pod", "p-1")]));
        assert_eq!(s.type_hint.as_deref(), Some("process_cpu"));
        let s = source_from_labels([("env", "x")]);
        assert_eq!(
            s.resource,
            tags(&[("service.name", "unknown_service"), ("env", "x")])
        );
    }

    fn tags(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }
}
