//! A rule as stored and as the APIs take it, and its validation. The checks and their
//! messages follow Pyroscope's `RecordingRulesService`, each naming the field at fault.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::pyroscope::profile_type;
use crate::selector::{MatchOp, parse_promql_selector};

/// Every rule's metric name starts with it, so recorded series are told from others.
pub const METRIC_PREFIX: &str = "profiles_recorded_";
/// The label every recorded series carries with its rule's id.
pub const RULE_ID_LABEL: &str = "profiles_rule_id";
const PROFILE_TYPE: &str = "__profile_type__";
const METRIC_NAME: &str = "__name__";

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RuleDefinition {
    /// The recorded series' name; starts with `profiles_recorded_`.
    pub metric_name: String,
    /// Selectors in Pyroscope's label names (`{__profile_type__="…", service_name="api"}`),
    /// all of which must hold; exactly one matcher sets `__profile_type__` with `=`.
    pub matchers: Vec<String>,
    /// Labels (Pyroscope's names) the selection is grouped by: one series per value set.
    #[serde(default)]
    pub group_by: Vec<String>,
    /// Labels added to every recorded series.
    #[serde(default)]
    pub external_labels: BTreeMap<String, String>,
    /// Only the stacks that contain this function, each counted once however often the
    /// function recurs in it.
    #[serde(default)]
    pub function_name: Option<String>,
}

impl RuleDefinition {
    /// The profile type id the rule records, or every problem of the rule, each naming
    /// its field, joined by `; `.
    pub fn validate(&self) -> Result<String, String> {
        let mut errors = Vec::new();
        if self.metric_name.is_empty() {
            errors.push("metric_name is required".to_string());
        } else if !is_metric_name(&self.metric_name) {
            errors.push(format!(
                "metric_name {:?} is invalid: must match [a-zA-Z_:][a-zA-Z0-9_:]*",
                self.metric_name
            ));
        } else if !self.metric_name.starts_with(METRIC_PREFIX) {
            errors.push(format!(
                "metric_name {:?} is invalid: must start with {METRIC_PREFIX}",
                self.metric_name
            ));
        }
        let mut types = Vec::new();
        for m in &self.matchers {
            match parse_promql_selector(m) {
                Err(e) => errors.push(format!("matcher {m:?} is invalid: {e}")),
                Ok(selector) => {
                    for matcher in selector.matchers.iter().filter(|x| x.name == PROFILE_TYPE) {
                        if matcher.op != MatchOp::Equal {
                            errors.push(format!("matcher {PROFILE_TYPE:?} in {m:?} must have type \"=\""));
                        } else {
                            types.push(matcher.value.clone());
                        }
                    }
                }
            }
        }
        match types.as_slice() {
            [one] => {
                if let Err(e) = profile_type::parse(one) {
                    errors.push(format!("matchers: {e}"));
                }
            }
            _ => errors.push(format!(
                "matchers must contain exactly one {PROFILE_TYPE:?} matcher"
            )),
        }
        for (i, name) in self.group_by.iter().enumerate() {
            if let Some(problem) = label_name_problem(name) {
                errors.push(format!("group_by label {name:?} {problem}"));
            } else if self.group_by[..i].contains(name) {
                errors.push(format!("group_by label {name:?} is given twice"));
            }
        }
        for name in self.external_labels.keys() {
            if let Some(problem) = label_name_problem(name) {
                errors.push(format!("external_labels name {name:?} {problem}"));
            } else if self.group_by.contains(name) {
                errors.push(format!("external_labels name {name:?} is also a group_by label"));
            }
        }
        if self.function_name.as_deref() == Some("") {
            errors.push("function_name must not be empty".to_string());
        }
        match errors.is_empty() {
            true => Ok(types.remove(0)),
            false => Err(errors.join("; ")),
        }
    }
}

fn is_metric_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// Why `name` cannot be a label of a recorded series: Prometheus's legacy label names,
/// without the reserved `__` prefix and the rule id label.
fn label_name_problem(name: &str) -> Option<String> {
    let mut chars = name.chars();
    let legacy = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !legacy {
        Some("must match [a-zA-Z_][a-zA-Z0-9_]*".to_string())
    } else if name.starts_with("__") || name == RULE_ID_LABEL || name == METRIC_NAME {
        Some("is reserved".to_string())
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule() -> RuleDefinition {
        RuleDefinition {
            metric_name: "profiles_recorded_cpu".into(),
            matchers: vec![
                r#"{__profile_type__="process_cpu:cpu:nanoseconds:cpu:nanoseconds", service_name="api"}"#
                    .into(),
            ],
            group_by: vec!["region".into()],
            external_labels: [("team".to_string(), "core".to_string())].into(),
            function_name: Some("main".into()),
        }
    }

    #[test]
    fn a_valid_rule_names_its_profile_type() {
        assert_eq!(
            rule().validate().unwrap(),
            "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
        );
        // Several selectors may share the matchers out.
        let split = RuleDefinition {
            matchers: vec![
                r#"{service_name="api"}"#.into(),
                r#"{__profile_type__="memory:alloc_space:bytes:space:bytes"}"#.into(),
            ],
            ..rule()
        };
        assert_eq!(split.validate().unwrap(), "memory:alloc_space:bytes:space:bytes");
    }

    #[test]
    fn every_problem_is_named_by_its_field() {
        let check = |r: RuleDefinition, wanted: &str| {
            let err = r.validate().unwrap_err();
            assert!(err.contains(wanted), "{err:?} should contain {wanted:?}");
        };
        check(
            RuleDefinition {
                metric_name: "cpu".into(),
                ..rule()
            },
            "metric_name \"cpu\" is invalid: must start with profiles_recorded_",
        );
        check(
            RuleDefinition {
                metric_name: "profiles_recorded-x".into(),
                ..rule()
            },
            "metric_name \"profiles_recorded-x\" is invalid: must match",
        );
        check(
            RuleDefinition {
                metric_name: String::new(),
                ..rule()
            },
            "metric_name is required",
        );
        check(
            RuleDefinition {
                matchers: vec![r#"{service_name="api"}"#.into()],
                ..rule()
            },
            "matchers must contain exactly one \"__profile_type__\" matcher",
        );
        check(
            RuleDefinition {
                matchers: vec![r#"{__profile_type__=~"process_cpu.*"}"#.into()],
                ..rule()
            },
            "matcher \"__profile_type__\" in \"{__profile_type__=~\\\"process_cpu.*\\\"}\" must have type \"=\"",
        );
        check(
            RuleDefinition {
                matchers: vec!["{service_name=}".into()],
                ..rule()
            },
            "matcher \"{service_name=}\" is invalid",
        );
        check(
            RuleDefinition {
                matchers: vec![r#"{__profile_type__="cpu"}"#.into()],
                ..rule()
            },
            "matchers: invalid profile type id \"cpu\"",
        );
        check(
            RuleDefinition {
                group_by: vec!["service.name".into()],
                ..rule()
            },
            "group_by label \"service.name\" must match [a-zA-Z_][a-zA-Z0-9_]*",
        );
        check(
            RuleDefinition {
                group_by: vec!["a".into(), "a".into()],
                ..rule()
            },
            "group_by label \"a\" is given twice",
        );
        check(
            RuleDefinition {
                external_labels: [("profiles_rule_id".to_string(), "x".to_string())].into(),
                ..rule()
            },
            "external_labels name \"profiles_rule_id\" is reserved",
        );
        check(
            RuleDefinition {
                external_labels: [("region".to_string(), "x".to_string())].into(),
                ..rule()
            },
            "external_labels name \"region\" is also a group_by label",
        );
        check(
            RuleDefinition {
                function_name: Some(String::new()),
                ..rule()
            },
            "function_name must not be empty",
        );
        // Several problems are all reported.
        let err = RuleDefinition {
            metric_name: "x".into(),
            group_by: vec!["__x".into()],
            ..rule()
        }
        .validate()
        .unwrap_err();
        assert!(
            err.contains("metric_name") && err.contains("group_by label \"__x\" is reserved"),
            "{err}"
        );
    }
}
