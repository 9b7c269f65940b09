//! Which format a file is in, from its content alone (after gunzip), for `stackhouse
//! import`. Each format recognizes its own files ([`WireFormat::detect`]); this asks the
//! formats of [`ALL`] in [`WireFormat::detect_rank`] order and words the refusal.
//! A new format joins by implementing those two methods in its file and its line in `ALL`.
//!
//! Content that starts like JSON is parsed once, here, and shown only to the JSON formats;
//! everything else is shown as bytes to the others. Today's order, where each check excludes
//! the later ones: the JFR magic; JSON (OTLP by `resourceProfiles`, speedscope by `$schema`
//! or `shared` + `profiles`); folded text (every line `frames value`, which binary protobuf
//! practically never is); pprof (a `Profile` with sample types and a string table starting
//! with ""); OTLP protobuf (only fields 1 and 2, `resource_profiles` present — a pprof
//! always carries field 6, its string table).

use std::borrow::Cow;

use super::{ALL, WireFormat};

/// A file's content as the formats see it.
pub enum Sniff<'a> {
    /// Content whose first non-blank byte is `{` or `[`, parsed: it is JSON or nothing, so
    /// no binary or text format may claim it.
    Json(&'a serde_json::Value),
    /// Any other content.
    Bytes(&'a [u8]),
}

impl Sniff<'_> {
    /// The top-level object of JSON content.
    pub fn json_object(&self) -> Option<&serde_json::Map<String, serde_json::Value>> {
        match self {
            Sniff::Json(value) => value.as_object(),
            Sniff::Bytes(_) => None,
        }
    }

    /// Content that is not JSON.
    pub fn bytes(&self) -> Option<&[u8]> {
        match self {
            Sniff::Json(_) => None,
            Sniff::Bytes(data) => Some(data),
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

/// The first format, by rank, that recognizes `data`. The refusals name the formats of
/// today: they are what users read and match on, so they do not follow the registry.
pub fn detect(data: &[u8]) -> Result<&'static dyn WireFormat, String> {
    let text_start = data.iter().position(|b| !b.is_ascii_whitespace());
    let json: serde_json::Value;
    let content = match text_start {
        Some(i) if matches!(data[i], b'{' | b'[') => {
            json = serde_json::from_slice(data)
                .map_err(|e| format!("looks like JSON but does not parse: {e}"))?;
            Sniff::Json(&json)
        }
        _ => Sniff::Bytes(data),
    };
    let mut ranked: Vec<(u8, &'static dyn WireFormat)> =
        ALL.iter().filter_map(|&f| Some((f.detect_rank()?, f))).collect();
    ranked.sort_unstable_by_key(|&(rank, _)| rank);
    if let Some(&(_, format)) = ranked.iter().find(|(_, f)| f.detect(&content)) {
        return Ok(format);
    }
    Err(match content {
        Sniff::Json(value) if !value.is_object() => {
            "JSON file is not an object: neither OTLP nor speedscope"
        }
        Sniff::Json(_) => {
            "JSON file is neither OTLP (no \"resourceProfiles\") nor speedscope (no \"$schema\" or \"shared\" + \"profiles\")"
        }
        Sniff::Bytes([]) => "the file is empty",
        Sniff::Bytes(_) => {
            "unrecognized format: not OTLP (protobuf or JSON), pprof, JFR, speedscope or folded stacks"
        }
    }
    .into())
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

    /// The detected format's name, which is how the tests below say which one they expect.
    fn detected(data: &[u8]) -> Result<&'static str, String> {
        detect(data).map(|f| f.name())
    }

    fn detect_file(rel: &str) -> Result<&'static str, String> {
        let raw = std::fs::read(testdata().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
        detected(&gunzip(&raw, 1 << 30).unwrap())
    }

    #[test]
    fn every_testdata_file_is_detected_by_its_directory() {
        let expected = [("pprof", "pprof"), ("jfr", "jfr"), ("speedscope", "speedscope")];
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
        assert_eq!(detect_file("otlp/ebpf-cpu-offcpu.v1_10.pb"), Ok("otlp-protobuf"));
        assert_eq!(detect_file("otlp/ebpf-cpu-offcpu.v1_10.json"), Ok("otlp-json"));
    }

    #[test]
    fn text_and_rejects() {
        assert_eq!(detected(b"main;work 10\nmain;idle 3\n\n"), Ok("folded"));
        assert_eq!(detected(b"  main;a b;c  7 \r\n"), Ok("folded"));
        assert_eq!(detected(b"{\"resourceProfiles\":[]}"), Ok("otlp-json"));
        assert_eq!(
            detected(br#"{"shared":{"frames":[]},"profiles":[]}"#),
            Ok("speedscope")
        );
        assert_eq!(detected(b"FLR\0\x00\x02"), Ok("jfr"));
        for (bad, needle) in [
            (&b""[..], "empty"),
            (b"main;work ten\n", "unrecognized"),
            (b"{\"foo\":1}", "neither OTLP"),
            (b"[1,2]", "not an object"),
            (b"{broken", "does not parse"),
            // JSON or nothing: text that would be folded stacks is not tried.
            (b"[main;work 5\n", "does not parse"),
            (b"\x00\x01\x02garbage", "unrecognized"),
        ] {
            let err = detect(bad).unwrap_err();
            assert!(err.contains(needle), "{bad:?}: {err}");
        }
    }

    #[test]
    fn refusals_are_worded_as_ever() {
        assert_eq!(detect(b"").unwrap_err(), "the file is empty");
        assert_eq!(
            detect(b"\x00\x01\x02garbage").unwrap_err(),
            "unrecognized format: not OTLP (protobuf or JSON), pprof, JFR, speedscope or folded stacks"
        );
        assert_eq!(
            detect(b"[1,2]").unwrap_err(),
            "JSON file is not an object: neither OTLP nor speedscope"
        );
        assert_eq!(
            detect(b"{\"foo\":1}").unwrap_err(),
            "JSON file is neither OTLP (no \"resourceProfiles\") nor speedscope (no \"$schema\" or \"shared\" + \"profiles\")"
        );
        assert_eq!(
            detect(b"{broken").unwrap_err(),
            "looks like JSON but does not parse: key must be a string at line 1 column 2"
        );
    }

    #[test]
    fn gzip_is_unwrapped() {
        use std::io::Write;
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(b"a;b 1\n").unwrap();
        let gz = enc.finish().unwrap();
        assert!(is_gzip(&gz));
        assert_eq!(detected(&gunzip(&gz, 100).unwrap()), Ok("folded"));
        assert!(gunzip(&gz, 3).is_err());
    }
}
