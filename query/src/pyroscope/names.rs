//! Label names as Grafana reads and writes them, over ours.
//!
//! We keep OpenTelemetry's names (`service.name`, `k8s.pod.name`). Pyroscope serves
//! `service.name` as `service_name`, and other names with every character outside
//! `[A-Za-z0-9_]` replaced by `_`, unless the client's `Accept` header carries
//! `allow-utf8-labelnames=true`; then names are served as stored (`service_name` still
//! stands for `service.name`: the Drilldown app hard-codes it). Every series also has
//! Pyroscope's labels derived from its type (`__profile_type__`, `__name__`, `__type__`,
//! `__unit__`, `__period_type__`, `__period_unit__`) and `__service_name__`, a copy of
//! the service name. All of these work in selectors; a sanitized name in a selector is
//! mapped back to the stored name it came from. A series without `service.name` is served
//! as `service_name="unknown_service"`.

use std::borrow::Cow;
use std::collections::BTreeSet;

use crate::error::QueryError;
use crate::selector::{MatchOp, Matcher, Selector, parse_promql_selector};
use stackhouse_storage::model::{ProfileType, Series};

use super::profile_type;

pub const SERVICE_NAME: &str = "service_name";
const OTEL_SERVICE_NAME: &str = "service.name";
/// The service of a series sent without `service.name`, as OpenTelemetry and Pyroscope
/// name it: Grafana's apps skip series without a service.
const UNKNOWN_SERVICE: &str = "unknown_service";
const SERVICE_NAME_COPY: &str = "__service_name__";
const PROFILE_TYPE: &str = "__profile_type__";
const METRIC_NAME: &str = "__name__";
/// Labels whose value is a function of the profile type.
const TYPE_LABELS: [&str; 6] = [
    PROFILE_TYPE,
    METRIC_NAME,
    "__type__",
    "__unit__",
    "__period_type__",
    "__period_unit__",
];

/// How one of our label names is served.
pub fn wire_name(name: &str, utf8: bool) -> Cow<'_, str> {
    if name == OTEL_SERVICE_NAME {
        return Cow::Borrowed(SERVICE_NAME);
    }
    let legacy = |c: char| c.is_ascii_alphanumeric() || c == '_';
    if utf8 || (name.chars().all(legacy) && !name.starts_with(|c: char| c.is_ascii_digit())) {
        return Cow::Borrowed(name);
    }
    let mut out: String = name.chars().map(|c| if legacy(c) { c } else { '_' }).collect();
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    Cow::Owned(out)
}

fn is_type_label(name: &str) -> bool {
    TYPE_LABELS.contains(&name)
}

/// The value of one of [`TYPE_LABELS`] for a type.
fn type_label(name: &str, t: &ProfileType) -> String {
    let t = profile_type::shown(t);
    match name {
        PROFILE_TYPE => profile_type::id(&t),
        METRIC_NAME => profile_type::name(&t),
        "__type__" => t.sample_type.clone(),
        "__unit__" => t.sample_unit.clone(),
        "__period_type__" => t.period_type.clone(),
        _ => t.period_unit.clone(),
    }
}

/// Our label names in the queried range: what a sanitized name may have come from.
#[derive(Debug, Default)]
pub struct Names {
    known: BTreeSet<String>,
}

impl Names {
    pub fn new(known: impl IntoIterator<Item = String>) -> Names {
        Names {
            known: known.into_iter().collect(),
        }
    }

    /// Whether resolving `wire` needs the stored names (it is neither Pyroscope's nor ours
    /// for certain).
    pub fn needed_for(wire: &str) -> bool {
        !(is_type_label(wire) || wire == SERVICE_NAME || wire == SERVICE_NAME_COPY)
    }

    /// Our name for a name a client sent.
    pub fn resolve(&self, wire: &str) -> String {
        if wire == SERVICE_NAME || wire == SERVICE_NAME_COPY {
            return OTEL_SERVICE_NAME.to_string();
        }
        if is_type_label(wire) || self.known.contains(wire) {
            return wire.to_string();
        }
        self.known
            .iter()
            .find(|k| wire_name(k, false) == wire)
            .cloned()
            .unwrap_or_else(|| wire.to_string())
    }
}

/// A client's selectors (all must hold), split into matchers on the type labels and
/// matchers on our labels.
#[derive(Clone, Debug, Default)]
pub struct Matchers {
    types: Vec<Matcher>,
    labels: Vec<Matcher>,
}

/// Every label name the selectors mention, as sent.
pub fn mentioned(selectors: &[&str]) -> Result<Vec<String>, QueryError> {
    let mut names = Vec::new();
    for s in selectors {
        names.extend(parse(s)?.matchers.into_iter().map(|m| m.name));
    }
    Ok(names)
}

fn parse(selector: &str) -> Result<Selector, QueryError> {
    parse_promql_selector(selector).map_err(|e| QueryError::bad_request(format!("{e} in {selector:?}")))
}

impl Matchers {
    pub fn parse(selectors: &[&str], names: &Names) -> Result<Matchers, QueryError> {
        let mut out = Matchers::default();
        for s in selectors {
            for m in parse(s)?.matchers {
                let (name, value) = match (m.name.as_str(), m.op) {
                    // A profile type id as the metric name (`<id>{}` from Grafana's
                    // template variables) selects that type.
                    (METRIC_NAME, MatchOp::Equal) if m.value.split(':').count() >= 5 => {
                        let five: Vec<&str> = m.value.split(':').take(5).collect();
                        (PROFILE_TYPE.to_string(), five.join(":"))
                    }
                    (name, _) => (names.resolve(name), m.value.clone()),
                };
                let matcher = Matcher::new(name, m.op, value).expect("the regex compiled once already");
                if is_type_label(&matcher.name) {
                    out.types.push(matcher);
                } else {
                    out.labels.push(matcher);
                }
            }
        }
        Ok(out)
    }

    /// Whether a series of this type can match.
    pub fn type_matches(&self, t: &ProfileType) -> bool {
        self.types
            .iter()
            .all(|m| m.matches(Some(&type_label(&m.name, t))))
    }

    /// The matchers on our labels, as the query engine takes them. The engine sees a
    /// missing `service.name` as `""`, so `unknown_service` is asked for as that.
    pub fn selector(&self) -> Selector {
        let matchers = self
            .labels
            .iter()
            .map(|m| match m.op {
                MatchOp::Equal | MatchOp::NotEqual
                    if m.name == OTEL_SERVICE_NAME && m.value == UNKNOWN_SERVICE =>
                {
                    Matcher::new(OTEL_SERVICE_NAME, m.op, "").expect("no regex to compile")
                }
                _ => m.clone(),
            })
            .collect();
        Selector { matchers }
    }

    /// Whether a stored series matches, judged on its labels alone; matchers on names
    /// only samples carry (`sample_only`) cannot be judged per series and are passed.
    pub fn series_matches(&self, series: &Series, sample_only: &BTreeSet<String>) -> bool {
        self.type_matches(&series.profile_type)
            && self.labels.iter().all(|m| {
                sample_only.contains(&m.name) && !series.labels.contains_key(&m.name)
                    || m.matches(series_label(series, &m.name).as_deref())
            })
    }
}

/// One label of a series as served: type labels, the service copy, or a stored label.
pub fn series_label(series: &Series, name: &str) -> Option<String> {
    if is_type_label(name) {
        return Some(type_label(name, &series.profile_type));
    }
    if name == SERVICE_NAME_COPY || name == OTEL_SERVICE_NAME {
        return Some(service(series).to_string());
    }
    series.labels.get(name).cloned()
}

fn service(series: &Series) -> &str {
    series
        .labels
        .get(OTEL_SERVICE_NAME)
        .map_or(UNKNOWN_SERVICE, String::as_str)
}

/// Every label of a series as served: (wire name, value), sorted by name.
pub fn series_labels(series: &Series, utf8: bool) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = series
        .labels
        .iter()
        .map(|(k, v)| (wire_name(k, utf8).into_owned(), v.clone()))
        .collect();
    out.extend(
        TYPE_LABELS
            .iter()
            .map(|n| (n.to_string(), type_label(n, &series.profile_type))),
    );
    for name in [SERVICE_NAME, SERVICE_NAME_COPY] {
        out.push((name.to_string(), service(series).to_string()));
    }
    out.sort();
    out.dedup_by(|a, b| a.0 == b.0);
    out
}

#[cfg(test)]
mod tests {
    use stackhouse_storage::model::Labels;

    use super::*;

    fn series(ty: &str, labels: &[(&str, &str)]) -> Series {
        let labels: Labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Series::new(ProfileType::parse(ty).unwrap(), labels, 1)
    }

    #[test]
    fn names_are_sanitized_unless_utf8_is_allowed() {
        assert_eq!(wire_name("service.name", false), "service_name");
        assert_eq!(wire_name("service.name", true), "service_name");
        assert_eq!(wire_name("k8s.pod.name", false), "k8s_pod_name");
        assert_eq!(wire_name("k8s.pod.name", true), "k8s.pod.name");
        assert_eq!(wire_name("1st", false), "_1st");
        assert_eq!(wire_name("plain_name", false), "plain_name");
    }

    #[test]
    fn selectors_map_back_to_our_names_and_types() {
        let names = Names::new(["k8s.pod.name".to_string(), "thread.name".to_string()]);
        let m = Matchers::parse(
            &[
                r#"process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name="api", k8s_pod_name=~"p-.*"}"#,
                r#"{"thread.name"!=""}"#,
            ],
            &names,
        )
        .unwrap();
        assert_eq!(
            m.selector().to_string(),
            r#"{service.name="api", k8s.pod.name=~"p-.*", thread.name!=""}"#
        );
        let cpu = ProfileType::parse("samples:count:cpu:nanoseconds").unwrap();
        let off = ProfileType::parse("off_cpu:nanoseconds::").unwrap();
        assert!(m.type_matches(&cpu));
        assert!(!m.type_matches(&off));
        let by_type = Matchers::parse(&[r#"{__name__="off_cpu", __unit__="nanoseconds"}"#], &names).unwrap();
        assert!(by_type.type_matches(&off) && !by_type.type_matches(&cpu));
        assert!(Matchers::parse(&["{a="], &names).is_err());
    }

    #[test]
    fn series_matching_and_labels() {
        let s = series(
            "samples:count:cpu:nanoseconds",
            &[("service.name", "api"), ("host.name", "h1")],
        );
        let sample_only: BTreeSet<String> = ["thread.name".to_string()].into();
        let names = Names::new(["host.name".to_string(), "thread.name".to_string()]);
        let matches = |sel: &str| {
            Matchers::parse(&[sel], &names)
                .unwrap()
                .series_matches(&s, &sample_only)
        };
        assert!(matches(r#"{service_name="api", host_name="h1"}"#));
        assert!(
            matches(r#"{thread_name="main"}"#),
            "judged per sample, not per series"
        );
        assert!(!matches(r#"{service_name="web"}"#));
        assert!(!matches(r#"{nope="x"}"#));
        assert!(matches(
            r#"{__profile_type__="process_cpu:cpu:nanoseconds:cpu:nanoseconds", __type__="cpu"}"#
        ));
        // Counted CPU is served in time: its type labels are the time type's.
        assert!(!matches(r#"{__type__="samples"}"#));
        let labels = series_labels(&s, false);
        let names: Vec<&str> = labels.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "__name__",
                "__period_type__",
                "__period_unit__",
                "__profile_type__",
                "__service_name__",
                "__type__",
                "__unit__",
                "host_name",
                "service_name"
            ]
        );
        assert_eq!(series_label(&s, "__name__").as_deref(), Some("process_cpu"));

        let nameless = series("samples:count:cpu:nanoseconds", &[("host.name", "h1")]);
        assert_eq!(
            series_label(&nameless, "service.name").as_deref(),
            Some("unknown_service")
        );
        let unknown = Matchers::parse(&[r#"{service_name="unknown_service"}"#], &Names::default()).unwrap();
        assert!(unknown.series_matches(&nameless, &sample_only) && !unknown.series_matches(&s, &sample_only));
        assert_eq!(unknown.selector().to_string(), r#"{service.name=""}"#);
    }
}
