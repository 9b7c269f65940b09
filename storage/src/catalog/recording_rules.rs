//! Recording rules: each tenant's rules as the API stored them (the definition is opaque
//! JSON here; the query crate reads and checks it), versioned by a generation for
//! optimistic concurrency, and how far each rule's series have been pushed.

use async_trait::async_trait;

use super::CatalogResult;
use super::backend::{Dialect, SqlCatalog, on_either};

/// One stored rule.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct StoredRule {
    pub id: String,
    /// 1 when created, one more with each replacement.
    pub generation: i64,
    /// The rule as JSON.
    pub definition: String,
}

/// How an upsert ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RuleUpsert {
    Stored(StoredRule),
    /// The rule exists and its generation is not the one the writer read.
    Conflict {
        stored_generation: i64,
    },
    /// A new rule would be one more than the tenant's limit.
    Limit {
        max: usize,
    },
}

/// How far a rule's series have been pushed.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct RuleProgress {
    pub rule_id: String,
    /// Every minute before this time (unix nanoseconds) has been evaluated and sent.
    pub evaluated_until: i64,
    /// The stretches sent at a resolution coarser than a minute, as JSON.
    pub coarse: String,
}

#[async_trait]
pub trait RecordingRuleCatalog: Send + Sync {
    /// `tenant`'s stored rules, by id.
    async fn recording_rules(&self, tenant: &str) -> CatalogResult<Vec<StoredRule>>;

    /// Creates rule `id` (generation 1) if the tenant has fewer than `max_rules` (`0`: no
    /// limit), or replaces it if it exists at `generation` (then `generation + 1`).
    async fn upsert_recording_rule(
        &self,
        tenant: &str,
        id: &str,
        generation: i64,
        definition: &str,
        max_rules: usize,
    ) -> CatalogResult<RuleUpsert>;

    /// Removes a rule and its progress; whether it existed.
    async fn delete_recording_rule(&self, tenant: &str, id: &str) -> CatalogResult<bool>;

    /// Tenants with at least one stored rule.
    async fn recording_rule_tenants(&self) -> CatalogResult<Vec<String>>;

    /// The progress of `tenant`'s rules (stored and configured alike), by rule id.
    async fn rule_progress(&self, tenant: &str) -> CatalogResult<Vec<RuleProgress>>;

    /// Records a rule's progress, replacing what was recorded.
    async fn set_rule_progress(&self, tenant: &str, progress: &RuleProgress) -> CatalogResult<()>;
}

const RULES: &str = "SELECT id, generation, definition FROM recording_rules WHERE tenant = $1 ORDER BY id";

const GENERATION: &str = "SELECT generation FROM recording_rules WHERE tenant = $1 AND id = $2";

const COUNT: &str = "SELECT COUNT(*) FROM recording_rules WHERE tenant = $1";

const INSERT: &str =
    "INSERT INTO recording_rules (tenant, id, generation, definition) VALUES ($1, $2, 1, $3)";

const REPLACE: &str =
    "UPDATE recording_rules SET generation = generation + 1, definition = $3 WHERE tenant = $1 AND id = $2";

const DELETE: &str = "DELETE FROM recording_rules WHERE tenant = $1 AND id = $2";

const DELETE_PROGRESS: &str = "DELETE FROM recording_rule_progress WHERE tenant = $1 AND rule_id = $2";

const TENANTS: &str = "SELECT DISTINCT tenant FROM recording_rules ORDER BY tenant";

const PROGRESS: &str = "SELECT rule_id, evaluated_until, coarse FROM recording_rule_progress
    WHERE tenant = $1 ORDER BY rule_id";

const SET_PROGRESS: &str =
    "INSERT INTO recording_rule_progress (tenant, rule_id, evaluated_until, coarse) VALUES ($1, $2, $3, $4)
    ON CONFLICT (tenant, rule_id) DO UPDATE SET evaluated_until = excluded.evaluated_until,
        coarse = excluded.coarse";

#[async_trait]
impl RecordingRuleCatalog for SqlCatalog {
    async fn recording_rules(&self, tenant: &str) -> CatalogResult<Vec<StoredRule>> {
        Ok(on_either!(self, |pool| sqlx::query_as(RULES)
            .bind(tenant)
            .fetch_all(pool)
            .await?))
    }

    async fn upsert_recording_rule(
        &self,
        tenant: &str,
        id: &str,
        generation: i64,
        definition: &str,
        max_rules: usize,
    ) -> CatalogResult<RuleUpsert> {
        on_either!(self, |pool| {
            let mut tx = pool.begin_rules_change(tenant).await?;
            let stored: Option<i64> = sqlx::query_scalar(GENERATION)
                .bind(tenant)
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
            let generation = match stored {
                Some(stored) if stored != generation => {
                    return Ok(RuleUpsert::Conflict {
                        stored_generation: stored,
                    });
                }
                Some(stored) => {
                    sqlx::query(REPLACE)
                        .bind(tenant)
                        .bind(id)
                        .bind(definition)
                        .execute(&mut *tx)
                        .await?;
                    stored + 1
                }
                None => {
                    let count: i64 = sqlx::query_scalar(COUNT).bind(tenant).fetch_one(&mut *tx).await?;
                    if max_rules > 0 && count >= max_rules as i64 {
                        return Ok(RuleUpsert::Limit { max: max_rules });
                    }
                    sqlx::query(INSERT)
                        .bind(tenant)
                        .bind(id)
                        .bind(definition)
                        .execute(&mut *tx)
                        .await?;
                    1
                }
            };
            tx.commit().await?;
            Ok(RuleUpsert::Stored(StoredRule {
                id: id.to_string(),
                generation,
                definition: definition.to_string(),
            }))
        })
    }

    async fn delete_recording_rule(&self, tenant: &str, id: &str) -> CatalogResult<bool> {
        on_either!(self, |pool| {
            let mut tx = pool.begin_rules_change(tenant).await?;
            let deleted = sqlx::query(DELETE)
                .bind(tenant)
                .bind(id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            sqlx::query(DELETE_PROGRESS)
                .bind(tenant)
                .bind(id)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(deleted > 0)
        })
    }

    async fn recording_rule_tenants(&self) -> CatalogResult<Vec<String>> {
        Ok(on_either!(self, |pool| sqlx::query_scalar(TENANTS)
            .fetch_all(pool)
            .await?))
    }

    async fn rule_progress(&self, tenant: &str) -> CatalogResult<Vec<RuleProgress>> {
        Ok(on_either!(self, |pool| sqlx::query_as(PROGRESS)
            .bind(tenant)
            .fetch_all(pool)
            .await?))
    }

    async fn set_rule_progress(&self, tenant: &str, progress: &RuleProgress) -> CatalogResult<()> {
        on_either!(self, |pool| {
            sqlx::query(SET_PROGRESS)
                .bind(tenant)
                .bind(progress.rule_id.as_str())
                .bind(progress.evaluated_until)
                .bind(progress.coarse.as_str())
                .execute(pool)
                .await?;
        });
        Ok(())
    }
}
