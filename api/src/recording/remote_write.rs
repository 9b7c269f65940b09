//! Prometheus remote write 1.0: a `WriteRequest` protobuf, snappy-compressed (block
//! format), POSTed with the protocol's headers. As the protocol says, a 5xx or 429 answer
//! or no answer is retried; any other 4xx means the receiver refused the points for good.

use std::time::Duration;

use prost::Message;
use stackhouse_proto::prometheus_remote::{Label, Sample, TimeSeries, WriteRequest};
use stackhouse_query::recording::RecordedSeries;

/// How long one push may take.
const PUSH_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum PushError {
    /// Not delivered; the same points may be sent again later.
    #[error("remote write to {url} failed, will retry: {reason}")]
    Retry { url: String, reason: String },
    /// The receiver refused them; sending them again would be refused again.
    #[error("remote write to {url} refused the points: {reason}")]
    Rejected { url: String, reason: String },
}

/// The body of a push: the series' points as one snappy-compressed `WriteRequest`.
pub fn encode(series: &[RecordedSeries]) -> Vec<u8> {
    let request = WriteRequest {
        timeseries: series
            .iter()
            .map(|s| TimeSeries {
                labels: s
                    .labels
                    .iter()
                    .map(|(name, value)| Label {
                        name: name.clone(),
                        value: value.clone(),
                    })
                    .collect(),
                samples: s
                    .points
                    .iter()
                    .map(|&(timestamp, value)| Sample { value, timestamp })
                    .collect(),
            })
            .collect(),
    };
    snap::raw::Encoder::new()
        .compress_vec(&request.encode_to_vec())
        .expect("snappy compresses any input below 4 GiB")
}

/// A remote-write client; one connection pool for every tenant's pushes.
#[derive(Clone)]
pub struct RemoteWrite {
    client: reqwest::Client,
}

impl Default for RemoteWrite {
    fn default() -> Self {
        RemoteWrite {
            client: reqwest::Client::builder()
                .timeout(PUSH_TIMEOUT)
                .build()
                .expect("an http client without tls options builds"),
        }
    }
}

impl RemoteWrite {
    pub async fn push(&self, url: &str, series: &[RecordedSeries]) -> Result<(), PushError> {
        let retry = |reason: String| PushError::Retry {
            url: url.to_string(),
            reason,
        };
        let response = self
            .client
            .post(url)
            .header("Content-Encoding", "snappy")
            .header("Content-Type", "application/x-protobuf")
            .header("User-Agent", concat!("stackhouse/", env!("CARGO_PKG_VERSION")))
            .header("X-Prometheus-Remote-Write-Version", "0.1.0")
            .body(encode(series))
            .send()
            .await
            .map_err(|e| retry(e.to_string()))?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let body = response.text().await.unwrap_or_default();
        let reason = format!("{status}: {}", body.trim());
        if status.is_server_error() || status.as_u16() == 429 {
            Err(retry(reason))
        } else {
            Err(PushError::Rejected {
                url: url.to_string(),
                reason,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_push_body_is_a_snappy_write_request() {
        let series = vec![RecordedSeries {
            labels: vec![
                ("__name__".into(), "profiles_recorded_cpu".into()),
                ("profiles_rule_id".into(), "abc".into()),
            ],
            points: vec![(60_000, 5.0), (120_000, 7.0)],
        }];
        let body = encode(&series);
        let raw = snap::raw::Decoder::new().decompress_vec(&body).unwrap();
        let request = WriteRequest::decode(raw.as_slice()).unwrap();
        assert_eq!(request.timeseries.len(), 1);
        let ts = &request.timeseries[0];
        assert_eq!(ts.labels[0].name, "__name__");
        assert_eq!(ts.labels[1].value, "abc");
        assert_eq!(
            ts.samples,
            vec![
                Sample {
                    value: 5.0,
                    timestamp: 60_000
                },
                Sample {
                    value: 7.0,
                    timestamp: 120_000
                }
            ]
        );
    }
}
