//! Folded stacks (`root;child;leaf 123` per line), Pyroscope's default `/ingest` format.
//!
//! The profile type comes from the transport: the sample type is the application name's
//! suffix (`Source::type_hint`, default `cpu`), the unit Pyroscope's `units` mapped by
//! [`unit_name`]. With a `sampleRate` a CPU profile gets the period `1e9 / hz` nanoseconds;
//! values are stored as sent (sample counts are not turned into time). One input is one
//! profile, so any malformed line refuses the whole input.

use stackhouse_proto::otlp_profiles::{Profile, Sample};

use crate::convert::{ConvertError, Converted, RequestBuilder, Source};

/// The OTLP unit for Pyroscope's `units` parameter (or `sample_type_config` units): counts
/// of things are `count`; units Pyroscope does not define are kept as sent.
pub(crate) fn unit_name(pyroscope_units: Option<&str>) -> String {
    match pyroscope_units.map(str::trim).unwrap_or("") {
        "" | "samples" | "objects" | "goroutines" | "lock_samples" => "count".to_string(),
        "bytes" => "bytes".to_string(),
        "lock_nanoseconds" => "nanoseconds".to_string(),
        other => other.to_string(),
    }
}

/// Sample types whose values are CPU samples, so that a sample rate gives them a period.
fn is_cpu_like(sample_type: &str) -> bool {
    matches!(sample_type, "cpu" | "itimer" | "process_cpu")
}

pub fn convert(
    data: &[u8],
    source: &Source,
    builder: &mut RequestBuilder,
) -> Result<Converted, ConvertError> {
    let text = std::str::from_utf8(data).map_err(|e| {
        ConvertError::invalid(
            "folded",
            format_args!("line {}: not valid utf-8", line_number(data, e.valid_up_to())),
        )
    })?;
    let lines = parse(text)?;

    let sample_type = source
        .type_hint
        .as_deref()
        .filter(|t| !t.is_empty())
        .unwrap_or("cpu");
    let unit = unit_name(source.units.as_deref());
    let mut profile = Profile {
        sample_type: Some(builder.value_type(sample_type, &unit)),
        time_unix_nano: source.time_nanos.filter(|&t| t > 0).unwrap_or(0) as u64,
        duration_nano: source.duration_nanos.filter(|&d| d > 0).unwrap_or(0) as u64,
        ..Default::default()
    };
    if let Some(hz) = source.sample_rate.filter(|&hz| hz > 0)
        && is_cpu_like(sample_type)
        && unit == "count"
    {
        profile.period_type = Some(builder.value_type("cpu", "nanoseconds"));
        profile.period = 1_000_000_000 / i64::from(hz);
    }

    let mut locations = Vec::new();
    for (frames, value) in lines {
        locations.clear();
        // Folded lines are root first; OTLP stacks leaf first.
        locations.extend(frames.iter().rev().map(|f| builder.named_frame(f, "", 0)));
        profile.samples.push(Sample {
            stack_index: builder.stack(&locations),
            values: vec![value],
            ..Default::default()
        });
    }
    let samples = profile.samples.len();
    builder.push_profile(&source.resource, &source.scope, profile);
    Ok(Converted { profiles: 1, samples })
}

/// Every non-empty line as (frames root first, value); the first bad line is the error.
fn parse(text: &str) -> Result<Vec<(Vec<&str>, i64)>, ConvertError> {
    let mut out = Vec::new();
    for (i, line) in text.split('\n').enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() {
            continue;
        }
        let bad = |msg: String| ConvertError::invalid("folded", format_args!("line {}: {msg}", i + 1));
        // Frame names may contain spaces: the value is whatever follows the last one.
        let (stack, value) = line
            .trim_end()
            .rsplit_once(' ')
            .ok_or_else(|| bad("no value after the stack (expected `frame;frame value`)".into()))?;
        let value: i64 = value
            .parse()
            .ok()
            .filter(|v| *v >= 0)
            .ok_or_else(|| bad(format!("value {value:?} is not a non-negative integer")))?;
        let frames: Vec<&str> = stack.trim_end().split(';').collect();
        if let Some(k) = frames.iter().position(|f| f.is_empty()) {
            return Err(bad(format!("frame {} has an empty name", k + 1)));
        }
        out.push((frames, value));
    }
    Ok(out)
}

fn line_number(data: &[u8], offset: usize) -> usize {
    data[..offset].iter().filter(|&&b| b == b'\n').count() + 1
}

#[cfg(test)]
mod tests;
