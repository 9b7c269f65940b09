use std::collections::{BTreeMap, HashMap};
use std::io::Write;

use prost::Message;
use stackhouse_proto::pprof::{self, Function, Label, Line, Location, Mapping, ValueType};

use super::*;
use crate::pprof::test_support::{ProfileView, profiles};

/// Builds a pprof profile by hand; `s` interns strings into its string table.
#[derive(Default)]
struct P {
    p: pprof::Profile,
}

impl P {
    fn new() -> P {
        let mut p = P::default();
        p.p.string_table.push(String::new());
        p
    }

    fn s(&mut self, v: &str) -> i64 {
        if let Some(i) = self.p.string_table.iter().position(|x| x == v) {
            return i as i64;
        }
        self.p.string_table.push(v.to_string());
        self.p.string_table.len() as i64 - 1
    }

    fn sample_type(&mut self, t: &str, u: &str) {
        let vt = ValueType {
            r#type: self.s(t),
            unit: self.s(u),
        };
        self.p.sample_type.push(vt);
    }

    fn function(&mut self, id: u64, name: &str) {
        let f = Function {
            id,
            name: self.s(name),
            system_name: self.s(&format!("sys_{name}")),
            filename: self.s("main.go"),
            start_line: 10,
        };
        self.p.function.push(f);
    }

    /// `functions` callee first, as pprof lines are.
    fn location(&mut self, id: u64, mapping_id: u64, address: u64, functions: &[u64]) {
        self.p.location.push(Location {
            id,
            mapping_id,
            address,
            line: functions
                .iter()
                .map(|&f| Line {
                    function_id: f,
                    line: 20 + f as i64,
                    column: 3,
                })
                .collect(),
            is_folded: false,
        });
    }

    /// `locations` leaf first.
    fn sample(&mut self, locations: &[u64], values: &[i64], labels: &[(&str, &str)]) {
        let label = labels
            .iter()
            .map(|(k, v)| match v.strip_prefix('#') {
                Some(num) => {
                    let (n, unit) = num.split_once(' ').unwrap_or((num, ""));
                    Label {
                        key: self.s(k),
                        str: 0,
                        num: n.parse().unwrap(),
                        num_unit: self.s(unit),
                    }
                }
                None => Label {
                    key: self.s(k),
                    str: self.s(v),
                    num: 0,
                    num_unit: 0,
                },
            })
            .collect();
        self.p.sample.push(pprof::Sample {
            location_id: locations.to_vec(),
            value: values.to_vec(),
            label,
        });
    }

    fn bytes(&self) -> Vec<u8> {
        self.p.encode_to_vec()
    }
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn source() -> Source {
    Source {
        resource: vec![
            ("service.name".into(), "svc".into()),
            ("env".into(), "prod".into()),
        ],
        scope: "pyroscope-go".into(),
        time_nanos: Some(111),
        duration_nanos: Some(222),
        ..Default::default()
    }
}

const LIMIT: usize = 64 << 20;

fn run_with(data: &[u8], options: &PprofOptions<'_>) -> Result<(Converted, Vec<ProfileView>), ConvertError> {
    let mut b = RequestBuilder::new();
    let c = convert(data, options, &source(), LIMIT, &mut b)?;
    assert_eq!(c.profiles, b.profile_count());
    Ok((c, profiles(&b.finish())))
}

fn run(data: &[u8]) -> Result<(Converted, Vec<ProfileView>), ConvertError> {
    run_with(data, &PprofOptions::default())
}

fn err(data: &[u8]) -> String {
    let mut b = RequestBuilder::new();
    let e = convert(data, &PprofOptions::default(), &source(), LIMIT, &mut b)
        .unwrap_err()
        .to_string();
    assert_eq!(b.profile_count(), 0, "nothing pushed on error");
    e
}

/// Expected value per root-first path per sample type index, walked straight from the
/// pprof message (ids looked up by id, lines callee first).
fn expected(p: &pprof::Profile) -> Vec<BTreeMap<String, i64>> {
    // Tables without ids (all 0, as .NET writes them) are referenced by position from 1.
    let positional = |ids: Vec<u64>| -> Vec<u64> {
        if ids.iter().all(|&id| id == 0) {
            (1..=ids.len() as u64).collect()
        } else {
            ids
        }
    };
    let loc_ids = positional(p.location.iter().map(|l| l.id).collect());
    let fn_ids = positional(p.function.iter().map(|f| f.id).collect());
    let locs: HashMap<u64, &Location> = loc_ids.into_iter().zip(&p.location).collect();
    let funcs: HashMap<u64, &Function> = fn_ids.into_iter().zip(&p.function).collect();
    let mut out = vec![BTreeMap::new(); p.sample_type.len()];
    for s in &p.sample {
        let mut names: Vec<&str> = s
            .location_id
            .iter()
            .flat_map(|id| &locs[id].line)
            .map(|l| {
                funcs
                    .get(&l.function_id)
                    .map_or("", |f| p.string_table[f.name as usize].as_str())
            })
            .collect();
        names.reverse();
        for (t, v) in s.value.iter().enumerate() {
            if *v != 0 {
                *out[t].entry(names.join(";")).or_default() += v;
            }
        }
    }
    out
}

/// Sums per type id over all profiles (profile ids split one type into several).
fn by_type(ps: &[ProfileView]) -> BTreeMap<String, BTreeMap<String, i64>> {
    let mut out: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    for p in ps {
        let m = out.entry(p.type_id.clone()).or_default();
        for (path, v) in p.by_path() {
            *m.entry(path).or_default() += v;
        }
    }
    out
}

/// Two sample types, non-contiguous ids, an inlined location, labels of every kind.
fn cpu_profile() -> P {
    let mut p = P::new();
    p.sample_type("samples", "count");
    p.sample_type("cpu", "nanoseconds");
    p.p.period_type = Some(ValueType {
        r#type: p.s("cpu"),
        unit: p.s("nanoseconds"),
    });
    p.p.period = 10_000_000;
    p.p.time_nanos = 1_700_000_000_000_000_000;
    p.p.duration_nanos = 10_000_000_000;
    let m = Mapping {
        id: 77,
        memory_start: 0x1000,
        memory_limit: 0x9000,
        file_offset: 0x10,
        filename: p.s("/bin/app"),
        build_id: p.s("abc123"),
        ..Default::default()
    };
    p.p.mapping.push(m);
    p.function(9, "main.main");
    p.function(3, "main.work");
    p.function(12, "main.inlined");
    p.function(40, "runtime.leaf");
    p.location(100, 77, 0x1100, &[9]);
    // main.inlined was inlined into main.work: callee first.
    p.location(7, 77, 0x1200, &[12, 3]);
    p.location(42, 0, 0x1300, &[40]);
    p.sample(
        &[42, 7, 100],
        &[3, 30_000_000],
        &[("region", "us"), ("bytes", "#1024 bytes")],
    );
    p.sample(&[7, 100], &[1, 10_000_000], &[("span_id", "00f067aa0ba902b7")]);
    p.sample(
        &[42, 100],
        &[0, 5],
        &[
            ("trace_id", "4bf92f3577b34da6a3ce929d0e0e4736"),
            ("span_id", "00f067aa0ba902b7"),
        ],
    );
    p.sample(
        &[100],
        &[2, 20_000_000],
        &[("span_id", "not-hex"), ("trace_id", "4bf9")],
    );
    p
}

#[test]
fn converts_every_sample_type_with_paths_labels_and_links() {
    let p = cpu_profile();
    let (c, ps) = run(&gzip(&p.bytes())).unwrap();
    assert_eq!(
        c,
        Converted {
            profiles: 2,
            samples: 7
        }
    );
    assert_eq!(ps.len(), 2);
    let want = expected(&p.p);
    assert_eq!(ps[0].type_id, "samples:count:cpu:nanoseconds");
    assert_eq!(ps[1].type_id, "cpu:nanoseconds:cpu:nanoseconds");
    for (t, view) in ps.iter().enumerate() {
        assert_eq!(view.by_path(), want[t]);
        assert_eq!(
            (view.time, view.duration, view.period),
            (1_700_000_000_000_000_000, 10_000_000_000, 10_000_000)
        );
        assert!(view.profile_id.is_empty());
        assert_eq!(view.scope, "pyroscope-go");
        assert_eq!(view.resource.len(), 2);
    }
    assert_eq!(
        ps[0].by_path(),
        BTreeMap::from([
            ("main.main;main.work;main.inlined;runtime.leaf".to_string(), 3),
            ("main.main;main.work;main.inlined".to_string(), 1),
            ("main.main".to_string(), 2),
        ]),
        "the zero-valued sample is left out"
    );
    let cpu = &ps[1].samples;
    assert_eq!(cpu[0].attributes, ["region=us", "bytes=1024 bytes"]);
    assert!(cpu[0].trace_id.is_empty() && cpu[0].span_id.is_empty());
    assert!(
        cpu[1].attributes.is_empty(),
        "span_id is a link, not an attribute"
    );
    assert_eq!(
        (cpu[1].trace_id.len(), hex::encode(&cpu[1].span_id)),
        (0, "00f067aa0ba902b7".to_string())
    );
    assert_eq!(hex::encode(&cpu[2].trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(hex::encode(&cpu[2].span_id), "00f067aa0ba902b7");
    assert_eq!(
        cpu[3].attributes,
        ["span_id=not-hex", "trace_id=4bf9"],
        "unparsable ids stay attributes"
    );
    assert!(cpu[3].trace_id.is_empty() && cpu[3].span_id.is_empty());
}

#[test]
fn keeps_functions_mappings_and_lines() {
    let p = cpu_profile();
    let mut b = RequestBuilder::new();
    convert(&p.bytes(), &PprofOptions::default(), &source(), LIMIT, &mut b).unwrap();
    let req = b.finish();
    let d = req.dictionary.unwrap();
    let s = |i: i32| d.string_table[i as usize].as_str();
    let f = d
        .function_table
        .iter()
        .find(|f| s(f.name_strindex) == "main.work")
        .unwrap();
    assert_eq!(
        (s(f.system_name_strindex), s(f.filename_strindex), f.start_line),
        ("sys_main.work", "main.go", 10)
    );
    let inlined = d
        .location_table
        .iter()
        .find(|l| l.lines.len() == 2)
        .expect("the inlined location");
    assert_eq!(inlined.address, 0x1200);
    let names: Vec<&str> = inlined
        .lines
        .iter()
        .map(|l| s(d.function_table[l.function_index as usize].name_strindex))
        .collect();
    assert_eq!(names, ["main.inlined", "main.work"]);
    assert_eq!((inlined.lines[0].line, inlined.lines[0].column), (32, 3));
    let m = &d.mapping_table[inlined.mapping_index as usize];
    assert_eq!(
        (
            m.memory_start,
            m.memory_limit,
            m.file_offset,
            s(m.filename_strindex)
        ),
        (0x1000, 0x9000, 0x10, "/bin/app")
    );
    let build_id = &d.attribute_table[m.attribute_indices[0] as usize];
    assert_eq!(s(build_id.key_strindex), "process.executable.build_id.gnu");
    let leaf = d.location_table.iter().find(|l| l.address == 0x1300).unwrap();
    assert_eq!(leaf.mapping_index, 0, "mapping id 0 is no mapping");
}

#[test]
fn profile_id_labels_split_profiles() {
    let mut p = P::new();
    p.sample_type("samples", "count");
    p.function(1, "f");
    p.location(1, 0, 0, &[1]);
    let uuid = "123e4567-e89b-12d3-a456-426614174000";
    p.sample(&[1], &[1], &[("profile_id", uuid)]);
    p.sample(
        &[1],
        &[2],
        &[("profile_id", "00112233445566778899aabbccddeeff"), ("k", "v")],
    );
    p.sample(&[1], &[4], &[("profile_id", uuid)]);
    p.sample(&[1], &[8], &[]);
    p.sample(&[1], &[16], &[("profile_id", "xyz")]);
    let (c, ps) = run(&p.bytes()).unwrap();
    assert_eq!(
        c,
        Converted {
            profiles: 3,
            samples: 5
        }
    );
    assert_eq!(hex::encode(&ps[0].profile_id), "123e4567e89b12d3a456426614174000");
    assert_eq!(ps[0].total(), 5);
    assert_eq!(hex::encode(&ps[1].profile_id), "00112233445566778899aabbccddeeff");
    assert_eq!(ps[1].total(), 2);
    assert_eq!(ps[1].samples[0].attributes, ["k=v"]);
    assert!(ps[2].profile_id.is_empty());
    assert_eq!(ps[2].total(), 24);
    assert_eq!(ps[2].samples[1].attributes, ["profile_id=xyz"]);
    for v in &ps {
        assert_eq!(
            (v.type_id.as_str(), v.time, v.duration),
            ("samples:count::", 111, 222),
            "time from the source"
        );
    }
}

fn heap(values: &[(&[u64], [i64; 4])], address_base: u64, function_ids: [u64; 3]) -> P {
    let mut p = P::new();
    for t in ["alloc_objects", "alloc_space", "inuse_objects", "inuse_space"] {
        p.sample_type(t, if t.ends_with("space") { "bytes" } else { "count" });
    }
    // Ids differ between profiles; names and addresses match.
    for (k, name) in ["main", "alloc", "grow"].iter().enumerate() {
        p.function(function_ids[k], name);
        p.location(
            function_ids[k] * 10,
            0,
            address_base + k as u64,
            &[function_ids[k]],
        );
    }
    for (stack, v) in values {
        let ids: Vec<u64> = stack.iter().map(|&k| function_ids[k as usize] * 10).collect();
        p.sample(&ids, v, &[("worker", "1")]);
    }
    p
}

#[test]
fn previous_profile_is_subtracted_for_cumulative_types() {
    // Stacks by function position, leaf first: [1, 0] is main;alloc.
    let current = heap(
        &[
            (&[1, 0], [10, 1000, 5, 500]),
            (&[2, 0], [3, 300, 1, 100]),
            (&[1, 0], [2, 200, 1, 100]),
            (&[2, 1, 0], [7, 700, 7, 700]),
        ],
        0x100,
        [1, 2, 3],
    );
    let previous = heap(
        &[
            (&[1, 0], [4, 400, 9, 900]),
            (&[2, 0], [3, 350, 0, 0]),
            (&[0], [50, 50, 50, 50]),
        ],
        0x100,
        [31, 17, 5],
    );
    let prev_bytes = gzip(&previous.bytes());
    let (_, ps) = run_with(
        &current.bytes(),
        &PprofOptions {
            previous: Some(&prev_bytes),
            sample_type_config: None,
        },
    )
    .unwrap();
    let got = by_type(&ps);
    let m = |pairs: &[(&str, i64)]| -> BTreeMap<String, i64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    };
    // alloc_*: (10 + 2) − 4 and 7 − 0; main;grow 3 − 3 = 0 and 300 − 350 < 0 dropped.
    assert_eq!(
        got["alloc_objects:count::"],
        m(&[("main;alloc", 8), ("main;alloc;grow", 7)])
    );
    assert_eq!(
        got["alloc_space:bytes::"],
        m(&[("main;alloc", 800), ("main;alloc;grow", 700)])
    );
    // inuse_*: as sent.
    let want = expected(&current.p);
    assert_eq!(got["inuse_objects:count::"], want[2]);
    assert_eq!(got["inuse_space:bytes::"], want[3]);
    let kept = &ps[0].samples[0];
    assert_eq!(
        kept.attributes,
        ["worker=1"],
        "the first sample's labels are kept"
    );

    // A different address is a different sample: nothing subtracted.
    let moved = heap(&[(&[1, 0], [4, 400, 9, 900])], 0x900, [1, 2, 3]).bytes();
    let (_, ps) = run_with(
        &current.bytes(),
        &PprofOptions {
            previous: Some(&moved),
            sample_type_config: None,
        },
    )
    .unwrap();
    assert_eq!(
        by_type(&ps)["alloc_objects:count::"],
        m(&[("main;alloc", 12), ("main;grow", 3), ("main;alloc;grow", 7)])
    );
}

#[test]
fn sample_type_config_renames_sets_units_and_cumulative() {
    let current = heap(&[(&[1, 0], [10, 1000, 5, 500])], 0x100, [1, 2, 3]);
    let previous = heap(&[(&[1, 0], [4, 400, 2, 200])], 0x100, [1, 2, 3]).bytes();
    let config = br#"{"alloc_space": {"units": "bytes", "display-name": "alloc_in_bytes", "cumulative": false, "aggregation": "sum", "sampled": false},
                      "inuse_objects": {"units": "objects", "display-name": "live", "cumulative": true},
                      "inuse_space": {"units": "furlongs"}}"#;
    let (_, ps) = run_with(
        &current.bytes(),
        &PprofOptions {
            previous: Some(&previous),
            sample_type_config: Some(config),
        },
    )
    .unwrap();
    let totals: Vec<(&str, i64)> = ps.iter().map(|p| (p.type_id.as_str(), p.total())).collect();
    assert_eq!(
        totals,
        [
            ("alloc_objects:count::", 6),
            ("alloc_in_bytes:bytes::", 1000),
            ("live:count::", 3),
            ("inuse_space:furlongs::", 500),
        ]
    );
}

#[test]
fn ids_are_resolved_by_id_and_broken_references_are_named() {
    let base = cpu_profile();
    let check = |mutate: &dyn Fn(&mut pprof::Profile), needle: &str| {
        let mut p = base.p.clone();
        mutate(&mut p);
        let e = err(&p.encode_to_vec());
        assert!(
            e.starts_with("invalid pprof: ") && e.contains(needle),
            "{needle}: {e}"
        );
    };
    check(
        &|p| p.string_table[0] = "x".into(),
        "string_table[0] must be empty, got \"x\"",
    );
    check(&|p| p.string_table.clear(), "string_table is empty");
    check(&|p| p.sample_type.clear(), "no sample_type");
    check(
        &|p| p.sample[2].location_id[1] = 5,
        "sample 2: location id 5 not found",
    );
    check(
        &|p| p.sample[1].location_id[0] = 0,
        "sample 1: location id 0 not found",
    );
    check(
        &|p| p.location[1].line[1].function_id = 4,
        "location id 7: function id 4 not found",
    );
    check(
        &|p| p.location[0].mapping_id = 78,
        "location id 100: mapping id 78 not found",
    );
    check(
        &|p| p.function[0].name = 999,
        "function id 9: name string index 999 out of range (string_table has",
    );
    check(
        &|p| p.function[1].filename = -1,
        "function id 3: filename string index -1 out of range",
    );
    check(
        &|p| p.mapping[0].build_id = 999,
        "mapping id 77: build_id string index 999 out of range",
    );
    check(
        &|p| p.sample[3].label[1].key = 999,
        "sample 3: label[1].key string index 999",
    );
    check(
        &|p| p.sample[0].label[1].num_unit = 999,
        "sample 0: label[1].num_unit string index 999",
    );
    check(
        &|p| p.sample_type[1].unit = 999,
        "sample_type[1].unit string index 999",
    );
    check(
        &|p| p.period_type.as_mut().unwrap().r#type = 999,
        "period_type.type string index 999",
    );
    check(
        &|p| p.sample[2].value.pop().map(drop).unwrap(),
        "sample 2 has 1 values but sample_type has 2 entries",
    );
    check(&|p| p.location[2].id = 7, "location[2]: duplicate location id 7");
    check(&|p| p.function[2].id = 0, "function[2] has id 0");
}

#[test]
fn broken_bodies_are_refused_with_the_reason() {
    let good = cpu_profile().bytes();
    let e = err(&good[..good.len() - 3]);
    assert!(e.contains("invalid pprof: not a pprof protobuf"), "{e}");
    let e = err(b"\xff\xff\xff\xff garbage that is not protobuf");
    assert!(e.contains("invalid pprof: not a pprof protobuf"), "{e}");
    let e = err(b"");
    assert!(e.contains("empty profile"), "{e}");
    let gz = gzip(&good);
    let e = err(&gz[..gz.len() / 2]);
    assert!(e.contains("invalid pprof:") && e.contains("gzip"), "{e}");
    let e = err(b"hello, world");
    assert!(e.starts_with("invalid pprof:"), "{e}");

    // A gzip bomb stops at the limit.
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(&vec![0u8; 8 << 20]).unwrap();
    let bomb = e.finish().unwrap();
    assert!(bomb.len() < 64 << 10, "bomb is {} bytes", bomb.len());
    let mut b = RequestBuilder::new();
    let e = convert(&bomb, &PprofOptions::default(), &source(), 1 << 20, &mut b).unwrap_err();
    assert!(
        matches!(
            e,
            ConvertError::TooLarge {
                format: "pprof",
                limit: 1048576
            }
        ),
        "{e}"
    );
    let e = convert(&good, &PprofOptions::default(), &source(), 16, &mut b).unwrap_err();
    assert!(matches!(e, ConvertError::TooLarge { .. }), "{e}");

    // The previous profile and the config are checked too.
    let bad_previous = PprofOptions {
        previous: Some(b"\x0a\x05abc"),
        sample_type_config: None,
    };
    let e = convert(&good, &bad_previous, &source(), LIMIT, &mut b)
        .unwrap_err()
        .to_string();
    assert!(e.contains("previous_profile: not a pprof protobuf"), "{e}");
    let bad_config = PprofOptions {
        previous: None,
        sample_type_config: Some(b"{oops"),
    };
    let e = convert(&good, &bad_config, &source(), LIMIT, &mut b)
        .unwrap_err()
        .to_string();
    assert!(e.contains("sample_type_config: not JSON"), "{e}");
    assert_eq!(b.profile_count(), 0);
}

#[test]
fn mutated_profiles_never_panic() {
    let good = cpu_profile().bytes();
    let mut seed = 0x853c49e6748fea9bu64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for round in 0..3000 {
        let mut data = good.clone();
        for _ in 0..1 + round % 4 {
            let i = next() as usize % data.len();
            data[i] = next() as u8;
        }
        if round % 7 == 0 {
            data.truncate(next() as usize % data.len());
        }
        let mut b = RequestBuilder::new();
        let previous = (round % 5 == 0).then_some(&data[..]);
        let options = PprofOptions {
            previous,
            sample_type_config: None,
        };
        if convert(&data, &options, &source(), LIMIT, &mut b).is_ok() {
            // Whatever converts must also pass the OTLP checks.
            profiles(&b.finish());
        }
    }
}

fn testdata(name: &str) -> Vec<u8> {
    let dir = std::env::var("STACKHOUSE_TESTDATA").unwrap_or_else(|_| "/work/shared/testdata".into());
    let path = format!("{dir}/pprof/{name}");
    std::fs::read(&path).unwrap_or_else(|e| panic!("test data {path} missing: {e}"))
}

fn inflate(data: &[u8]) -> Vec<u8> {
    if !data.starts_with(&[0x1f, 0x8b]) {
        return data.to_vec();
    }
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::MultiGzDecoder::new(data), &mut out).unwrap();
    out
}

#[test]
fn every_testdata_profile_converts_with_its_totals() {
    let dir = std::env::var("STACKHOUSE_TESTDATA").unwrap_or_else(|_| "/work/shared/testdata".into());
    let mut names: Vec<String> = std::fs::read_dir(format!("{dir}/pprof"))
        .expect("testdata/pprof")
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n != "invalid_utf8.pb.gz")
        .collect();
    names.sort();
    assert!(names.len() >= 10, "{names:?}");
    for name in names {
        let data = testdata(&name);
        let p = pprof::Profile::decode(inflate(&data).as_slice()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let (c, ps) = run(&data).unwrap_or_else(|e| panic!("{name}: {e}"));
        let want = expected(&p);
        let got = by_type(&ps);
        assert_eq!(got.len(), p.sample_type.len(), "{name}");
        for (t, vt) in p.sample_type.iter().enumerate() {
            let period = p.period_type.map_or(String::new(), |pt| {
                format!(
                    "{}:{}",
                    p.string_table[pt.r#type as usize], p.string_table[pt.unit as usize]
                )
            });
            let id = format!(
                "{}:{}:{}",
                p.string_table[vt.r#type as usize],
                p.string_table[vt.unit as usize],
                if period.is_empty() { ":" } else { &period }
            );
            let total: i64 = p.sample.iter().map(|s| s.value[t]).sum();
            let got_type = got
                .get(&id)
                .unwrap_or_else(|| panic!("{name}: no {id} in {:?}", got.keys()));
            assert_eq!(got_type.values().sum::<i64>(), total, "{name} {id} total");
            assert_eq!(*got_type, want[t], "{name} {id} per path");
        }
        let nonzero: usize = (0..p.sample_type.len())
            .map(|t| p.sample.iter().filter(|s| s.value[t] != 0).count())
            .sum();
        assert_eq!(c.samples, nonzero, "{name}");
        for v in &ps {
            let t = if p.time_nanos > 0 {
                p.time_nanos as u64
            } else {
                111
            };
            assert_eq!(v.time, t, "{name}");
            assert_eq!(v.period, p.period, "{name}");
        }
    }
}

#[test]
fn go_exemplar_span_ids_become_links() {
    // Pyroscope's Go exemplars label samples `profile_id` = the 16-hex-digit span id.
    let data = testdata("cpu-exemplars.pb.gz");
    let p = pprof::Profile::decode(inflate(&data).as_slice()).unwrap();
    let key = p
        .string_table
        .iter()
        .position(|s| s == "profile_id")
        .expect("profile_id labels") as i64;
    // Per span id, the sum of the last sample type's values, from the file.
    let t = p.sample_type.len() - 1;
    let mut want: BTreeMap<String, i64> = BTreeMap::new();
    for s in &p.sample {
        if let Some(l) = s.label.iter().find(|l| l.key == key) {
            let id = &p.string_table[l.str as usize];
            assert_eq!(id.len(), 16);
            *want.entry(id.clone()).or_default() += s.value[t];
        }
    }
    assert!(want.len() > 100, "{}", want.len());
    let (_, ps) = run(&data).unwrap();
    let mut got: BTreeMap<String, i64> = BTreeMap::new();
    for s in &ps[t].samples {
        assert!(!s.attributes.iter().any(|a| a.starts_with("profile_id=")));
        if !s.span_id.is_empty() {
            assert!(s.trace_id.is_empty());
            *got.entry(hex::encode(&s.span_id)).or_default() += s.value;
        }
    }
    assert_eq!(got, want);
    assert!(ps.iter().all(|v| v.profile_id.is_empty()));
}

/// `perftools.profiles.Profile` with only what this test reads, strings as bytes.
#[derive(Clone, PartialEq, Message)]
struct BytesProfile {
    #[prost(message, repeated, tag = "1")]
    sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    sample: Vec<pprof::Sample>,
    #[prost(message, repeated, tag = "4")]
    location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    function: Vec<Function>,
    #[prost(bytes = "vec", repeated, tag = "6")]
    string_table: Vec<Vec<u8>>,
}

#[test]
fn invalid_utf8_is_stored_with_replacement_characters() {
    let data = testdata("invalid_utf8.pb.gz");
    let raw = inflate(&data);
    assert!(
        pprof::Profile::decode(raw.as_slice()).is_err(),
        "the file is meant to hold invalid UTF-8"
    );
    let bp = BytesProfile::decode(raw.as_slice()).unwrap();
    let invalid: Vec<String> = bp
        .string_table
        .iter()
        .filter(|s| std::str::from_utf8(s).is_err())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect();
    assert!(!invalid.is_empty());
    // The same profile with the lossy strings: its expected paths.
    let p = pprof::Profile {
        sample_type: bp.sample_type.clone(),
        sample: bp.sample.clone(),
        location: bp.location.clone(),
        function: bp.function.clone(),
        string_table: bp
            .string_table
            .iter()
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect(),
        ..Default::default()
    };
    let want = expected(&p);
    let (_, ps) = run(&data).unwrap();
    let got = by_type(&ps);
    for (t, vt) in p.sample_type.iter().enumerate() {
        let prefix = format!(
            "{}:{}:",
            p.string_table[vt.r#type as usize], p.string_table[vt.unit as usize]
        );
        let (_, paths) = got.iter().find(|(k, _)| k.starts_with(&prefix)).unwrap();
        assert_eq!(*paths, want[t]);
    }
    let all: String = got.values().flat_map(|m| m.keys()).cloned().collect();
    let stored_invalid = invalid.iter().filter(|s| all.contains(s.as_str())).count();
    let names_invalid = p
        .function
        .iter()
        .filter(|f| invalid.contains(&p.string_table[f.name as usize]))
        .count();
    assert!(names_invalid > 0, "the file names a function with invalid UTF-8");
    assert!(stored_invalid > 0 && all.contains('\u{fffd}'));
}
