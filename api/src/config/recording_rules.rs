//! The flags of recording rules: where their series go, how many a tenant may store, the
//! rules the configuration provides (read-only through the API), and when a minute is
//! evaluated.

use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use stackhouse_query::recording::RuleDefinition;

use super::{PerTenant, tenant_override, tenant_value};

#[derive(Args, Debug, Clone)]
pub struct RecordingRuleArgs {
    /// Prometheus remote-write URL (e.g. `http://prometheus:9090/api/v1/write`) that
    /// recording rules push their series to; without one, rules are stored but not
    /// evaluated.
    #[arg(long, env = "STACKHOUSE_RECORDING_RULES_REMOTE_WRITE_URL")]
    pub recording_rules_remote_write_url: Option<String>,

    /// One tenant's `--recording-rules-remote-write-url`, `tenant=URL`; repeatable.
    #[arg(long, env = "STACKHOUSE_TENANT_RECORDING_RULES_REMOTE_WRITE_URL", value_delimiter = ',', value_parser = tenant_url)]
    pub tenant_recording_rules_remote_write_url: Vec<(String, String)>,

    /// Most recording rules a tenant may store through the API (`0`: no limit).
    #[arg(long, env = "STACKHOUSE_RECORDING_RULES_MAX", default_value_t = 25)]
    pub recording_rules_max: usize,

    /// One tenant's `--recording-rules-max`, `tenant=N`; repeatable.
    #[arg(long, env = "STACKHOUSE_TENANT_RECORDING_RULES_MAX", value_delimiter = ',', value_parser = tenant_value::<usize>)]
    pub tenant_recording_rules_max: Vec<(String, usize)>,

    /// Recording rules of every tenant, read-only through the API: a JSON list of rules
    /// (`metric_name`, `matchers`, `group_by`, `external_labels`, `function_name`, and an
    /// optional `id`). In the config file, a YAML list of such maps. A bad rule stops the
    /// server naming it.
    #[arg(long, env = "STACKHOUSE_RECORDING_RULES", value_name = "JSON", default_value = "[]", value_parser = provisioned)]
    pub recording_rules: Arc<Vec<Provisioned>>,

    /// One tenant's `--recording-rules` (replacing the default's), `tenant=JSON`;
    /// repeatable.
    #[arg(long, env = "STACKHOUSE_TENANT_RECORDING_RULES", value_name = "JSON", value_parser = tenant_provisioned)]
    pub tenant_recording_rules: Vec<(String, Arc<Vec<Provisioned>>)>,

    /// How often rules are evaluated and their points pushed.
    #[arg(long, env = "STACKHOUSE_RECORDING_RULES_INTERVAL", default_value = "15s", value_parser = humantime::parse_duration)]
    pub recording_rules_interval: Duration,

    /// How long after a minute ends it is evaluated: samples of that minute arriving later
    /// are stored and queryable but not in the recorded series.
    #[arg(long, env = "STACKHOUSE_RECORDING_RULES_DELAY", default_value = "2m", value_parser = humantime::parse_duration)]
    pub recording_rules_delay: Duration,
}

/// A rule from the configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Provisioned {
    pub id: String,
    pub definition: RuleDefinition,
}

/// What the evaluator and the API need to know of the flags.
#[derive(Clone, Debug)]
pub struct RecordingRuleConfig {
    pub remote_write_url: PerTenant<Option<String>>,
    pub max_rules: PerTenant<usize>,
    pub provisioned: PerTenant<Arc<Vec<Provisioned>>>,
    pub interval: Duration,
    pub delay: Duration,
}

impl RecordingRuleArgs {
    pub fn config(&self) -> RecordingRuleConfig {
        let urls: Vec<(String, Option<String>)> = self
            .tenant_recording_rules_remote_write_url
            .iter()
            .map(|(t, u)| (t.clone(), Some(u.clone())))
            .collect();
        RecordingRuleConfig {
            remote_write_url: PerTenant::new(self.recording_rules_remote_write_url.clone(), &urls),
            max_rules: PerTenant::new(self.recording_rules_max, &self.tenant_recording_rules_max),
            provisioned: PerTenant::new(self.recording_rules.clone(), &self.tenant_recording_rules),
            interval: self.recording_rules_interval,
            delay: self.recording_rules_delay,
        }
    }
}

fn tenant_url(s: &str) -> Result<(String, String), String> {
    let (tenant, url) = tenant_override(s)?;
    Ok((tenant.to_string(), url.to_string()))
}

/// The rules of a JSON list, each checked; a rule without an id gets one derived from its
/// definition, so it keeps its series across restarts.
fn provisioned(json: &str) -> Result<Arc<Vec<Provisioned>>, String> {
    // `serde_json` also reads the one JSON text the config file turns a YAML list into.
    let written: Vec<serde_json::Map<String, serde_json::Value>> = serde_json::from_str(json)
        .map_err(|e| format!("recording rules: expected a JSON list of rules: {e}"))?;
    let mut rules = Vec::with_capacity(written.len());
    for (i, mut fields) in written.into_iter().enumerate() {
        // The id is the configuration's own; the rest is a rule as the API takes it.
        let given = match fields.remove("id") {
            None => None,
            Some(serde_json::Value::String(id)) => Some(id),
            Some(other) => return Err(format!("recording rule {i}: id must be a string, got {other}")),
        };
        let definition: RuleDefinition = serde_json::from_value(serde_json::Value::Object(fields))
            .map_err(|e| format!("recording rule {i}: {e}"))?;
        let what = format!("recording rule {i} ({:?})", definition.metric_name);
        definition.validate().map_err(|e| format!("{what}: {e}"))?;
        let id = match given {
            Some(id) if crate::recording::valid_id(&id) => id,
            Some(id) => return Err(format!("{what}: id {id:?} must be letters only")),
            None => crate::recording::derived_id(&definition),
        };
        if rules.iter().any(|r: &Provisioned| r.id == id) {
            return Err(format!("{what}: id {id:?} is given twice"));
        }
        rules.push(Provisioned { id, definition });
    }
    Ok(Arc::new(rules))
}

fn tenant_provisioned(s: &str) -> Result<(String, Arc<Vec<Provisioned>>), String> {
    let (tenant, json) = tenant_override(s)?;
    let rules = provisioned(json).map_err(|e| format!("tenant {tenant}: {e}"))?;
    Ok((tenant.to_string(), rules))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configured_rules_are_checked_and_named() {
        let ok = provisioned(
            r#"[{"metric_name": "profiles_recorded_cpu",
                 "matchers": ["{__profile_type__=\"process_cpu:cpu:nanoseconds:cpu:nanoseconds\"}"]},
                {"id": "mine", "metric_name": "profiles_recorded_gc",
                 "matchers": ["{__profile_type__=\"process_cpu:cpu:nanoseconds:cpu:nanoseconds\"}"],
                 "function_name": "runtime.gcBgMarkWorker"}]"#,
        )
        .unwrap();
        assert_eq!(ok.len(), 2);
        assert_eq!(ok[1].id, "mine");
        // A derived id is letters only and the same each time.
        assert!(ok[0].id.chars().all(|c| c.is_ascii_alphabetic()), "{}", ok[0].id);
        assert_eq!(ok[0].id, crate::recording::derived_id(&ok[0].definition));

        let err = provisioned(r#"[{"metric_name": "cpu", "matchers": []}]"#).unwrap_err();
        assert!(
            err.starts_with("recording rule 0 (\"cpu\"): metric_name"),
            "{err}"
        );
        let err = provisioned(r#"[{"metric_name": "profiles_recorded_x", "matchers": [], "bogus": 1}]"#)
            .unwrap_err();
        assert!(err.contains("bogus"), "{err}");
    }
}
