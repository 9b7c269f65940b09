//! Recording rules, managed two ways: REST under `/api/v1/recording-rules` and Grafana
//! Pyroscope's `settings.v1.RecordingRulesService` (Connect), which Grafana's Profiles
//! Drilldown calls to create a rule from a flame-graph frame. Both go through
//! [`crate::recording::RecordingRules`].

use std::collections::BTreeMap;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};
use stackhouse_proto::pyroscope_settings::{
    DeleteRecordingRuleRequest, DeleteRecordingRuleResponse, GetRecordingRuleRequest,
    GetRecordingRuleResponse, ListRecordingRulesRequest, ListRecordingRulesResponse, RecordingRule,
    StacktraceFilter, StacktraceFilterFunctionName, UpsertRecordingRuleRequest, UpsertRecordingRuleResponse,
};
use stackhouse_proto::pyroscope_types::LabelPair;
use stackhouse_query::pyroscope::Caller;
use stackhouse_query::recording::RuleDefinition;
use stackhouse_storage::catalog::RuleProgress;
use utoipa::ToSchema;

use super::connect::rpc;
use super::settings::written_tenant;
use crate::error::ApiError;
use crate::read::params::{TenantHeader, tenant_of};
use crate::recording::Rule;
use crate::route::{Route, documented};
use crate::state::AppState;
use crate::wire::body::read_limited;

/// A rule is a few selectors and labels.
const MAX_BODY_BYTES: usize = 64 << 10;

const SERVICE: &str = "/settings.v1.RecordingRulesService/";

pub(super) fn routes() -> Vec<Route> {
    vec![
        documented!(list, create),
        documented!(get, replace, delete),
        Route::new(format!("{SERVICE}GetRecordingRule"), rpc(connect_get)),
        Route::new(format!("{SERVICE}ListRecordingRules"), rpc(connect_list)),
        Route::new(format!("{SERVICE}UpsertRecordingRule"), rpc(connect_upsert)),
        Route::new(format!("{SERVICE}DeleteRecordingRule"), rpc(connect_delete)),
    ]
}

/// A rule as the REST API shows it.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct RuleEntry {
    /// Letters only; every recorded series carries it as `profiles_rule_id`.
    pub id: String,
    /// 1 when created, one more with each change; a change must give the one it read.
    /// 0 for a rule from the server's configuration.
    pub generation: i64,
    /// From the server's configuration: cannot be changed or deleted through the API.
    pub provisioned: bool,
    /// The profile type id the matchers select.
    pub profile_type: String,
    /// The rule as created or last changed.
    pub rule: RuleDefinition,
    /// Every minute before this time (unix nanoseconds) has been evaluated and sent;
    /// absent until the rule's first evaluation.
    pub evaluated_until: Option<i64>,
    /// `[from, to)` stretches (unix nanoseconds) sent one point per hour, stamped with the
    /// hour's end: backfilled where retention left only the hour rollup. Every other
    /// point is one minute's total, stamped with the minute's end.
    #[schema(value_type = Vec<Vec<i64>>)]
    pub hourly: Vec<(i64, i64)>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct RuleList {
    /// Configured rules first, then stored ones by id.
    pub rules: Vec<RuleEntry>,
}

/// A change of a stored rule: the whole new rule and the generation it replaces.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RuleChange {
    /// The generation read; the change is refused (409) if the rule has moved on.
    pub generation: i64,
    pub rule: RuleDefinition,
}

fn entry(rule: Rule, progress: Option<&RuleProgress>) -> RuleEntry {
    RuleEntry {
        id: rule.id,
        generation: rule.generation,
        provisioned: rule.provisioned,
        profile_type: rule.profile_type,
        rule: rule.definition,
        evaluated_until: progress.map(|p| p.evaluated_until),
        hourly: progress
            .and_then(|p| serde_json::from_str(&p.coarse).ok())
            .unwrap_or_default(),
    }
}

async fn entries(state: &AppState, tenant: &str, rules: Vec<Rule>) -> Result<Vec<RuleEntry>, ApiError> {
    let progress: BTreeMap<String, RuleProgress> = state
        .catalog
        .rule_progress(tenant)
        .await?
        .into_iter()
        .map(|p| (p.rule_id.clone(), p))
        .collect();
    Ok(rules
        .into_iter()
        .map(|r| {
            let p = progress.get(&r.id);
            entry(r, p)
        })
        .collect())
}

async fn body_of<T: serde::de::DeserializeOwned>(body: Body, shape: &str) -> Result<T, ApiError> {
    let bytes = read_limited(body, MAX_BODY_BYTES).await?;
    serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::invalid(format!("a recording rule is JSON {shape}: {e}")))
}

const DEFINITION_SHAPE: &str = "{\"metric_name\": …, \"matchers\": […], \"group_by\": […], \"external_labels\": {…}, \"function_name\": …}";

/// The tenant's recording rules.
#[utoipa::path(
    get,
    path = "/api/v1/recording-rules",
    tag = "recording rules",
    params(TenantHeader),
    responses((status = 200, description = "The tenant's rules", body = RuleList))
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<RuleList>, ApiError> {
    let tenant = tenant_of(&headers)?;
    let rules = state.rules.list(&tenant).await?;
    Ok(Json(RuleList {
        rules: entries(&state, &tenant, rules).await?,
    }))
}

/// Creates a rule; its series are backfilled from the oldest stored data on.
#[utoipa::path(
    post,
    path = "/api/v1/recording-rules",
    tag = "recording rules",
    params(TenantHeader),
    request_body(content = RuleDefinition, content_type = "application/json"),
    responses(
        (status = 201, description = "Stored", body = RuleEntry),
        (status = 400, description = "Invalid rule; the message names each field at fault", body = crate::error::ErrorBody),
        (status = 422, description = "The tenant has as many rules as allowed", body = crate::error::ErrorBody),
    )
)]
pub(crate) async fn create(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Result<(StatusCode, Json<RuleEntry>), ApiError> {
    let tenant = tenant_of(&headers)?;
    let rule: RuleDefinition = body_of(body, DEFINITION_SHAPE).await?;
    let stored = state.rules.upsert(&tenant, None, 0, rule).await?;
    tracing::info!(%tenant, id = %stored.id, metric = %stored.definition.metric_name, "recording rule created");
    Ok((StatusCode::CREATED, Json(entry(stored, None))))
}

/// One rule of the tenant.
#[utoipa::path(
    get,
    path = "/api/v1/recording-rules/{id}",
    tag = "recording rules",
    params(TenantHeader, ("id" = String, Path, description = "The rule's id")),
    responses((status = 200, description = "The rule", body = RuleEntry))
)]
pub(crate) async fn get(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<RuleEntry>, ApiError> {
    let tenant = tenant_of(&headers)?;
    let rule = state.rules.get(&tenant, &id).await?;
    let mut entries = entries(&state, &tenant, vec![rule]).await?;
    Ok(Json(entries.remove(0)))
}

/// Replaces a stored rule (or stores one under this id), at the generation read.
#[utoipa::path(
    put,
    path = "/api/v1/recording-rules/{id}",
    tag = "recording rules",
    params(TenantHeader, ("id" = String, Path, description = "The rule's id")),
    request_body(content = RuleChange, content_type = "application/json"),
    responses(
        (status = 200, description = "Stored", body = RuleEntry),
        (status = 400, description = "Invalid rule", body = crate::error::ErrorBody),
        (status = 409, description = "The rule changed since the generation given, or it is configured", body = crate::error::ErrorBody),
    )
)]
pub(crate) async fn replace(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Body,
) -> Result<Json<RuleEntry>, ApiError> {
    let tenant = tenant_of(&headers)?;
    let change: RuleChange = body_of(body, "{\"generation\": …, \"rule\": {…}}").await?;
    let stored = state
        .rules
        .upsert(&tenant, Some(&id), change.generation, change.rule)
        .await?;
    let mut entries = entries(&state, &tenant, vec![stored]).await?;
    Ok(Json(entries.remove(0)))
}

/// Deletes a stored rule; its series stop.
#[utoipa::path(
    delete,
    path = "/api/v1/recording-rules/{id}",
    tag = "recording rules",
    params(TenantHeader, ("id" = String, Path, description = "The rule's id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "No such rule", body = crate::error::ErrorBody),
        (status = 409, description = "The rule is configured", body = crate::error::ErrorBody),
    )
)]
pub(crate) async fn delete(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let tenant = tenant_of(&headers)?;
    state.rules.delete(&tenant, &id).await?;
    tracing::info!(%tenant, %id, "recording rule deleted");
    Ok(StatusCode::NO_CONTENT)
}

fn to_wire(rule: Rule) -> RecordingRule {
    RecordingRule {
        id: rule.id,
        metric_name: rule.definition.metric_name,
        profile_type: rule.profile_type,
        matchers: rule.definition.matchers,
        group_by: rule.definition.group_by,
        external_labels: rule
            .definition
            .external_labels
            .into_iter()
            .map(|(name, value)| LabelPair { name, value })
            .collect(),
        generation: rule.generation,
        stacktrace_filter: rule
            .definition
            .function_name
            .map(|function_name| StacktraceFilter {
                function_name: Some(StacktraceFilterFunctionName {
                    function_name,
                    metric_type: 0,
                }),
            }),
        provisioned: rule.provisioned,
    }
}

async fn connect_get(
    state: AppState,
    call: Caller,
    r: GetRecordingRuleRequest,
) -> Result<GetRecordingRuleResponse, ApiError> {
    let tenant = written_tenant(&call)?;
    let id = r.id.trim();
    if id.is_empty() {
        return Err(ApiError::invalid("id is required"));
    }
    Ok(GetRecordingRuleResponse {
        rule: Some(to_wire(state.rules.get(&tenant, id).await?)),
    })
}

async fn connect_list(
    state: AppState,
    call: Caller,
    _: ListRecordingRulesRequest,
) -> Result<ListRecordingRulesResponse, ApiError> {
    let tenant = written_tenant(&call)?;
    Ok(ListRecordingRulesResponse {
        rules: state
            .rules
            .list(&tenant)
            .await?
            .into_iter()
            .map(to_wire)
            .collect(),
    })
}

async fn connect_upsert(
    state: AppState,
    call: Caller,
    r: UpsertRecordingRuleRequest,
) -> Result<UpsertRecordingRuleResponse, ApiError> {
    let tenant = written_tenant(&call)?;
    let mut external_labels = BTreeMap::new();
    for pair in r.external_labels {
        if external_labels.insert(pair.name.clone(), pair.value).is_some() {
            return Err(ApiError::invalid(format!(
                "invalid rule: external_labels name {:?} is given twice",
                pair.name
            )));
        }
    }
    let rule = RuleDefinition {
        metric_name: r.metric_name.trim().to_string(),
        matchers: r.matchers,
        group_by: r.group_by,
        external_labels,
        function_name: r
            .stacktrace_filter
            .and_then(|f| f.function_name)
            .map(|f| f.function_name),
    };
    let id = r.id.trim();
    let id = (!id.is_empty()).then_some(id);
    let stored = state.rules.upsert(&tenant, id, r.generation, rule).await?;
    Ok(UpsertRecordingRuleResponse {
        rule: Some(to_wire(stored)),
    })
}

async fn connect_delete(
    state: AppState,
    call: Caller,
    r: DeleteRecordingRuleRequest,
) -> Result<DeleteRecordingRuleResponse, ApiError> {
    let tenant = written_tenant(&call)?;
    let id = r.id.trim();
    if id.is_empty() {
        return Err(ApiError::invalid("id is required"));
    }
    state.rules.delete(&tenant, id).await?;
    Ok(DeleteRecordingRuleResponse {})
}
