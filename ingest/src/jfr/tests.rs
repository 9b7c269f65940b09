//! A hand-built recording (metadata, constant pools and events written byte by byte) for
//! what the test files do not exercise: fixed-size integers, Pyroscope's labels, missing
//! constants and damaged input.

use std::collections::BTreeMap;

use stackhouse_proto::otlp_collector::ExportProfilesServiceRequest;

use super::*;

const START_NANOS: i64 = 1_700_000_000_000_000_000;

struct Writer {
    buf: Vec<u8>,
    compressed: bool,
}

impl Writer {
    fn new(compressed: bool) -> Writer {
        Writer {
            buf: Vec::new(),
            compressed,
        }
    }

    fn u8(&mut self, b: u8) -> &mut Self {
        self.buf.push(b);
        self
    }

    fn leb(&mut self, mut v: u64) -> &mut Self {
        for _ in 0..8 {
            if v < 0x80 {
                return self.u8(v as u8);
            }
            self.buf.push((v as u8 & 0x7f) | 0x80);
            v >>= 7;
        }
        self.u8(v as u8)
    }

    fn long(&mut self, v: i64) -> &mut Self {
        if self.compressed {
            self.leb(v as u64)
        } else {
            self.buf.extend_from_slice(&v.to_be_bytes());
            self
        }
    }

    fn int(&mut self, v: i32) -> &mut Self {
        if self.compressed {
            self.leb(u64::from(v as u32))
        } else {
            self.buf.extend_from_slice(&v.to_be_bytes());
            self
        }
    }

    fn str(&mut self, s: &str) -> &mut Self {
        self.u8(3).int(s.len() as i32);
        self.buf.extend_from_slice(s.as_bytes());
        self
    }

    /// An event: its size (padded to five varint bytes, as async-profiler does), then the body.
    fn event(&mut self, body: &[u8]) -> &mut Self {
        if self.compressed {
            let v = body.len() as u64 + 5;
            for i in 0..4 {
                self.buf.push(((v >> (7 * i)) as u8 & 0x7f) | 0x80);
            }
            self.buf.push((v >> 28) as u8 & 0x7f);
        } else {
            self.buf.extend_from_slice(&(body.len() as i32 + 4).to_be_bytes());
        }
        self.buf.extend_from_slice(body);
        self
    }

    fn sub(&self) -> Writer {
        Writer::new(self.compressed)
    }
}

/// (class id, name, fields as (name, type id, constant pool, array, annotation value)).
type ClassSpec = (
    i64,
    &'static str,
    Vec<(&'static str, i64, bool, bool, Option<&'static str>)>,
);

const TIMESTAMP: i64 = 30;

fn classes() -> Vec<ClassSpec> {
    vec![
        (1, "long", vec![]),
        (2, "int", vec![]),
        (3, "boolean", vec![]),
        (4, "java.lang.String", vec![]),
        (10, "jdk.types.Symbol", vec![("string", 4, false, false, None)]),
        (11, "java.lang.Class", vec![("name", 10, true, false, None)]),
        (
            12,
            "jdk.types.Method",
            vec![("type", 11, true, false, None), ("name", 10, true, false, None)],
        ),
        (
            13,
            "jdk.types.StackFrame",
            vec![
                ("method", 12, true, false, None),
                ("lineNumber", 2, false, false, None),
            ],
        ),
        (
            14,
            "jdk.types.StackTrace",
            vec![
                ("truncated", 3, false, false, None),
                ("frames", 13, false, true, None),
            ],
        ),
        (
            15,
            "java.lang.Thread",
            vec![
                ("javaName", 4, false, false, None),
                ("javaThreadId", 1, false, false, None),
            ],
        ),
        (
            20,
            "jdk.ExecutionSample",
            vec![
                ("startTime", 1, false, false, Some("TICKS")),
                ("sampledThread", 15, true, false, None),
                ("stackTrace", 14, true, false, None),
                ("contextId", 1, false, false, None),
            ],
        ),
        (
            21,
            "jdk.ActiveSetting",
            vec![
                ("startTime", 1, false, false, Some("TICKS")),
                ("id", 1, false, false, None),
                ("name", 4, false, false, None),
                ("value", 4, false, false, None),
            ],
        ),
        (
            TIMESTAMP,
            "jdk.jfr.Timestamp",
            vec![("value", 4, false, false, None)],
        ),
    ]
}

fn metadata(w: &Writer) -> Vec<u8> {
    let mut strings: Vec<String> = Vec::new();
    let mut s = |x: &str| -> i32 {
        match strings.iter().position(|y| y == x) {
            Some(i) => i as i32,
            None => {
                strings.push(x.to_string());
                strings.len() as i32 - 1
            }
        }
    };
    // Elements as (name, attributes, children), written depth first.
    struct El(i32, Vec<(i32, i32)>, Vec<El>);
    let mut class_elements = Vec::new();
    for (id, name, fields) in classes() {
        let mut field_elements = Vec::new();
        for (fname, ftype, cp, array, annotation) in fields {
            let mut attrs = vec![(s("name"), s(fname)), (s("class"), s(&ftype.to_string()))];
            if cp {
                attrs.push((s("constantPool"), s("true")));
            }
            if array {
                attrs.push((s("dimension"), s("1")));
            }
            let mut children = vec![El(
                s("annotation"),
                vec![(s("class"), s("99")), (s("value"), s("Label"))],
                vec![],
            )];
            if let Some(v) = annotation {
                let class = TIMESTAMP.to_string();
                children.push(El(
                    s("annotation"),
                    vec![(s("class"), s(&class)), (s("value"), s(v))],
                    vec![],
                ));
            }
            field_elements.push(El(s("field"), attrs, children));
        }
        let attrs = vec![(s("name"), s(name)), (s("id"), s(&id.to_string()))];
        class_elements.push(El(s("class"), attrs, field_elements));
    }
    let root = El(
        s("root"),
        vec![],
        vec![
            El(s("metadata"), vec![], class_elements),
            El(s("region"), vec![], vec![]),
        ],
    );
    fn write(w: &mut Writer, e: &El) {
        w.int(e.0).int(e.1.len() as i32);
        for &(k, v) in &e.1 {
            w.int(k).int(v);
        }
        w.int(e.2.len() as i32);
        for c in &e.2 {
            write(w, c);
        }
    }
    let mut body = w.sub();
    body.long(0).long(0).long(0).long(1).int(strings.len() as i32);
    for x in &strings {
        body.str(x);
    }
    write(&mut body, &root);
    body.buf
}

/// The constant pools; without `stacks`, the stack traces and threads are left out (as in
/// a chunk after a rotation whose events refer to the previous chunk's).
fn checkpoint(w: &Writer, stacks: bool) -> Vec<u8> {
    let mut b = w.sub();
    b.long(1)
        .long(0)
        .long(0)
        .long(0)
        .u8(0)
        .int(if stacks { 5 } else { 3 });
    // Symbols.
    b.long(10).int(3);
    b.long(1).str("com/example/Foo");
    b.long(2).str("work");
    b.long(3).str("main");
    // Classes.
    b.long(11).int(1);
    b.long(1).long(1);
    // Methods: Foo.work and a method without a class.
    b.long(12).int(2);
    b.long(1).long(1).long(2);
    b.long(2).long(0).long(3);
    if !stacks {
        return b.buf;
    }
    // Stack traces, leaf first: work (line 10) called by main.
    b.long(14).int(2);
    b.long(1).u8(0).int(2).long(1).int(10).long(2).int(-1);
    // A stack whose frame names a method that is not in the pool.
    b.long(2).u8(0).int(1).long(9).int(1);
    // Threads.
    b.long(15).int(1);
    b.long(1).str("worker-1").long(7);
    b.buf
}

fn sample(w: &Writer, ticks: i64, stack: i64, context: i64) -> Vec<u8> {
    let mut b = w.sub();
    b.long(20).long(ticks).long(1).long(stack).long(context);
    b.buf
}

/// A one-chunk recording with three samples (one without a stack) and a period setting;
/// `stack` is the key the first sample refers to.
fn recording(compressed: bool, stack: i64) -> Vec<u8> {
    chunk(compressed, stack, true)
}

/// One chunk of [`recording`]; see [`checkpoint`] for `stacks`.
fn chunk(compressed: bool, stack: i64, stacks: bool) -> Vec<u8> {
    let mut w = Writer::new(compressed);
    w.buf.resize(68, 0);
    let meta_at = w.buf.len();
    let meta = metadata(&w);
    w.event(&meta);
    let cp_at = w.buf.len();
    let cp = checkpoint(&w, stacks);
    w.event(&cp);
    let mut setting = w.sub();
    setting.long(21).long(1000).long(20).str("period").str("10 ms");
    let setting = setting.buf;
    w.event(&setting);
    for (ticks, stack, context) in [(1005, stack, 42), (1010, 1, 0), (1020, 0, 42)] {
        let s = sample(&w, ticks, stack, context);
        w.event(&s);
    }
    let size = w.buf.len() as u64;
    let mut h = Vec::new();
    h.extend_from_slice(b"FLR\0");
    h.extend_from_slice(&[0, 2, 0, 0]);
    for v in [
        size,
        cp_at as u64,
        meta_at as u64,
        START_NANOS as u64,
        1_000_000_000,
        1000,
        1000,
    ] {
        h.extend_from_slice(&v.to_be_bytes());
    }
    h.extend_from_slice(&[0, 0, 0, u8::from(compressed)]);
    w.buf[..68].copy_from_slice(&h);
    w.buf
}

fn labels() -> Vec<u8> {
    let snapshot = LabelsSnapshot {
        contexts: BTreeMap::from([(
            42,
            Context {
                labels: BTreeMap::from([(1, 2)]),
            },
        )]),
        strings: BTreeMap::from([(1, "endpoint".to_string()), (2, "/api".to_string())]),
    };
    prost::Message::encode_to_vec(&snapshot)
}

fn source() -> Source {
    Source {
        resource: vec![("service.name".into(), "app".into())],
        scope: "javaspy".into(),
        ..Default::default()
    }
}

fn run(
    data: &[u8],
    labels: Option<&[u8]>,
) -> Result<(Converted, ExportProfilesServiceRequest), ConvertError> {
    run_named(data, labels, FrameNames::default())
}

fn run_named(
    data: &[u8],
    labels: Option<&[u8]>,
    names: FrameNames,
) -> Result<(Converted, ExportProfilesServiceRequest), ConvertError> {
    let mut b = RequestBuilder::new();
    let converted = convert(data, labels, names, &source(), 1 << 20, &mut b)?;
    Ok((converted, b.finish()))
}

type Row = (Vec<String>, Vec<String>, i64, u64);

/// (path root first, attributes as "key=value", value, timestamp) of every value.
fn rows(req: &ExportProfilesServiceRequest) -> Vec<Row> {
    let d = req.dictionary.as_ref().unwrap();
    let s = |i: i32| d.string_table[i as usize].clone();
    let mut out = Vec::new();
    for p in &req.resource_profiles[0].scope_profiles[0].profiles {
        for sample in &p.samples {
            let mut path: Vec<String> = d.stack_table[sample.stack_index as usize]
                .location_indices
                .iter()
                .map(|&l| {
                    s(
                        d.function_table[d.location_table[l as usize].lines[0].function_index as usize]
                            .name_strindex,
                    )
                })
                .collect();
            path.reverse();
            let attrs: Vec<String> = sample
                .attribute_indices
                .iter()
                .map(|&a| {
                    let kv = &d.attribute_table[a as usize];
                    let v = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                        Some(stackhouse_proto::otlp_common::any_value::Value::StringValue(v)) => v.clone(),
                        Some(stackhouse_proto::otlp_common::any_value::Value::IntValue(v)) => v.to_string(),
                        other => format!("{other:?}"),
                    };
                    format!("{}={v}", s(kv.key_strindex))
                })
                .collect();
            for (&v, &t) in sample.values.iter().zip(&sample.timestamps_unix_nano) {
                out.push((path.clone(), attrs.clone(), v, t));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn synthetic_recording_with_labels_in_both_integer_encodings() {
    // Pyroscope drops `main`, whose method has no class constant (key 0); the JDK style
    // names it by its method alone and dots the package.
    for (names, path) in [
        (FrameNames::Pyroscope, vec!["com/example/Foo.work"]),
        (FrameNames::Jdk, vec!["main", "com.example.Foo.work"]),
    ] {
        let path: Vec<String> = path.into_iter().map(String::from).collect();
        for compressed in [true, false] {
            synthetic_recording(names, compressed, path.clone());
        }
    }
}

fn synthetic_recording(names: FrameNames, compressed: bool, path: Vec<String>) {
    {
        let (converted, req) = run_named(&recording(compressed, 1), Some(&labels()), names).unwrap();
        assert_eq!(
            converted,
            Converted {
                profiles: 1,
                samples: 3
            }
        );
        let rp = &req.resource_profiles[0];
        let p = &rp.scope_profiles[0].profiles[0];
        let d = req.dictionary.as_ref().unwrap();
        let vt = |v: Option<stackhouse_proto::otlp_profiles::ValueType>| {
            let v = v.unwrap();
            format!(
                "{}:{}",
                d.string_table[v.type_strindex as usize], d.string_table[v.unit_strindex as usize]
            )
        };
        assert_eq!(vt(p.sample_type), "samples:count");
        assert_eq!(vt(p.period_type), "cpu:nanoseconds");
        assert_eq!(p.period, 10_000_000);
        assert_eq!(p.time_unix_nano, START_NANOS as u64);
        assert_eq!(p.duration_nano, 1_000_000_000);
        assert_eq!(rp.scope_profiles[0].scope.as_ref().unwrap().name, "javaspy");
        let thread = ["thread.name=worker-1".to_string(), "thread.id=7".to_string()];
        let labelled: Vec<String> = thread
            .iter()
            .cloned()
            .chain(["endpoint=/api".to_string()])
            .collect();
        let ms = |n: i64| (START_NANOS + n * 1_000_000) as u64;
        assert_eq!(
            rows(&req),
            vec![
                (vec![], labelled.clone(), 1, ms(20)),
                (path.clone(), thread.to_vec(), 1, ms(10)),
                (path, labelled, 1, ms(5)),
            ],
            "compressed={compressed}"
        );
    }
}

#[test]
fn without_labels_context_ids_add_nothing() {
    let (_, req) = run(&recording(true, 1), None).unwrap();
    assert!(rows(&req).iter().all(|(_, attrs, _, _)| attrs.len() == 2));
}

#[test]
fn missing_method_inside_a_stack_drops_the_frame_or_is_an_error_in_the_jdk_style() {
    // Stack 2's only frame names method 9, which no pool holds: Pyroscope drops the frame.
    let (_, req) = run(&recording(true, 2), None).unwrap();
    let paths: Vec<Vec<String>> = rows(&req).into_iter().map(|r| r.0).collect();
    assert_eq!(paths.iter().filter(|p| p.is_empty()).count(), 2, "{paths:?}");
    let e = run_named(&recording(true, 2), None, FrameNames::Jdk)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("invalid jfr: reference to missing constant 9 of jdk.types.Method at byte offset"),
        "{e}"
    );
}

#[test]
fn a_stack_and_thread_from_the_previous_chunk_are_resolved_there() {
    // The second chunk's pools have no stack traces and no threads, yet its samples refer
    // to stack 1 and thread 1 of the first chunk (ids are global across a JDK recording's
    // chunks). Key 9 is defined by no chunk: the empty stack.
    let mut data = recording(true, 1);
    data.extend(chunk(true, 9, false));
    let (converted, req) = run(&data, None).unwrap();
    assert_eq!(converted.samples, 6);
    let path = vec!["com/example/Foo.work".to_string()];
    let thread = vec!["thread.name=worker-1".to_string(), "thread.id=7".to_string()];
    let rows = rows(&req);
    let count = |p: &Vec<String>| rows.iter().filter(|r| &r.0 == p && r.1 == thread).count();
    // Per chunk: one sample on stack 1, one on the first sample's key, one without a stack.
    assert_eq!(count(&path), 3, "{rows:?}");
    assert_eq!(count(&vec![]), 3, "{rows:?}");
}

#[test]
fn an_events_missing_stack_trace_is_the_empty_stack() {
    // As `jfr print` shows it (null): the JDK writes such events around chunk rotations.
    let (converted, req) = run(&recording(true, 9), None).unwrap();
    assert_eq!(converted.samples, 3);
    let empty = rows(&req)
        .iter()
        .filter(|(path, _, _, _)| path.is_empty())
        .count();
    assert_eq!(empty, 2);
}

#[test]
fn every_truncation_and_mutation_is_refused_without_panicking() {
    let data = recording(true, 1);
    for n in 0..data.len() {
        let e = run(&data[..n], None).unwrap_err().to_string();
        assert!(e.starts_with("invalid jfr: "), "{n}: {e}");
    }
    for i in 0..data.len() {
        for flip in [0x01, 0x80, 0xff] {
            let mut d = data.clone();
            d[i] ^= flip;
            let _ = run(&d, Some(&labels()));
        }
    }
}

#[test]
fn bad_magic_version_and_labels() {
    let mut data = recording(true, 1);
    data[0] = b'X';
    let e = run(&data, None).unwrap_err().to_string();
    assert!(e.contains("bad magic") && e.contains("byte offset 0"), "{e}");
    let mut data = recording(true, 1);
    data[5] = 1;
    let e = run(&data, None).unwrap_err().to_string();
    assert!(e.contains("unsupported format version 1.0"), "{e}");
    let e = run(&recording(true, 1), Some(b"\xff\xff"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("labels are not a LabelsSnapshot"), "{e}");
}

#[test]
fn absurd_counts_are_refused_before_allocating() {
    let mut data = recording(true, 1);
    // The metadata's string count follows the event size (5), type and three longs.
    let at = 68 + 5 + 3;
    assert_eq!(data[at], 1, "metadata id");
    data.splice(at + 1..at + 2, [0xff, 0xff, 0xff, 0xff, 0x07]);
    let e = run(&data, None).unwrap_err().to_string();
    assert!(e.contains("count") && e.contains("does not fit"), "{e}");
}

#[test]
fn gzip_and_limits() {
    use std::io::Write;
    let data = recording(true, 1);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&data).unwrap();
    let gz = gz.finish().unwrap();
    let (converted, _) = run(&gz, None).unwrap();
    assert_eq!(converted.samples, 3);
    let mut b = RequestBuilder::new();
    let e = convert(
        &gz,
        None,
        FrameNames::Pyroscope,
        &source(),
        data.len() - 1,
        &mut b,
    )
    .unwrap_err();
    assert!(matches!(e, ConvertError::TooLarge { format: "jfr", .. }), "{e}");
    let e = run(&gz[..gz.len() / 2], None).unwrap_err().to_string();
    assert!(e.starts_with("invalid jfr: ") && e.contains("gzip"), "{e}");
    let e = run(b"", None).unwrap_err().to_string();
    assert!(e.contains("empty"), "{e}");
}
