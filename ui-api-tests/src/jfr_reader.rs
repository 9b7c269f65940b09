//! Independent JFR reader for expected values: the JDK's own `jfr print --json` (Java 17+
//! on PATH, or `$JAVA_HOME/bin/jfr`), parsed with serde_json. Shares no code with
//! `stackhouse-ingest`; the mapping below is written down again from the documented rules:
//!
//! | event | profile type ids | value per event |
//! |---|---|---|
//! | `jdk.ExecutionSample` | `samples:count:cpu:nanoseconds` (`...:wall:nanoseconds` when async-profiler's `event` setting is `wall`) | 1 |
//! | `jdk.NativeMethodSample` | `samples:count:wall:nanoseconds` | 1 |
//! | `profiler.WallClockSample` | `samples:count:wall:nanoseconds` | `samples` |
//! | `jdk.ObjectAllocationInNewTLAB` | `alloc_in_new_tlab_objects:count:space:bytes`, `alloc_in_new_tlab_bytes:bytes:space:bytes` | 1, `tlabSize` |
//! | `jdk.ObjectAllocationOutsideTLAB` | `alloc_outside_tlab_objects:count:space:bytes`, `alloc_outside_tlab_bytes:bytes:space:bytes` | 1, `allocationSize` |
//! | `jdk.ObjectAllocationSample` | `alloc_sample_objects:count:space:bytes`, `alloc_sample_bytes:bytes:space:bytes` | 1, `weight` |
//! | `jdk.JavaMonitorEnter`, `jdk.ThreadPark` | `lock_count:count:lock:nanoseconds`, `lock_time:nanoseconds:lock:nanoseconds` | 1, `duration` in ns |
//! | `profiler.LiveObject` | `live_objects:count:space:bytes`, `live_bytes:bytes:space:bytes` | 1, `allocationSize` |
//! | `profiler.Malloc` | `malloc_objects:count:space:bytes`, `malloc_bytes:bytes:space:bytes` | 1, `size` |
//!
//! Stack paths are root first. Frames are named as Pyroscope names them
//! (`../shared/reference/pyroscope-jfr-names.md`, [`Names::Pyroscope`], the default) or in
//! the JDK's dotted style ([`Names::Jdk`]). An event without a stack has the empty path.
//! The thread is `sampledThread` or `eventThread`: its `javaName`, else `osName`, else "".
//!
//! ```no_run
//! let totals = ui_api_tests::jfr_reader::read(std::path::Path::new("kafka-cpu.jfr.gz"));
//! let cpu = &totals.by_type["samples:count:cpu:nanoseconds"];
//! let total: i64 = cpu.values().sum();
//! ```

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// Expected values of one recording (a `.jfr` or `.jfr.gz` file).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JfrTotals {
    /// Profile type id → stack path (frame names, root first) → summed value.
    pub by_type: BTreeMap<String, BTreeMap<Vec<String>, i64>>,
    /// Profile type id → thread name ("" when the event has none) → summed value.
    pub by_thread: BTreeMap<String, BTreeMap<String, i64>>,
    /// Profile type id → the timestamp (unix ns) of every value, sorted.
    pub timestamps: BTreeMap<String, Vec<i64>>,
    /// Profile type id → number of events that fed it.
    pub events: BTreeMap<String, usize>,
}

impl JfrTotals {
    /// Total of one profile type (0 when the recording has none).
    pub fn total(&self, type_id: &str) -> i64 {
        self.by_type.get(type_id).map_or(0, |paths| paths.values().sum())
    }
}

pub const CPU: &str = "samples:count:cpu:nanoseconds";
pub const WALL: &str = "samples:count:wall:nanoseconds";

/// What an event is worth in each of the profile types it feeds.
enum Worth {
    One,
    Field(&'static str),
    DurationNanos,
}

fn mapping(event: &str, wall_mode: bool) -> Vec<(&'static str, Worth)> {
    use Worth::*;
    match event {
        "jdk.ExecutionSample" => vec![(if wall_mode { WALL } else { CPU }, One)],
        "jdk.NativeMethodSample" => vec![(WALL, One)],
        "profiler.WallClockSample" => vec![(WALL, Field("samples"))],
        "jdk.ObjectAllocationInNewTLAB" => vec![
            ("alloc_in_new_tlab_objects:count:space:bytes", One),
            ("alloc_in_new_tlab_bytes:bytes:space:bytes", Field("tlabSize")),
        ],
        "jdk.ObjectAllocationOutsideTLAB" => vec![
            ("alloc_outside_tlab_objects:count:space:bytes", One),
            (
                "alloc_outside_tlab_bytes:bytes:space:bytes",
                Field("allocationSize"),
            ),
        ],
        "jdk.ObjectAllocationSample" => vec![
            ("alloc_sample_objects:count:space:bytes", One),
            ("alloc_sample_bytes:bytes:space:bytes", Field("weight")),
        ],
        "jdk.JavaMonitorEnter" | "jdk.ThreadPark" => vec![
            ("lock_count:count:lock:nanoseconds", One),
            ("lock_time:nanoseconds:lock:nanoseconds", DurationNanos),
        ],
        "profiler.LiveObject" => vec![
            ("live_objects:count:space:bytes", One),
            ("live_bytes:bytes:space:bytes", Field("allocationSize")),
        ],
        "profiler.Malloc" => vec![
            ("malloc_objects:count:space:bytes", One),
            ("malloc_bytes:bytes:space:bytes", Field("size")),
        ],
        _ => Vec::new(),
    }
}

/// The profile types an event of type `kind` feeds (not in async-profiler's wall mode)
/// and its value in each: `int` reads an integer field, `duration_nanos` is its duration.
pub fn event_values(kind: &str, int: impl Fn(&str) -> i64, duration_nanos: i64) -> Vec<(&'static str, i64)> {
    mapping(kind, false)
        .into_iter()
        .map(|(type_id, worth)| {
            let v = match worth {
                Worth::One => 1,
                Worth::Field(f) => int(f),
                Worth::DurationNanos => duration_nanos,
            };
            (type_id, v)
        })
        .collect()
}

const EVENTS: &str = "jdk.ExecutionSample,jdk.NativeMethodSample,profiler.WallClockSample,\
jdk.ObjectAllocationInNewTLAB,jdk.ObjectAllocationOutsideTLAB,jdk.ObjectAllocationSample,\
jdk.JavaMonitorEnter,jdk.ThreadPark,profiler.LiveObject,profiler.Malloc,jdk.ActiveSetting";

/// How frames are named.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Names {
    /// `<class-name symbol>.<method-name symbol>`, JVM-internal slashes kept, both symbols
    /// renamed by [`pyroscope_symbol`]; a frame whose method or class is null is left out.
    #[default]
    Pyroscope,
    /// `<class name with '/' replaced by '.'>.<method name>`, the method name alone when
    /// the class is null or has an empty name, `[unknown]` for a null method.
    Jdk,
}

/// Reads a recording (gzipped or not) through `jfr print --json`, frames named as
/// Pyroscope names them.
pub fn read(path: &Path) -> JfrTotals {
    read_named(path, Names::Pyroscope)
}

/// Like [`read`], with the given frame names.
pub fn read_named(path: &Path, names: Names) -> JfrTotals {
    let raw = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    read_bytes_named(&raw, names)
}

/// Like [`read`], for a recording in memory (gzipped or not).
pub fn read_bytes(raw: &[u8]) -> JfrTotals {
    read_bytes_named(raw, Names::Pyroscope)
}

/// Like [`read_named`], for a recording in memory (gzipped or not).
pub fn read_bytes_named(raw: &[u8], names: Names) -> JfrTotals {
    let data = gunzip_if_needed(raw);
    let mut file = tempfile::Builder::new()
        .suffix(".jfr")
        .tempfile()
        .expect("temp file");
    file.write_all(&data).expect("write temp recording");
    file.flush().expect("flush temp recording");
    let json = print_json(file.path());
    totals(&json, names)
}

fn gunzip_if_needed(raw: &[u8]) -> Vec<u8> {
    if !raw.starts_with(&[0x1f, 0x8b]) {
        return raw.to_vec();
    }
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(raw)
        .read_to_end(&mut out)
        .expect("gunzip recording");
    out
}

/// The JDK's `jfr` tool: `$JAVA_HOME/bin/jfr`, else `jfr` on PATH.
pub fn jfr_tool() -> PathBuf {
    let candidates = std::env::var_os("JAVA_HOME")
        .map(|home| PathBuf::from(home).join("bin/jfr"))
        .into_iter()
        .chain(["/usr/bin/jfr".into(), "jfr".into()]);
    for candidate in candidates {
        if Command::new(&candidate)
            .arg("help")
            .output()
            .is_ok_and(|o| o.status.success())
        {
            return candidate;
        }
    }
    panic!(
        "the JDK's `jfr` tool is missing (install a JDK 17+, e.g. `apt-get install openjdk-17-jdk-headless`, \
         or set JAVA_HOME): it computes the expected values of the JFR tests"
    );
}

fn print_json(path: &Path) -> Value {
    let out = Command::new(jfr_tool())
        .args(["print", "--json", "--stack-depth", "1000000", "--events", EVENTS])
        .arg(path)
        .output()
        .expect("run jfr print");
    assert!(
        out.status.success(),
        "jfr print failed on {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("jfr print --json output is JSON")
}

fn totals(json: &Value, names: Names) -> JfrTotals {
    let events = json["recording"]["events"].as_array().expect("recording.events");
    let wall_mode = events.iter().any(|e| {
        e["type"] == "jdk.ActiveSetting" && e["values"]["name"] == "event" && e["values"]["value"] == "wall"
    });
    let mut t = JfrTotals::default();
    for event in events {
        let kind = event["type"].as_str().expect("event type");
        let outputs = mapping(kind, wall_mode);
        if outputs.is_empty() {
            continue;
        }
        let values = &event["values"];
        let path = stack_path(&values["stackTrace"], names);
        let thread = thread_name(if values["sampledThread"].is_null() {
            &values["eventThread"]
        } else {
            &values["sampledThread"]
        });
        let time = parse_instant(values["startTime"].as_str().expect("startTime"));
        for (type_id, worth) in outputs {
            let v = match worth {
                Worth::One => 1,
                Worth::Field(f) => values[f]
                    .as_i64()
                    .unwrap_or_else(|| panic!("{kind}.{f} is not an integer: {}", values[f])),
                Worth::DurationNanos => parse_duration(values["duration"].as_str().expect("duration")),
            };
            *t.by_type
                .entry(type_id.to_string())
                .or_default()
                .entry(path.clone())
                .or_default() += v;
            *t.by_thread
                .entry(type_id.to_string())
                .or_default()
                .entry(thread.clone())
                .or_default() += v;
            t.timestamps.entry(type_id.to_string()).or_default().push(time);
            *t.events.entry(type_id.to_string()).or_default() += 1;
        }
    }
    for ts in t.timestamps.values_mut() {
        ts.sort_unstable();
    }
    t
}

/// The root-first path of a `stackTrace` value as `jfr print --json` writes it (or as
/// [`crate::jfr_raw`] decodes it: the same shape).
pub fn stack_path(stack: &Value, names: Names) -> Vec<String> {
    let Some(frames) = stack["frames"].as_array() else {
        return Vec::new();
    };
    frames
        .iter()
        .rev()
        .filter_map(|f| frame_name(&f["method"], names))
        .collect()
}

fn frame_name(method: &Value, names: Names) -> Option<String> {
    let name = method["name"].as_str().unwrap_or("");
    match names {
        Names::Jdk if method.is_null() => Some("[unknown]".to_string()),
        Names::Jdk => Some(match method["type"]["name"].as_str() {
            Some(class) if !class.is_empty() => format!("{}.{name}", class.replace('/', ".")),
            _ => name.to_string(),
        }),
        // jfr-parser drops frames whose method or class it cannot find; a null symbol is "".
        Names::Pyroscope if method.is_null() || method["type"].is_null() => None,
        Names::Pyroscope => {
            let class = method["type"]["name"].as_str().unwrap_or("");
            Some(format!("{}.{}", pyroscope_symbol(class), pyroscope_symbol(name)))
        }
    }
}

/// jfr-parser v0.18.0's symbol renaming (`parser/symbols.go`), its six anchored rules in
/// order, each on the previous one's output.
pub fn pyroscope_symbol(symbol: &str) -> String {
    use std::sync::LazyLock;
    static RULES: LazyLock<Vec<(regex::Regex, &str)>> = LazyLock::new(|| {
        [
            (r"^(jdk/internal/reflect/GeneratedMethodAccessor)([0-9]+)$", "${1}_"),
            (r"^(.+\$\$Lambda)(\$?[0-9]*[./](0x)?[0-9a-f]+|[0-9]+)$", "${1}_"),
            (
                r"^(\.?/tmp/)?(libzstd-jni-[0-9]+\.[0-9]+\.[0-9]+-)([0-9]+)(\.so)( \(deleted\))?$",
                "libzstd-jni-_.so",
            ),
            (
                r"^(\.?/tmp/)?(lib)?(amazonCorrettoCryptoProvider)(NativeLibraries\.)?([0-9a-f]{16})(/libcrypto|/libamazonCorrettoCryptoProvider)?(\.so)( \(deleted\))?$",
                "libamazonCorrettoCryptoProvider_.so",
            ),
            (
                r"^(\.?/tmp/)?(libasyncProfiler)-(linux-arm64|linux-musl-x64|linux-x64|macos)-(17b9a1d8156277a98ccc871afa9a8f69215f92)(\.so)( \(deleted\))?$",
                "libasyncProfiler-_.so",
            ),
            (r"^(.+\$\$EnhancerBySpringCGLIB\$\$)(.*)$", "${1}_"),
        ]
        .into_iter()
        .map(|(p, r)| (regex::Regex::new(p).expect("rule"), r))
        .collect()
    });
    let mut s = symbol.to_string();
    for (rule, replacement) in RULES.iter() {
        s = rule.replace(&s, *replacement).into_owned();
    }
    s
}

/// The thread name of a `java.lang.Thread` value: `javaName`, else `osName`, else "".
pub fn thread_name(thread: &Value) -> String {
    let non_empty = |k: &str| thread[k].as_str().filter(|s| !s.is_empty());
    non_empty("javaName")
        .or_else(|| non_empty("osName"))
        .unwrap_or("")
        .to_string()
}

/// `2023-08-03T04:34:34.761531348Z` → unix nanoseconds (UTC only, as `jfr print` writes).
pub fn parse_instant(s: &str) -> i64 {
    fn bad(s: &str) -> ! {
        panic!("unexpected instant {s:?}")
    }
    let num = |p: &str| p.parse::<i64>().unwrap_or_else(|_| bad(s));
    let body = s.strip_suffix('Z').unwrap_or_else(|| bad(s));
    let (date, time) = body.split_once('T').unwrap_or_else(|| bad(s));
    let d: Vec<i64> = date.split('-').map(num).collect();
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    let h: Vec<i64> = hms.split(':').map(num).collect();
    if d.len() != 3 || h.len() < 2 {
        bad(s);
    }
    let nanos = if frac.is_empty() {
        0
    } else {
        num(&format!("{frac:0<9}")[..9])
    };
    let days = days_from_civil(d[0], d[1], d[2]);
    let seconds = days * 86_400 + h[0] * 3600 + h[1] * 60 + h.get(2).copied().unwrap_or(0);
    seconds * 1_000_000_000 + nanos
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// ISO-8601 durations as `java.time.Duration` prints them (`PT0.025106742S`, `PT1M2S`,
/// `PT-0.5S`) → nanoseconds.
pub fn parse_duration(s: &str) -> i64 {
    fn bad(s: &str) -> ! {
        panic!("unexpected duration {s:?}")
    }
    let mut rest = s.strip_prefix("PT").unwrap_or_else(|| bad(s));
    let mut total = 0i64;
    while !rest.is_empty() {
        let end = rest
            .find(|c: char| c.is_ascii_alphabetic())
            .unwrap_or_else(|| bad(s));
        let (number, unit) = (&rest[..end], &rest[end..end + 1]);
        rest = &rest[end + 1..];
        let negative = number.starts_with('-');
        let number = number.trim_start_matches('-');
        let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
        let whole: i64 = whole.parse().unwrap_or_else(|_| bad(s));
        let frac: i64 = if frac.is_empty() {
            0
        } else {
            format!("{frac:0<9}")[..9].parse().unwrap_or_else(|_| bad(s))
        };
        let nanos = match unit {
            "H" => whole * 3_600_000_000_000,
            "M" => whole * 60_000_000_000,
            "S" => whole * 1_000_000_000 + frac,
            _ => bad(s),
        };
        total += if negative { -nanos } else { nanos };
    }
    total
}

/// A small Java program (threads contending for a monitor, parking, allocating small and
/// huge arrays, spinning) recorded by the JDK itself with every event the mapping uses
/// enabled, in several chunks; returns the `.jfr` path inside `dir`. Panics when `java`
/// is missing.
pub fn record_jdk_workload(dir: &Path) -> PathBuf {
    let source = dir.join("Workload.java");
    std::fs::write(&source, WORKLOAD_JAVA).expect("write Workload.java");
    let settings = dir.join("stackhouse.jfc");
    std::fs::write(&settings, WORKLOAD_JFC).expect("write stackhouse.jfc");
    let recording = dir.join("workload.jfr");
    let java = std::env::var_os("JAVA_HOME")
        .map(|home| PathBuf::from(home).join("bin/java"))
        .filter(|p| p.exists())
        .unwrap_or_else(|| "java".into());
    let out = Command::new(&java)
        .arg(format!(
            "-XX:StartFlightRecording:filename={},settings={}",
            recording.display(),
            settings.display()
        ))
        .arg(&source)
        .output()
        .unwrap_or_else(|e| panic!("`java` (JDK 17+) is needed to record a JDK workload: {e}"));
    assert!(
        out.status.success() && recording.exists(),
        "java workload failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    recording
}

const WORKLOAD_JAVA: &str = r#"
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.LockSupport;

public class Workload {
    static final Object LOCK = new Object();
    static volatile long sink;

    static void spin(long millis) {
        long end = System.nanoTime() + millis * 1_000_000L;
        long x = 0;
        while (System.nanoTime() < end) { x += x * 31 + 7; }
        sink = x;
    }

    public static void main(String[] args) throws Exception {
        Thread[] threads = new Thread[4];
        for (int i = 0; i < threads.length; i++) {
            threads[i] = new Thread(() -> {
                long until = System.currentTimeMillis() + 2000;
                List<byte[]> keep = new ArrayList<>();
                while (System.currentTimeMillis() < until) {
                    synchronized (LOCK) { spin(10); }
                    for (int k = 0; k < 200; k++) {
                        keep.add(new byte[1024 * (1 + k % 64)]);
                        if (keep.size() > 500) keep.clear();
                    }
                    keep.add(new byte[4 * 1024 * 1024]);
                    LockSupport.parkNanos(20_000_000L);
                    spin(5);
                }
            }, "worker-" + i);
            threads[i].start();
        }
        // Starting and stopping another recording rotates the chunk, so the file holds
        // several chunks of one JVM (constant ids shared across them).
        Thread.sleep(600);
        try (jdk.jfr.Recording other = new jdk.jfr.Recording()) {
            other.start();
            Thread.sleep(600);
            other.stop();
        }
        for (Thread t : threads) t.join();
    }
}
"#;

const WORKLOAD_JFC: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<configuration version="2.0" label="stackhouse test">
  <event name="jdk.ActiveSetting"><setting name="enabled">true</setting></event>
  <event name="jdk.ExecutionSample"><setting name="enabled">true</setting><setting name="period">2 ms</setting></event>
  <event name="jdk.NativeMethodSample"><setting name="enabled">true</setting><setting name="period">5 ms</setting></event>
  <event name="jdk.ObjectAllocationInNewTLAB"><setting name="enabled">true</setting><setting name="stackTrace">true</setting></event>
  <event name="jdk.ObjectAllocationOutsideTLAB"><setting name="enabled">true</setting><setting name="stackTrace">true</setting></event>
  <event name="jdk.ObjectAllocationSample"><setting name="enabled">true</setting><setting name="stackTrace">true</setting><setting name="throttle">1000/s</setting></event>
  <event name="jdk.JavaMonitorEnter"><setting name="enabled">true</setting><setting name="stackTrace">true</setting><setting name="threshold">0 ms</setting></event>
  <event name="jdk.ThreadPark"><setting name="enabled">true</setting><setting name="stackTrace">true</setting><setting name="threshold">0 ms</setting></event>
</configuration>
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_and_durations() {
        assert_eq!(parse_instant("1970-01-01T00:00:01.5Z"), 1_500_000_000);
        assert_eq!(
            parse_instant("2023-08-03T04:34:34.761531348Z"),
            1_691_037_274_761_531_348
        );
        assert_eq!(parse_duration("PT0.025106742S"), 25_106_742);
        assert_eq!(parse_duration("PT1M2S"), 62_000_000_000);
        assert_eq!(parse_duration("PT0S"), 0);
    }
}
