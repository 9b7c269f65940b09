//! The benchmark's result: one row per measurement, rendered as a markdown table.

use std::fmt::Write as _;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct Row {
    pub measurement: String,
    /// Our number, in `unit`.
    pub ours: f64,
    /// The baseline measured in the same run, in `unit`.
    pub baseline: f64,
    pub unit: &'static str,
    /// What the baseline is.
    pub baseline_name: String,
    pub target: String,
    pub pass: bool,
}

impl Row {
    pub fn ratio(&self) -> f64 {
        if self.baseline == 0.0 {
            f64::INFINITY
        } else {
            self.ours / self.baseline
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct Report {
    pub scale: String,
    pub rows: Vec<Row>,
    /// Timing splits and how the data was built, printed under the table.
    pub notes: Vec<String>,
    /// Samples the ingest workload generated (counted by the generator).
    pub ingest_samples: usize,
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

fn number(v: f64, unit: &str) -> String {
    let digits = if v.abs() >= 100.0 {
        0
    } else if v.abs() >= 10.0 {
        1
    } else if v.abs() >= 1.0 {
        2
    } else {
        3
    };
    format!("{v:.digits$} {unit}")
}

impl Report {
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "| measurement | ours | baseline (same run) | ratio | target | result |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|");
        for r in &self.rows {
            let _ = writeln!(
                out,
                "| {} | {} | {}: {} | {:.2}× | {} | {} |",
                r.measurement,
                number(r.ours, r.unit),
                r.baseline_name,
                number(r.baseline, r.unit),
                r.ratio(),
                r.target,
                if r.pass { "pass" } else { "**miss**" }
            );
        }
        if !self.notes.is_empty() {
            out.push('\n');
            for note in &self.notes {
                let _ = writeln!(out, "- {note}");
            }
        }
        out
    }
}
