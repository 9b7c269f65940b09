//! Which format a file is in, from its content alone (after gunzip).
//!
//! Checked in an order where each test excludes the later ones: the JFR magic; JSON
//! (OTLP by `resourceProfiles`, speedscope by `$schema` or `shared` + `profiles`); folded
//! text (every line `frames value`, which binary protobuf practically never is); pprof (a
//! `Profile` with sample types and a string table starting with ""); OTLP protobuf (only
//! fields 1 and 2, `resource_profiles` present — a pprof always carries field 6, its
//! string table).

use std::borrow::Cow;

use prost::Message;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detected {
    OtlpProtobuf,
    OtlpJson,
    Pprof,
    Jfr,
    Speedscope,
    Folded,
}

impl Detected {
    pub fn name(self) -> &'static str {
        match self {
            Detected::OtlpProtobuf => "otlp-protobuf",
            Detected::OtlpJson => "otlp-json",
            Detected::Pprof => "pprof",
            Detected::Jfr => "jfr",
            Detected::Speedscope => "speedscope",
            Detected::Folded => "folded",
        }
    }

    /// The converter of content in this format.
    pub fn wire_format(self) -> &'static dyn super::WireFormat {
        super::by_name(self.name()).expect("every detected format is registered")
    }

    /// The `/ingest` `format=` value; `None` for OTLP, which has its own endpoint.
    pub fn ingest_format(self) -> Option<&'static str> {
        match self {
            Detected::OtlpProtobuf | Detected::OtlpJson => None,
            Detected::Pprof => Some("pprof"),
            Detected::Jfr => Some("jfr"),
            Detected::Speedscope => Some("speedscope"),
            Detected::Folded => Some("folded"),
        }
    }
}

pub fn is_gzip(data: &[u8]) -> bool {
    data.starts_with(&[0x1f, 0x8b])
}

/// The content with one gzip layer removed, bounded by `limit`.
pub fn gunzip(data: &[u8], limit: usize) -> Result<Cow<'_, [u8]>, String> {
    if !is_gzip(data) {
        return Ok(Cow::Borrowed(data));
    }
    crate::body::decompress(data, Some("gzip"), limit).map_err(|e| e.to_string())
}

/// Top-level view of an OTLP request: both fields as raw bytes, so that any layout's
/// nested messages decode.
#[derive(Clone, PartialEq, prost::Message)]
struct ShallowRequest {
    #[prost(bytes = "vec", repeated, tag = "1")]
    resource_profiles: Vec<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "2")]
    dictionary: Option<Vec<u8>>,
}

/// A pprof `Profile` with its strings as bytes: a file with invalid UTF-8 is still pprof
/// (the server decides what to do with it).
#[derive(Clone, PartialEq, prost::Message)]
struct ShallowProfile {
    #[prost(message, repeated, tag = "1")]
    sample_type: Vec<stackhouse_proto::pprof::ValueType>,
    #[prost(bytes = "vec", repeated, tag = "6")]
    string_table: Vec<Vec<u8>>,
}

pub fn detect(data: &[u8]) -> Result<Detected, String> {
    if data.starts_with(b"FLR\0") {
        return Ok(Detected::Jfr);
    }
    let text_start = data.iter().position(|b| !b.is_ascii_whitespace());
    if let Some(i) = text_start
        && matches!(data[i], b'{' | b'[')
    {
        return detect_json(data);
    }
    if is_folded(data) {
        return Ok(Detected::Folded);
    }
    if let Ok(p) = ShallowProfile::decode(data)
        && !p.sample_type.is_empty()
        && p.string_table.first().is_some_and(Vec::is_empty)
    {
        return Ok(Detected::Pprof);
    }
    if let Ok(r) = ShallowRequest::decode(data)
        && !r.resource_profiles.is_empty()
    {
        return Ok(Detected::OtlpProtobuf);
    }
    if data.is_empty() {
        return Err("the file is empty".into());
    }
    Err("unrecognized format: not OTLP (protobuf or JSON), pprof, JFR, speedscope or folded stacks".into())
}

fn detect_json(data: &[u8]) -> Result<Detected, String> {
    let value: serde_json::Value =
        serde_json::from_slice(data).map_err(|e| format!("looks like JSON but does not parse: {e}"))?;
    let Some(object) = value.as_object() else {
        return Err("JSON file is not an object: neither OTLP nor speedscope".into());
    };
    if object.contains_key("resourceProfiles") || object.contains_key("resource_profiles") {
        return Ok(Detected::OtlpJson);
    }
    let schema_says = object
        .get("$schema")
        .and_then(|s| s.as_str())
        .is_some_and(|s| s.contains("speedscope"));
    if schema_says || (object.contains_key("shared") && object.contains_key("profiles")) {
        return Ok(Detected::Speedscope);
    }
    Err("JSON file is neither OTLP (no \"resourceProfiles\") nor speedscope (no \"$schema\" or \"shared\" + \"profiles\")".into())
}

/// Every non-empty line is `frames <integer>`, and there is at least one.
fn is_folded(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let mut lines = 0;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let Some((frames, value)) = line.rsplit_once(|c: char| c.is_ascii_whitespace()) else {
            return false;
        };
        if frames.trim().is_empty() || value.parse::<i64>().is_err() {
            return false;
        }
        lines += 1;
    }
    lines > 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn testdata() -> std::path::PathBuf {
        let dir = std::env::var("STACKHOUSE_TESTDATA").unwrap_or_else(|_| "/work/shared/testdata".into());
        let dir = std::path::PathBuf::from(dir);
        assert!(
            dir.is_dir(),
            "test data {} is missing; set STACKHOUSE_TESTDATA",
            dir.display()
        );
        dir
    }

    fn detect_file(rel: &str) -> Result<Detected, String> {
        let raw = std::fs::read(testdata().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
        detect(&gunzip(&raw, 1 << 30).unwrap())
    }

    #[test]
    fn every_testdata_file_is_detected_by_its_directory() {
        let expected = [
            ("pprof", Detected::Pprof),
            ("jfr", Detected::Jfr),
            ("speedscope", Detected::Speedscope),
        ];
        let mut seen = 0;
        for (dir, want) in expected {
            for entry in std::fs::read_dir(testdata().join(dir)).unwrap() {
                let name = entry.unwrap().file_name().into_string().unwrap();
                let rel = format!("{dir}/{name}");
                assert_eq!(detect_file(&rel), Ok(want), "{rel}");
                seen += 1;
            }
        }
        assert!(seen >= 15, "only {seen} files");
        assert_eq!(
            detect_file("otlp/ebpf-cpu-offcpu.v1_10.pb"),
            Ok(Detected::OtlpProtobuf)
        );
        assert_eq!(
            detect_file("otlp/ebpf-cpu-offcpu.v1_10.json"),
            Ok(Detected::OtlpJson)
        );
    }

    #[test]
    fn text_and_rejects() {
        assert_eq!(detect(b"main;work 10\nmain;idle 3\n\n"), Ok(Detected::Folded));
        assert_eq!(detect(b"  main;a b;c  7 \r\n"), Ok(Detected::Folded));
        assert_eq!(detect(b"{\"resourceProfiles\":[]}"), Ok(Detected::OtlpJson));
        assert_eq!(
            detect(br#"{"shared":{"frames":[]},"profiles":[]}"#),
            Ok(Detected::Speedscope)
        );
        assert_eq!(detect(b"FLR\0\x00\x02"), Ok(Detected::Jfr));
        for (bad, needle) in [
            (&b""[..], "empty"),
            (b"main;work ten\n", "unrecognized"),
            (b"{\"foo\":1}", "neither OTLP"),
            (b"[1,2]", "not an object"),
            (b"{broken", "does not parse"),
            (b"\x00\x01\x02garbage", "unrecognized"),
        ] {
            let err = detect(bad).unwrap_err();
            assert!(err.contains(needle), "{bad:?}: {err}");
        }
    }

    #[test]
    fn gzip_is_unwrapped() {
        use std::io::Write;
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(b"a;b 1\n").unwrap();
        let gz = enc.finish().unwrap();
        assert!(is_gzip(&gz));
        assert_eq!(detect(&gunzip(&gz, 100).unwrap()), Ok(Detected::Folded));
        assert!(gunzip(&gz, 3).is_err());
    }
}
