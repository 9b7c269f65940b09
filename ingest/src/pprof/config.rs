//! Pyroscope's `sample_type_config`: `{"<type>": {"units", "aggregation", "display-name",
//! "sampled", "cumulative"}}`.
//!
//! Honoured: `display-name` renames the sample type, `units` sets its unit (mapped like the
//! `/ingest` `units` parameter: `samples`/`objects`/... → `count`), `cumulative` decides
//! whether a `previous_profile` is subtracted. Not honoured: `aggregation` (averaging is a
//! query-time choice; values are stored as sent) and `sampled` (the profile's own period
//! is stored with it already).

use std::collections::HashMap;

use serde_json::Value;

use super::decode::invalid;
use crate::convert::ConvertError;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct TypeConfig {
    pub display_name: Option<String>,
    pub units: Option<String>,
    pub cumulative: Option<bool>,
}

pub(crate) type Config = HashMap<String, TypeConfig>;

pub(crate) fn parse(json: Option<&[u8]>) -> Result<Config, ConvertError> {
    let Some(json) = json.filter(|j| !j.iter().all(u8::is_ascii_whitespace)) else {
        return Ok(Config::new());
    };
    let bad = |m: String| invalid(format_args!("sample_type_config: {m}"));
    let root: Value = serde_json::from_slice(json).map_err(|e| bad(format!("not JSON: {e}")))?;
    let types = root
        .as_object()
        .ok_or_else(|| bad("expected an object of sample types".into()))?;
    let mut config = Config::new();
    for (name, entry) in types {
        let entry = entry
            .as_object()
            .ok_or_else(|| bad(format!("{name:?} is not an object")))?;
        let string = |key: &str| -> Result<Option<String>, ConvertError> {
            match entry.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) if s.is_empty() => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(_) => Err(bad(format!("{name:?}.{key} is not a string"))),
            }
        };
        let cumulative = match entry.get("cumulative") {
            None | Some(Value::Null) => None,
            Some(Value::Bool(b)) => Some(*b),
            Some(_) => return Err(bad(format!("{name:?}.cumulative is not a boolean"))),
        };
        config.insert(
            name.clone(),
            TypeConfig {
                display_name: string("display-name")?,
                units: string("units")?,
                cumulative,
            },
        );
    }
    Ok(config)
}

/// Whether values of this sample type grow over the process lifetime (so a previous
/// profile is subtracted): the config's `cumulative`, else Go's cumulative profiles by
/// name — allocations since start and block/mutex contention — never `inuse_*`.
pub(crate) fn is_cumulative(config: &Config, sample_type: &str) -> bool {
    if let Some(c) = config.get(sample_type).and_then(|c| c.cumulative) {
        return c;
    }
    matches!(
        sample_type,
        "alloc_objects"
            | "alloc_space"
            | "contentions"
            | "delay"
            | "block_count"
            | "block_duration"
            | "mutex_count"
            | "mutex_duration"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pyroscope_config() {
        let c = parse(Some(
            br#"{"alloc_space": {"units": "bytes", "aggregation": "sum", "display-name": "alloc_bytes", "sampled": false, "cumulative": false},
                 "inuse_objects": {"units": "objects", "cumulative": true}}"#,
        ))
        .unwrap();
        assert_eq!(
            c["alloc_space"],
            TypeConfig {
                display_name: Some("alloc_bytes".into()),
                units: Some("bytes".into()),
                cumulative: Some(false)
            }
        );
        assert!(!is_cumulative(&c, "alloc_space"));
        assert!(is_cumulative(&c, "inuse_objects"));
        assert!(is_cumulative(&c, "alloc_objects"));
        assert!(is_cumulative(&c, "delay"));
        assert!(!is_cumulative(&c, "inuse_space"));
        assert!(!is_cumulative(&c, "cpu"));
        assert!(parse(None).unwrap().is_empty());
        assert!(parse(Some(b"  ")).unwrap().is_empty());
    }

    #[test]
    fn bad_config_is_named() {
        for (json, needle) in [
            (&b"{"[..], "not JSON"),
            (b"[]", "expected an object"),
            (br#"{"cpu": 1}"#, "\"cpu\" is not an object"),
            (
                br#"{"cpu": {"cumulative": "yes"}}"#,
                "\"cpu\".cumulative is not a boolean",
            ),
            (br#"{"cpu": {"units": 3}}"#, "\"cpu\".units is not a string"),
        ] {
            let e = parse(Some(json)).unwrap_err().to_string();
            assert!(e.contains("sample_type_config") && e.contains(needle), "{e}");
        }
    }
}
