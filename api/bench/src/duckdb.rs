//! DuckDB as a baseline: the aggregation a flamegraph needs, run by an embedded engine
//! users know, over the very Parquet files the bench's store holds. DuckDB runs in Python
//! (the `duckdb` package, installed here with pip when missing); the timing is taken inside
//! Python around each query, so process start and data transfer are not counted.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};

/// Each run times `SELECT stack_id, SUM(value) ... GROUP BY 1` (one row handed back: the
/// groups are counted and summed in DuckDB) and `SELECT SUM(value)`; medians of `runs`
/// warm runs after one cold run, with 2 threads (the machines' cores). It also sums the
/// values of the part `[start, end)` of the time range, what a flamegraph of that part
/// must count.
const SCRIPT: &str = r#"
import json, sys, time, statistics, duckdb
args = json.load(sys.stdin)
con = duckdb.connect()
con.execute("SET threads = 2")
files = ", ".join("'" + f.replace("'", "''") + "'" for f in args["files"])
con.execute(f"CREATE VIEW samples AS SELECT * FROM read_parquet([{files}])")
group = "SELECT count(*), sum(s) FROM (SELECT stack_id, sum(value) AS s FROM samples GROUP BY 1)"
total = "SELECT sum(value) FROM samples"
groups, summed = con.execute(group).fetchone()
con.execute(total).fetchone()
def median(sql):
    times = []
    for _ in range(args["runs"]):
        t = time.perf_counter()
        con.execute(sql).fetchone()
        times.append(time.perf_counter() - t)
    return statistics.median(times)
start, end = args["part"]
part = con.execute(f"SELECT sum(value) FROM samples WHERE time_nanos >= {int(start)} AND time_nanos < {int(end)}").fetchone()[0]
print(json.dumps({"version": duckdb.__version__, "groups": groups, "total": int(summed or 0),
                  "part_total": int(part or 0),
                  "group_by_seconds": median(group), "sum_seconds": median(total)}))
"#;

pub(crate) struct DuckDb {
    pub version: String,
    /// Distinct stacks and summed values the aggregation found.
    pub groups: u64,
    pub total: i64,
    /// Summed values of the part of the range asked for.
    pub part_total: i64,
    pub group_by: Duration,
    pub sum: Duration,
}

/// Makes sure Python can import `duckdb`, installing it with pip when it cannot; the reason
/// when neither works.
pub(crate) fn setup() -> Result<(), String> {
    let importable = || {
        Command::new("python3")
            .args(["-c", "import duckdb"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if importable() {
        return Ok(());
    }
    let install = Command::new("python3")
        .args(["-m", "pip", "install", "--quiet", "duckdb"])
        .output()
        .map_err(|e| format!("python3 could not run pip: {e}"))?;
    if !install.status.success() || !importable() {
        return Err(format!(
            "pip could not install duckdb: {}",
            String::from_utf8_lossy(&install.stderr).trim()
        ));
    }
    Ok(())
}

/// Runs [`SCRIPT`] over `files`, summing the part `[part.0, part.1)` of their time range.
pub(crate) fn measure(files: &[String], runs: usize, part: (i64, i64)) -> anyhow::Result<DuckDb> {
    let mut child = Command::new("python3")
        .args(["-c", SCRIPT])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting python3 for DuckDB")?;
    let input = serde_json::json!({"files": files, "runs": runs.max(1), "part": [part.0, part.1]});
    child
        .stdin
        .take()
        .context("python3's stdin")?
        .write_all(input.to_string().as_bytes())?;
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!("DuckDB failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).context("DuckDB's answer")?;
    let seconds = |key: &str| {
        v[key]
            .as_f64()
            .map(Duration::from_secs_f64)
            .with_context(|| format!("{key} in {v}"))
    };
    Ok(DuckDb {
        version: v["version"].as_str().unwrap_or("?").to_string(),
        groups: v["groups"].as_u64().context("groups")?,
        total: v["total"].as_i64().context("total")?,
        part_total: v["part_total"].as_i64().context("part_total")?,
        group_by: seconds("group_by_seconds")?,
        sum: seconds("sum_seconds")?,
    })
}
