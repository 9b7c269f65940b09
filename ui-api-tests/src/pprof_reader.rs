//! pprof read back by an independent decoder: npm's `pprof-format` run with node
//! (`ui-api-tests/pprof-reader/`), installed into the target directory on first use.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

use crate::node_tool::{self, run};

#[derive(Clone, Debug)]
pub struct PprofSample {
    /// Caller first, named as DESIGN.md names frames.
    pub frames: Vec<String>,
    /// Per frame, its function's file and the line (empty and 0 when not given).
    pub sources: Vec<(String, i64)>,
    pub values: Vec<i64>,
    /// String labels; numeric labels as `#<num>`.
    pub labels: BTreeMap<String, String>,
}

#[derive(Clone, Debug)]
pub struct Pprof {
    pub sample_types: Vec<(String, String)>,
    pub period_type: Option<(String, String)>,
    pub period: i64,
    pub time_nanos: i64,
    pub duration_nanos: i64,
    pub samples: Vec<PprofSample>,
}

/// The reader's directory with `pprof-format` installed.
fn reader_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        node_tool::install(
            "pprof-reader",
            &["package.json", "read.mjs"],
            "node_modules/pprof-format/package.json",
        )
    })
    .clone()
}

fn int(v: &Value) -> i64 {
    v.as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not a decimal string: {v}"))
}

fn pair(v: &Value) -> Option<(String, String)> {
    let a = v.as_array()?;
    Some((a[0].as_str()?.to_string(), a[1].as_str()?.to_string()))
}

/// Decodes pprof bytes (gzipped or raw) with the independent reader.
pub fn decode(gzipped: &[u8]) -> Pprof {
    let dir = reader_dir();
    let file = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(file.path(), gzipped).unwrap();
    let out = run(
        Command::new("node").arg(dir.join("read.mjs")).arg(file.path()),
        "node read.mjs (pprof-format)",
    );
    let doc: Value = serde_json::from_slice(&out).expect("reader output is JSON");
    let samples = doc["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let mut frames = Vec::new();
            let mut sources = Vec::new();
            // pprof lists the leaf location first, and within a location the innermost
            // line first: reversed twice, the caller comes first.
            for loc in s["locations"].as_array().unwrap().iter().rev() {
                let lines = loc["lines"].as_array().unwrap();
                if lines.is_empty() {
                    let addr = loc["address"].as_str().unwrap();
                    frames.push(match loc["mapping"].as_str() {
                        Some(file) if !file.is_empty() => format!("{file}+0x{addr}"),
                        _ => format!("0x{addr}"),
                    });
                    sources.push((String::new(), 0));
                }
                for line in lines.iter().rev() {
                    let name = line["name"].as_str().unwrap();
                    let system = line["system_name"].as_str().unwrap();
                    frames.push(if name.is_empty() { system } else { name }.to_string());
                    sources.push((line["filename"].as_str().unwrap().to_string(), int(&line["line"])));
                }
            }
            let mut labels = BTreeMap::new();
            for l in s["labels"].as_array().unwrap() {
                let key = l["key"].as_str().unwrap().to_string();
                let value = match l["str"].as_str().unwrap() {
                    "" => format!("#{}", int(&l["num"])),
                    s => s.to_string(),
                };
                assert!(
                    labels.insert(key.clone(), value).is_none(),
                    "label {key} twice on one sample"
                );
            }
            PprofSample {
                frames,
                sources,
                values: s["values"].as_array().unwrap().iter().map(int).collect(),
                labels,
            }
        })
        .collect();
    Pprof {
        sample_types: doc["sample_types"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| pair(t).expect("sample type"))
            .collect(),
        period_type: pair(&doc["period_type"]),
        period: int(&doc["period"]),
        time_nanos: int(&doc["time_nanos"]),
        duration_nanos: int(&doc["duration_nanos"]),
        samples,
    }
}
