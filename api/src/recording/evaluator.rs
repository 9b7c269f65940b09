//! Evaluates every tenant's recording rules in the background and pushes their points.
//!
//! Each rule has a mark in the catalog: every minute before it has been evaluated and
//! delivered. A pass moves each rule's mark forward one hour at a time (never across an
//! hour, so a stretch that only the hour rollup still holds is one whole hour) up to the
//! last minute that ended `--recording-rules-delay` ago, and moves it only once the
//! receiver has taken the points. So the points waiting to be sent are never held in
//! memory: an outage of the receiver stops the marks, and once it is back the missed
//! minutes are sent with their own timestamps, no gap and no point twice. A new rule's
//! mark starts at the hour of the tenant's oldest stored data: it is backfilled from
//! whatever tiers hold each hour, and the stretches sent one point per hour are kept with
//! the mark (`coarse`, shown on the rule).
//!
//! One process evaluates a tenant at a time, under a lease in the catalog.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use stackhouse_query::QueryEngine;
use stackhouse_query::recording::{RecordedSeries, RuleDefinition, STEP_NANOS, Step};
use stackhouse_storage::catalog::{Catalog, RuleProgress};
use stackhouse_storage::clock::SharedClock;
use stackhouse_storage::model::TimeRange;
use tokio::sync::watch;

use super::remote_write::{PushError, RemoteWrite};
use super::{RecordingRules, Rule};

const HOUR_NANOS: i64 = 3_600_000_000_000;
/// Stretches (an hour at most each) one pass evaluates per tenant, so a long backfill
/// shares the passes with the other tenants.
const MAX_STRETCHES_PER_PASS: usize = 24;
/// Longest wait after failed pushes: an outage's end is noticed within it.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// A stretch `[start, end)` in unix nanoseconds sent one point per hour.
pub type Coarse = Vec<(i64, i64)>;

/// The background task; ends when `shutdown` turns true.
pub async fn run(
    rules: Arc<RecordingRules>,
    engine: Arc<QueryEngine>,
    catalog: Arc<dyn Catalog>,
    clock: SharedClock,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut evaluator = Evaluator::new(rules, engine, catalog, clock);
    let mut ticker = tokio::time::interval(evaluator.rules.config().interval.max(Duration::from_millis(10)));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = async { let _ = shutdown.wait_for(|stop| *stop).await; } => return,
            _ = ticker.tick() => evaluator.pass().await,
        }
    }
}

pub struct Evaluator {
    rules: Arc<RecordingRules>,
    engine: Arc<QueryEngine>,
    catalog: Arc<dyn Catalog>,
    clock: SharedClock,
    remote: RemoteWrite,
    holder: String,
    /// Per tenant: when to try again after failed pushes, and the last wait.
    backoff: HashMap<String, (tokio::time::Instant, Duration)>,
}

impl Evaluator {
    pub fn new(
        rules: Arc<RecordingRules>,
        engine: Arc<QueryEngine>,
        catalog: Arc<dyn Catalog>,
        clock: SharedClock,
    ) -> Evaluator {
        Evaluator {
            rules,
            engine,
            catalog,
            clock,
            remote: RemoteWrite::default(),
            holder: uuid::Uuid::now_v7().to_string(),
            backoff: HashMap::new(),
        }
    }

    /// One pass over every tenant with rules and a remote-write URL.
    pub async fn pass(&mut self) {
        let tenants = match self.tenants().await {
            Ok(tenants) => tenants,
            Err(e) => {
                tracing::warn!(error = %e, "listing tenants with recording rules failed");
                return;
            }
        };
        for tenant in tenants {
            let Some(url) = self.rules.config().remote_write_url.of(&tenant) else {
                continue;
            };
            if let Some((until, _)) = self.backoff.get(&tenant)
                && tokio::time::Instant::now() < *until
            {
                continue;
            }
            match self.tenant(&tenant, &url).await {
                Ok(()) => {
                    self.backoff.remove(&tenant);
                }
                Err(e) => {
                    let wait = match self.backoff.get(&tenant) {
                        Some((_, last)) => (*last * 2).min(MAX_BACKOFF),
                        None => self.rules.config().interval.max(Duration::from_secs(1)),
                    };
                    tracing::warn!(%tenant, error = %e, retry_in = ?wait, "recording rules: pass failed");
                    self.backoff
                        .insert(tenant, (tokio::time::Instant::now() + wait, wait));
                }
            }
        }
    }

    /// Tenants with stored rules, and every tenant with data where configured rules apply.
    async fn tenants(&self) -> anyhow::Result<BTreeSet<String>> {
        let mut tenants: BTreeSet<String> =
            self.catalog.recording_rule_tenants().await?.into_iter().collect();
        let configured = &self.rules.config().provisioned;
        if !configured.default.is_empty() {
            tenants.extend(self.catalog.tenants().await?);
        }
        tenants.extend(
            configured
                .overrides
                .iter()
                .filter(|(_, rules)| !rules.is_empty())
                .map(|(t, _)| t.clone()),
        );
        Ok(tenants)
    }

    async fn tenant(&self, tenant: &str, url: &str) -> anyhow::Result<()> {
        let interval = self.rules.config().interval;
        let ttl = (interval * 4).max(Duration::from_secs(60));
        let lease = format!("recording-rules/{tenant}");
        if !self
            .catalog
            .acquire_lease(&lease, &self.holder, self.clock.now_nanos(), ttl)
            .await?
        {
            return Ok(());
        }
        let rules = self
            .rules
            .list(tenant)
            .await
            .map_err(|e| anyhow::anyhow!(e.message))?;
        let mut progress: HashMap<String, RuleProgress> = self
            .catalog
            .rule_progress(tenant)
            .await?
            .into_iter()
            .map(|p| (p.rule_id.clone(), p))
            .collect();
        let delay = i64::try_from(self.rules.config().delay.as_nanos()).unwrap_or(i64::MAX);
        let target = self
            .clock
            .now_nanos()
            .saturating_sub(delay)
            .div_euclid(STEP_NANOS)
            * STEP_NANOS;
        let mut marks = Vec::with_capacity(rules.len());
        for rule in rules {
            let mark = match progress.remove(&rule.id) {
                Some(p) => p,
                None => self.first_mark(tenant, &rule, target).await?,
            };
            marks.push((rule, mark));
        }
        let result = self.advance(tenant, url, &mut marks, target).await;
        for (rule, mark) in &marks {
            let lag = (self.clock.now_nanos() - mark.evaluated_until) as f64 / 1e9;
            metrics::gauge!("stackhouse_recording_rules_lag_seconds", "tenant" => tenant.to_string(), "rule" => rule.id.clone())
                .set(lag);
        }
        result
    }

    /// Where a rule without a mark starts: the hour of the tenant's oldest data.
    async fn first_mark(&self, tenant: &str, rule: &Rule, target: i64) -> anyhow::Result<RuleProgress> {
        let start = match self.catalog.data_range(tenant).await? {
            Some((min, _)) => min.div_euclid(HOUR_NANOS) * HOUR_NANOS,
            None => target,
        };
        let mark = RuleProgress {
            rule_id: rule.id.clone(),
            evaluated_until: start.min(target),
            coarse: "[]".to_string(),
        };
        self.catalog.set_rule_progress(tenant, &mark).await?;
        Ok(mark)
    }

    /// Moves the rules' marks towards `target`: the rules at the earliest mark together,
    /// an hour at most at a time, each stretch's points delivered before the marks move
    /// past them.
    async fn advance(
        &self,
        tenant: &str,
        url: &str,
        marks: &mut [(Rule, RuleProgress)],
        target: i64,
    ) -> anyhow::Result<()> {
        for _ in 0..MAX_STRETCHES_PER_PASS {
            let Some(start) = marks
                .iter()
                .map(|(_, m)| m.evaluated_until)
                .filter(|&t| t < target)
                .min()
            else {
                break;
            };
            let end = ((start.div_euclid(HOUR_NANOS) + 1) * HOUR_NANOS).min(target);
            let at: Vec<usize> = (0..marks.len())
                .filter(|&i| marks[i].1.evaluated_until == start)
                .collect();
            let rules: Vec<(String, RuleDefinition)> = at
                .iter()
                .map(|&i| (marks[i].0.id.clone(), marks[i].0.definition.clone()))
                .collect();
            let recorded = match self.engine.record(tenant, &rules, TimeRange { start, end }).await {
                Ok(recorded) => recorded,
                Err(e) => {
                    metrics::counter!("stackhouse_recording_rules_failures_total", "tenant" => tenant.to_string(), "reason" => "evaluation")
                        .increment(1);
                    anyhow::bail!("evaluating recording rules over [{start}, {end}): {e}");
                }
            };
            let series: Vec<RecordedSeries> =
                recorded.iter().flat_map(|r| r.series.iter().cloned()).collect();
            if !series.is_empty() {
                match self.remote.push(url, &series).await {
                    Ok(()) => {
                        for ((id, _), r) in rules.iter().zip(&recorded) {
                            let labels = [("tenant", tenant.to_string()), ("rule", id.clone())];
                            let samples: usize = r.series.iter().map(|s| s.points.len()).sum();
                            metrics::counter!("stackhouse_recording_rules_series_sent_total", &labels)
                                .increment(r.series.len() as u64);
                            metrics::counter!("stackhouse_recording_rules_samples_sent_total", &labels)
                                .increment(samples as u64);
                        }
                    }
                    Err(e @ PushError::Rejected { .. }) => {
                        // Sending them again would be refused again: they are dropped,
                        // counted and logged, and the rules go on.
                        metrics::counter!("stackhouse_recording_rules_failures_total", "tenant" => tenant.to_string(), "reason" => "rejected")
                            .increment(1);
                        tracing::warn!(%tenant, error = %e, "recording rule points refused");
                    }
                    Err(e @ PushError::Retry { .. }) => {
                        metrics::counter!("stackhouse_recording_rules_failures_total", "tenant" => tenant.to_string(), "reason" => "unavailable")
                            .increment(1);
                        return Err(e.into());
                    }
                }
            }
            for (&i, r) in at.iter().zip(&recorded) {
                let mark = &mut marks[i].1;
                let mut coarse: Coarse = serde_json::from_str(&mark.coarse).unwrap_or_default();
                if r.step == Step::Hour {
                    match coarse.last_mut() {
                        Some(last) if last.1 == start => last.1 = end,
                        _ => coarse.push((start, end)),
                    }
                }
                mark.evaluated_until = end;
                mark.coarse = serde_json::to_string(&coarse).expect("pairs serialize");
                self.catalog.set_rule_progress(tenant, mark).await?;
            }
        }
        Ok(())
    }
}
