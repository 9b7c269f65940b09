//! Relabeling of a series' labels before it is stored, with Prometheus' `relabel_config`
//! semantics, so operators shape (and pay for) what a fleet sends without touching its
//! agents: rename or copy labels, drop noisy ones, keep or drop whole profiles. Rules run
//! in order on the series labels (resource, scope and profile attributes) plus
//! `__profile_type__` (the profile type id, `sample_type:unit:period_type:period_unit`),
//! before the series limit counts the series; labels starting with `__` are removed after
//! the last rule, as Prometheus does.
//!
//! As in Prometheus: `source_labels` joined by `separator` (`;`), a missing label read as
//! "", `regex` anchored at both ends (default `(.*)`), `replacement` (default `$1`) and
//! `target_label` expanded with the match's groups; `replace` with an empty result removes
//! the target label; `hashmod` sets the target to the MD5 of the joined value (its last 8
//! bytes, big-endian) modulo `modulus`.

use md5::{Digest, Md5};
use regex::Regex;
use serde::Deserialize;
use stackhouse_storage::model::Labels;

/// The label rules read `profile type` from; removed after relabeling.
pub const PROFILE_TYPE_LABEL: &str = "__profile_type__";

/// One rule as configured (JSON, or YAML in the config file).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    #[serde(default)]
    pub source_labels: Vec<String>,
    pub separator: Option<String>,
    pub regex: Option<String>,
    pub target_label: Option<String>,
    pub replacement: Option<String>,
    pub modulus: Option<u64>,
    pub action: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Replace,
    Keep,
    Drop,
    HashMod,
    LabelDrop,
    LabelKeep,
    LabelMap,
}

impl Action {
    const ALL: [(&'static str, Action); 7] = [
        ("replace", Action::Replace),
        ("keep", Action::Keep),
        ("drop", Action::Drop),
        ("hashmod", Action::HashMod),
        ("labeldrop", Action::LabelDrop),
        ("labelkeep", Action::LabelKeep),
        ("labelmap", Action::LabelMap),
    ];

    fn name(self) -> &'static str {
        Action::ALL
            .iter()
            .find(|(_, a)| *a == self)
            .map_or("?", |(n, _)| n)
    }
}

/// A rule checked and compiled.
#[derive(Clone, Debug)]
pub struct Rule {
    action: Action,
    source_labels: Vec<String>,
    separator: String,
    regex: Regex,
    target_label: String,
    replacement: String,
    modulus: u64,
    /// Whether `target_label` or `replacement` refer to the regex's groups (`$`).
    expands: bool,
}

/// Why a rule was refused; the server does not start with it.
#[derive(Debug, thiserror::Error)]
#[error("relabel rule {index} (action {action}): {reason}")]
pub struct RuleError {
    pub index: usize,
    pub action: String,
    pub reason: String,
}

impl Rule {
    /// Checks rule number `index` (from 0) as Prometheus does.
    pub fn new(index: usize, config: &RuleConfig) -> Result<Rule, RuleError> {
        let action_name = config.action.clone().unwrap_or_else(|| "replace".to_string());
        let error = |reason: String| RuleError {
            index,
            action: action_name.clone(),
            reason,
        };
        let action = Action::ALL
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(&action_name))
            .map(|(_, a)| *a)
            .ok_or_else(|| {
                let known: Vec<&str> = Action::ALL.iter().map(|(n, _)| *n).collect();
                error(format!("unknown action; actions are {}", known.join(", ")))
            })?;
        let pattern = config.regex.as_deref().unwrap_or("(.*)");
        let regex = Regex::new(&format!("^(?:{pattern})$"))
            .map_err(|e| error(format!("invalid regex {pattern:?}: {e}")))?;
        let target_label = config.target_label.clone().unwrap_or_default();
        let needs_target = matches!(action, Action::Replace | Action::HashMod);
        if needs_target && target_label.is_empty() {
            return Err(error("target_label is required".to_string()));
        }
        if action == Action::Replace && !target_label.contains('$') && !valid_name(&target_label) {
            return Err(error(format!("invalid target_label {target_label:?}")));
        }
        let modulus = config.modulus.unwrap_or(0);
        if action == Action::HashMod && modulus == 0 {
            return Err(error("modulus must be a positive integer".to_string()));
        }
        let label_only = matches!(action, Action::LabelDrop | Action::LabelKeep);
        let others = !config.source_labels.is_empty()
            || !target_label.is_empty()
            || config.separator.is_some()
            || config.replacement.is_some()
            || config.modulus.is_some();
        if label_only && others {
            return Err(error(
                "takes only regex (it matches label names), no other field".to_string(),
            ));
        }
        Ok(Rule {
            action,
            source_labels: config.source_labels.clone(),
            separator: config.separator.clone().unwrap_or_else(|| ";".to_string()),
            regex,
            replacement: config.replacement.clone().unwrap_or_else(|| "$1".to_string()),
            modulus,
            expands: target_label.contains('$')
                || config.replacement.as_deref().is_none_or(|r| r.contains('$')),
            target_label,
        })
    }

    /// Applies the rule; `false` drops the series.
    fn apply(&self, labels: &mut Labels) -> bool {
        match self.action {
            Action::Replace => {
                let value = self.source_value(labels);
                // Most rules name a fixed target and many a fixed value: a match alone
                // decides those, and finding groups costs several times more.
                let (target, replaced) = if self.expands {
                    let Some(caps) = self.regex.captures(&value) else {
                        return true;
                    };
                    let mut target = String::new();
                    caps.expand(&self.target_label, &mut target);
                    let mut replaced = String::new();
                    caps.expand(&self.replacement, &mut replaced);
                    if !valid_name(&target) {
                        return true;
                    }
                    (target, replaced)
                } else if self.regex.is_match(&value) {
                    (self.target_label.clone(), self.replacement.clone())
                } else {
                    return true;
                };
                if replaced.is_empty() {
                    labels.remove(&target);
                } else {
                    labels.insert(target, replaced);
                }
                true
            }
            Action::Keep => self.regex.is_match(&self.source_value(labels)),
            Action::Drop => !self.regex.is_match(&self.source_value(labels)),
            Action::HashMod => {
                let digest = Md5::digest(self.source_value(labels).as_bytes());
                let tail: [u8; 8] = digest[8..].try_into().expect("an MD5 digest has 16 bytes");
                let value = u64::from_be_bytes(tail) % self.modulus;
                labels.insert(self.target_label.clone(), value.to_string());
                true
            }
            Action::LabelDrop => {
                labels.retain(|name, _| !self.regex.is_match(name));
                true
            }
            Action::LabelKeep => {
                labels.retain(|name, _| self.regex.is_match(name));
                true
            }
            Action::LabelMap => {
                let mapped: Vec<(String, String)> = labels
                    .iter()
                    .filter_map(|(name, value)| {
                        let caps = self.regex.captures(name)?;
                        let mut renamed = String::new();
                        caps.expand(&self.replacement, &mut renamed);
                        Some((renamed, value.clone()))
                    })
                    .collect();
                labels.extend(mapped);
                true
            }
        }
    }

    fn source_value(&self, labels: &Labels) -> String {
        let mut out = String::new();
        for (i, name) in self.source_labels.iter().enumerate() {
            if i > 0 {
                out.push_str(&self.separator);
            }
            out.push_str(labels.get(name).map_or("", String::as_str));
        }
        out
    }

    pub fn action(&self) -> &'static str {
        self.action.name()
    }
}

/// Prometheus' label name rule, which a `replace` target must meet after expansion
/// (dots allowed, as OpenTelemetry attribute names have them).
fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
}

/// No rules, for a tenant state that lives as long as the program.
pub static NO_RULES: Rules = Rules::NONE;

/// A tenant's rules, in order.
#[derive(Clone, Debug, Default)]
pub struct Rules(Vec<Rule>);

impl Rules {
    /// No rules.
    pub const NONE: Rules = Rules(Vec::new());

    /// Checks every rule; the first bad one is named by its position in `configs`.
    pub fn new(configs: &[RuleConfig]) -> Result<Rules, RuleError> {
        configs
            .iter()
            .enumerate()
            .map(|(i, c)| Rule::new(i, c))
            .collect::<Result<Vec<_>, _>>()
            .map(Rules)
    }

    /// Rules from a JSON list (the flag's and the config file's form).
    pub fn from_json(json: &str) -> Result<Rules, String> {
        let configs: Vec<RuleConfig> =
            serde_json::from_str(json).map_err(|e| format!("relabel rules are a JSON list of rules: {e}"))?;
        Rules::new(&configs).map_err(|e| e.to_string())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The labels after every rule, or `Err(rule)` with the number of the rule that dropped
    /// the series. `profile_type` is readable as [`PROFILE_TYPE_LABEL`]; labels starting
    /// with `__` are removed at the end.
    pub fn apply(&self, mut out: Labels, profile_type: &str) -> Result<Labels, usize> {
        out.insert(PROFILE_TYPE_LABEL.to_string(), profile_type.to_string());
        for (i, rule) in self.0.iter().enumerate() {
            if !rule.apply(&mut out) {
                return Err(i);
            }
        }
        out.retain(|name, _| !name.starts_with("__"));
        Ok(out)
    }

    pub fn rule(&self, index: usize) -> Option<&Rule> {
        self.0.get(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn rules(json: &str) -> Rules {
        Rules::from_json(json).unwrap()
    }

    const CPU: &str = "cpu:nanoseconds:cpu:nanoseconds";

    fn input() -> Labels {
        labels(&[
            ("service.name", "checkout"),
            ("host.name", "node-7"),
            ("k8s.pod.name", "checkout-5d9f-abcde"),
            ("env", "prod"),
        ])
    }

    #[test]
    fn replace_joins_sources_expands_groups_and_removes_on_empty() {
        let r = rules(
            r#"[{"source_labels": ["service.name", "env"], "separator": "/", "regex": "(.+)/(prod|staging)",
                 "target_label": "svc_env", "replacement": "$2-$1"}]"#,
        );
        let mut expected = input();
        expected.insert("svc_env".into(), "prod-checkout".into());
        assert_eq!(r.apply(input(), CPU), Ok(expected));
        // Anchored: "prod" alone does not match "(prod)x".
        let r = rules(r#"[{"source_labels": ["env"], "regex": "(prod)x", "target_label": "e"}]"#);
        assert_eq!(r.apply(input(), CPU), Ok(input()));
        // An empty replacement removes the target.
        let r =
            rules(r#"[{"source_labels": ["nope"], "regex": "", "target_label": "env", "replacement": ""}]"#);
        let mut expected = input();
        expected.remove("env");
        assert_eq!(r.apply(input(), CPU), Ok(expected));
        // Group references in the target label; no source labels read "".
        let r = rules(
            r#"[{"source_labels": ["env"], "regex": "(.*)", "target_label": "tier_$1", "replacement": "x"}]"#,
        );
        let mut expected = input();
        expected.insert("tier_prod".into(), "x".into());
        assert_eq!(r.apply(input(), CPU), Ok(expected));
        let r = rules(r#"[{"target_label": "cluster", "replacement": "eu-1"}]"#);
        let mut expected = input();
        expected.insert("cluster".into(), "eu-1".into());
        assert_eq!(r.apply(input(), CPU), Ok(expected));
    }

    #[test]
    fn keep_and_drop_decide_on_the_joined_sources_and_the_profile_type() {
        let keep = rules(r#"[{"source_labels": ["env"], "regex": "prod|staging", "action": "keep"}]"#);
        assert_eq!(keep.apply(input(), CPU), Ok(input()));
        let mut dev = input();
        dev.insert("env".into(), "dev".into());
        assert_eq!(keep.apply(dev, CPU), Err(0));
        let drop = rules(
            r#"[{"target_label": "x", "replacement": "y"},
                {"source_labels": ["__profile_type__"], "regex": "memory:.*", "action": "drop"}]"#,
        );
        assert_eq!(drop.apply(input(), "memory:bytes:space:bytes"), Err(1));
        let mut expected = input();
        expected.insert("x".into(), "y".into());
        assert_eq!(
            drop.apply(input(), CPU),
            Ok(expected),
            "__ labels are removed at the end"
        );
    }

    #[test]
    fn hashmod_is_md5_modulo_as_in_prometheus() {
        // Expected values from Python's hashlib: int.from_bytes(md5(v).digest()[8:], "big") % 1000.
        for (value, expected) in [("foo", "696"), ("bar", "922")] {
            let r = rules(
                r#"[{"source_labels": ["v"], "target_label": "shard", "modulus": 1000, "action": "hashmod"}]"#,
            );
            let out = r.apply(labels(&[("v", value)]), CPU).unwrap();
            assert_eq!(out.get("shard").map(String::as_str), Some(expected), "{value}");
        }
        let r = rules(
            r#"[{"source_labels": ["a", "b"], "target_label": "shard", "modulus": 1000, "action": "hashmod"}]"#,
        );
        let out = r.apply(labels(&[("a", "a"), ("b", "b")]), CPU).unwrap();
        assert_eq!(out.get("shard").map(String::as_str), Some("74"), "a;b");
    }

    #[test]
    fn labeldrop_labelkeep_and_labelmap_match_names() {
        let r = rules(r#"[{"regex": "k8s\\..*", "action": "labeldrop"}]"#);
        let mut expected = input();
        expected.remove("k8s.pod.name");
        assert_eq!(r.apply(input(), CPU), Ok(expected));
        let r = rules(r#"[{"regex": "service\\.name|env", "action": "labelkeep"}]"#);
        assert_eq!(
            r.apply(input(), CPU),
            Ok(labels(&[("service.name", "checkout"), ("env", "prod")]))
        );
        let r = rules(r#"[{"regex": "k8s\\.(.*)", "replacement": "kube_$1", "action": "labelmap"}]"#);
        let mut expected = input();
        expected.insert("kube_pod.name".into(), "checkout-5d9f-abcde".into());
        assert_eq!(
            r.apply(input(), CPU),
            Ok(expected),
            "labelmap copies, keeping the original"
        );
    }

    #[test]
    fn a_bad_rule_is_named() {
        for (json, message) in [
            (
                r#"[{"action": "keep", "source_labels": ["a"]}, {"action": "explode"}]"#,
                "relabel rule 1 (action explode): unknown action",
            ),
            (
                r#"[{"regex": "(", "target_label": "x"}]"#,
                "relabel rule 0 (action replace): invalid regex \"(\"",
            ),
            (
                r#"[{"source_labels": ["a"]}]"#,
                "relabel rule 0 (action replace): target_label is required",
            ),
            (
                r#"[{"source_labels": ["a"], "target_label": "t", "action": "hashmod"}]"#,
                "modulus must be a positive integer",
            ),
            (
                r#"[{"regex": "a", "target_label": "t", "action": "labeldrop"}]"#,
                "takes only regex",
            ),
            (
                r#"[{"target_label": "1bad", "replacement": "x"}]"#,
                "invalid target_label \"1bad\"",
            ),
            (r#"[{"sources": ["a"]}]"#, "unknown field `sources`"),
        ] {
            let err = Rules::from_json(json).unwrap_err();
            assert!(err.contains(message), "{json}: {err}");
        }
    }
}
