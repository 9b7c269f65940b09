//! `stackhouse-bench`: runs every measurement in-process against local files and a
//! SQLite catalog in a temporary directory, each next to a baseline measured in the same
//! run, and prints them as a markdown table.

mod api;
mod cgroup;
mod distributed;
mod duckdb;
mod env;
mod fleet;
mod focus;
mod ingest;
mod labels;
pub mod measure;
mod pods;
mod query;
pub mod report;
mod rollups;
mod rules;
mod sustained;
pub mod workload;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, ValueEnum};

pub use fleet::FleetSize;
pub use report::{Report, Row};
pub use workload::{FleetConfig, Generated, Workload, load_capture};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Scale {
    /// Seconds, even in a debug build; what the smoke test runs.
    Tiny,
    /// About a minute in a release build.
    Small,
    /// The full sizes: 1 M and 10 M samples, 30 days; minutes on two cores.
    Full,
}

/// Measure ingest, storage and query against baselines in the same run.
#[derive(Parser, Debug, Clone)]
#[command(name = "stackhouse-bench", version)]
pub struct BenchArgs {
    #[arg(long, value_enum, default_value = "small")]
    pub scale: Scale,
    /// Also write the table to this file.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Seed of the workload generator.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Run only these phases (comma-separated), e.g. to profile one of them.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub only: Vec<Phase>,
    /// Warm runs of each query measurement instead of the scale's number (its median is
    /// reported); many runs make a query dominate a profile.
    #[arg(long)]
    pub warm_runs: Option<usize>,
    /// The fleet phase's store: 7 hours (s), 3 days (m) or 30 days (l) of the same fleet;
    /// by default tiny at the tiny scale, s at small, m at full.
    #[arg(long, value_enum)]
    pub fleet_size: Option<FleetSize>,
    /// Keep the fleet store in this directory, and read it from there in later runs of
    /// the same size and seed instead of building it again.
    #[arg(long)]
    pub fleet_store: Option<PathBuf>,
    /// The catalogs the labels phase builds and lists from (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "sqlite,postgres")]
    pub labels_catalogs: Vec<CatalogKind>,
    /// How long the sustained phase sends, in seconds of wall time (by default 4 at the
    /// tiny scale, 120 at small, 600 at full).
    #[arg(long)]
    pub sustained_seconds: Option<u64>,
    /// How many times faster than the wall the sustained phase's store clock runs.
    #[arg(long)]
    pub sustained_speed: Option<u32>,
    /// The CFS period of the query pods' CPU quotas, in milliseconds (Kubernetes' default,
    /// and the kernel's, is 100; a kubelet's `--cpu-cfs-quota-period` changes it).
    #[arg(long, default_value_t = 100)]
    pub pod_cpu_period_ms: u64,
}

/// A catalog database.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CatalogKind {
    Sqlite,
    Postgres,
}

/// The phases of a run, in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Phase {
    /// Ingest CPU, stored bytes and the flamegraph over that store (1 M at full).
    Ingest,
    /// The large store's flamegraph and memory (10 M at full).
    Large,
    /// The large store's reads on query pods (real processes) under CPU quotas, 1 to 4
    /// workers (the ingest workload's size where the scale has no large store).
    Pods,
    /// The 30-day store: the 1-hour query, the 7-day API queries and the rollup tiers.
    Retention,
    /// Acknowledgement latency and memory under sustained load.
    Load,
    /// The fleet-shaped store: cost against range, label listings, bytes per tier.
    Fleet,
    /// Label listings over a month of 10,000 services' catalog, SQLite and Postgres.
    Labels,
    /// The fleet's exports sent as they fall due for minutes, with compaction, rollups and
    /// retention running on a fast clock.
    Sustained,
    /// Recording rules evaluated each minute, against compaction's CPU.
    Rules,
}

/// Sizes of every phase at one scale.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The ingest workload (ingest CPU, stored bytes and the first query size).
    pub fleet: FleetConfig,
    /// Seconds of the same fleet for the large query store (10 M at full), if any.
    pub large_seconds: Option<u64>,
    /// One hour of this fleet is the hour of the 30-day store query.
    pub hour_fleet: FleetConfig,
    pub days: u64,
    /// Senders, their export period, and how long the sustained load runs.
    pub load_fleet: FleetConfig,
    pub load_period: Duration,
    pub load_duration: Duration,
    pub warm_runs: usize,
    pub seed: u64,
    /// The size of the fleet phase's store, and where it is kept (if anywhere).
    pub fleet_size: FleetSize,
    pub fleet_store: Option<PathBuf>,
    /// The catalogs of the Labels phase.
    pub labels_catalogs: Vec<CatalogKind>,
    /// How long the Sustained phase sends (wall time), and how much faster than the wall
    /// its store's clock runs.
    pub sustained_run: Duration,
    pub sustained_speed: u32,
    /// The CPU quota of each query pod of the Pods phase, in cores, over CFS periods of
    /// `pod_cpu_period`.
    pub pod_cores: f64,
    pub pod_cpu_period: Duration,
    pub flush_interval: Duration,
    /// The query engine's memory budget.
    pub query_budget: usize,
}

const HOUR_NANOS: i64 = 3_600_000_000_000;

impl Plan {
    pub fn new(scale: Scale, seed: u64) -> Plan {
        // Whole hours before now, so that every store's data lies in closed hour windows
        // inside the default 30-day retention.
        let now = stackhouse_storage::clock::system_now_nanos();
        let this_hour = now.div_euclid(HOUR_NANOS) * HOUR_NANOS;
        let start = this_hour - 2 * HOUR_NANOS;
        let (days, hour_hz) = match scale {
            Scale::Tiny => (2, 1),
            Scale::Small => (7, 20),
            Scale::Full => (30, 20),
        };
        let hour_start = this_hour - (days as i64 * 24 + 1) * HOUR_NANOS;
        let hour_fleet = FleetConfig {
            stacks_per_service: 1000,
            ..FleetConfig::new(1, 1, 1, hour_hz, 3600, hour_start, seed ^ 4)
        };
        let base = Plan {
            fleet: FleetConfig::new(2, 2, 2, 20, 20, start, seed),
            large_seconds: None,
            hour_fleet,
            days,
            load_fleet: FleetConfig::new(4, 2, 2, 20, 10, start, seed ^ 5),
            load_period: Duration::from_secs(1),
            load_duration: Duration::from_secs(3),
            warm_runs: 3,
            seed,
            fleet_size: FleetSize::Tiny,
            fleet_store: None,
            labels_catalogs: vec![CatalogKind::Sqlite, CatalogKind::Postgres],
            sustained_run: Duration::from_secs(4),
            sustained_speed: 300,
            // A debug build at tiny scale: a whole core, so the smoke stays seconds long.
            pod_cores: 1.0,
            pod_cpu_period: Duration::from_millis(100),
            flush_interval: stackhouse_storage::writer::WriterConfig::default().flush_interval,
            query_budget: 1 << 30,
        };
        match scale {
            Scale::Tiny => base,
            Scale::Small => Plan {
                fleet: FleetConfig::new(5, 4, 4, 20, 60, start, seed),
                load_fleet: FleetConfig::new(10, 5, 4, 20, 10, start, seed ^ 5),
                load_period: Duration::from_secs(5),
                load_duration: Duration::from_secs(20),
                warm_runs: 5,
                fleet_size: FleetSize::S,
                pod_cores: 0.2,
                pod_cpu_period: Duration::from_millis(100),
                sustained_run: Duration::from_secs(120),
                sustained_speed: 60,
                ..base
            },
            Scale::Full => Plan {
                // 10 hosts × 5 processes × 4 cores × 20 Hz, 80% busy: 3200 samples/s.
                fleet: FleetConfig::new(10, 5, 4, 20, 315, start, seed),
                large_seconds: Some(3125),
                load_fleet: FleetConfig::new(100, 5, 4, 20, 10, start, seed ^ 5),
                load_period: Duration::from_secs(5),
                load_duration: Duration::from_secs(60),
                // A 1 M-sample flamegraph takes about 30 ms: the median of 5 swung its ratio
                // to the bare scan by ±0.2 between runs on these machines.
                warm_runs: 20,
                fleet_size: FleetSize::M,
                // Five processes at 0.2 core (a coordinator and 4 workers) leave this
                // 2-core machine's other core to the client and the kernel.
                pod_cores: 0.2,
                pod_cpu_period: Duration::from_millis(100),
                // Ten hours of the fleet's data in ten minutes: hour blocks, rollups and
                // retention all run several times.
                sustained_run: Duration::from_secs(600),
                sustained_speed: 60,
                ..base
            },
        }
    }
}

/// Runs every measurement at `scale`.
pub async fn run(scale: Scale, seed: u64) -> anyhow::Result<Report> {
    run_phases(Plan::new(scale, seed), scale, &[]).await
}

/// Runs the measurements of `phases` (all of them when empty) as `plan` sizes them.
pub async fn run_phases(plan: Plan, scale: Scale, phases: &[Phase]) -> anyhow::Result<Report> {
    let runs = |phase| phases.is_empty() || phases.contains(&phase);
    let capture = load_capture()?;
    let mut report = Report {
        scale: format!("{scale:?}").to_lowercase(),
        ..Report::default()
    };
    if runs(Phase::Ingest) {
        let workload = Workload::new(plan.fleet.clone(), &capture);
        ingest::ingest_measurements(&plan, &workload, &mut report)
            .await
            .context("ingest, storage and first query measurements")?;
    }
    let large = plan.large_seconds.filter(|_| runs(Phase::Large));
    if large.is_some() || runs(Phase::Pods) {
        let workload = Workload::new(
            FleetConfig {
                seconds: plan.large_seconds.unwrap_or(plan.fleet.seconds),
                ..plan.fleet.clone()
            },
            &capture,
        );
        let built = query::build_store(workload, "Large store", &mut report)
            .await
            .context("building the large store")?;
        if large.is_some() {
            query::flamegraph_measurement(&plan, &built.env, built.range, built.samples, true, &mut report)
                .await
                .context("large query measurements")?;
        }
        if runs(Phase::Pods) {
            pods::measurements(&plan, &built.env, built.range, built.samples, &mut report)
                .await
                .context("query pods under CPU quotas")?;
        }
    }
    if runs(Phase::Retention) {
        query::retention_measurement(&plan, &capture, &mut report)
            .await
            .context("30-day store measurement")?;
    }
    if runs(Phase::Load) {
        ingest::load_measurements(&plan, &capture, &mut report)
            .await
            .context("sustained load measurements")?;
    }
    if runs(Phase::Fleet) {
        fleet::measurements(
            &plan,
            plan.fleet_size,
            plan.fleet_store.as_ref(),
            plan.seed,
            &capture,
            &mut report,
        )
        .await
        .context("fleet measurements")?;
    }
    if runs(Phase::Sustained) {
        sustained::measurements(&plan, scale == Scale::Tiny, &capture, &mut report)
            .await
            .context("sustained ingest with maintenance")?;
    }
    if runs(Phase::Labels) {
        labels::measurements(&plan, scale, &mut report)
            .await
            .context("label listing measurements")?;
    }
    if runs(Phase::Rules) {
        rules::measurements(&plan, &capture, &mut report)
            .await
            .context("recording rule measurements")?;
    }
    Ok(report)
}

/// The `stackhouse-bench` command.
pub fn main(args: BenchArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let mut plan = Plan::new(args.scale, args.seed);
    if let Some(runs) = args.warm_runs {
        plan.warm_runs = runs.max(1);
    }
    if let Some(size) = args.fleet_size {
        plan.fleet_size = size;
    }
    plan.fleet_store = args.fleet_store;
    plan.labels_catalogs = args.labels_catalogs;
    if let Some(seconds) = args.sustained_seconds {
        plan.sustained_run = Duration::from_secs(seconds.max(1));
    }
    if let Some(speed) = args.sustained_speed {
        plan.sustained_speed = speed.max(1);
    }
    plan.pod_cpu_period = Duration::from_millis(args.pod_cpu_period_ms.clamp(1, 1000));
    let report = runtime.block_on(run_phases(plan, args.scale, &args.only))?;
    let text = format!("{}\n{}", machine(), report.markdown());
    println!("{text}");
    if let Some(out) = &args.out {
        std::fs::write(out, &text).with_context(|| format!("writing {}", out.display()))?;
    }
    Ok(())
}

/// The machine the numbers come from.
pub fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown cpu".into());
    let ram = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .unwrap_or(0);
    format!(
        "Machine: {cpus} CPUs ({model}), {:.1} GiB RAM.\n",
        ram as f64 / (1u64 << 20) as f64
    )
}
