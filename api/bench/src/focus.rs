//! A flamegraph with a focus filter (`focus=function:…`) against the same flamegraph
//! unfiltered, both over the HTTP API and interleaved: what a frame rule costs a read.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use anyhow::{Context, bail};
use prost::Message;
use stackhouse_proto::otlp_collector::ExportProfilesServiceRequest;
use stackhouse_storage::model::TimeRange;

use super::Plan;
use super::api::{self, Served};
use super::env::Env;
use super::measure::median;
use super::report::{Report, Row, ms};

/// The function a focus filter keeps, and the value of the samples whose stacks hold it.
pub(crate) struct Focus {
    pub function: String,
    pub total: i64,
}

/// The share of the samples the focused function's stacks should hold: a filter that keeps
/// a part of a tree, as a reader's does.
const SHARE: f64 = 0.3;

/// From the requests as sent: the function whose stacks hold the share of the samples
/// nearest [`SHARE`], counted from the input.
pub(crate) fn pick(encoded: &[(Vec<u8>, usize)]) -> anyhow::Result<Focus> {
    let mut values: BTreeMap<String, i64> = BTreeMap::new();
    let mut all = 0i64;
    for (bytes, _) in encoded {
        let request = ExportProfilesServiceRequest::decode(bytes.as_slice()).context("decoding a request")?;
        let Some(dict) = request.dictionary.as_ref() else {
            continue;
        };
        let string = |i: i32| dict.string_table.get(i as usize).map_or("", String::as_str);
        let profiles = request
            .resource_profiles
            .iter()
            .flat_map(|r| &r.scope_profiles)
            .flat_map(|s| &s.profiles);
        for profile in profiles {
            for sample in &profile.samples {
                // As ingest reads a sample: one row per timestamp, worth its value or 1.
                let times = sample.timestamps_unix_nano.len();
                let value: i64 = match (sample.values.is_empty(), times) {
                    (true, n) => n as i64,
                    (false, 0) => sample.values.iter().sum(),
                    (false, n) => sample.values.iter().take(n).sum(),
                };
                all += value;
                let Some(stack) = dict.stack_table.get(sample.stack_index as usize) else {
                    continue;
                };
                let names: BTreeSet<&str> = stack
                    .location_indices
                    .iter()
                    .filter_map(|&l| dict.location_table.get(l as usize))
                    .flat_map(|l| &l.lines)
                    .filter_map(|line| dict.function_table.get(line.function_index as usize))
                    .map(|f| string(f.name_strindex))
                    // Names a reader sees as sent: not mangled, not empty.
                    .filter(|n| !n.is_empty() && !n.starts_with("_Z") && !n.starts_with("_R"))
                    .collect();
                for name in names {
                    *values.entry(name.to_string()).or_default() += value;
                }
            }
        }
    }
    let target = SHARE * all as f64;
    values
        .into_iter()
        .min_by(|a, b| {
            let off = |v: i64| (v as f64 - target).abs();
            off(a.1).total_cmp(&off(b.1)).then_with(|| a.0.cmp(&b.0))
        })
        .map(|(function, total)| Focus { function, total })
        .context("no named function in the requests")
}

/// Escapes what a regular expression would read as syntax.
fn escaped(name: &str) -> String {
    name.chars()
        .flat_map(|c| {
            let special = "\\.+*?()|[]{}^$#&-~".contains(c);
            special.then_some('\\').into_iter().chain(std::iter::once(c))
        })
        .collect()
}

pub(crate) async fn measurement(
    plan: &Plan,
    env: &Env,
    range: TimeRange,
    focus: &Focus,
    report: &mut Report,
) -> anyhow::Result<()> {
    let served = Served::start(env).await?;
    let client = reqwest::Client::new();
    let rule = format!("function:{}", escaped(&focus.function));
    let measured = async {
        let total =
            api::http_flamegraph_total_with(&client, &served.base, range, &[("focus", &rule)]).await?;
        if total != focus.total {
            bail!(
                "the focused flamegraph counts {total}, the samples through {} hold {}",
                focus.function,
                focus.total
            );
        }
        let (mut plain, mut focused) = (Vec::new(), Vec::new());
        for _ in 0..plan.warm_runs {
            let t = Instant::now();
            api::http_flamegraph_total(&client, &served.base, range).await?;
            plain.push(t.elapsed());
            let t = Instant::now();
            api::http_flamegraph_total_with(&client, &served.base, range, &[("focus", &rule)]).await?;
            focused.push(t.elapsed());
        }
        anyhow::Ok((median(plain), median(focused)))
    }
    .await;
    served.stop().await;
    let (plain, focused) = measured.context("focused flamegraph")?;
    report.rows.push(Row {
        measurement: format!(
            "flamegraph with a focus filter over the HTTP API ({:.0} % of the samples kept)",
            100.0 * focus.total as f64 / report.ingest_samples.max(1) as f64
        ),
        ours: ms(focused),
        baseline: ms(plain),
        unit: "ms",
        baseline_name: "the same flamegraph unfiltered".into(),
        target: "≤ 1.2×".into(),
        pass: focused.as_secs_f64() <= 1.2 * plain.as_secs_f64(),
    });
    report.notes.push(format!(
        "Focus filter: `focus={rule}`, medians of {} warm runs alternating with the unfiltered read.",
        plan.warm_runs
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::escaped;

    #[test]
    fn names_are_escaped_for_a_full_match() {
        assert_eq!(escaped("svc1::module2::function_3"), "svc1::module2::function_3");
        assert_eq!(escaped("a.b(c)*"), "a\\.b\\(c\\)\\*");
    }
}
