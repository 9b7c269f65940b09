use std::collections::BTreeMap;

use super::*;
use crate::pprof::test_support::{ProfileView, profiles};

fn testdata(name: &str) -> Vec<u8> {
    let dir = std::env::var("STACKHOUSE_TESTDATA").unwrap_or_else(|_| "/work/shared/testdata".into());
    let path = format!("{dir}/speedscope/{name}");
    std::fs::read(&path).unwrap_or_else(|e| panic!("test data {path} missing: {e}"))
}

fn run(data: &[u8]) -> Result<(Converted, Vec<ProfileView>), ConvertError> {
    let mut b = RequestBuilder::new();
    let source = Source {
        resource: vec![("service.name".into(), "svc".into())],
        time_nanos: Some(5_000),
        ..Default::default()
    };
    let c = convert(data, &source, &mut b)?;
    Ok((c, profiles(&b.finish())))
}

fn err(json: &str) -> String {
    let mut b = RequestBuilder::new();
    let e = convert(json.as_bytes(), &Source::default(), &mut b)
        .unwrap_err()
        .to_string();
    assert_eq!(b.profile_count(), 0, "nothing pushed on error");
    e
}

fn paths(pairs: &[(&str, i64)]) -> BTreeMap<String, i64> {
    pairs.iter().map(|(p, v)| (p.to_string(), *v)).collect()
}

/// Per-path totals of every profile, read straight from the JSON: sampled weights, or the
/// time between consecutive events charged to the frames open in between.
fn expected_from_json(data: &[u8]) -> Vec<BTreeMap<String, i64>> {
    let v: Value = serde_json::from_slice(data).unwrap();
    let names: Vec<&str> = v["shared"]["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    let mut out = Vec::new();
    for p in v["profiles"].as_array().unwrap() {
        let mut m = BTreeMap::new();
        if p["type"] == "sampled" {
            for (s, w) in p["samples"]
                .as_array()
                .unwrap()
                .iter()
                .zip(p["weights"].as_array().unwrap())
            {
                let path: Vec<&str> = s
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|i| names[i.as_u64().unwrap() as usize])
                    .collect();
                *m.entry(path.join(";")).or_default() += w.as_i64().unwrap();
            }
        } else {
            let mut open: Vec<&str> = Vec::new();
            let mut last = 0;
            for e in p["events"].as_array().unwrap() {
                let at = e["at"].as_i64().unwrap();
                if !open.is_empty() && at > last {
                    *m.entry(open.join(";")).or_default() += at - last;
                }
                last = at;
                let name = names[e["frame"].as_u64().unwrap() as usize];
                if e["type"] == "O" {
                    open.push(name);
                } else {
                    assert_eq!(open.pop(), Some(name));
                }
            }
        }
        out.push(m);
    }
    out
}

#[test]
fn evented_file_stores_self_time_per_stack() {
    let data = testdata("simple.speedscope.json");
    let (c, ps) = run(&data).unwrap();
    assert_eq!(c.profiles, 1);
    assert_eq!(ps.len(), 1);
    let p = &ps[0];
    assert_eq!(p.type_id, "samples:count::");
    assert_eq!(p.by_path(), expected_from_json(&data)[0]);
    // By hand from the file: c 0..2 and 6..9, d 2..6, b alone 9..14.
    assert_eq!(p.by_path(), paths(&[("a;b;c", 5), ("a;b;d", 4), ("a;b", 5)]));
    assert_eq!(p.attributes, ["profile.name=simple.txt"]);
    assert_eq!((p.time, p.duration), (5_000, 0));
}

#[test]
fn sampled_file_stores_weights() {
    let data = testdata("two-sampled.speedscope.json");
    let (c, ps) = run(&data).unwrap();
    assert_eq!(
        c,
        Converted {
            profiles: 2,
            samples: 10
        }
    );
    let expected = expected_from_json(&data);
    for (i, p) in ps.iter().enumerate() {
        assert_eq!(p.type_id, "wall:seconds::");
        assert_eq!(p.by_path(), expected[i]);
        assert_eq!(p.total(), 14);
        assert_eq!(p.duration, 14_000_000_000, "endValue - startValue seconds");
        assert_eq!(p.resource, [("service.name".to_string(), "svc".to_string())]);
    }
    assert_eq!(ps[0].attributes, ["profile.name=one"]);
    assert_eq!(ps[1].attributes, ["profile.name=two"]);
}

#[test]
fn units_and_fractional_times() {
    let file = |unit: &str, weights: &str| {
        format!(
            r#"{{"shared": {{"frames": [{{"name": "f", "file": "f.js", "line": 3, "col": 4}}, {{"name": "g"}}]}},
                "profiles": [{{"type": "sampled", "name": "", "unit": "{unit}", "startValue": 0, "endValue": 2.5,
                               "samples": [[0, 1], [0], []], "weights": {weights}}}]}}"#
        )
    };
    let (_, ps) = run(file("bytes", "[1, 2, 3]").as_bytes()).unwrap();
    assert_eq!(ps[0].type_id, "space:bytes::");
    assert_eq!(ps[0].by_path(), paths(&[("f;g", 1), ("f", 2), ("", 3)]));
    assert!(ps[0].attributes.is_empty(), "empty names are not kept");

    let (_, ps) = run(file("milliseconds", "[1, 2, 3.0]").as_bytes()).unwrap();
    assert_eq!(ps[0].type_id, "wall:milliseconds::");
    assert_eq!(ps[0].total(), 6);

    // Fractional milliseconds: stored in nanoseconds, rounded.
    let (_, ps) = run(file("milliseconds", "[0.5, 1.25, 0.0000004]").as_bytes()).unwrap();
    assert_eq!(ps[0].type_id, "wall:nanoseconds::");
    assert_eq!(
        ps[0].by_path(),
        paths(&[("f;g", 500_000), ("f", 1_250_000), ("", 0)])
    );
    assert_eq!(ps[0].duration, 2_500_000);

    let e = err(&file("none", "[0.5, 1, 1]"));
    assert!(e.contains("profile 0: fractional values in unit \"none\""), "{e}");
    let e = err(&file("furlongs", "[1, 1, 1]"));
    assert!(e.contains("profile 0: unknown unit \"furlongs\""), "{e}");
}

#[test]
fn fractional_event_times_become_nanoseconds() {
    let json = r#"{"shared": {"frames": [{"name": "a"}, {"name": "b"}]}, "profiles": [
        {"type": "evented", "name": "main", "unit": "milliseconds", "startValue": 0.5, "endValue": 3,
         "events": [{"type": "O", "frame": 0, "at": 0.5}, {"type": "O", "frame": 1, "at": 1.25},
                    {"type": "C", "frame": 1, "at": 2}, {"type": "C", "frame": 0, "at": 3}]}]}"#;
    let (_, ps) = run(json.as_bytes()).unwrap();
    assert_eq!(ps[0].type_id, "wall:nanoseconds::");
    assert_eq!(
        ps[0].by_path(),
        paths(&[("a", 750_000 + 1_000_000), ("a;b", 750_000)])
    );
    assert_eq!(ps[0].duration, 2_500_000);
}

#[test]
fn malformed_files_are_named() {
    let frames = r#""shared": {"frames": [{"name": "a"}, {"name": "b"}]}"#;
    let sampled =
        |rest: &str| format!(r#"{{{frames}, "profiles": [{{"type": "sampled", "unit": "none", {rest}}}]}}"#);
    let evented = |events: &str| {
        format!(
            r#"{{{frames}, "profiles": [{{"type": "sampled", "unit": "none", "samples": [], "weights": []}}, {{"type": "evented", "unit": "none", "events": [{events}]}}]}}"#
        )
    };
    for (json, needle) in [
        ("{".to_string(), "not JSON"),
        ("[]".to_string(), "missing the shared.frames array"),
        (format!("{{{frames}}}"), "missing the profiles array"),
        (
            r#"{"shared": {"frames": [{"file": "x"}]}, "profiles": []}"#.to_string(),
            "shared.frames[0] has no name",
        ),
        (
            sampled(r#""samples": [[0], [1]], "weights": [1]"#),
            "profile 0: samples has 2 entries but weights has 1",
        ),
        (
            sampled(r#""samples": [[0], [0, 2]], "weights": [1, 1]"#),
            "profile 0 sample 1: frame index 2 out of range (shared.frames has 2 entries)",
        ),
        (
            sampled(r#""samples": [[0], [-1]], "weights": [1, 1]"#),
            "profile 0 sample 1: frame index -1 out of range",
        ),
        (
            sampled(r#""samples": [[0], 5], "weights": [1, 1]"#),
            "profile 0 sample 1: not an array",
        ),
        (
            sampled(r#""samples": [[0]], "weights": [-1]"#),
            "profile 0: weights[0] is not a non-negative number",
        ),
        (
            sampled(r#""samples": [[0]], "weights": ["1"]"#),
            "profile 0: weights[0] is not a non-negative number",
        ),
        (
            sampled(r#""weights": []"#),
            "profile 0: missing the samples array",
        ),
        (
            evented(r#"{"type": "C", "frame": 0, "at": 1}"#),
            "profile 1 event 0: closes frame 0 but no frame is open",
        ),
        (
            evented(
                r#"{"type": "O", "frame": 0, "at": 1}, {"type": "O", "frame": 1, "at": 1}, {"type": "C", "frame": 0, "at": 2}"#,
            ),
            "profile 1 event 2: closes frame 0 while frame 1 is the innermost open frame",
        ),
        (
            evented(r#"{"type": "O", "frame": 0, "at": 1}"#),
            "profile 1: 1 frames still open after the last event",
        ),
        (
            evented(r#"{"type": "O", "frame": 0, "at": 5}, {"type": "C", "frame": 0, "at": 4}"#),
            "profile 1: event 1: at 4 is before the previous event's 5",
        ),
        (
            evented(r#"{"type": "O", "frame": 7, "at": 5}"#),
            "profile 1 event 0: frame index 7 out of range",
        ),
        (
            evented(r#"{"type": "X", "frame": 0, "at": 5}"#),
            "profile 1 event 0: type \"X\" is neither",
        ),
        (
            evented(r#"{"type": "O", "frame": 0}"#),
            "profile 1: event 0: at is not a number",
        ),
        (
            format!(r#"{{{frames}, "profiles": [{{"type": "flame", "unit": "none"}}]}}"#),
            "profile 0: unknown type \"flame\"",
        ),
    ] {
        let e = err(&json);
        assert!(
            e.starts_with("invalid speedscope: ") && e.contains(needle),
            "{json}\n{e}"
        );
    }
}

#[test]
fn arbitrary_bytes_never_panic() {
    let base = testdata("simple.speedscope.json");
    let mut seed = 0x2545f4914f6cdd1du64;
    for _ in 0..500 {
        let mut data = base.clone();
        for _ in 0..3 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let i = (seed as usize) % data.len();
            data[i] = b"0123456789-.OC[]{}\"x"[(seed >> 32) as usize % 20];
        }
        let mut b = RequestBuilder::new();
        let _ = convert(&data, &Source::default(), &mut b);
    }
}

fn nested(depth: usize) -> String {
    let mut events = Vec::new();
    for d in 0..depth {
        events.push(format!(r#"{{"type": "O", "frame": {}, "at": {d}}}"#, d % 2));
    }
    for d in (0..depth).rev() {
        events.push(format!(
            r#"{{"type": "C", "frame": {}, "at": {}}}"#,
            d % 2,
            2 * depth - d
        ));
    }
    format!(
        r#"{{"shared": {{"frames": [{{"name": "a"}}, {{"name": "b"}}]}}, "profiles": [{{"type": "evented", "unit": "none", "events": [{}]}}]}}"#,
        events.join(",")
    )
}

#[test]
fn deep_evented_stacks_are_bounded_by_the_input_size() {
    let (_, ps) = run(nested(200).as_bytes()).unwrap();
    // Every level holds self time 1 on the way in and 1 on the way out, except the
    // innermost, open from 199 to 201.
    assert_eq!(ps[0].total(), 400);
    assert_eq!(ps[0].samples.len(), 200);
    assert_eq!(ps[0].samples.iter().map(|s| s.path.len()).max(), Some(200));

    let e = err(&nested(20_000));
    assert!(
        e.contains("profile 0: evented stacks hold") && e.contains("too many"),
        "{e}"
    );
}
