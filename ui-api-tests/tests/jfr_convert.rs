//! JFR conversion checked against the JDK's own reader: `stackhouse_ingest::jfr::convert`
//! turns a recording into an OTLP request, which is walked here (through
//! opentelemetry-proto, not our types) into per-type path and thread totals and event
//! timestamps that must equal what `jfr print --json` says about the same file.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::collections::BTreeMap;
use std::io::Write;

use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use prost::Message;
use stackhouse_ingest::convert::{ConvertError, RequestBuilder, Source};
use stackhouse_ingest::jfr::FrameNames;
use ui_api_tests::jfr_reader::{self, JfrTotals, Names};
use ui_api_tests::{capture, jfr_raw};

const LIMIT: usize = 512 << 20;

fn source() -> Source {
    Source {
        resource: vec![("service.name".into(), "kafka".into())],
        scope: "javaspy".into(),
        ..Default::default()
    }
}

fn convert(data: &[u8]) -> Result<ExportProfilesServiceRequest, ConvertError> {
    convert_named(data, FrameNames::Pyroscope)
}

fn convert_named(data: &[u8], names: FrameNames) -> Result<ExportProfilesServiceRequest, ConvertError> {
    let mut builder = RequestBuilder::new();
    stackhouse_ingest::jfr::convert(data, None, names, &source(), LIMIT, &mut builder)?;
    let bytes = builder.finish().encode_to_vec();
    Ok(ExportProfilesServiceRequest::decode(bytes.as_slice()).expect("our request decodes as OTLP"))
}

/// The request's totals in the reader's shape: type id → root-first path → sum, type id →
/// `thread.name` → sum, type id → sorted timestamps, type id → number of values. The
/// request is read by the harness's one OTLP reader (`capture`).
fn totals(req: &ExportProfilesServiceRequest) -> JfrTotals {
    for rp in &req.resource_profiles {
        let resource = rp.resource.as_ref().expect("resource");
        assert_eq!(resource.attributes.len(), 1);
        assert_eq!(resource.attributes[0].key, "service.name");
        for sp in &rp.scope_profiles {
            assert_eq!(sp.scope.as_ref().map(|s| s.name.as_str()), Some("javaspy"));
            for sample in sp.profiles.iter().flat_map(|p| &p.samples) {
                assert_eq!(sample.values.len(), sample.timestamps_unix_nano.len());
            }
        }
    }
    let mut t = JfrTotals::default();
    for o in capture::from_protobuf(req) {
        let type_id = &o.profile_type;
        *t.by_type
            .entry(type_id.clone())
            .or_default()
            .entry(o.frames.clone())
            .or_default() += o.value;
        let thread = o.attrs.get("thread.name").cloned().unwrap_or_default();
        *t.by_thread
            .entry(type_id.clone())
            .or_default()
            .entry(thread)
            .or_default() += o.value;
        t.timestamps.entry(type_id.clone()).or_default().push(o.time);
        *t.events.entry(type_id.clone()).or_default() += 1;
    }
    for ts in t.timestamps.values_mut() {
        ts.sort_unstable();
    }
    t
}

/// Compares type by type with readable failures (a whole-map diff of thousands of paths
/// is unreadable). Timestamps must agree within `time_tolerance` ns: exactly for single
/// chunks; the JDK converts every chunk's ticks with the first chunk's clock anchor while
/// we use each chunk's own, so later chunks differ by the clock drift between anchors.
fn assert_same(expected: &JfrTotals, got: &JfrTotals, what: &str, time_tolerance: i64) {
    let types = |t: &JfrTotals| t.by_type.keys().cloned().collect::<Vec<_>>();
    assert_eq!(types(got), types(expected), "{what}: profile types");
    for (type_id, paths) in &expected.by_type {
        let got_paths = &got.by_type[type_id];
        assert_eq!(
            got.total(type_id),
            expected.total(type_id),
            "{what}: total of {type_id}"
        );
        let only_got: Vec<_> = got_paths.keys().filter(|p| !paths.contains_key(*p)).collect();
        let only_expected: Vec<_> = paths.keys().filter(|p| !got_paths.contains_key(*p)).collect();
        assert_eq!(
            got_paths.len(),
            paths.len(),
            "{what}: number of paths of {type_id}; only ours: {only_got:?}; only expected: {only_expected:?}"
        );
        for (path, v) in paths {
            assert_eq!(got_paths.get(path), Some(v), "{what}: {type_id} path {path:?}");
        }
        assert_eq!(
            got.by_thread[type_id], expected.by_thread[type_id],
            "{what}: {type_id} per thread"
        );
        assert_eq!(
            got.events[type_id], expected.events[type_id],
            "{what}: {type_id} events"
        );
        let (got_ts, expected_ts) = (&got.timestamps[type_id], &expected.timestamps[type_id]);
        assert_eq!(got_ts.len(), expected_ts.len(), "{what}: {type_id} timestamps");
        for (g, e) in got_ts.iter().zip(expected_ts) {
            assert!(
                (g - e).abs() <= time_tolerance,
                "{what}: {type_id} timestamp {g}, expected {e}"
            );
        }
    }
}

fn gunzip(path: &std::path::Path) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_end(&mut out)
        .unwrap();
    out
}

#[test]
fn async_profiler_cpu_recording_matches_jfr_print() {
    let path = ui_api_tests::testdata("jfr/kafka-cpu.jfr.gz");
    let expected = jfr_reader::read(&path);
    assert_eq!(
        expected.events[jfr_reader::CPU],
        478,
        "the file's jdk.ExecutionSample count"
    );
    let data = std::fs::read(&path).unwrap();
    let req = convert(&data).unwrap();
    assert_same(&expected, &totals(&req), "kafka-cpu", 0);
    // The JDK's dotted style is what `jfr print` shows.
    let jdk = totals(&convert_named(&data, FrameNames::Jdk).unwrap());
    assert_same(
        &jfr_reader::read_named(&path, Names::Jdk),
        &jdk,
        "kafka-cpu, jdk names",
        0,
    );
    // One profile, spanning the chunk: 2023-08-03T04:34:34Z plus about ten seconds.
    let profiles: Vec<_> = req.resource_profiles[0].scope_profiles[0]
        .profiles
        .iter()
        .collect();
    assert_eq!(profiles.len(), 1);
    let p = profiles[0];
    let start = jfr_reader::parse_instant("2023-08-03T04:34:34Z") as u64;
    assert!(
        p.time_unix_nano >= start && p.time_unix_nano < start + 1_000_000_000,
        "{}",
        p.time_unix_nano
    );
    assert!(
        (9_000_000_000..12_000_000_000).contains(&p.duration_nano),
        "{}",
        p.duration_nano
    );
    let times = &expected.timestamps[jfr_reader::CPU];
    assert!(times[0] as u64 >= p.time_unix_nano);
    assert!(*times.last().unwrap() as u64 <= p.time_unix_nano + p.duration_nano);
}

#[test]
fn async_profiler_cpu_and_alloc_recording_matches_jfr_print() {
    let path = ui_api_tests::testdata("jfr/kafka-cpu-lock-alloc.jfr.gz");
    let expected = jfr_reader::read(&path);
    assert_eq!(expected.events[jfr_reader::CPU], 554);
    assert_eq!(
        expected.events["alloc_in_new_tlab_objects:count:space:bytes"],
        766
    );
    let req = convert(&std::fs::read(&path).unwrap()).unwrap();
    assert_same(&expected, &totals(&req), "kafka-cpu-lock-alloc", 0);
    // async-profiler states its allocation sampling interval (alloc=2097152).
    let d = req.dictionary.as_ref().unwrap();
    for p in &req.resource_profiles[0].scope_profiles[0].profiles {
        let name = &d.string_table[p.sample_type.unwrap().type_strindex as usize];
        if name.starts_with("alloc_in_new_tlab") {
            assert_eq!(p.period, 2_097_152, "{name}");
        }
    }
}

/// Adds `b` into `a` (the expectations of recordings converted together).
fn merge(a: &mut JfrTotals, b: JfrTotals) {
    for (type_id, paths) in b.by_type {
        let into = a.by_type.entry(type_id).or_default();
        for (path, v) in paths {
            *into.entry(path).or_default() += v;
        }
    }
    for (type_id, threads) in b.by_thread {
        let into = a.by_thread.entry(type_id).or_default();
        for (thread, v) in threads {
            *into.entry(thread).or_default() += v;
        }
    }
    for (type_id, ts) in b.timestamps {
        let into = a.timestamps.entry(type_id).or_default();
        into.extend(ts);
        into.sort_unstable();
    }
    for (type_id, n) in b.events {
        *a.events.entry(type_id).or_default() += n;
    }
}

#[test]
fn two_recordings_back_to_back_convert_chunk_by_chunk() {
    // `jfr print` cannot be the reference here: the JDK's parser lets a chunk fall back on
    // the previous chunk's constants, which mixes up two unrelated JVMs' ids. Each chunk
    // read alone by `jfr print` can.
    let (a, b) = (
        ui_api_tests::testdata("jfr/kafka-cpu.jfr.gz"),
        ui_api_tests::testdata("jfr/kafka-cpu-lock-alloc.jfr.gz"),
    );
    let mut expected = jfr_reader::read(&a);
    merge(&mut expected, jfr_reader::read(&b));
    assert_eq!(expected.events[jfr_reader::CPU], 478 + 554);
    let mut data = gunzip(&a);
    data.extend(gunzip(&b));
    let req = convert(&data).unwrap();
    assert_same(&expected, &totals(&req), "two recordings", 0);
    let p = &req.resource_profiles[0].scope_profiles[0].profiles[0];
    // From the first chunk's start to the second one's end (about two minutes later).
    assert!(p.duration_nano > 100_000_000_000, "{}", p.duration_nano);
}

/// Chunk count of a raw recording, from the chunk headers' sizes.
fn chunk_count(data: &[u8]) -> usize {
    let (mut at, mut n) = (0, 0);
    while at + 16 <= data.len() {
        at += u64::from_be_bytes(data[at + 8..at + 16].try_into().unwrap()) as usize;
        n += 1;
    }
    n
}

/// `jfr print`'s totals, corrected for what it cannot show: an event written into the
/// chunk after the one holding its stack trace (or thread) shows null there unless the
/// memo rule resolves it, and the conversion gives it the earlier chunk's stack. Which
/// events those are, and that stack, come from the raw keys ([`jfr_raw`]); the predicted
/// nulls must be `jfr print`'s nulls, and where `jfr print` resolves a stack, the earlier
/// chunk's must be the same one.
fn with_stacks_from_earlier_chunks(mut printed: JfrTotals, data: &[u8]) -> JfrTotals {
    let raw = jfr_raw::read(data, &JDK_EVENTS);
    let path = |v: &serde_json::Value| jfr_reader::stack_path(v, Names::Pyroscope);
    let values = |e: &jfr_raw::RawEvent| {
        let int = |f: &str| e.ints.get(f).copied().unwrap_or(0);
        jfr_reader::event_values(&e.type_name, int, e.duration_nanos)
    };
    // The rule reproduces jfr print: its empty path holds exactly the predicted nulls and
    // the stacks without frames (count types: one per event).
    let mut predicted_empty: BTreeMap<String, i64> = BTreeMap::new();
    for e in raw.iter().filter(|e| path(&e.stack.printed).is_empty()) {
        for (type_id, v) in values(e) {
            *predicted_empty.entry(type_id.to_string()).or_default() += v;
        }
    }
    for (type_id, paths) in printed.by_type.iter().filter(|(t, _)| t.contains(":count:")) {
        assert_eq!(
            paths.get(&Vec::new()).copied().unwrap_or(0),
            predicted_empty.get(type_id).copied().unwrap_or(0),
            "{type_id}: events jfr print shows on the empty path"
        );
    }
    let (mut moved_stacks, mut moved_threads) = (0, 0);
    for e in &raw {
        if !e.stack.printed.is_null() {
            // What jfr print resolves (own chunk or memo) is what the conversion resolves.
            assert_eq!(path(&e.stack.printed), path(&e.stack.converter), "{e:?}");
        } else if !e.stack.converter.is_null() {
            moved_stacks += 1;
            let to = path(&e.stack.converter);
            for (type_id, v) in values(e) {
                let paths = printed.by_type.get_mut(type_id).unwrap();
                *paths.get_mut(&Vec::new()).unwrap() -= v;
                *paths.entry(to.clone()).or_default() += v;
            }
        }
        if e.thread.printed.is_null() && !e.thread.converter.is_null() {
            moved_threads += 1;
            let to = jfr_reader::thread_name(&e.thread.converter);
            for (type_id, v) in values(e) {
                let threads = printed.by_thread.get_mut(type_id).unwrap();
                *threads.get_mut("").unwrap() -= v;
                *threads.entry(to.clone()).or_default() += v;
            }
        }
    }
    for paths in printed.by_type.values_mut() {
        paths.retain(|_, v| *v != 0);
    }
    for threads in printed.by_thread.values_mut() {
        threads.retain(|_, v| *v != 0);
    }
    let earlier_stacks = raw.iter().filter(|e| e.stack.from_earlier_chunk).count();
    let earlier_threads = raw.iter().filter(|e| e.thread.from_earlier_chunk).count();
    eprintln!(
        "JDK workload: {} events; resolved from an earlier chunk: {earlier_stacks} stacks \
         ({moved_stacks} of them null in jfr print), {earlier_threads} threads ({moved_threads} \
         null in jfr print)",
        raw.len()
    );
    printed
}

/// The event types the JDK workload records that the conversion counts.
const JDK_EVENTS: [&str; 7] = [
    "jdk.ExecutionSample",
    "jdk.NativeMethodSample",
    "jdk.ObjectAllocationInNewTLAB",
    "jdk.ObjectAllocationOutsideTLAB",
    "jdk.ObjectAllocationSample",
    "jdk.JavaMonitorEnter",
    "jdk.ThreadPark",
];

#[test]
fn jdk_recording_with_locks_parks_and_allocations_matches_jfr_print() {
    let dir = tempfile::tempdir().unwrap();
    let recording = jfr_reader::record_jdk_workload(dir.path());
    let expected = jfr_reader::read(&recording);
    for type_id in [
        jfr_reader::CPU,
        "lock_count:count:lock:nanoseconds",
        "lock_time:nanoseconds:lock:nanoseconds",
        "alloc_outside_tlab_bytes:bytes:space:bytes",
        "alloc_sample_bytes:bytes:space:bytes",
    ] {
        assert!(
            expected.total(type_id) > 0,
            "the JDK workload recorded no {type_id}: {:?}",
            expected.events
        );
    }
    let data = std::fs::read(&recording).unwrap();
    assert!(
        chunk_count(&data) >= 2,
        "the workload rotates chunks: {}",
        chunk_count(&data)
    );
    let req = convert(&data).unwrap();
    let expected = with_stacks_from_earlier_chunks(expected, &data);
    assert_same(&expected, &totals(&req), "JDK workload", 1_000);
    // The JDK states the execution sampling period (2 ms in the workload's settings).
    let d = req.dictionary.as_ref().unwrap();
    let cpu = req.resource_profiles[0].scope_profiles[0]
        .profiles
        .iter()
        .find(|p| d.string_table[p.period_type.unwrap().type_strindex as usize] == "cpu")
        .unwrap();
    assert_eq!(cpu.period, 2_000_000);
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(data).unwrap();
    gz.finish().unwrap()
}

fn error(data: &[u8]) -> String {
    match convert(data) {
        Ok(_) => panic!("{} bytes of malformed input were accepted", data.len()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn malformed_recordings_are_refused_with_the_problem_and_offset() {
    let good = gunzip(&ui_api_tests::testdata("jfr/kafka-cpu-lock-alloc.jfr.gz"));

    let e = error(&good[..good.len() / 2]);
    assert!(
        e.starts_with("invalid jfr: chunk size") && e.contains("truncated") && e.contains("byte offset 8"),
        "{e}"
    );
    let e = error(&good[..40]);
    assert!(
        e.contains("truncated chunk header") && e.contains("byte offset 0"),
        "{e}"
    );
    let e = error(&gzip(&good[..good.len() - 1]));
    assert!(e.contains("truncated"), "{e}");

    let garbage: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let e = error(&garbage);
    assert!(
        e.starts_with("invalid jfr: bad magic") && e.contains("byte offset 0"),
        "{e}"
    );
    let e = error(&gzip(&garbage));
    assert!(e.starts_with("invalid jfr: bad magic"), "{e}");
    let mut bad_gzip = gzip(&good);
    bad_gzip.truncate(bad_gzip.len() / 3);
    let e = error(&bad_gzip);
    assert!(e.starts_with("invalid jfr: ") && e.contains("gzip"), "{e}");

    let mut bad_magic = good.clone();
    bad_magic[..4].copy_from_slice(b"FLX\0");
    let e = error(&bad_magic);
    assert!(e.contains("bad magic") && e.contains("byte offset 0"), "{e}");

    // A second chunk that is cut short.
    let mut two = good.clone();
    two.extend_from_slice(&good[..1000]);
    let e = error(&two);
    assert!(
        e.contains("chunk size") && e.contains(&format!("byte offset {}", good.len() + 8)),
        "{e}"
    );

    let mut b = RequestBuilder::new();
    let e =
        stackhouse_ingest::jfr::convert(&gzip(&good), None, FrameNames::Pyroscope, &source(), 1000, &mut b)
            .unwrap_err();
    assert!(
        matches!(
            e,
            ConvertError::TooLarge {
                format: "jfr",
                limit: 1000
            }
        ),
        "{e}"
    );
}

#[test]
fn damaged_recordings_never_panic() {
    let good = gunzip(&ui_api_tests::testdata("jfr/kafka-cpu.jfr.gz"));
    // Deterministic xorshift: byte flips and overwritten varints all over the file, and
    // cuts at many lengths; any answer is fine except a panic or a hang.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for round in 0..300 {
        let mut d = good.clone();
        for _ in 0..1 + round % 4 {
            let i = next() as usize % d.len();
            d[i] = next() as u8;
        }
        if round % 3 == 0 {
            let i = next() as usize % d.len();
            let end = (i + 5).min(d.len());
            d[i..end].fill(0xff);
        }
        let _ = convert(&d);
        let cut = next() as usize % good.len();
        assert!(
            convert(&good[..cut]).is_err(),
            "a recording cut at {cut} bytes was accepted"
        );
    }
}

#[test]
fn reader_totals_are_not_trivially_empty() {
    // Guards the comparison above against an empty reader: the files have real stacks.
    let t = jfr_reader::read(&ui_api_tests::testdata("jfr/kafka-cpu.jfr.gz"));
    let cpu: &BTreeMap<Vec<String>, i64> = &t.by_type[jfr_reader::CPU];
    assert!(cpu.len() > 50, "{}", cpu.len());
    assert!(cpu.keys().any(|p| p.len() > 20));
    assert!(cpu.keys().flatten().any(|f| f == "kafka/network/Processor.poll"));
    let jdk = jfr_reader::read_named(&ui_api_tests::testdata("jfr/kafka-cpu.jfr.gz"), Names::Jdk);
    assert!(
        jdk.by_type[jfr_reader::CPU]
            .keys()
            .flatten()
            .any(|f| f == "kafka.network.Processor.poll")
    );
    assert!(
        t.by_thread[jfr_reader::CPU]
            .keys()
            .any(|n| n.starts_with("data-plane-kafka-request-handler"))
    );
}

/// The kafka captures' frame names after conversion, checked against the rules of
/// `../shared/reference/pyroscope-jfr-names.md` (not against a reader), and their paths
/// against the JDK's structure.
#[test]
fn kafka_frame_names_follow_pyroscopes_rules() {
    let lambda = regex::Regex::new(r"\$\$Lambda\$[0-9]+\.0x[0-9a-f]+\.").unwrap();
    let accessor = regex::Regex::new(r"^jdk/internal/reflect/GeneratedMethodAccessor[0-9]+\.").unwrap();
    for (file, issue_paths) in [
        ("jfr/kafka-cpu.jfr.gz", Some(316)),
        ("jfr/kafka-cpu-lock-alloc.jfr.gz", None),
    ] {
        let path = ui_api_tests::testdata(file);
        let data = std::fs::read(&path).unwrap();
        let py = totals(&convert(&data).unwrap());
        let jdk = totals(&convert_named(&data, FrameNames::Jdk).unwrap());
        let count_paths = |t: &JfrTotals| t.by_type.values().map(BTreeMap::len).sum::<usize>();
        // The JDK style has `jfr print`'s paths; the issue counted 316 in kafka-cpu.
        let printed = jfr_reader::read_named(&path, Names::Jdk);
        assert_eq!(count_paths(&jdk), count_paths(&printed), "{file}");
        if let Some(n) = issue_paths {
            assert_eq!(count_paths(&jdk), n, "{file}");
        }
        // No frame added or dropped: the same depth for every value, and the same totals.
        let depths = |t: &JfrTotals| {
            let mut d: BTreeMap<(String, usize), i64> = BTreeMap::new();
            for (ty, paths) in &t.by_type {
                for (p, v) in paths {
                    *d.entry((ty.clone(), p.len())).or_default() += v;
                }
            }
            d
        };
        assert_eq!(depths(&py), depths(&jdk), "{file}: path depths");
        // Renaming merges lambdas of one call site, never splits a path.
        assert!(count_paths(&py) <= count_paths(&jdk), "{file}");
        let names: std::collections::BTreeSet<&str> = py
            .by_type
            .values()
            .flat_map(|paths| paths.keys().flatten())
            .map(String::as_str)
            .collect();
        // Rule 1: class symbol + "." + method symbol, slashes kept, no package dotted in.
        assert!(names.iter().all(|n| n.contains('.')), "{file}");
        assert!(names.contains("kafka/network/Processor.poll"), "{file}");
        assert!(
            !names
                .iter()
                .any(|n| n.starts_with("kafka.") || n.starts_with("org.apache.")),
            "{file}"
        );
        // The empty class of async-profiler's stubs and unresolved natives.
        for golden in [
            ".itable stub",
            "./lib/x86_64-linux-gnu/libc-2.31.so",
            ".jbyte_disjoint_arraycopy_avx3",
            ".not_walkable_Java",
            ".unknown_Java",
            "kafka/cluster/Partition$$Lambda_.apply",
            "kafka/log/LogValidator$$$Lambda_.accept",
            "jdk/internal/reflect/GeneratedMethodAccessor_.invoke",
        ] {
            assert!(names.contains(golden), "{file}: {golden} missing");
        }
        // Rules 1 and 2 leave no numbered accessor or lambda; what no rule matches stays.
        assert!(
            !names.iter().any(|n| lambda.is_match(n) || accessor.is_match(n)),
            "{file}"
        );
        assert!(names.contains("./tmp/snappy-1.1.8-d1f9bd24-4cc8-4571-b71c-1698b83f1af1-libsnappyjava.so"));
        assert!(
            names
                .iter()
                .any(|n| n.starts_with("java/lang/invoke/LambdaForm$MH.0x"))
        );
        assert!(names.contains("jdk/internal/reflect/DelegatingMethodAccessorImpl.invoke"));
        eprintln!(
            "{file}: {} paths with Pyroscope's names ({} with the JDK's), {} distinct names",
            count_paths(&py),
            count_paths(&jdk),
            names.len()
        );
    }
}
