//! `stackhouse-bench`: runs every measurement in-process against local files and a
//! SQLite catalog in a temporary directory, each next to a baseline measured in the same
//! run, and prints them as a markdown table.

mod api;
mod distributed;
mod duckdb;
mod env;
mod ingest;
pub mod measure;
mod query;
pub mod report;
mod rollups;
pub mod workload;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, ValueEnum};

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
}

/// The phases of a run, in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Phase {
    /// Ingest CPU, stored bytes and the flamegraph over that store (1 M at full).
    Ingest,
    /// The large store's flamegraph and memory (10 M at full).
    Large,
    /// The 30-day store: the 1-hour query, the 7-day API queries and the rollup tiers.
    Retention,
    /// Acknowledgement latency and memory under sustained load.
    Load,
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
    pub flush_interval: Duration,
    /// The query engine's memory budget.
    pub query_budget: usize,
}

const HOUR_NANOS: i64 = 3_600_000_000_000;

fn fleet(
    hosts: usize,
    processes: usize,
    cores: usize,
    hz: u32,
    seconds: u64,
    seed: u64,
    start: i64,
) -> FleetConfig {
    FleetConfig {
        hosts,
        processes_per_host: processes,
        cores,
        hz,
        seconds,
        start_nanos: start,
        seed,
        services: processes.clamp(1, 8),
        stacks_per_service: 2000,
        linked_share: 0.1,
    }
}

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
            ..fleet(1, 1, 1, hour_hz, 3600, seed ^ 4, hour_start)
        };
        let base = Plan {
            fleet: fleet(2, 2, 2, 20, 20, seed, start),
            large_seconds: None,
            hour_fleet,
            days,
            load_fleet: fleet(4, 2, 2, 20, 10, seed ^ 5, start),
            load_period: Duration::from_secs(1),
            load_duration: Duration::from_secs(3),
            warm_runs: 3,
            flush_interval: stackhouse_storage::writer::WriterConfig::default().flush_interval,
            query_budget: 1 << 30,
        };
        match scale {
            Scale::Tiny => base,
            Scale::Small => Plan {
                fleet: fleet(5, 4, 4, 20, 60, seed, start),
                load_fleet: fleet(10, 5, 4, 20, 10, seed ^ 5, start),
                load_period: Duration::from_secs(5),
                load_duration: Duration::from_secs(20),
                warm_runs: 5,
                ..base
            },
            Scale::Full => Plan {
                // 10 hosts × 5 processes × 4 cores × 20 Hz, 80% busy: 3200 samples/s.
                fleet: fleet(10, 5, 4, 20, 315, seed, start),
                large_seconds: Some(3125),
                load_fleet: fleet(100, 5, 4, 20, 10, seed ^ 5, start),
                load_period: Duration::from_secs(5),
                load_duration: Duration::from_secs(60),
                // A 1 M-sample flamegraph takes about 30 ms: the median of 5 swung its ratio
                // to the bare scan by ±0.2 between runs on these machines.
                warm_runs: 20,
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
    if let Some(seconds) = plan.large_seconds.filter(|_| runs(Phase::Large)) {
        let large = Workload::new(
            FleetConfig {
                seconds,
                ..plan.fleet.clone()
            },
            &capture,
        );
        query::large_query_measurements(&plan, large, &mut report)
            .await
            .context("large query measurements")?;
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
    Ok(report)
}

/// The `stackhouse-bench` command.
pub fn main(args: BenchArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let mut plan = Plan::new(args.scale, args.seed);
    if let Some(runs) = args.warm_runs {
        plan.warm_runs = runs.max(1);
    }
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
