//! JFR expectations from the independent reader (`jfr print --json`, see `jfr_reader`).

use std::path::Path;

use crate::capture::Observation;
use crate::formats::Expected;
use crate::jfr_reader::{self, JfrTotals};

pub fn expected(path: &Path) -> Expected {
    from_totals(&jfr_reader::read(path))
}

/// One observation per (type, path); the recording's events give the span, the profile
/// count (types fed) and the value count the converters report as samples.
pub fn from_totals(t: &JfrTotals) -> Expected {
    let first = t.timestamps.values().flatten().min().copied();
    let last = t.timestamps.values().flatten().max().copied();
    let time = first.unwrap_or(0);
    let mut observations = Vec::new();
    for (ty, paths) in &t.by_type {
        for (path, value) in paths {
            observations.push(Observation {
                profile_type: ty.clone(),
                attrs: Default::default(),
                frames: path.clone(),
                time,
                value: *value,
                trace_id: None,
            });
        }
    }
    Expected {
        observations,
        profiles: t.by_type.len(),
        samples: t.events.values().sum(),
        span: first.zip(last).map(|(a, b)| (a, b + 1)),
    }
}
