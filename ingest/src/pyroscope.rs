//! Pyroscope's transport facts: the `/ingest` query (`name=app.cpu{env=prod}`, `from`,
//! `until`, `format`, ...) and a Push series' labels, turned into a [`Source`]. The
//! `format=` values are the formats' own ([`WireFormat::ingest_name`]).

use crate::convert::{SERVICE_NAME, Source};
use crate::formats::{self, WireFormat};

/// The profile types Pyroscope clients append to the application name (`app.cpu`). Only
/// these are stripped: `billing.api` stays `billing.api`.
pub const PROFILE_TYPE_SUFFIXES: &[&str] = &[
    "cpu",
    "itimer",
    "wall",
    "alloc_objects",
    "alloc_space",
    "inuse_objects",
    "inuse_space",
    "goroutines",
    "goroutine",
    "mutex_count",
    "mutex_duration",
    "block_count",
    "block_duration",
    "lock_count",
    "lock_duration",
    "alloc_in_new_tlab_objects",
    "alloc_in_new_tlab_bytes",
    "alloc_outside_tlab_objects",
    "alloc_outside_tlab_bytes",
    "exceptions",
];

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct ParamError(String);

impl ParamError {
    fn new(message: impl Into<String>) -> ParamError {
        ParamError(message.into())
    }
}

/// What Pyroscope reads a request without `format=` (or with it empty) as.
const DEFAULT_FORMAT: &str = "folded";

/// Pyroscope's formats that Stackhouse does not take, refused as such rather than as typos.
const UNSUPPORTED_FORMATS: [&str; 3] = ["lines", "trie", "tree"];

/// `format=` of an `/ingest` request: the format of [`formats::ALL`] that has it as its
/// [`WireFormat::ingest_name`].
pub fn parse_format(value: &str) -> Result<&'static dyn WireFormat, ParamError> {
    let value_or_default = if value.is_empty() { DEFAULT_FORMAT } else { value };
    if let Some(format) = formats::of_ingest(value_or_default) {
        return Ok(format);
    }
    let accepted = accepted_formats();
    Err(ParamError::new(if UNSUPPORTED_FORMATS.contains(&value) {
        format!("format {value:?} is not supported: use {accepted}")
    } else {
        format!("unknown format {value:?}: use {accepted}")
    }))
}

/// `folded, pprof, jfr or speedscope`: the default first, then in the order of
/// [`formats::ALL`], so that the message stays put until a format is added.
fn accepted_formats() -> String {
    let mut names: Vec<&str> = formats::ALL.iter().filter_map(|f| f.ingest_name()).collect();
    names.sort_by_key(|&name| name != DEFAULT_FORMAT);
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => names.concat(),
    }
}

/// An `/ingest` request's query, parsed.
#[derive(Clone, Debug)]
pub struct IngestQuery {
    pub format: &'static dyn WireFormat,
    pub source: Source,
}

/// The `name` parameter: `app.cpu{env=prod, region = "eu"}`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AppName {
    /// The service name: the `service_name` tag if given, else the application name
    /// without a known profile-type suffix.
    pub service: String,
    /// The stripped suffix, or the `__name__` tag.
    pub type_hint: Option<String>,
    /// The other tags, in order.
    pub tags: Vec<(String, String)>,
}

impl AppName {
    pub fn into_resource(self) -> Vec<(String, String)> {
        let mut resource = vec![(SERVICE_NAME.to_string(), self.service)];
        resource.extend(self.tags);
        resource
    }
}

/// Parses the `/ingest` query pairs (already percent-decoded). Unknown parameters are
/// ignored, as Pyroscope does; a repeated one takes its last value.
pub fn parse_query<'a>(
    pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<IngestQuery, ParamError> {
    let mut name = None;
    let mut format = None;
    let mut from = None;
    let mut until = None;
    let mut source = Source::default();
    for (key, value) in pairs {
        match key {
            "name" => name = Some(value),
            "format" => format = Some(parse_format(value)?),
            "from" => from = parse_time("from", value)?,
            "until" => until = parse_time("until", value)?,
            "sampleRate" => {
                source.sample_rate = match value.trim() {
                    "" => None,
                    v => Some(v.parse::<u32>().ok().filter(|&r| r > 0).ok_or_else(|| {
                        ParamError::new(format!("invalid sampleRate {value:?}: want a positive integer"))
                    })?),
                }
            }
            "spyName" => source.scope = value.to_string(),
            "units" => source.units = non_empty(value),
            "aggregationType" => {
                source.aggregation = match value {
                    "" => None,
                    "sum" | "average" => Some(value.to_string()),
                    other => {
                        return Err(ParamError::new(format!(
                            "invalid aggregationType {other:?}: use sum or average"
                        )));
                    }
                }
            }
            _ => {}
        }
    }
    let format = match format {
        Some(format) => format,
        None => parse_format("")?,
    };
    let name =
        name.ok_or_else(|| ParamError::new("missing query parameter name (e.g. name=app.cpu{env=prod})"))?;
    let app = parse_name(name)?;
    source.type_hint = app.type_hint.clone();
    source.resource = app.into_resource();
    if let Some(from) = from {
        source.time_nanos = Some(from);
        if let Some(until) = until {
            if until < from {
                return Err(ParamError::new(format!(
                    "until ({until} ns) is before from ({from} ns)"
                )));
            }
            source.duration_nanos = Some(until - from);
        }
    }
    Ok(IngestQuery { format, source })
}

fn non_empty(value: &str) -> Option<String> {
    (!value.is_empty()).then(|| value.to_string())
}

/// A unix time in seconds, or, told apart by magnitude as Pyroscope does, milliseconds,
/// microseconds or nanoseconds; returned in nanoseconds. Empty means absent.
pub fn parse_time(param: &str, value: &str) -> Result<Option<i64>, ParamError> {
    let value = value.trim();
    if value.is_empty() {
        return Ok(None);
    }
    let t: i64 = value
        .parse()
        .map_err(|_| ParamError::new(format!("invalid {param} {value:?}: want a unix timestamp")))?;
    if t < 0 {
        return Err(ParamError::new(format!(
            "invalid {param} {value:?}: negative timestamp"
        )));
    }
    // Thresholds between units: 10^11 s is year 5138, 10^14 ms and 10^17 us likewise.
    let per_unit = if t < 100_000_000_000 {
        1_000_000_000
    } else if t < 100_000_000_000_000 {
        1_000_000
    } else if t < 100_000_000_000_000_000 {
        1_000
    } else {
        1
    };
    // Found by fuzzing: seconds past 2262 do not fit in i64 nanoseconds.
    t.checked_mul(per_unit).map(Some).ok_or_else(|| {
        ParamError::new(format!(
            "invalid {param} {value:?}: past the year 2262, the last time stored"
        ))
    })
}

/// `app.cpu{k=v,k2="v 2"}`: the application name, then optional tags in braces. Keys are
/// `[A-Za-z0-9_.-]+`; a value is bare (up to `,` or `}`) or a double-quoted string with
/// `\"` and `\\` escapes; whitespace around keys and values is ignored.
pub fn parse_name(name: &str) -> Result<AppName, ParamError> {
    let (app, tags) = match name.find('{') {
        Some(open) => {
            let rest = &name[open + 1..];
            let close = rest.rfind('}').ok_or_else(|| {
                ParamError::new(format!(
                    "invalid name {name:?}: '{{' at byte {open} is never closed"
                ))
            })?;
            if !rest[close + 1..].trim().is_empty() {
                return Err(ParamError::new(format!(
                    "invalid name {name:?}: unexpected {:?} after the closing '}}'",
                    &rest[close + 1..]
                )));
            }
            (&name[..open], parse_tags(name, &rest[..close])?)
        }
        None => (name, Vec::new()),
    };
    let app = app.trim();
    let mut out = AppName::default();
    let (service, suffix) = strip_suffix(app);
    out.service = service.to_string();
    out.type_hint = suffix.map(str::to_string);
    for (key, value) in tags {
        match key.as_str() {
            "service_name" => out.service = value,
            "__name__" => out.type_hint = Some(value),
            k if k.starts_with("__") => {}
            _ => out.tags.push((key, value)),
        }
    }
    if out.service.is_empty() {
        return Err(ParamError::new(format!(
            "invalid name {name:?}: the application name is empty"
        )));
    }
    Ok(out)
}

fn strip_suffix(app: &str) -> (&str, Option<&str>) {
    match app.rsplit_once('.') {
        Some((base, suffix)) if PROFILE_TYPE_SUFFIXES.contains(&suffix) => (base, Some(suffix)),
        _ => (app, None),
    }
}

fn parse_tags(name: &str, body: &str) -> Result<Vec<(String, String)>, ParamError> {
    let bad = |what: String| ParamError::new(format!("invalid name {name:?}: {what}"));
    let mut tags: Vec<(String, String)> = Vec::new();
    let mut chars = body.char_indices().peekable();
    loop {
        skip_spaces(&mut chars);
        let Some(&(start, _)) = chars.peek() else { break };
        let mut key = String::new();
        while let Some(&(_, c)) = chars.peek() {
            if c == '=' || c == ',' || c.is_whitespace() {
                break;
            }
            key.push(c);
            chars.next();
        }
        skip_spaces(&mut chars);
        match chars.next() {
            Some((_, '=')) => {}
            _ => {
                return Err(bad(format!(
                    "tag {key:?} at byte {start} of the tags has no '=value'"
                )));
            }
        }
        if key.is_empty()
            || !key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
        {
            return Err(bad(format!("invalid tag key {key:?}: use [A-Za-z0-9_.-]")));
        }
        skip_spaces(&mut chars);
        let value = if chars.peek().is_some_and(|&(_, c)| c == '"') {
            chars.next();
            let mut value = String::new();
            loop {
                match chars.next() {
                    Some((_, '"')) => break,
                    Some((_, '\\')) => match chars.next() {
                        Some((_, c)) => value.push(c),
                        None => return Err(bad(format!("tag {key:?}: unterminated quoted value"))),
                    },
                    Some((_, c)) => value.push(c),
                    None => return Err(bad(format!("tag {key:?}: unterminated quoted value"))),
                }
            }
            skip_spaces(&mut chars);
            if chars.peek().is_some_and(|&(_, c)| c != ',') {
                return Err(bad(format!(
                    "tag {key:?}: unexpected text after the quoted value"
                )));
            }
            value
        } else {
            let mut value = String::new();
            while let Some(&(_, c)) = chars.peek() {
                if c == ',' {
                    break;
                }
                value.push(c);
                chars.next();
            }
            value.trim().to_string()
        };
        // A repeated key takes its last value: the Node.js SDK appends user tags after its
        // built-in ones so that they override them.
        match tags.iter_mut().find(|(k, _)| *k == key) {
            Some(tag) => tag.1 = value,
            None => tags.push((key, value)),
        }
        match chars.next() {
            Some((_, ',')) | None => {}
            Some((i, c)) => return Err(bad(format!("unexpected {c:?} at byte {i} of the tags"))),
        }
    }
    Ok(tags)
}

fn skip_spaces(chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>) {
    while chars.peek().is_some_and(|&(_, c)| c.is_whitespace()) {
        chars.next();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn names() {
        let n = parse_name("app{}").unwrap();
        assert_eq!((n.service.as_str(), n.type_hint, n.tags), ("app", None, vec![]));

        let n = parse_name("app.cpu{env=prod, region = eu}").unwrap();
        assert_eq!(n.service, "app");
        assert_eq!(n.type_hint.as_deref(), Some("cpu"));
        assert_eq!(n.tags, tags(&[("env", "prod"), ("region", "eu")]));

        let n = parse_name("billing.api").unwrap();
        assert_eq!((n.service.as_str(), n.type_hint), ("billing.api", None));

        let n = parse_name("my.app.alloc_in_new_tlab_objects{a=\"x, y}\",b=\"q\\\"\"}").unwrap();
        assert_eq!(n.service, "my.app");
        assert_eq!(n.type_hint.as_deref(), Some("alloc_in_new_tlab_objects"));
        assert_eq!(n.tags, tags(&[("a", "x, y}"), ("b", "q\"")]));

        let n = parse_name("app.wall{service_name=real,__name__=process_cpu,__session_id__=1,x=}").unwrap();
        assert_eq!(n.service, "real");
        assert_eq!(n.type_hint.as_deref(), Some("process_cpu"));
        assert_eq!(n.tags, tags(&[("x", "")]));

        let n = parse_name(
            "node-sdk-app{otel.scope.name=com.grafana.pyroscope/nodejs,env=prod,region=eu,env=test}",
        )
        .unwrap();
        assert_eq!(n.service, "node-sdk-app");
        assert_eq!(
            n.tags,
            tags(&[
                ("otel.scope.name", "com.grafana.pyroscope/nodejs"),
                ("env", "test"),
                ("region", "eu")
            ])
        );

        let r = parse_name("svc.inuse_space{k=v}").unwrap().into_resource();
        assert_eq!(r, tags(&[("service.name", "svc"), ("k", "v")]));
    }

    #[test]
    fn bad_names_name_the_problem() {
        for (name, needle) in [
            ("", "application name is empty"),
            (".cpu{}", "application name is empty"),
            ("app{env=prod", "never closed"),
            ("app{env}", "tag \"env\""),
            ("app{env=prod}x", "after the closing"),
            ("app{e v=1}", "tag \"e\""),
            ("app{k=\"unterminated}", "unterminated quoted value"),
            ("app{k=\"v\" x}", "after the quoted value"),
            ("app{k/x=1}", "invalid tag key \"k/x\""),
        ] {
            let err = parse_name(name).unwrap_err().to_string();
            assert!(err.contains(needle), "{name:?}: {err}");
        }
    }

    #[test]
    fn time_magnitudes() {
        let s = 1_700_000_000i64;
        for v in [s, s * 1_000, s * 1_000_000, s * 1_000_000_000] {
            assert_eq!(
                parse_time("from", &v.to_string()).unwrap(),
                Some(s * 1_000_000_000),
                "{v}"
            );
        }
        assert_eq!(parse_time("from", "").unwrap(), None);
        assert_eq!(parse_time("from", "0").unwrap(), Some(0));
        let err = parse_time("until", "soon").unwrap_err().to_string();
        assert!(err.contains("until") && err.contains("soon"), "{err}");
        assert!(parse_time("from", "-5").is_err());
        // Each unit just past i64 nanoseconds (found by the http_api fuzz target).
        for far in ["9300000000", "99999999999999", "99999999999999999"] {
            let err = parse_time("from", far).unwrap_err().to_string();
            assert!(err.contains("2262"), "{far}: {err}");
        }
        assert_eq!(
            parse_time("from", "9223372036").unwrap(),
            Some(9_223_372_036_000_000_000)
        );
    }

    #[test]
    fn queries() {
        let q = parse_query([
            ("name", "app.cpu{env=prod}"),
            ("from", "1700000000"),
            ("until", "1700000010"),
            ("format", "pprof"),
            ("sampleRate", "100"),
            ("spyName", "gospy"),
            ("units", "samples"),
            ("aggregationType", "sum"),
            ("unknown", "ignored"),
        ])
        .unwrap();
        assert_eq!(q.format.name(), "pprof");
        let s = q.source;
        assert_eq!(s.resource, tags(&[("service.name", "app"), ("env", "prod")]));
        assert_eq!(s.type_hint.as_deref(), Some("cpu"));
        assert_eq!(s.time_nanos, Some(1_700_000_000_000_000_000));
        assert_eq!(s.duration_nanos, Some(10_000_000_000));
        assert_eq!(s.sample_rate, Some(100));
        assert_eq!(s.scope, "gospy");
        assert_eq!(s.units.as_deref(), Some("samples"));
        assert_eq!(s.aggregation.as_deref(), Some("sum"));

        assert_eq!(parse_query([("name", "a")]).unwrap().format.name(), "folded");
        for (pairs, needle) in [
            (vec![], "missing query parameter name"),
            (
                vec![("name", "a"), ("format", "lines")],
                "format \"lines\" is not supported",
            ),
            (vec![("name", "a"), ("format", "trie")], "format \"trie\""),
            (vec![("name", "a"), ("format", "xml")], "unknown format \"xml\""),
            (vec![("name", "a"), ("sampleRate", "0")], "sampleRate"),
            (vec![("name", "a"), ("aggregationType", "max")], "aggregationType"),
            (
                vec![("name", "a"), ("from", "20"), ("until", "10")],
                "before from",
            ),
        ] {
            let err = parse_query(pairs).unwrap_err().to_string();
            assert!(err.contains(needle), "{err}");
        }
    }

    #[test]
    fn format_refusals_are_worded_as_ever() {
        for (value, message) in [
            (
                "lines",
                "format \"lines\" is not supported: use folded, pprof, jfr or speedscope",
            ),
            (
                "tree",
                "format \"tree\" is not supported: use folded, pprof, jfr or speedscope",
            ),
            (
                "xml",
                "unknown format \"xml\": use folded, pprof, jfr or speedscope",
            ),
            (
                "Pprof",
                "unknown format \"Pprof\": use folded, pprof, jfr or speedscope",
            ),
        ] {
            assert_eq!(parse_format(value).unwrap_err().to_string(), message);
        }
        assert_eq!(parse_format("").unwrap().name(), "folded");
    }
}
