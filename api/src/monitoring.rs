//! Prometheus metrics: the process-wide recorder behind `GET /metrics`, and what the edges
//! record (HTTP requests by route, ingest outcomes by protocol). The storage writer,
//! maintenance and the query engine record their own through the `metrics` facade.
//!
//! Tenants are not a label anywhere: their number is unbounded.

use std::sync::OnceLock;
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use metrics::{counter, describe_counter, describe_gauge, describe_histogram, histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use stackhouse_ingest::pipeline::Exported;
use stackhouse_ingest::usage::UsageReport;

use crate::error::ApiError;

/// Latency buckets, in seconds, of every `*_seconds` histogram.
const SECONDS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0,
];
/// Segment size buckets, in bytes.
const SEGMENT_BYTES: [f64; 7] = [1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9];

/// Where an ingest request came in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    OtlpGrpc,
    OtlpHttp,
    OtlpExperimentalGrpc,
    OtlpExperimentalHttp,
    PyroscopeIngest,
    PyroscopePush,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::OtlpGrpc => "otlp_grpc",
            Protocol::OtlpHttp => "otlp_http",
            Protocol::OtlpExperimentalGrpc => "otlp_experimental_grpc",
            Protocol::OtlpExperimentalHttp => "otlp_experimental_http",
            Protocol::PyroscopeIngest => "pyroscope_ingest",
            Protocol::PyroscopePush => "pyroscope_push",
        }
    }
}

/// Installs the recorder once per process (later calls get the same handle) and
/// describes every metric, so that each has its HELP line.
pub fn install() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &SECONDS)
                .and_then(|b| {
                    b.set_buckets_for_metric(Matcher::Full("stackhouse_segment_bytes".into()), &SEGMENT_BYTES)
                })
                .expect("bucket lists are not empty")
                .build_recorder();
            let handle = recorder.handle();
            // A test harness may have installed a recorder of its own; ours then stays
            // empty, which only its own /metrics shows.
            if metrics::set_global_recorder(recorder).is_err() {
                tracing::warn!("a metrics recorder was installed already; /metrics will be empty");
            }
            describe();
            handle
        })
        .clone()
}

fn describe() {
    describe_counter!(
        "stackhouse_http_requests_total",
        "HTTP requests by route pattern and status."
    );
    describe_histogram!(
        "stackhouse_http_request_duration_seconds",
        metrics::Unit::Seconds,
        "HTTP request duration by route pattern and status (query endpoints included)."
    );
    describe_counter!(
        "stackhouse_ingest_requests_total",
        "Ingest requests by protocol and outcome (ok, partial, or the error code)."
    );
    describe_counter!(
        "stackhouse_ingest_rejections_total",
        "Refused ingest requests and profiles by protocol and reason."
    );
    describe_counter!(
        "stackhouse_ingest_profiles_total",
        "Ingested profiles by protocol and outcome: stored, repeated (stored before, left out: retried exports), rejected."
    );
    describe_counter!(
        "stackhouse_ingest_samples_total",
        "Samples stored by protocol (acknowledged; without those of repeated profiles)."
    );
    describe_counter!(
        "stackhouse_ingest_bytes_total",
        "Request bytes of decoded ingest requests, as sent, by protocol."
    );
    describe_counter!(
        "stackhouse_ingest_repeated_profiles_total",
        "Profiles left out because the same profile (id, series, start) was stored before: retried exports."
    );
    describe_counter!(
        "stackhouse_ingest_refused_series_samples_total",
        "Samples of series the catalog refused at commit for the tenant's series limit."
    );
    describe_counter!(
        "stackhouse_ingest_truncated_stacks_total",
        "Stacks stored cut to --ingest-max-stack-depth."
    );
    describe_gauge!(
        "stackhouse_ingest_pending_bytes",
        "Ingested data accepted but not yet stored (estimated bytes)."
    );
    describe_gauge!(
        "stackhouse_ingest_budget_bytes",
        "The ingest memory budget (--ingest-memory-budget)."
    );
    describe_histogram!(
        "stackhouse_flush_duration_seconds",
        metrics::Unit::Seconds,
        "Segment flushes (write and commit) by outcome."
    );
    describe_histogram!(
        "stackhouse_segment_bytes",
        metrics::Unit::Bytes,
        "Size of the Parquet objects of each flushed segment."
    );
    describe_counter!(
        "stackhouse_compaction_runs_total",
        "Compaction passes by outcome."
    );
    describe_counter!(
        "stackhouse_compaction_leases_lost_total",
        "Compaction leases lost mid-pass: not renewed in time, or taken by another compactor."
    );
    describe_counter!("stackhouse_retention_runs_total", "Retention passes by outcome.");
    describe_counter!(
        "stackhouse_purge_runs_total",
        "Passes purging deletion requests by outcome."
    );
    describe_counter!(
        "stackhouse_symbols_collected_total",
        "Symbols the symbol merge after a purge dropped because no remaining segment used them."
    );
    describe_counter!(
        "stackhouse_recording_rules_series_sent_total",
        "Series recording rules pushed over remote write, per tenant and rule (one per group per push)."
    );
    describe_counter!(
        "stackhouse_recording_rules_samples_sent_total",
        "Points recording rules pushed over remote write, per tenant and rule."
    );
    describe_counter!(
        "stackhouse_recording_rules_failures_total",
        "Recording rule passes that failed, per tenant and reason: unavailable (the receiver did not take the points; retried), rejected (it refused them; dropped), evaluation."
    );
    describe_gauge!(
        "stackhouse_recording_rules_lag_seconds",
        "How far behind now each rule's recorded series end, per tenant and rule."
    );
    describe_gauge!(
        "stackhouse_deletion_requests",
        "Deletion requests by state (pending, purging, purged, cancelled), as the last purge pass found them."
    );
    describe_histogram!(
        "stackhouse_query_duration_seconds",
        metrics::Unit::Seconds,
        "Query engine runs (data queries and listings) by endpoint and outcome (ok, invalid, limit, timeout, error)."
    );
    describe_counter!(
        "stackhouse_query_bytes_scanned_total",
        "Bytes queries fetched from object storage."
    );
    describe_counter!(
        "stackhouse_query_bytes_shipped_total",
        "Arrow bytes coordinators received from query workers."
    );
    describe_counter!(
        "stackhouse_query_worker_retries_total",
        "Queries a query worker failed, planned and run again over the workers that answer."
    );
    describe_gauge!(
        "stackhouse_query_workers_known",
        "Query workers the coordinator's configuration names (a fixed list or every address its DNS name resolves to)."
    );
    describe_gauge!(
        "stackhouse_query_workers_answering",
        "Query workers that answered the last probe: the ones handed tasks."
    );
    describe_counter!(
        "stackhouse_query_rows_scanned_total",
        "Rows queries decoded, by the resolution read: raw samples, or the 1m and 1h rollup tiers (tier)."
    );
    describe_counter!(
        "stackhouse_usage_received_samples_total",
        "Samples received per tenant and usage group (valid, after relabeling, before the series limit and sampling)."
    );
    describe_counter!(
        "stackhouse_usage_stored_samples_total",
        "Samples stored per tenant and usage group (acknowledged, without repeats and refused series)."
    );
    describe_counter!(
        "stackhouse_usage_stored_bytes_total",
        "Bytes of the flushed segments per tenant and usage group, shared out by stored samples."
    );
    describe_counter!(
        "stackhouse_usage_sampled_out_profiles_total",
        "Profiles a usage group's sampling left out (acknowledged, not stored)."
    );
    describe_counter!(
        "stackhouse_usage_sampled_out_samples_total",
        "Samples of the profiles a usage group's sampling left out."
    );
    describe_counter!(
        "stackhouse_catalog_errors_total",
        "Catalog errors answered to a client, by whether they are transient."
    );
    describe_counter!(
        "stackhouse_store_errors_total",
        "Object store and stored-object errors answered to a client."
    );
}

/// `GET /metrics`, Prometheus' text format.
pub async fn render() -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        install().render(),
    )
        .into_response()
}

/// Counts and times every routed HTTP request by its route pattern (bounded, unlike paths).
pub async fn track(request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |p| p.as_str().to_string());
    let started = Instant::now();
    let response = next.run(request).await;
    let status = response.status().as_u16().to_string();
    counter!("stackhouse_http_requests_total", "route" => route.clone(), "status" => status.clone())
        .increment(1);
    histogram!("stackhouse_http_request_duration_seconds", "route" => route, "status" => status)
        .record(started.elapsed().as_secs_f64());
    response
}

/// One ingest request's outcome, recorded by the edge that answered it.
pub fn ingest_request(protocol: Protocol, result: Result<&Exported, &ApiError>) {
    let outcome = match result {
        Ok(e) if e.rejected_profiles > 0 => "partial",
        Ok(_) => "ok",
        Err(e) => e.kind.connect_code(),
    };
    counter!("stackhouse_ingest_requests_total", "protocol" => protocol.as_str(), "outcome" => outcome)
        .increment(1);
    if let Err(e) = result {
        counter!("stackhouse_ingest_rejections_total", "protocol" => protocol.as_str(), "reason" => e.kind.connect_code())
            .increment(1);
    }
}

/// What one export stored and refused, and its size on the wire.
pub fn ingest_volume(protocol: Protocol, bytes: usize, exported: &Exported) {
    let p = protocol.as_str();
    counter!("stackhouse_ingest_bytes_total", "protocol" => p).increment(bytes as u64);
    counter!("stackhouse_ingest_samples_total", "protocol" => p).increment(exported.stored_samples as u64);
    counter!("stackhouse_ingest_profiles_total", "protocol" => p, "outcome" => "stored")
        .increment(exported.stored_profiles as u64);
    counter!("stackhouse_ingest_profiles_total", "protocol" => p, "outcome" => "repeated")
        .increment(exported.repeated_profiles as u64);
    counter!("stackhouse_ingest_profiles_total", "protocol" => p, "outcome" => "rejected")
        .increment(exported.rejected_profiles as u64);
    let invalid = exported
        .rejected_profiles
        .saturating_sub(exported.relabeled_profiles);
    if invalid > 0 {
        counter!("stackhouse_ingest_rejections_total", "protocol" => p, "reason" => "invalid_profile")
            .increment(invalid as u64);
    }
    if exported.relabeled_profiles > 0 {
        counter!("stackhouse_ingest_rejections_total", "protocol" => p, "reason" => "relabel_drop")
            .increment(exported.relabeled_profiles as u64);
    }
    if exported.truncated_stacks > 0 {
        counter!("stackhouse_ingest_truncated_stacks_total", "protocol" => p)
            .increment(exported.truncated_stacks as u64);
    }
    if let Some(usage) = &exported.usage {
        usage_groups(usage);
    }
}

/// One request's samples and bytes per usage group of its tenant.
fn usage_groups(usage: &UsageReport) {
    for (group, g) in &usage.groups {
        let count = |name: &'static str, n: u64| {
            counter!(name, "tenant" => usage.tenant.clone(), "group" => group.clone()).increment(n);
        };
        count("stackhouse_usage_received_samples_total", g.received_samples);
        count("stackhouse_usage_stored_samples_total", g.stored_samples);
        count("stackhouse_usage_stored_bytes_total", g.stored_bytes);
        if g.sampled_out_profiles > 0 {
            count(
                "stackhouse_usage_sampled_out_profiles_total",
                g.sampled_out_profiles,
            );
            count(
                "stackhouse_usage_sampled_out_samples_total",
                g.sampled_out_samples,
            );
        }
    }
}
