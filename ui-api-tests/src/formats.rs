//! Expected contents of the test data files, computed by readers that share no code with
//! Stackhouse: pprof through npm `pprof-format`, speedscope through serde_json, OTLP through
//! the `opentelemetry-proto` crate (or serde_json for OTLP/JSON), JFR through the JDK's
//! `jfr print --json` (see `jfr_reader`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::capture::{self, Observation};
use crate::pprof_reader;
use crate::speedscope_reader;

/// How a file is sent to `/ingest` (OTLP files go to `/v1development/profiles`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Pprof,
    Jfr,
    Speedscope,
    OtlpProtobuf,
    OtlpJson,
}

impl Format {
    pub fn of(path: &Path) -> Format {
        let name = path.file_name().unwrap().to_string_lossy();
        let dir = path.parent().unwrap().file_name().unwrap().to_string_lossy();
        match (&*dir, name.ends_with(".json")) {
            ("pprof", _) => Format::Pprof,
            ("jfr", _) => Format::Jfr,
            ("speedscope", _) => Format::Speedscope,
            ("otlp", true) => Format::OtlpJson,
            ("otlp", false) => Format::OtlpProtobuf,
            _ => panic!("unknown test data kind: {}", path.display()),
        }
    }

    /// The `format` parameter of `/ingest`.
    pub fn ingest_name(self) -> &'static str {
        match self {
            Format::Pprof => "pprof",
            Format::Jfr => "jfr",
            Format::Speedscope => "speedscope",
            Format::OtlpProtobuf | Format::OtlpJson => panic!("OTLP is not sent to /ingest"),
        }
    }
}

/// What one file must become once stored.
#[derive(Clone, Debug)]
pub struct Expected {
    /// One per stored value; `time` is 0 when the file carries no time of its own.
    pub observations: Vec<Observation>,
    /// OTLP profiles and samples the file converts into.
    pub profiles: usize,
    pub samples: usize,
    /// `[from, to)` in unix ns holding every observation, when the file says when it was
    /// recorded; `None` means the receive time (or `/ingest`'s `from`) is used.
    pub span: Option<(i64, i64)>,
}

/// Every test data file, in a fixed order.
pub fn testdata_files() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in ["pprof", "jfr", "speedscope", "otlp"] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(crate::testdata(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file())
            .collect();
        files.sort();
        out.extend(files);
    }
    out
}

/// A service name (and tenant) for a file: its name up to the first dot, `_` for `-`.
pub fn stem(path: &Path) -> String {
    let name = path.file_name().unwrap().to_string_lossy();
    let stem = name.split('.').next().unwrap().replace('-', "_");
    let ext = if name.ends_with(".json") && name.contains("v1_10") {
        "_json"
    } else {
        ""
    };
    format!("{stem}{ext}")
}

pub fn expected(path: &Path) -> Expected {
    let bytes = std::fs::read(path).unwrap();
    match Format::of(path) {
        Format::Pprof => pprof(&bytes),
        Format::Speedscope => speedscope_reader::expected(&serde_json::from_slice(&bytes).unwrap()),
        Format::OtlpProtobuf => {
            use prost::Message;
            let req = opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest::decode(
                &bytes[..],
            )
            .unwrap();
            let (profiles, samples) = req
                .resource_profiles
                .iter()
                .flat_map(|r| &r.scope_profiles)
                .flat_map(|s| &s.profiles)
                .fold((0, 0), |(p, s), prof| (p + 1, s + prof.samples.len()));
            otlp(capture::from_protobuf(&req), profiles, samples)
        }
        Format::OtlpJson => {
            let doc: Value = serde_json::from_slice(&bytes).unwrap();
            let (mut profiles, mut samples) = (0, 0);
            for rp in doc["resourceProfiles"].as_array().unwrap() {
                for sp in rp["scopeProfiles"].as_array().unwrap() {
                    for p in sp["profiles"].as_array().unwrap() {
                        profiles += 1;
                        samples += p["samples"].as_array().map_or(0, Vec::len);
                    }
                }
            }
            otlp(capture::from_json(&doc), profiles, samples)
        }
        Format::Jfr => crate::jfr_expected::expected(path),
    }
}

fn otlp(observations: Vec<Observation>, profiles: usize, samples: usize) -> Expected {
    let all: Vec<&Observation> = observations.iter().collect();
    let span = Some(crate::checks::span(&all));
    Expected {
        observations,
        profiles,
        samples,
        span,
    }
}

/// pprof labels the API reads as trace and profile filters rather than plain attributes
/// (kept in the observations' attributes, skipped by attribute selectors).
pub const LINK_LABELS: [&str; 3] = ["trace_id", "span_id", "profile_id"];

/// A `profile_id` label value that names an OTLP profile: 32 hex digits or a UUID.
fn is_profile_id(v: &str) -> bool {
    let plain: String = if v.len() == 36 && [8, 13, 18, 23].iter().all(|&i| v.as_bytes()[i] == b'-') {
        v.replace('-', "")
    } else {
        v.to_string()
    };
    plain.len() == 32 && plain.bytes().all(|b| b.is_ascii_hexdigit())
}

/// One observation per sample and sample type, at the profile's `time_nanos`. A sample
/// whose value is 0 for a type is not stored in that type (the converter's documented
/// choice; it changes no flamegraph); a profile is sent per type and `profile_id` value.
fn pprof(bytes: &[u8]) -> Expected {
    let p = pprof_reader::decode(bytes);
    let (period_type, period_unit) = p.period_type.clone().unwrap_or_default();
    let time = p.time_nanos;
    let mut observations = Vec::new();
    let mut groups = std::collections::BTreeSet::new();
    let mut samples = 0;
    for s in &p.samples {
        groups.insert(s.labels.get("profile_id").filter(|v| is_profile_id(v)).cloned());
        let attrs = s
            .labels
            .iter()
            .filter(|(_, v)| !v.starts_with('#'))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<std::collections::HashMap<_, _>>();
        for ((ty, unit), value) in p.sample_types.iter().zip(&s.values) {
            samples += usize::from(*value != 0);
            observations.push(Observation {
                profile_type: format!("{ty}:{unit}:{period_type}:{period_unit}"),
                attrs: attrs.clone(),
                frames: s.frames.clone(),
                time,
                value: *value,
                trace_id: None,
            });
        }
    }
    Expected {
        profiles: p.sample_types.len() * groups.len().max(1),
        samples,
        span: (time > 0).then(|| (time, time + p.duration_nanos.max(0) + 1)),
        observations,
    }
}

/// Root-first path → summed value (zero sums left out), per profile type.
pub fn paths_by_type(observations: &[Observation]) -> BTreeMap<String, BTreeMap<Vec<String>, i64>> {
    let mut out: BTreeMap<String, BTreeMap<Vec<String>, i64>> = BTreeMap::new();
    for o in observations {
        if !o.frames.is_empty() {
            *out.entry(o.profile_type.clone())
                .or_default()
                .entry(o.frames.clone())
                .or_insert(0) += o.value;
        }
    }
    for paths in out.values_mut() {
        paths.retain(|_, v| *v != 0);
    }
    out
}

pub fn totals_by_type(observations: &[Observation]) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for o in observations {
        *out.entry(o.profile_type.clone()).or_insert(0) += o.value;
    }
    out
}
