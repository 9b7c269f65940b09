//! Recording rules ("metrics from profiles"): the rules of each tenant, from the
//! configuration (read-only) and from the catalog (managed through REST and Connect's
//! `settings.v1.RecordingRulesService`), and the background task that evaluates them and
//! pushes their series to Prometheus over remote write ([`evaluator`]).

pub mod evaluator;
pub mod remote_write;

use std::sync::Arc;

use sha2::{Digest, Sha256};
use stackhouse_query::recording::RuleDefinition;
use stackhouse_storage::catalog::{RecordingRuleCatalog, RuleUpsert, StoredRule};

use crate::config::RecordingRuleConfig;
use crate::error::{ApiError, ErrorKind};

/// Length of a generated rule id, as Pyroscope's.
const ID_LENGTH: usize = 10;
const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

/// A rule as the APIs show it.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    pub id: String,
    /// 1 when created, one more with each replacement; 0 for a configured rule.
    pub generation: i64,
    pub definition: RuleDefinition,
    /// The profile type id its matchers select.
    pub profile_type: String,
    /// From the configuration: read-only.
    pub provisioned: bool,
}

/// Whether `id` may name a rule: letters only, as Pyroscope's ids.
pub fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.chars().all(|c| c.is_ascii_alphabetic())
}

/// The id of a configured rule given none: from a hash of its definition, so it is the
/// same after a restart and its series continue.
pub fn derived_id(rule: &RuleDefinition) -> String {
    let json = serde_json::to_vec(rule).expect("a rule serializes");
    letters(&Sha256::digest(&json)[..ID_LENGTH])
}

/// An id of letters, one per byte.
fn letters(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
        .collect()
}

fn new_id() -> Result<String, ApiError> {
    let mut bytes = [0u8; ID_LENGTH];
    getrandom::fill(&mut bytes)
        .map_err(|e| ApiError::new(ErrorKind::Internal, format!("no randomness from the os: {e}")))?;
    Ok(letters(&bytes))
}

/// The rules of every tenant: configured ones first, then stored ones (a stored rule under
/// a configured rule's id is hidden, as in Pyroscope).
pub struct RecordingRules {
    catalog: Arc<dyn RecordingRuleCatalog>,
    config: RecordingRuleConfig,
}

impl RecordingRules {
    pub fn new(catalog: Arc<dyn RecordingRuleCatalog>, config: RecordingRuleConfig) -> RecordingRules {
        RecordingRules { catalog, config }
    }

    pub fn config(&self) -> &RecordingRuleConfig {
        &self.config
    }

    /// Every rule of `tenant`.
    pub async fn list(&self, tenant: &str) -> Result<Vec<Rule>, ApiError> {
        let configured = self.config.provisioned.of(tenant);
        let mut rules: Vec<Rule> = configured
            .iter()
            .map(|p| Rule {
                id: p.id.clone(),
                generation: 0,
                profile_type: p.definition.validate().unwrap_or_default(),
                definition: p.definition.clone(),
                provisioned: true,
            })
            .collect();
        for stored in self.catalog.recording_rules(tenant).await? {
            if configured.iter().any(|p| p.id == stored.id) {
                continue;
            }
            rules.push(from_stored(stored)?);
        }
        Ok(rules)
    }

    pub async fn get(&self, tenant: &str, id: &str) -> Result<Rule, ApiError> {
        self.list(tenant)
            .await?
            .into_iter()
            .find(|r| r.id == id)
            .ok_or_else(|| ApiError::not_found(format!("no rule with id {id:?} found")))
    }

    /// Creates a rule (no id) or replaces one at the generation the caller read.
    pub async fn upsert(
        &self,
        tenant: &str,
        id: Option<&str>,
        generation: i64,
        definition: RuleDefinition,
    ) -> Result<Rule, ApiError> {
        let mut problems = Vec::new();
        if let Some(id) = id
            && !valid_id(id)
        {
            problems.push(format!("id {id:?} must be letters only"));
        }
        if generation < 0 {
            problems.push(format!("generation must not be negative, got {generation}"));
        }
        if let Err(e) = definition.validate() {
            problems.push(e);
        }
        if !problems.is_empty() {
            return Err(ApiError::invalid(format!(
                "invalid rule: {}",
                problems.join("; ")
            )));
        }
        if let Some(id) = id
            && self.config.provisioned.of(tenant).iter().any(|p| p.id == id)
        {
            return Err(ApiError::new(
                ErrorKind::Conflict,
                format!(
                    "rule {id:?} comes from the server's configuration and cannot be changed through the API"
                ),
            ));
        }
        let id = match id {
            Some(id) => id.to_string(),
            None => new_id()?,
        };
        let json = serde_json::to_string(&definition).expect("a rule serializes");
        let max = self.config.max_rules.of(tenant);
        match self
            .catalog
            .upsert_recording_rule(tenant, &id, generation, &json, max)
            .await?
        {
            RuleUpsert::Stored(stored) => from_stored(stored),
            RuleUpsert::Conflict { stored_generation } => Err(ApiError::new(
                ErrorKind::Stale,
                format!(
                    "conflicting update of rule {id:?}: generation {generation} given, {stored_generation} stored; read the rule again and retry"
                ),
            )),
            RuleUpsert::Limit { max } => Err(ApiError::new(
                ErrorKind::LimitExceeded,
                format!(
                    "tenant {tenant:?} has {max} recording rules, the most allowed (limit recording_rules_max, flag --recording-rules-max)"
                ),
            )),
        }
    }

    pub async fn delete(&self, tenant: &str, id: &str) -> Result<(), ApiError> {
        if self.config.provisioned.of(tenant).iter().any(|p| p.id == id) {
            return Err(ApiError::new(
                ErrorKind::Conflict,
                format!(
                    "rule {id:?} comes from the server's configuration and cannot be deleted through the API"
                ),
            ));
        }
        match self.catalog.delete_recording_rule(tenant, id).await? {
            true => Ok(()),
            false => Err(ApiError::not_found(format!("no rule with id {id:?} found"))),
        }
    }
}

fn from_stored(stored: StoredRule) -> Result<Rule, ApiError> {
    let definition: RuleDefinition = serde_json::from_str(&stored.definition).map_err(|e| {
        ApiError::new(
            ErrorKind::Internal,
            format!("stored recording rule {:?} is unreadable: {e}", stored.id),
        )
    })?;
    Ok(Rule {
        profile_type: definition.validate().unwrap_or_default(),
        id: stored.id,
        generation: stored.generation,
        definition,
        provisioned: false,
    })
}
