//! Pyroscope's 5-part profile type ids, `name:sample_type:sample_unit:period_type:period_unit`,
//! over our 4-part ones. The name is derived from the 4 parts, so each of our types has
//! exactly one id and the id names exactly one type.

use std::borrow::Cow;

use stackhouse_proto::pyroscope_types;
use stackhouse_storage::model::ProfileType;

use crate::error::QueryError;

/// The `__name__` Pyroscope would give the type, so that Grafana's per-type units and
/// rate math and the Drilldown app's names apply:
///
/// | our type | name |
/// |---|---|
/// | period or sample type `cpu` (`samples:count:cpu:nanoseconds`, `cpu:nanoseconds:cpu:nanoseconds`) | `process_cpu` |
/// | sample type `off_cpu` | `off_cpu` |
/// | period or sample type `wall` | `wall` |
/// | sample type `alloc_*`, `inuse_*`, `live*`, `malloc_*`, or period type `space` | `memory` |
/// | sample type `lock_*`, `mutex_*`, `contentions`, `delay`, or period type `lock` | `mutex` |
/// | sample type `goroutine*` | `goroutines` |
/// | anything else | the period type, or the sample type when there is none |
pub fn name(t: &ProfileType) -> String {
    let sample = t.sample_type.as_str();
    let period = t.period_type.as_str();
    let starts = |prefixes: &[&str]| prefixes.iter().any(|p| sample.starts_with(p));
    let name = if sample == "off_cpu" {
        "off_cpu"
    } else if sample == "cpu" || period == "cpu" {
        "process_cpu"
    } else if sample == "wall" || period == "wall" {
        "wall"
    } else if starts(&["alloc_", "inuse_", "live", "malloc_"]) || period == "space" {
        "memory"
    } else if starts(&["lock_", "mutex_"]) || matches!(sample, "contentions" | "delay") || period == "lock" {
        "mutex"
    } else if sample.starts_with("goroutine") {
        "goroutines"
    } else if !period.is_empty() {
        period
    } else {
        sample
    };
    name.to_string()
}

/// The type one of ours is served as: counted CPU samples as CPU time
/// ([`ProfileType::in_time`]), so that Grafana shows time and cores; others as stored.
pub fn shown(t: &ProfileType) -> Cow<'_, ProfileType> {
    t.in_time().map_or(Cow::Borrowed(t), Cow::Owned)
}

/// The 5-part id one of our types is served under.
pub fn id(t: &ProfileType) -> String {
    let t = shown(t);
    format!("{}:{}", name(&t), t.id())
}

/// A profile type as `ProfileTypes` lists it.
pub fn to_wire(t: &ProfileType) -> pyroscope_types::ProfileType {
    let t = shown(t);
    pyroscope_types::ProfileType {
        id: id(&t),
        name: name(&t),
        sample_type: t.sample_type.clone(),
        sample_unit: t.sample_unit.clone(),
        period_type: t.period_type.clone(),
        period_unit: t.period_unit.clone(),
    }
}

/// What an id a client sent selects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requested {
    pub profile_type: ProfileType,
    /// The id names a time type that counted samples are served as, so the scope
    /// selects those too ([`crate::Scope::in_time`]).
    pub in_time: bool,
    /// False when the id's name is not the one we give its type: such an id names
    /// nothing stored, and the query answers empty, as Pyroscope's would.
    pub exists: bool,
}

/// Parses a 5-part id (a 6th part, Pyroscope's `:delta`, is ignored) or one of our own
/// 4-part ids.
pub fn parse(id: &str) -> Result<Requested, QueryError> {
    let invalid = || {
        QueryError::bad_request(format!(
            "invalid profile type id {id:?}: expected name:sample_type:sample_unit:period_type:period_unit"
        ))
    };
    let parts: Vec<&str> = id.split(':').collect();
    let (given_name, four) = match parts.len() {
        4 => (None, &parts[..]),
        5 | 6 => (Some(parts[0]), &parts[1..5]),
        _ => return Err(invalid()),
    };
    let profile_type = ProfileType::parse(&four.join(":")).ok_or_else(invalid)?;
    let exists = given_name.is_none_or(|n| n == name(&profile_type));
    // Our own 4-part ids select exactly the stored type.
    let in_time = given_name.is_some() && profile_type.counted().is_some();
    Ok(Requested {
        profile_type,
        in_time,
        exists,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(id: &str) -> ProfileType {
        ProfileType::parse(id).unwrap()
    }

    #[test]
    fn names_follow_pyroscope() {
        for (ours, expected) in [
            (
                "samples:count:cpu:nanoseconds",
                "process_cpu:cpu:nanoseconds:cpu:nanoseconds",
            ),
            (
                "cpu:nanoseconds:cpu:nanoseconds",
                "process_cpu:cpu:nanoseconds:cpu:nanoseconds",
            ),
            ("off_cpu:nanoseconds::", "off_cpu:off_cpu:nanoseconds::"),
            (
                "samples:count:wall:nanoseconds",
                "wall:samples:count:wall:nanoseconds",
            ),
            (
                "alloc_space:bytes:space:bytes",
                "memory:alloc_space:bytes:space:bytes",
            ),
            (
                "alloc_in_new_tlab_objects:count:space:bytes",
                "memory:alloc_in_new_tlab_objects:count:space:bytes",
            ),
            (
                "lock_count:count:lock:nanoseconds",
                "mutex:lock_count:count:lock:nanoseconds",
            ),
            (
                "goroutine:count:goroutine:count",
                "goroutines:goroutine:count:goroutine:count",
            ),
            (
                "events:count:page_faults:count",
                "page_faults:events:count:page_faults:count",
            ),
            ("samples:count::", "samples:samples:count::"),
        ] {
            assert_eq!(id(&t(ours)), expected);
            let cpu_time = ours.ends_with(":cpu:nanoseconds") && ours.starts_with(['s', 'c']);
            assert_eq!(
                parse(expected).unwrap(),
                Requested {
                    profile_type: shown(&t(ours)).into_owned(),
                    in_time: cpu_time,
                    exists: true
                }
            );
        }
    }

    #[test]
    fn parsing() {
        let delta = parse("memory:alloc_space:bytes:space:bytes:delta").unwrap();
        assert_eq!(delta.profile_type, t("alloc_space:bytes:space:bytes"));
        assert!(parse("samples:count:cpu:nanoseconds").unwrap().exists);
        assert!(!parse("memory:samples:count:cpu:nanoseconds").unwrap().exists);
        // The id served before counted CPU was shown in time still selects the counts.
        let counts = parse("process_cpu:samples:count:cpu:nanoseconds").unwrap();
        assert!(counts.exists && !counts.in_time);
        assert_eq!(counts.profile_type, t("samples:count:cpu:nanoseconds"));
        for bad in ["", "cpu", "a:b:c", "a:b:c:d:e:f:g", "x::count:cpu:nanoseconds"] {
            let err = parse(bad).unwrap_err();
            assert!(
                err.to_string().contains("invalid profile type id"),
                "{bad}: {err}"
            );
        }
    }
}
