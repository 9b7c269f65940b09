//! Events to OTLP profiles: which events count, what they are worth, and how their stacks,
//! threads and labels become dictionary entries. The mapping is documented in [`super`].

use std::collections::HashMap;

use stackhouse_proto::otlp_profiles::{Profile, Sample};

use super::chunk::{Chunk, Event, Header};
use super::cursor::invalid;
use super::labels::LabelsSnapshot;
use super::names::{FrameNames, frame_name};
use super::value::Value;
use crate::convert::{ConvertError, Converted, RequestBuilder, Source};

/// (sample type, sample unit, period type, period unit) of every profile JFR can produce.
pub const PROFILE_TYPES: [(&str, &str, &str, &str); 14] = [
    ("samples", "count", "cpu", "nanoseconds"),
    ("samples", "count", "wall", "nanoseconds"),
    ("alloc_in_new_tlab_objects", "count", "space", "bytes"),
    ("alloc_in_new_tlab_bytes", "bytes", "space", "bytes"),
    ("alloc_outside_tlab_objects", "count", "space", "bytes"),
    ("alloc_outside_tlab_bytes", "bytes", "space", "bytes"),
    ("alloc_sample_objects", "count", "space", "bytes"),
    ("alloc_sample_bytes", "bytes", "space", "bytes"),
    ("lock_count", "count", "lock", "nanoseconds"),
    ("lock_time", "nanoseconds", "lock", "nanoseconds"),
    ("live_objects", "count", "space", "bytes"),
    ("live_bytes", "bytes", "space", "bytes"),
    ("malloc_objects", "count", "space", "bytes"),
    ("malloc_bytes", "bytes", "space", "bytes"),
];

const CPU: usize = 0;
const WALL: usize = 1;

/// What one event adds to a profile.
#[derive(Clone, Copy)]
enum Worth {
    One,
    /// An integer field, e.g. `tlabSize`.
    Field(&'static str),
    /// The event's `duration`, in nanoseconds.
    Duration,
}

/// The profiles (indexes into [`PROFILE_TYPES`]) an event type contributes to.
fn outputs(event: &str) -> &'static [(usize, Worth)] {
    match event {
        "jdk.ExecutionSample" => &[(CPU, Worth::One)],
        "jdk.NativeMethodSample" => &[(WALL, Worth::One)],
        "profiler.WallClockSample" => &[(WALL, Worth::Field("samples"))],
        "jdk.ObjectAllocationInNewTLAB" => &[(2, Worth::One), (3, Worth::Field("tlabSize"))],
        "jdk.ObjectAllocationOutsideTLAB" => &[(4, Worth::One), (5, Worth::Field("allocationSize"))],
        "jdk.ObjectAllocationSample" => &[(6, Worth::One), (7, Worth::Field("weight"))],
        "jdk.JavaMonitorEnter" | "jdk.ThreadPark" => &[(8, Worth::One), (9, Worth::Duration)],
        "profiler.LiveObject" => &[(10, Worth::One), (11, Worth::Field("allocationSize"))],
        "profiler.Malloc" => &[(12, Worth::One), (13, Worth::Field("size"))],
        _ => &[],
    }
}

const ACTIVE_SETTING: &str = "jdk.ActiveSetting";

#[derive(Default)]
struct Accumulator {
    samples: Vec<Sample>,
    /// (stack, attributes) → index in `samples`: events that share both share a sample.
    index: HashMap<(i32, Vec<i32>), usize>,
    values: usize,
}

impl Accumulator {
    fn add(&mut self, stack: i32, attributes: &[i32], value: i64, time: u64) {
        let samples = &mut self.samples;
        let i = *self.index.entry((stack, attributes.to_vec())).or_insert_with(|| {
            samples.push(Sample {
                stack_index: stack,
                attribute_indices: attributes.to_vec(),
                ..Default::default()
            });
            samples.len() - 1
        });
        self.samples[i].values.push(value);
        self.samples[i].timestamps_unix_nano.push(time);
        self.values += 1;
    }
}

pub(crate) struct Converter<'a, 'b> {
    builder: &'b mut RequestBuilder,
    names: FrameNames,
    labels: Option<LabelsSnapshot>,
    profiles: Vec<Accumulator>,
    /// (event type name, setting name) → value, from `jdk.ActiveSetting` events.
    settings: HashMap<(String, String), String>,
    /// Earliest chunk start and latest chunk end, unix nanoseconds.
    span: Option<(i64, i64)>,
    /// The chunks read so far, oldest first, with their caches. The JDK's stack-trace ids
    /// are global and monotonic, and it can write an event into the chunk after the one
    /// holding its stack trace (or thread): such a key resolves in the latest earlier chunk
    /// that defines it. Bounded by the recording's own constant pools.
    earlier: Vec<(Chunk<'a>, ChunkCache)>,
}

/// Per-chunk caches: constant-pool keys are only meaningful inside their chunk.
#[derive(Default)]
struct ChunkCache {
    stacks: HashMap<i64, i32>,
    /// `None`: the style drops the frame.
    methods: HashMap<i64, Option<String>>,
    threads: HashMap<i64, Vec<i32>>,
    contexts: HashMap<i64, Vec<i32>>,
}

impl<'a, 'b> Converter<'a, 'b> {
    pub(super) fn new(
        builder: &'b mut RequestBuilder,
        labels: Option<LabelsSnapshot>,
        names: FrameNames,
    ) -> Converter<'a, 'b> {
        Converter {
            builder,
            names,
            labels,
            profiles: (0..PROFILE_TYPES.len()).map(|_| Accumulator::default()).collect(),
            settings: HashMap::new(),
            span: None,
            earlier: Vec::new(),
        }
    }

    pub(super) fn chunk(&mut self, chunk: Chunk<'a>) -> Result<(), ConvertError> {
        let h = chunk.header;
        let end = h.start_nanos.saturating_add(h.duration_nanos.max(0));
        self.span = Some(match self.span {
            None => (h.start_nanos, end),
            Some((s, e)) => (s.min(h.start_nanos), e.max(end)),
        });
        let names: HashMap<i64, &str> = chunk
            .meta
            .classes
            .iter()
            .filter(|(_, c)| c.name == ACTIVE_SETTING || !outputs(&c.name).is_empty())
            .map(|(&id, c)| (id, c.name.as_str()))
            .collect();
        let mut cache = ChunkCache::default();
        chunk.events(|event| {
            let Some(&name) = names.get(&event.type_id) else {
                return Ok(());
            };
            let Some(value) = chunk.decode(&event)? else {
                return Ok(());
            };
            if name == ACTIVE_SETTING {
                self.setting(&chunk, &value)
            } else {
                self.event(&chunk, &mut cache, &event, name, &value)
            }
        })?;
        self.earlier.push((chunk, cache));
        Ok(())
    }

    fn setting(&mut self, chunk: &Chunk<'_>, v: &Value) -> Result<(), ConvertError> {
        let meta = &chunk.meta;
        let event = v.field(meta, "id").and_then(Value::as_int);
        let event = event
            .and_then(|id| meta.classes.get(&id))
            .map_or("", |c| c.name.as_str());
        let text = |field: &str| -> Result<String, ConvertError> {
            let v = v.field(meta, field).unwrap_or(&Value::Null);
            Ok(chunk.text(v)?.unwrap_or_default())
        };
        let (name, value) = (text("name")?, text("value")?);
        self.settings.insert((event.to_string(), name), value);
        Ok(())
    }

    fn event(
        &mut self,
        chunk: &Chunk<'a>,
        cache: &mut ChunkCache,
        event: &Event<'_>,
        name: &str,
        v: &Value,
    ) -> Result<(), ConvertError> {
        let meta = &chunk.meta;
        let class = &meta.classes[&event.type_id];
        let time = match (class.field_index("startTime"), v.field(meta, "startTime")) {
            (Some(i), Some(t)) => {
                let t = t.as_int().unwrap_or(0);
                timestamp(&chunk.header, class.fields[i].time_unit.as_deref(), t)
            }
            _ => chunk.header.start_nanos,
        };
        let time = u64::try_from(time)
            .map_err(|_| invalid(event.offset, format!("event time {time} ns is before 1970")))?;
        let stack = match v.field(meta, "stackTrace") {
            Some(s) => self.stack(chunk, cache, s)?,
            None => 0,
        };
        let mut attributes = match v
            .field(meta, "sampledThread")
            .or_else(|| v.field(meta, "eventThread"))
        {
            Some(t) => self.thread(chunk, cache, t)?,
            None => Vec::new(),
        };
        let context = v.field(meta, "contextId").and_then(Value::as_int).unwrap_or(0);
        if context != 0 {
            attributes.extend(self.context(cache, context));
        }
        if let Some(span) = v
            .field(meta, "spanId")
            .and_then(Value::as_int)
            .filter(|&s| s != 0)
        {
            attributes.push(
                self.builder
                    .attribute_str("span_id", &format!("{:016x}", span as u64)),
            );
        }
        let span_name = v
            .field(meta, "spanName")
            .and_then(Value::as_int)
            .filter(|&s| s != 0);
        if let Some(span_name) = span_name.and_then(|s| self.labels.as_ref()?.string(s)) {
            let span_name = span_name.to_string();
            attributes.push(self.builder.attribute_str("span_name", &span_name));
        }
        for &(profile, worth) in outputs(name) {
            let value = match worth {
                Worth::One => 1,
                Worth::Field(f) => v.field(meta, f).and_then(Value::as_int).unwrap_or(0),
                Worth::Duration => {
                    let i = class.field_index("duration");
                    let d = v.field(meta, "duration").and_then(Value::as_int).unwrap_or(0);
                    let unit = i.and_then(|i| class.fields[i].time_unit.as_deref());
                    timespan(&chunk.header, unit, d)
                }
            };
            self.profiles[profile].add(stack, &attributes, value, time);
        }
        Ok(())
    }

    /// The stack index of an event's `stackTrace` field.
    fn stack(&mut self, chunk: &Chunk<'a>, cache: &mut ChunkCache, v: &Value) -> Result<i32, ConvertError> {
        let names = self.names;
        self.in_defining_chunk(chunk, cache, v, |builder, chunk, cache, v| {
            stack_in(builder, names, chunk, cache, v)
        })
    }

    /// The thread attributes of an event's thread field.
    fn thread(
        &mut self,
        chunk: &Chunk<'a>,
        cache: &mut ChunkCache,
        v: &Value,
    ) -> Result<Vec<i32>, ConvertError> {
        self.in_defining_chunk(chunk, cache, v, thread_in)
    }

    /// Calls `f` with the chunk whose pools define the reference `v` of an event in
    /// `chunk`: `chunk` itself, else the latest earlier chunk that defines the key, else
    /// `chunk` (where it resolves to null).
    fn in_defining_chunk<T>(
        &mut self,
        chunk: &Chunk<'a>,
        cache: &mut ChunkCache,
        v: &Value,
        f: impl FnOnce(&mut RequestBuilder, &Chunk<'a>, &mut ChunkCache, &Value) -> Result<T, ConvertError>,
    ) -> Result<T, ConvertError> {
        if !chunk.defines(v) {
            for (earlier, earlier_cache) in self.earlier.iter_mut().rev() {
                if let Some(v) = earlier.translate(chunk, v) {
                    return f(self.builder, earlier, earlier_cache, &v);
                }
            }
        }
        f(self.builder, chunk, cache, v)
    }

    fn context(&mut self, cache: &mut ChunkCache, id: i64) -> Vec<i32> {
        if let Some(attrs) = cache.contexts.get(&id) {
            return attrs.clone();
        }
        let attrs: Vec<i32> = match &self.labels {
            Some(labels) => labels
                .labels(id)
                .into_iter()
                .map(|(k, v)| self.builder.attribute_str(k, v))
                .collect(),
            None => Vec::new(),
        };
        cache.contexts.insert(id, attrs.clone());
        attrs
    }

    /// Pushes one profile per type that has samples.
    pub(super) fn finish(self, source: &Source) -> Converted {
        let wall_mode = self
            .settings
            .iter()
            .any(|((_, k), v)| k == "event" && v == "wall");
        let mut profiles = self.profiles;
        if wall_mode {
            // async-profiler's wall-clock mode writes its samples as jdk.ExecutionSample.
            let cpu = std::mem::take(&mut profiles[CPU]);
            profiles[WALL].samples.extend(cpu.samples);
            profiles[WALL].values += cpu.values;
        }
        let (time, duration) = match self.span {
            Some((start, end)) if start > 0 => (start, end - start),
            _ => (source.time_nanos.unwrap_or(0), source.duration_nanos.unwrap_or(0)),
        };
        let mut converted = Converted::default();
        for (i, acc) in profiles.into_iter().enumerate() {
            if acc.samples.is_empty() {
                continue;
            }
            let (sample_type, unit, period_type, period_unit) = PROFILE_TYPES[i];
            let profile = Profile {
                sample_type: Some(self.builder.value_type(sample_type, unit)),
                samples: acc.samples,
                time_unix_nano: time.max(0) as u64,
                duration_nano: duration.max(0) as u64,
                period_type: Some(self.builder.value_type(period_type, period_unit)),
                period: period(&self.settings, i, wall_mode, source),
                ..Default::default()
            };
            self.builder
                .push_profile(&source.resource, &source.scope, profile);
            converted.profiles += 1;
            converted.samples += acc.values;
        }
        converted
    }
}

/// The key of a constant-pool reference.
fn key(v: &Value) -> Option<i64> {
    match v {
        Value::Ref { key, .. } => Some(*key),
        _ => None,
    }
}

/// The stack index of a `stackTrace` reference resolved in `chunk`: frames leaf first, as
/// JFR stores them, minus the frames the naming style drops.
fn stack_in(
    builder: &mut RequestBuilder,
    names: FrameNames,
    chunk: &Chunk<'_>,
    cache: &mut ChunkCache,
    v: &Value,
) -> Result<i32, ConvertError> {
    let key = key(v);
    if let Some(&i) = key.and_then(|k| cache.stacks.get(&k)) {
        return Ok(i);
    }
    let trace = chunk.resolve_or_null(v)?;
    let mut locations = Vec::new();
    if let Some(Value::Array(frames)) = trace.field(&chunk.meta, "frames") {
        locations.reserve(frames.len());
        for frame in frames {
            let frame = chunk.resolve(frame)?;
            let method = frame.field(&chunk.meta, "method").unwrap_or(&Value::Null);
            let Some(name) = method_name(names, chunk, cache, method)? else {
                continue;
            };
            let line = frame.field(&chunk.meta, "lineNumber").and_then(Value::as_int);
            locations.push(builder.named_frame(&name, "", line.unwrap_or(0).max(0)));
        }
    }
    let i = if locations.is_empty() {
        0
    } else {
        builder.stack(&locations)
    };
    if let Some(k) = key {
        cache.stacks.insert(k, i);
    }
    Ok(i)
}

/// A frame's name from its `method` reference (see [`FrameNames`]); `None` when the style
/// drops the frame. Pyroscope drops a frame whose method or class constant is missing and
/// reads a missing symbol as ""; the JDK style requires the constants and names a null
/// method [`UNKNOWN_METHOD`].
fn method_name(
    names: FrameNames,
    chunk: &Chunk<'_>,
    cache: &mut ChunkCache,
    v: &Value,
) -> Result<Option<String>, ConvertError> {
    let key = key(v);
    if let Some(name) = key.and_then(|k| cache.methods.get(&k)) {
        return Ok(name.clone());
    }
    let pyroscope = names == FrameNames::Pyroscope;
    let resolve = |v: &Value| match names {
        FrameNames::Pyroscope => chunk.resolve_or_null(v),
        FrameNames::Jdk => chunk.resolve(v),
    };
    let symbol = |v: Option<&Value>| -> Result<Option<String>, ConvertError> {
        match v {
            Some(v) if !pyroscope || chunk.defines(v) => chunk.text(v),
            _ => Ok(None),
        }
    };
    let method = resolve(v)?;
    let name = if method == Value::Null {
        (!pyroscope).then(|| UNKNOWN_METHOD.to_string())
    } else {
        let meta = &chunk.meta;
        let class = match method.field(meta, "type") {
            Some(c) => resolve(c)?,
            None => Value::Null,
        };
        if class == Value::Null && pyroscope {
            None
        } else {
            let method_name = symbol(method.field(meta, "name"))?;
            let class_name = symbol(class.field(meta, "name"))?;
            Some(frame_name(names, class_name.as_deref(), method_name.as_deref()))
        }
    };
    if let Some(k) = key {
        cache.methods.insert(k, name.clone());
    }
    Ok(name)
}

/// `thread.name` (the Java name, else the OS name) and `thread.id` (the Java thread id,
/// else the OS one) of a thread reference resolved in `chunk`, when known.
fn thread_in(
    builder: &mut RequestBuilder,
    chunk: &Chunk<'_>,
    cache: &mut ChunkCache,
    v: &Value,
) -> Result<Vec<i32>, ConvertError> {
    let key = key(v);
    if let Some(attrs) = key.and_then(|k| cache.threads.get(&k)) {
        return Ok(attrs.clone());
    }
    let thread = chunk.resolve_or_null(v)?;
    let meta = &chunk.meta;
    let text = |field: &str| -> Result<Option<String>, ConvertError> {
        match thread.field(meta, field) {
            Some(v) => Ok(chunk.text(v)?.filter(|s| !s.is_empty())),
            None => Ok(None),
        }
    };
    let name = match text("javaName")? {
        Some(n) => Some(n),
        None => text("osName")?,
    };
    let id = |field: &str| {
        thread
            .field(meta, field)
            .and_then(Value::as_int)
            .filter(|&i| i > 0)
    };
    let id = id("javaThreadId").or_else(|| id("osThreadId"));
    let mut attrs = Vec::new();
    if let Some(name) = name {
        attrs.push(builder.attribute_str("thread.name", &name));
    }
    if let Some(id) = id {
        attrs.push(builder.attribute_int("thread.id", id, ""));
    }
    if let Some(k) = key {
        cache.threads.insert(k, attrs.clone());
    }
    Ok(attrs)
}

/// The name of a frame whose method is missing (JFR's null).
pub const UNKNOWN_METHOD: &str = "[unknown]";

fn timestamp(h: &Header, unit: Option<&str>, t: i64) -> i64 {
    match unit {
        Some("NANOSECONDS_SINCE_EPOCH") => t,
        Some("MILLISECONDS_SINCE_EPOCH") => t.saturating_mul(1_000_000),
        _ => h.ticks_to_unix_nanos(t),
    }
}

fn timespan(h: &Header, unit: Option<&str>, d: i64) -> i64 {
    match unit {
        Some("NANOSECONDS") => d,
        Some("MICROSECONDS") => d.saturating_mul(1_000),
        Some("MILLISECONDS") => d.saturating_mul(1_000_000),
        Some("SECONDS") => d.saturating_mul(1_000_000_000),
        _ => h.ticks_to_nanos(d),
    }
}

/// The period the recording states for a profile type: the JDK's `period` setting ("10 ms")
/// or async-profiler's `interval` (ns), `alloc` (bytes) and `lock` (ns) settings; for
/// sample counts without one, Pyroscope's `sampleRate`; else 0.
fn period(
    settings: &HashMap<(String, String), String>,
    profile: usize,
    wall_mode: bool,
    source: &Source,
) -> i64 {
    let get = |event: &str, name: &str| {
        settings
            .get(&(event.to_string(), name.to_string()))
            .and_then(|v| parse_quantity(v))
            .filter(|&v| v > 0)
    };
    let stated = match profile {
        CPU if !wall_mode => {
            get("jdk.ExecutionSample", "period").or_else(|| get("jdk.ExecutionSample", "interval"))
        }
        WALL => get("jdk.NativeMethodSample", "period")
            .or_else(|| get("profiler.WallClockSample", "interval"))
            .or_else(|| get("jdk.ExecutionSample", "interval").filter(|_| wall_mode)),
        2..=5 | 10 | 11 => get("jdk.ObjectAllocationInNewTLAB", "alloc"),
        8 | 9 => get("jdk.JavaMonitorEnter", "lock"),
        _ => None,
    };
    let counted = matches!(profile, CPU | WALL);
    stated
        .or_else(|| {
            let hz = source.sample_rate.filter(|&hz| hz > 0 && counted)?;
            Some(1_000_000_000 / i64::from(hz))
        })
        .unwrap_or(0)
}

/// "20 ms", "1 s", "10000000" (nanoseconds or bytes) → the number in base units.
fn parse_quantity(s: &str) -> Option<i64> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let n: i64 = s[..split].parse().ok()?;
    let scale = match s[split..].trim() {
        "" | "ns" => 1,
        "us" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" | "min" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        "d" => 86_400_000_000_000,
        _ => return None,
    };
    n.checked_mul(scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities() {
        assert_eq!(parse_quantity("20 ms"), Some(20_000_000));
        assert_eq!(parse_quantity("10000000"), Some(10_000_000));
        assert_eq!(parse_quantity("1 s"), Some(1_000_000_000));
        assert_eq!(parse_quantity("everyChunk"), None);
        assert_eq!(parse_quantity(""), None);
    }
}
