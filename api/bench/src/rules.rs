//! Recording rules against compaction (`--only rules`): the ingest workload written as
//! ingest writes it; 25 rules (plain, grouped, regex-selected and function-filtered)
//! evaluated minute by minute over it as the evaluator does live, reading the fresh
//! segments; then the store compacted as the compactor does, pass after pass of what is
//! due (level 0 into minute blocks, those into hour blocks with their rollups). The row is
//! compaction's CPU per sample with the rules' CPU added, against compaction's alone.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use stackhouse_proto::otlp_collector::ExportProfilesServiceRequest;
use stackhouse_query::pyroscope::profile_type;
use stackhouse_query::recording::{RuleDefinition, STEP_NANOS};
use stackhouse_query::{QueryConfig, QueryEngine, Scope, TopQuery};
use stackhouse_storage::compaction::CompactMode;
use stackhouse_storage::model::TimeRange;
use stackhouse_storage::symbols::SymbolCache;

use super::Plan;
use super::env::{Env, TENANT, cpu_type};
use super::measure::cpu_time;
use super::query::write_workload;
use super::report::{Report, Row};
use super::workload::Workload;

/// Pyroscope's default limit of rules per tenant.
const RULES: usize = 25;

pub(crate) async fn measurements(
    plan: &Plan,
    capture: &ExportProfilesServiceRequest,
    report: &mut Report,
) -> anyhow::Result<()> {
    let env = Env::open().await?;
    let workload = Arc::new(Workload::new(plan.fleet.clone(), capture));
    let samples = write_workload(&env, workload, plan.flush_interval).await?;
    let (min, max) = env
        .catalog
        .data_range(TENANT)
        .await?
        .context("the workload stored nothing")?;
    let engine = QueryEngine::new(
        env.store.clone(),
        env.catalog.clone(),
        Arc::new(SymbolCache::new(env.store.clone(), env.catalog.clone())),
        QueryConfig::default(),
    );
    let range = TimeRange {
        start: min.div_euclid(STEP_NANOS) * STEP_NANOS,
        end: (max.div_euclid(STEP_NANOS) + 1) * STEP_NANOS,
    };
    let rules = twenty_five(&engine, range).await?;

    // As live: each minute once it has ended, every rule at once.
    let before = cpu_time();
    let mut points = 0;
    let mut minute = range.start;
    while minute < range.end {
        let recorded = engine
            .record(
                TENANT,
                &rules,
                TimeRange {
                    start: minute,
                    end: minute + STEP_NANOS,
                },
            )
            .await
            .context("evaluating the rules")?;
        points += recorded
            .iter()
            .flat_map(|r| &r.series)
            .map(|s| s.points.len())
            .sum::<usize>();
        minute += STEP_NANOS;
    }
    let rules_cpu = cpu_time() - before;
    anyhow::ensure!(points > 0, "the rules recorded no point");

    // Compaction as the server runs it: passes of what is due (minute blocks, then hour
    // blocks with their rollups) until nothing is; the data's hours have all closed.
    let compactor = env.compactor();
    let before = cpu_time();
    let mut passes = 0;
    while compactor.compact_tenant(TENANT, CompactMode::Due).await?.merges > 0 {
        passes += 1;
    }
    let compaction_cpu = cpu_time() - before;

    let per_sample = |d: Duration| d.as_nanos() as f64 / samples as f64;
    let (with, without) = (per_sample(compaction_cpu + rules_cpu), per_sample(compaction_cpu));
    report.rows.push(Row {
        measurement: format!("compaction CPU per sample with {RULES} recording rules evaluated each minute"),
        ours: with,
        baseline: without,
        unit: "ns/sample",
        baseline_name: "compaction alone".into(),
        target: "≤ 1.2×".into(),
        pass: with <= 1.2 * without,
    });
    report.notes.push(format!(
        "Recording rules: {RULES} rules over {samples} samples in {} minutes ({:.0} samples/s), \
         {points} points; evaluation {:.0} ms CPU, compaction ({passes} passes) {:.0} ms CPU.",
        (range.end - range.start) / STEP_NANOS,
        samples as f64 / ((max - min) as f64 / 1e9).max(1.0),
        rules_cpu.as_secs_f64() * 1e3,
        compaction_cpu.as_secs_f64() * 1e3,
    ));
    Ok(())
}

/// Rules as a tenant would keep them: per service, grouped by host or service, by regex,
/// and the total of the five heaviest functions.
async fn twenty_five(
    engine: &QueryEngine,
    range: TimeRange,
) -> anyhow::Result<Vec<(String, RuleDefinition)>> {
    let t = profile_type::id(&cpu_type());
    let top = engine
        .top(&TopQuery {
            scope: Scope::new(TENANT, cpu_type(), range),
            limit: 5,
        })
        .await?;
    let rule = |i: usize, matcher: String, group_by: &[&str], function: Option<String>| {
        (
            format!("rule{}", char::from(b'a' + i as u8)),
            RuleDefinition {
                metric_name: format!("profiles_recorded_bench_{i}"),
                matchers: vec![format!("{{__profile_type__=\"{t}\"{matcher}}}")],
                group_by: group_by.iter().map(|g| g.to_string()).collect(),
                external_labels: [("bench".to_string(), "yes".to_string())].into(),
                function_name: function,
            },
        )
    };
    let mut rules = Vec::with_capacity(RULES);
    for s in 0..8 {
        rules.push(rule(
            rules.len(),
            format!(", service_name=\"service-{s}\""),
            &[],
            None,
        ));
    }
    for group_by in [
        &["host_name"][..],
        &["service_name"],
        &["service_name", "host_name"],
    ] {
        for _ in 0..3 {
            rules.push(rule(rules.len(), String::new(), group_by, None));
        }
    }
    for r in ["service-[0-3]", "service-[4-7]", ".*"] {
        rules.push(rule(
            rules.len(),
            format!(", service_name=~\"{r}\""),
            &["service_name"],
            None,
        ));
    }
    for f in top.functions.iter().take(RULES - rules.len()) {
        rules.push(rule(rules.len(), String::new(), &[], Some(f.name.clone())));
    }
    Ok(rules)
}
