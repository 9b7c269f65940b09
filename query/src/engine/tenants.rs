//! Reads over several tenants (`X-Scope-OrgID: a|b`, as Loki, Mimir and Tempo take it):
//! each tenant is planned on its own, with its own catalog, deletions and limits, and the
//! scans of all of them run as one query. Every series of such a read carries the label
//! `__tenant_id__`, usable in selectors and `group_by` (of one tenant's reads too).
//!
//! Series ids are hashes of a series' labels, so two tenants' series with the same labels
//! have the same id. Where a query tells series apart, each tenant's rows but the first's
//! get their series id XOR a hash of the tenant's name, and the plan's series are keyed so.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;

use datafusion::dataframe::DataFrame;
use datafusion::logical_expr::{Expr, Operator, binary_expr, col, lit};
use stackhouse_storage::model::{ProfileType, Series, TimeRange, is_union, member_tenants};
use stackhouse_storage::schema::samples;

use super::QueryEngine;
use super::aggregate::Dim;
use super::plan::{Needs, Plan, value_expr};
use super::scope::Scope;
use crate::error::QueryError;
use crate::selector::{Matcher, Selector};

/// The label naming each series' tenant.
pub(crate) const TENANT_LABEL: &str = "__tenant_id__";

/// What XORed into a tenant's series ids keeps them apart from another tenant's: 64-bit
/// FNV-1a of its name.
fn salt(tenant: &str) -> i64 {
    let hash = tenant.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    hash as i64
}

/// The salt of the `i`th tenant of a union: the first keeps its series ids.
fn member_salt(i: usize, tenant: &str) -> i64 {
    if i == 0 { 0 } else { salt(tenant) }
}

/// A series of the `i`th tenant of a union as the union shows it: id salted, labelled with
/// its tenant.
fn as_member(mut series: Series, i: usize, tenant: &str) -> Series {
    series.id ^= member_salt(i, tenant);
    series.labels.insert(TENANT_LABEL.to_string(), tenant.to_string());
    series
}

/// The tenants of `tenant` its `__tenant_id__` matchers select, and the rest of the
/// selector, which each tenant's plan applies.
fn split_selector<'a>(tenant: &'a str, selector: &Selector) -> (Vec<&'a str>, Selector) {
    let (by_tenant, rest): (Vec<&Matcher>, Vec<&Matcher>) =
        selector.matchers.iter().partition(|m| m.name == TENANT_LABEL);
    let members = member_tenants(tenant)
        .filter(|t| by_tenant.iter().all(|m| m.matches(Some(*t))))
        .collect();
    let rest = Selector {
        matchers: rest.into_iter().cloned().collect(),
    };
    (members, rest)
}

impl QueryEngine {
    /// Checks the scope against the limits, then prunes with the catalog. `Ok(None)` when
    /// nothing can match (no series, no segment): the caller answers with an empty result.
    pub(crate) async fn plan(&self, scope: &Scope, needs: Needs<'_>) -> Result<Option<Plan>, QueryError> {
        let names_tenant = scope.selector.matchers.iter().any(|m| m.name == TENANT_LABEL)
            || needs.labels.contains(&TENANT_LABEL);
        if !is_union(&scope.tenant) && !names_tenant {
            return self.plan_tenant(scope, needs).await;
        }
        let (members, selector) = split_selector(&scope.tenant, &scope.selector);
        let labels: Vec<&str> = needs
            .labels
            .iter()
            .copied()
            .filter(|l| *l != TENANT_LABEL)
            .collect();
        let members: Vec<Scope> = members
            .into_iter()
            .map(|tenant| Scope {
                tenant: tenant.to_string(),
                selector: selector.clone(),
                ..scope.clone()
            })
            .collect();
        let mut plans = self.plan_members(&members, &needs.dims, &labels).await?;
        // One query reads one set of columns: when a tenant's series lack a grouped label
        // (it is a sample attribute there), every tenant groups by the attribute set.
        let mut dims = needs.dims.clone();
        for plan in plans.iter().flatten() {
            for d in &plan.dims {
                if !dims.contains(d) {
                    dims.push(*d);
                }
            }
        }
        let short: Vec<usize> = (0..plans.len())
            .filter(|&i| plans[i].as_ref().is_some_and(|p| p.dims != dims))
            .collect();
        if !short.is_empty() {
            let scopes: Vec<Scope> = short.iter().map(|&i| members[i].clone()).collect();
            let again = self.plan_members(&scopes, &dims, &[]).await?;
            for (i, plan) in short.into_iter().zip(again) {
                plans[i] = plan;
            }
        }
        let plans: Vec<(&str, Plan)> = members
            .iter()
            .zip(plans)
            .filter_map(|(member, p)| p.map(|p| (member.tenant.as_str(), p)))
            .collect();
        if plans.is_empty() {
            return Ok(None);
        }
        // Frames are named from `SymbolCache::loaded` of the union: the union of what each
        // member's planning read.
        Ok(Some(union(scope, plans, dims)))
    }

    async fn plan_members(
        &self,
        members: &[Scope],
        dims: &[Dim],
        labels: &[&str],
    ) -> Result<Vec<Option<Plan>>, QueryError> {
        futures::future::try_join_all(members.iter().map(|scope| {
            let needs = Needs {
                dims: dims.to_vec(),
                labels: labels.to_vec(),
            };
            self.plan_tenant(scope, needs)
        }))
        .await
    }

    /// `read` of each tenant a read names, at once, with the tenant it was of.
    pub(crate) async fn per_tenant<'t, T, F, Fut>(
        &self,
        tenant: &'t str,
        read: F,
    ) -> Result<Vec<(&'t str, T)>, QueryError>
    where
        F: Fn(&'t str) -> Fut,
        Fut: Future<Output = Result<T, QueryError>>,
    {
        futures::future::try_join_all(member_tenants(tenant).map(|t| {
            let read = read(t);
            async move { Ok((t, read.await?)) }
        }))
        .await
    }
}

/// The catalog's listings over every tenant a read names: one tenant's as they are,
/// several tenants' merged, their series labelled with their tenant.
impl QueryEngine {
    pub(crate) async fn catalog_series(
        &self,
        tenant: &str,
        range: TimeRange,
    ) -> Result<Vec<Series>, QueryError> {
        if !is_union(tenant) {
            return Ok(self.catalog.series(tenant, range).await?);
        }
        let all = self
            .per_tenant(
                tenant,
                |t| async move { Ok(self.catalog.series(t, range).await?) },
            )
            .await?;
        let mut series = Vec::new();
        for (i, (t, listed)) in all.into_iter().enumerate() {
            series.extend(listed.into_iter().map(|s| as_member(s, i, t)));
        }
        Ok(series)
    }

    pub(crate) async fn catalog_label_names(
        &self,
        tenant: &str,
        range: TimeRange,
    ) -> Result<Vec<String>, QueryError> {
        if !is_union(tenant) {
            return Ok(self.catalog.label_names(tenant, range).await?);
        }
        let all = self
            .per_tenant(tenant, |t| async move {
                Ok(self.catalog.label_names(t, range).await?)
            })
            .await?;
        let mut names: BTreeSet<String> = all.into_iter().flat_map(|(_, names)| names).collect();
        names.insert(TENANT_LABEL.to_string());
        Ok(names.into_iter().collect())
    }

    pub(crate) async fn catalog_label_values(
        &self,
        tenant: &str,
        name: &str,
        range: TimeRange,
    ) -> Result<Vec<String>, QueryError> {
        if name == TENANT_LABEL {
            // The tenants with data in the range.
            let types = self
                .per_tenant(tenant, |t| async move {
                    Ok(self.catalog.profile_types(t, range).await?)
                })
                .await?;
            let mut tenants: Vec<String> = types
                .into_iter()
                .filter(|(_, types)| !types.is_empty())
                .map(|(t, _)| t.to_string())
                .collect();
            tenants.sort();
            return Ok(tenants);
        }
        if !is_union(tenant) {
            return Ok(self.catalog.label_values(tenant, name, range).await?);
        }
        let all = self
            .per_tenant(tenant, |t| async move {
                Ok(self.catalog.label_values(t, name, range).await?)
            })
            .await?;
        let values: BTreeSet<String> = all.into_iter().flat_map(|(_, values)| values).collect();
        Ok(values.into_iter().collect())
    }

    pub(crate) async fn catalog_profile_types(
        &self,
        tenant: &str,
        range: TimeRange,
    ) -> Result<Vec<ProfileType>, QueryError> {
        let all = self
            .per_tenant(tenant, |t| async move {
                Ok(self.catalog.profile_types(t, range).await?)
            })
            .await?;
        let mut types = Vec::new();
        for t in all.into_iter().flat_map(|(_, types)| types) {
            if !types.contains(&t) {
                types.push(t);
            }
        }
        Ok(types)
    }

    /// Unix nanoseconds of the oldest and newest sample of the tenants; `None` without data.
    pub(crate) async fn catalog_data_range(&self, tenant: &str) -> Result<Option<(i64, i64)>, QueryError> {
        let all = self
            .per_tenant(tenant, |t| async move { Ok(self.catalog.data_range(t).await?) })
            .await?;
        Ok(all
            .into_iter()
            .filter_map(|(_, range)| range)
            .reduce(|(a0, a1), (b0, b1)| (a0.min(b0), a1.max(b1))))
    }
}

/// The plans of several tenants as one: each tenant's scans, its series keyed by salted id
/// and labelled with the tenant.
fn union(scope: &Scope, plans: Vec<(&str, Plan)>, dims: Vec<Dim>) -> Plan {
    let mut scans = Vec::new();
    let mut series = HashMap::new();
    let mut period = 0;
    let mut answered: Option<TimeRange> = None;
    for (i, (tenant, plan)) in plans.into_iter().enumerate() {
        let salt = member_salt(i, tenant);
        for mut scan in plan.scans {
            scan.salt = salt;
            scans.push(scan);
        }
        for s in plan.series.into_values() {
            let s = as_member(s, i, tenant);
            series.insert(s.id, s);
        }
        period = period.max(plan.period);
        // Where tiers answer a tenant over less than the range, the union says the least.
        let covered = plan.answered.unwrap_or(scope.range);
        answered = Some(match answered {
            None => covered,
            Some(a) => TimeRange {
                start: a.start.max(covered.start),
                end: a.end.min(covered.end),
            },
        });
    }
    let value = value_expr(scope, &series);
    Plan {
        scans,
        dims,
        series,
        period,
        value,
        answered: answered.filter(|a| *a != scope.range),
    }
}

/// Whether the rows of `plan` must tell series apart: it groups by series, or weighs
/// values by series.
pub(super) fn needs_series(plan: &Plan) -> bool {
    plan.dims.contains(&Dim::Series)
        || plan
            .value
            .column_refs()
            .iter()
            .any(|c| c.name == samples::SERIES_ID)
}

/// `df` with its series ids XOR `salt`.
pub(super) fn salted(df: DataFrame, salt: i64) -> Result<DataFrame, QueryError> {
    let columns: Vec<Expr> = df
        .schema()
        .fields()
        .iter()
        .map(|f| {
            if f.name() == samples::SERIES_ID {
                binary_expr(col(samples::SERIES_ID), Operator::BitwiseXor, lit(salt))
                    .alias(samples::SERIES_ID)
            } else {
                col(f.name())
            }
        })
        .collect();
    Ok(df.select(columns)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selector::parse_selector;

    #[test]
    fn tenant_matchers_pick_members_and_leave_the_rest() {
        let selector = parse_selector(r#"{__tenant_id__=~"a|c", service="x"}"#).unwrap();
        let (members, rest) = split_selector("a|b|c", &selector);
        assert_eq!(members, vec!["a", "c"]);
        assert_eq!(rest.to_string(), r#"{service="x"}"#);
        let (members, _) = split_selector("a", &parse_selector(r#"{__tenant_id__!="a"}"#).unwrap());
        assert!(members.is_empty());
    }

    #[test]
    fn salts_differ_by_tenant() {
        assert_ne!(salt("a"), salt("b"));
        assert_eq!(salt("a"), salt("a"));
    }
}
