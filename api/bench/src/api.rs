//! Measurement 5: a 7-day flamegraph asked of a server over loopback, through the HTTP
//! API (the JSON body rendered and read) and through the Grafana API (Connect querier
//! `SelectMergeStacktraces`, binary proto, as Grafana's datasource sends it), each against
//! a bare DataFusion scan of the same days.

use std::time::Instant;

use anyhow::{Context, bail};
use prost::Message;
use stackhouse_api::config::ServeArgs;
use stackhouse_proto::pyroscope_querier::{
    ProfileTypesRequest, ProfileTypesResponse, SelectMergeStacktracesRequest, SelectMergeStacktracesResponse,
};
use stackhouse_storage::model::TimeRange;

use super::Plan;
use super::env::{Env, TENANT, cpu_type, flamegraph_query};
use super::measure::median;
use super::query::BareScan;
use super::report::{Report, Row, ms};

/// The part of a flamegraph answer the bench checks.
#[derive(serde::Deserialize)]
pub(crate) struct Total {
    pub total: i64,
}

/// What Grafana's Profiles Drilldown asks for by default.
const GRAFANA_MAX_NODES: i64 = 16384;

/// A server over a bench store on a loopback port.
pub(crate) struct Served {
    pub base: String,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
    writer: std::sync::Arc<stackhouse_storage::writer::Writer>,
}

impl Served {
    pub(crate) async fn start(env: &Env) -> anyhow::Result<Served> {
        let args = ServeArgs::from_flags(env.serve_flags()).context("server flags")?;
        let services = stackhouse_api::server::services(&args)
            .await
            .context("building the server")?;
        let writer = services.writer.clone();
        let app = stackhouse_api::http::router(services.state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://{}", listener.local_addr()?);
        let server = tokio::spawn(async move { axum::serve(listener, app).await });
        Ok(Served { base, server, writer })
    }

    pub(crate) async fn stop(self) {
        self.server.abort();
        self.writer.shutdown().await;
    }
}

/// The total of `GET /api/v1/flamegraph` (JSON, default `max_nodes`) of the CPU type over
/// `range`, the whole answer received and read.
pub(crate) async fn http_flamegraph_total(
    client: &reqwest::Client,
    base: &str,
    range: TimeRange,
) -> anyhow::Result<i64> {
    http_flamegraph_total_with(client, base, range, &[]).await
}

/// [`http_flamegraph_total`] with more query parameters.
pub(crate) async fn http_flamegraph_total_with(
    client: &reqwest::Client,
    base: &str,
    range: TimeRange,
    extra: &[(&str, &str)],
) -> anyhow::Result<i64> {
    let url = format!("{base}/api/v1/flamegraph");
    let (start, end) = (range.start.to_string(), range.end.to_string());
    let mut query = vec![("profile_type", cpu_type().id()), ("from", start), ("to", end)];
    query.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
    let response = client
        .get(url)
        .query(&query)
        .header("X-Scope-OrgID", TENANT)
        .send()
        .await?
        .error_for_status()?;
    // Into a struct that skips the tree: serde_json skips without recursing, where a
    // `Value` stops at 128 levels, fewer than a deep stack's tree has.
    let body: Total = serde_json::from_slice(&response.bytes().await?)?;
    Ok(body.total)
}

/// Serves `env` on a loopback port and measures a flamegraph of `range`, which holds
/// `samples` samples, through both APIs.
pub(crate) async fn api_measurements(
    plan: &Plan,
    env: &Env,
    range: TimeRange,
    samples: usize,
    report: &mut Report,
) -> anyhow::Result<()> {
    let served = Served::start(env).await?;
    let result = measure(plan, env, &served.base, range, samples, report).await;
    served.stop().await;
    result
}

async fn measure(
    plan: &Plan,
    env: &Env,
    base: &str,
    range: TimeRange,
    samples: usize,
    report: &mut Report,
) -> anyhow::Result<()> {
    let client = reqwest::Client::new();
    let http = || http_flamegraph_total(&client, base, range);
    let profile_type = grafana_profile_type(&client, base, range).await?;
    let grafana = || async {
        let request = SelectMergeStacktracesRequest {
            profile_type_id: profile_type.clone(),
            label_selector: "{}".into(),
            start: range.start / 1_000_000,
            end: range.end / 1_000_000,
            max_nodes: Some(GRAFANA_MAX_NODES),
            ..Default::default()
        };
        let bytes = connect(&client, base, "SelectMergeStacktraces", request.encode_to_vec()).await?;
        let response = SelectMergeStacktracesResponse::decode(bytes.as_slice())?;
        anyhow::Ok(response.flamegraph.map_or(0, |f| f.total))
    };
    let engine = env.engine(plan.query_budget);
    let query = flamegraph_query(range);
    let bare = BareScan::over(env, range).await?;

    // Warm runs first; every path must count every sample of the days.
    // Grafana is served CPU time: each sample is worth the fleet's sampling period.
    let period = 1_000_000_000 / i64::from(plan.hour_fleet.hz.max(1));
    let grafana_total = grafana().await.context("Grafana flamegraph")?;
    if grafana_total != samples as i64 * period {
        bail!(
            "the Grafana API shows {grafana_total} ns over the days, they hold {samples} samples of {period} ns"
        );
    }
    let totals = [
        ("HTTP API", http().await.context("HTTP flamegraph")?),
        ("in-process", engine.flamegraph(&query).await?.total),
        ("bare scan", bare.total().await?),
    ];
    for (path, total) in totals {
        if total != samples as i64 {
            bail!("the {path} counts {total} samples over the days, they hold {samples}");
        }
    }
    let (mut over_http, mut over_grafana, mut in_process, mut scans) = (vec![], vec![], vec![], vec![]);
    for _ in 0..plan.warm_runs {
        let t = Instant::now();
        http().await?;
        over_http.push(t.elapsed());
        let t = Instant::now();
        grafana().await?;
        over_grafana.push(t.elapsed());
        let t = Instant::now();
        engine.flamegraph(&query).await?;
        in_process.push(t.elapsed());
        let t = Instant::now();
        bare.total().await?;
        scans.push(t.elapsed());
    }
    let scan = median(scans);
    let days = (range.end - range.start) as f64 / (24.0 * 3600e9);
    for (name, times) in [
        ("HTTP API `/api/v1/flamegraph`, JSON", over_http),
        ("Grafana API `SelectMergeStacktraces`, binary proto", over_grafana),
    ] {
        let ours = median(times);
        report.rows.push(Row {
            measurement: format!(
                "{days:.0}-day flamegraph through the {name}, {:.2} M samples",
                samples as f64 / 1e6
            ),
            ours: ms(ours),
            baseline: ms(scan),
            unit: "ms",
            baseline_name: "bare DataFusion".into(),
            target: "≤ 1.5×".into(),
            pass: ours.as_secs_f64() <= 1.5 * scan.as_secs_f64(),
        });
    }
    report.notes.push(format!(
        "{days:.0}-day flamegraph: a server built from `serve` flags over the {}-day store, asked over \
         loopback with reqwest ({} max nodes for Grafana, as Drilldown sends; the HTTP API's default \
         8192); the same query in-process took {:.1} ms (median of {} warm runs each). The bare scan \
         reads the samples files of those days' hour blocks.",
        plan.days,
        GRAFANA_MAX_NODES,
        ms(median(in_process)),
        plan.warm_runs,
    ));
    Ok(())
}

/// The ID Grafana would pick for CPU: ProfileTypes, as its query editor asks.
async fn grafana_profile_type(
    client: &reqwest::Client,
    base: &str,
    range: TimeRange,
) -> anyhow::Result<String> {
    let request = ProfileTypesRequest {
        start: range.start / 1_000_000,
        end: range.end / 1_000_000,
    };
    let bytes = connect(client, base, "ProfileTypes", request.encode_to_vec()).await?;
    let types = ProfileTypesResponse::decode(bytes.as_slice())?;
    // Counted CPU samples are listed as CPU time, as Grafana is served them.
    let cpu = cpu_type().in_time().context("the bench's type is counted CPU")?;
    types
        .profile_types
        .into_iter()
        .find(|t| t.sample_type == cpu.sample_type && t.period_type == cpu.period_type)
        .map(|t| t.id)
        .context("ProfileTypes lists no CPU type")
}

/// One Connect unary call with a binary proto body.
async fn connect(
    client: &reqwest::Client,
    base: &str,
    method: &str,
    body: Vec<u8>,
) -> anyhow::Result<Vec<u8>> {
    let response = client
        .post(format!("{base}/querier.v1.QuerierService/{method}"))
        .header("content-type", "application/proto")
        .header("X-Scope-OrgID", TENANT)
        .body(body)
        .send()
        .await?
        .error_for_status()
        .with_context(|| format!("connect call {method}"))?;
    Ok(response.bytes().await?.to_vec())
}
