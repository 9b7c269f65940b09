//! speedscope JSON files (sampled and evented profiles), one OTLP profile per speedscope
//! profile, its `name` kept as the profile attribute `profile.name`.
//!
//! Profile types by `unit`: `none` is `samples:count`, `bytes` is `space:bytes`, and a time
//! unit is `wall:<unit>` with the values as sent. Sampled profiles store each sample's
//! weight; evented profiles store each stack's self time (the time between consecutive
//! events, attributed to the stack open in between). OTLP values are integers: a profile in
//! a time unit with fractional weights or event times (Chrome and .NET exports write
//! fractional milliseconds) is stored as `wall:nanoseconds` instead, each time rounded to
//! the nanosecond; fractional counts or bytes are refused. speedscope files carry no
//! absolute time, so the profile time is `Source::time_nanos`.

use std::collections::HashMap;

use serde_json::Value;
use stackhouse_proto::otlp_profiles::{Profile, Sample};

use crate::convert::{ConvertError, Converted, FrameLine, RequestBuilder, Source};

fn invalid(message: impl std::fmt::Display) -> ConvertError {
    ConvertError::invalid("speedscope", message)
}

pub fn convert(
    data: &[u8],
    source: &Source,
    builder: &mut RequestBuilder,
) -> Result<Converted, ConvertError> {
    let root: Value = serde_json::from_slice(data).map_err(|e| invalid(format_args!("not JSON: {e}")))?;
    let frames = shared_frames(&root)?;
    let profiles = root
        .get("profiles")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid("missing the profiles array"))?;

    // Convert every profile before pushing any: one file is one upload.
    let mut frame_locations = vec![None; frames.len()];
    // Sampled stacks are spelled out in the input; evented ones are expanded from events,
    // so what they may expand into is bounded by the input size.
    let mut frame_budget = data.len().saturating_mul(8).max(1 << 16);
    let mut converted = Vec::with_capacity(profiles.len());
    for (p, json) in profiles.iter().enumerate() {
        let mut ctx = Context {
            builder: &mut *builder,
            frames: &frames,
            locations: &mut frame_locations,
            frame_budget: &mut frame_budget,
            profile: p,
        };
        converted.push(ctx.profile(json, source)?);
    }
    let mut out = Converted::default();
    for profile in converted {
        out.profiles += 1;
        out.samples += profile.samples.len();
        builder.push_profile(&source.resource, &source.scope, profile);
    }
    Ok(out)
}

struct Frame<'a> {
    name: &'a str,
    file: &'a str,
    line: i64,
    column: i64,
}

fn shared_frames(root: &Value) -> Result<Vec<Frame<'_>>, ConvertError> {
    let frames = root
        .get("shared")
        .and_then(|s| s.get("frames"))
        .and_then(Value::as_array)
        .ok_or_else(|| invalid("missing the shared.frames array"))?;
    frames
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let name = f
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| invalid(format_args!("shared.frames[{i}] has no name string")))?;
            let file = f.get("file").and_then(Value::as_str).unwrap_or("");
            let number = |key: &str| f.get(key).and_then(Value::as_i64).unwrap_or(0);
            Ok(Frame {
                name,
                file,
                line: number("line"),
                column: number("col"),
            })
        })
        .collect()
}

/// A JSON number as speedscope writes it: usually an integer, sometimes fractional.
#[derive(Clone, Copy)]
enum Number {
    Int(i64),
    Fraction(f64),
}

fn number(v: &Value) -> Option<Number> {
    if let Some(i) = v.as_i64() {
        return Some(Number::Int(i));
    }
    let f = v.as_f64().filter(|f| f.is_finite())?;
    // Within ±2^53 a whole f64 is an exact integer.
    if f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0 {
        Some(Number::Int(f as i64))
    } else {
        Some(Number::Fraction(f))
    }
}

/// How a profile's numbers become stored integers.
#[derive(Clone, Copy)]
enum Scale {
    /// All whole numbers: stored as sent.
    AsSent,
    /// Fractional times: nanoseconds per file unit.
    ToNanos(f64),
}

impl Scale {
    fn apply(self, n: Number) -> Option<i64> {
        match (self, n) {
            (Scale::AsSent, Number::Int(i)) => Some(i),
            (Scale::AsSent, Number::Fraction(_)) => None,
            (Scale::ToNanos(k), Number::Int(i)) => finite_i64(i as f64 * k),
            (Scale::ToNanos(k), Number::Fraction(f)) => finite_i64(f * k),
        }
    }
}

fn finite_i64(f: f64) -> Option<i64> {
    let r = f.round();
    (r.is_finite() && r.abs() < 9.2e18).then_some(r as i64)
}

/// `(sample type, unit, nanoseconds per unit for time units)`.
fn profile_type(unit: &str) -> Option<(&'static str, &str, Option<f64>)> {
    Some(match unit {
        "none" => ("samples", "count", None),
        "bytes" => ("space", "bytes", None),
        "nanoseconds" => ("wall", unit, Some(1.0)),
        "microseconds" => ("wall", unit, Some(1e3)),
        "milliseconds" => ("wall", unit, Some(1e6)),
        "seconds" => ("wall", unit, Some(1e9)),
        _ => return None,
    })
}

struct Context<'a, 'f> {
    builder: &'a mut RequestBuilder,
    frames: &'a [Frame<'f>],
    locations: &'a mut Vec<Option<i32>>,
    /// Frames the evented profiles of this file may still expand into.
    frame_budget: &'a mut usize,
    profile: usize,
}

/// A call tree node of an evented profile: `location` called from `parent`.
#[derive(Default)]
struct Node {
    parent: usize,
    location: i32,
    depth: usize,
    self_time: i64,
}

impl Context<'_, '_> {
    fn err(&self, message: impl std::fmt::Display) -> ConvertError {
        invalid(format_args!("profile {}: {message}", self.profile))
    }

    fn profile(&mut self, json: &Value, source: &Source) -> Result<Profile, ConvertError> {
        let kind = json.get("type").and_then(Value::as_str).unwrap_or("");
        let unit = json.get("unit").and_then(Value::as_str).unwrap_or("none");
        let (sample_type, unit_name, nanos_per_unit) = profile_type(unit).ok_or_else(|| {
            self.err(format_args!(
                "unknown unit {unit:?} (expected none, bytes, nanoseconds, microseconds, milliseconds or seconds)"
            ))
        })?;
        let numbers = match kind {
            "sampled" => self.sampled_weights(json)?,
            "evented" => self.event_times(json)?,
            _ => {
                return Err(self.err(format_args!(
                    "unknown type {kind:?} (expected sampled or evented)"
                )));
            }
        };
        let scale = if numbers.iter().all(|n| matches!(n, Number::Int(_))) {
            Scale::AsSent
        } else {
            match nanos_per_unit {
                Some(k) => Scale::ToNanos(k),
                None => return Err(self.err(format_args!("fractional values in unit {unit:?}"))),
            }
        };
        let unit_name = match scale {
            Scale::AsSent => unit_name,
            Scale::ToNanos(_) => "nanoseconds",
        };
        let samples = match kind {
            "sampled" => self.sampled(json, &numbers, scale)?,
            _ => self.evented(json, &numbers, scale)?,
        };

        let mut profile = Profile {
            sample_type: Some(self.builder.value_type(sample_type, unit_name)),
            samples,
            time_unix_nano: source.time_nanos.filter(|&t| t > 0).unwrap_or(0) as u64,
            duration_nano: source.duration_nanos.filter(|&d| d > 0).unwrap_or(0) as u64,
            ..Default::default()
        };
        if profile.duration_nano == 0
            && let Some(k) = nanos_per_unit
        {
            let at = |key: &str| json.get(key).and_then(number);
            if let (Some(start), Some(end)) = (at("startValue"), at("endValue")) {
                let ns = |n| Scale::ToNanos(k).apply(n).unwrap_or(0);
                profile.duration_nano = ns(end).saturating_sub(ns(start)).max(0) as u64;
            }
        }
        if let Some(name) = json.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()) {
            profile
                .attribute_indices
                .push(self.builder.attribute_str("profile.name", name));
        }
        Ok(profile)
    }

    fn array<'v>(&self, json: &'v Value, key: &str) -> Result<&'v Vec<Value>, ConvertError> {
        json.get(key)
            .and_then(Value::as_array)
            .ok_or_else(|| self.err(format_args!("missing the {key} array")))
    }

    fn sampled_weights(&self, json: &Value) -> Result<Vec<Number>, ConvertError> {
        let samples = self.array(json, "samples")?;
        let weights = self.array(json, "weights")?;
        if samples.len() != weights.len() {
            return Err(self.err(format_args!(
                "samples has {} entries but weights has {}",
                samples.len(),
                weights.len()
            )));
        }
        weights
            .iter()
            .enumerate()
            .map(|(i, w)| {
                number(w)
                    .filter(|n| !matches!(n, Number::Int(i) if *i < 0))
                    .filter(|n| !matches!(n, Number::Fraction(f) if *f < 0.0))
                    .ok_or_else(|| self.err(format_args!("weights[{i}] is not a non-negative number")))
            })
            .collect()
    }

    fn sampled(
        &mut self,
        json: &Value,
        weights: &[Number],
        scale: Scale,
    ) -> Result<Vec<Sample>, ConvertError> {
        let samples = self.array(json, "samples")?;
        let mut out = Vec::with_capacity(samples.len());
        let mut stack = Vec::new();
        for (i, (sample, &weight)) in samples.iter().zip(weights).enumerate() {
            let p = self.profile;
            let at = |m: String| invalid(format_args!("profile {p} sample {i}: {m}"));
            let frames = sample
                .as_array()
                .ok_or_else(|| at("not an array of frame indices".into()))?;
            stack.clear();
            // speedscope stacks are root first; OTLP stacks leaf first.
            for f in frames.iter().rev() {
                let loc = self.location(f).map_err(at)?;
                stack.push(loc);
            }
            let value = scale
                .apply(weight)
                .ok_or_else(|| at("weight does not fit a 64-bit integer".into()))?;
            out.push(Sample {
                stack_index: self.stack(&stack),
                values: vec![value],
                ..Default::default()
            });
        }
        Ok(out)
    }

    /// Every event's `at`, checked to be a number and never to go back in time.
    fn event_times(&self, json: &Value) -> Result<Vec<Number>, ConvertError> {
        let events = self.array(json, "events")?;
        let mut last = f64::NEG_INFINITY;
        events
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let n = e
                    .get("at")
                    .and_then(number)
                    .ok_or_else(|| self.err(format_args!("event {i}: at is not a number")))?;
                let f = match n {
                    Number::Int(v) => v as f64,
                    Number::Fraction(f) => f,
                };
                if f < last {
                    return Err(self.err(format_args!(
                        "event {i}: at {f} is before the previous event's {last}"
                    )));
                }
                last = f;
                Ok(n)
            })
            .collect()
    }

    fn evented(&mut self, json: &Value, times: &[Number], scale: Scale) -> Result<Vec<Sample>, ConvertError> {
        let events = self.array(json, "events")?;
        // The call tree: stacks share their prefixes, so deep recursion costs one node per
        // event rather than a copy of the whole stack per event. Node 0 is the root.
        let mut nodes = vec![Node::default()];
        let mut children: HashMap<(usize, i32), usize> = HashMap::new();
        // Open frames root first, as (frame index, node).
        let mut open: Vec<(u64, usize)> = Vec::new();
        let mut previous: Option<i64> = None;
        for (i, (event, &time)) in events.iter().zip(times).enumerate() {
            let p = self.profile;
            let at = |m: String| invalid(format_args!("profile {p} event {i}: {m}"));
            let time = scale
                .apply(time)
                .ok_or_else(|| at("at does not fit a 64-bit integer".into()))?;
            if let (Some(prev), Some(&(_, node))) = (previous, open.last())
                && time > prev
            {
                nodes[node].self_time = time
                    .checked_sub(prev)
                    .and_then(|d| nodes[node].self_time.checked_add(d))
                    .ok_or_else(|| at("self time overflows a 64-bit integer".into()))?;
            }
            previous = Some(time);

            let frame = event.get("frame").ok_or_else(|| at("no frame".into()))?;
            let location = self.location(frame).map_err(at)?;
            let index = frame.as_u64().unwrap_or_default();
            match event.get("type").and_then(Value::as_str) {
                Some("O") => {
                    let parent = open.last().map_or(0, |&(_, n)| n);
                    let node = *children.entry((parent, location)).or_insert_with(|| {
                        nodes.push(Node {
                            parent,
                            location,
                            depth: nodes[parent].depth + 1,
                            self_time: 0,
                        });
                        nodes.len() - 1
                    });
                    open.push((index, node));
                }
                Some("C") => match open.last() {
                    Some(&(top, _)) if top == index => {
                        open.pop();
                    }
                    Some(&(top, _)) => {
                        return Err(at(format!(
                            "closes frame {index} while frame {top} is the innermost open frame (unbalanced events)"
                        )));
                    }
                    None => {
                        return Err(at(format!(
                            "closes frame {index} but no frame is open (unbalanced events)"
                        )));
                    }
                },
                Some(other) => return Err(at(format!("type {other:?} is neither \"O\" nor \"C\""))),
                None => return Err(at("no type (expected \"O\" or \"C\")".into())),
            }
        }
        if !open.is_empty() {
            return Err(self.err(format_args!(
                "{} frames still open after the last event (unbalanced events)",
                open.len()
            )));
        }
        // Every stored stack lists all its frames: bound their total by the input size.
        let frames: usize = nodes.iter().filter(|n| n.self_time > 0).map(|n| n.depth).sum();
        if frames > *self.frame_budget {
            return Err(self.err(format_args!(
                "evented stacks hold {frames} frames in total, too many for an input of this size"
            )));
        }
        *self.frame_budget -= frames;
        let mut stack = Vec::new();
        let mut out = Vec::new();
        for n in nodes.iter().filter(|n| n.self_time > 0) {
            stack.clear();
            let mut cur = n;
            while cur.depth > 0 {
                stack.push(cur.location);
                cur = &nodes[cur.parent];
            }
            out.push(Sample {
                stack_index: self.stack(&stack),
                values: vec![n.self_time],
                ..Default::default()
            });
        }
        Ok(out)
    }

    fn location(&mut self, index: &Value) -> Result<i32, String> {
        let i = index
            .as_u64()
            .and_then(|i| usize::try_from(i).ok())
            .filter(|&i| i < self.frames.len())
            .ok_or_else(|| {
                format!(
                    "frame index {index} out of range (shared.frames has {} entries)",
                    self.frames.len()
                )
            })?;
        if let Some(loc) = self.locations[i] {
            return Ok(loc);
        }
        let f = &self.frames[i];
        let function = self.builder.function(f.name, "", f.file, 0);
        let loc = self.builder.location(
            0,
            0,
            &[FrameLine {
                function,
                line: f.line,
                column: f.column,
            }],
        );
        self.locations[i] = Some(loc);
        Ok(loc)
    }

    fn stack(&mut self, leaf_first: &[i32]) -> i32 {
        if leaf_first.is_empty() {
            0
        } else {
            self.builder.stack(leaf_first)
        }
    }
}

#[cfg(test)]
mod tests;
