use std::collections::BTreeMap;

use super::*;
use crate::pprof::test_support::profiles;

fn source() -> Source {
    Source {
        resource: vec![("service.name".into(), "app".into())],
        scope: "rbspy".into(),
        time_nanos: Some(1_700_000_000_000_000_000),
        duration_nanos: Some(10_000_000_000),
        ..Default::default()
    }
}

fn run(
    text: &str,
    source: &Source,
) -> Result<(Converted, Vec<crate::pprof::test_support::ProfileView>), ConvertError> {
    let mut b = RequestBuilder::new();
    let c = convert(text.as_bytes(), source, &mut b)?;
    Ok((c, profiles(&b.finish())))
}

/// The expected value per path, computed from the text independently of the parser.
fn expected(text: &str) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let cut = line.rfind(' ').unwrap();
        *out.entry(line[..cut].to_string()).or_default() += line[cut + 1..].trim().parse::<i64>().unwrap();
    }
    out
}

#[test]
fn lines_become_root_first_paths_with_values_as_sent() {
    let text =
        "main;work;leaf 10\r\nmain;work 3\n\nmain;work;leaf 5\nmain;Foo::bar(int, char*) const;<lambda> 7\n";
    let (c, ps) = run(text, &source()).unwrap();
    assert_eq!(
        c,
        Converted {
            profiles: 1,
            samples: 4
        }
    );
    assert_eq!(ps.len(), 1);
    let p = &ps[0];
    assert_eq!(p.type_id, "cpu:count::");
    assert_eq!(p.by_path(), expected(text));
    assert_eq!(p.by_path()["main;Foo::bar(int, char*) const;<lambda>"], 7);
    assert_eq!((p.time, p.duration), (1_700_000_000_000_000_000, 10_000_000_000));
    assert_eq!(p.resource, [("service.name".to_string(), "app".to_string())]);
    assert_eq!(p.scope, "rbspy");
}

#[test]
fn sample_rate_gives_cpu_a_period_and_units_map() {
    let mut s = source();
    s.sample_rate = Some(100);
    let (_, ps) = run("a;b 2\n", &s).unwrap();
    assert_eq!(
        (ps[0].type_id.as_str(), ps[0].period),
        ("cpu:count:cpu:nanoseconds", 10_000_000)
    );
    assert_eq!(ps[0].total(), 2, "values are not multiplied by the period");

    for (hint, units, id) in [
        ("alloc_space", "bytes", "alloc_space:bytes::"),
        ("inuse_objects", "objects", "inuse_objects:count::"),
        ("goroutines", "goroutines", "goroutines:count::"),
        ("mutex_count", "lock_samples", "mutex_count:count::"),
        (
            "mutex_duration",
            "lock_nanoseconds",
            "mutex_duration:nanoseconds::",
        ),
    ] {
        let mut s = source();
        s.sample_rate = Some(100);
        s.type_hint = Some(hint.into());
        s.units = Some(units.into());
        let (_, ps) = run("a;b 2\n", &s).unwrap();
        assert_eq!((ps[0].type_id.as_str(), ps[0].period), (id, 0), "{hint}/{units}");
    }
}

#[test]
fn without_time_the_profile_time_is_zero() {
    let (_, ps) = run("a 1", &Source::default()).unwrap();
    assert_eq!((ps[0].time, ps[0].duration), (0, 0));
    assert_eq!(ps[0].by_path(), BTreeMap::from([("a".to_string(), 1)]));
}

#[test]
fn empty_input_is_an_empty_profile() {
    let (c, ps) = run("\n\r\n  \n", &source()).unwrap();
    assert_eq!(
        c,
        Converted {
            profiles: 1,
            samples: 0
        }
    );
    assert_eq!(ps[0].total(), 0);
}

#[test]
fn malformed_lines_refuse_the_input_naming_the_line() {
    for (text, needle) in [
        ("a;b 1\nab\n", "line 2: no value"),
        ("a;b 1\n\na;b x\n", "line 3: value \"x\""),
        ("a;b -4\n", "line 1: value \"-4\""),
        ("a;b 1.5\n", "line 1: value \"1.5\""),
        ("a;b 99999999999999999999\n", "line 1: value"),
        ("a;;b 1\n", "line 1: frame 2 has an empty name"),
        ("a;b; 1\n", "line 1: frame 3 has an empty name"),
        (" 1\n", "line 1: frame 1 has an empty name"),
    ] {
        let mut b = RequestBuilder::new();
        let e = convert(text.as_bytes(), &source(), &mut b)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("invalid folded: ") && e.contains(needle),
            "{text:?}: {e}"
        );
        assert_eq!(b.profile_count(), 0);
    }
    let mut b = RequestBuilder::new();
    let e = convert(b"a 1\nb\xff 2\n", &source(), &mut b)
        .unwrap_err()
        .to_string();
    assert!(e.contains("line 2: not valid utf-8"), "{e}");
}

#[test]
fn arbitrary_bytes_never_panic() {
    let mut seed = 0x9e3779b97f4a7c15u64;
    for len in 0..300 {
        let data: Vec<u8> = (0..len)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let alphabet = b"ab; 1\n\r9\xff";
                alphabet[(seed % alphabet.len() as u64) as usize]
            })
            .collect();
        let mut b = RequestBuilder::new();
        let _ = convert(&data, &source(), &mut b);
    }
}
