//! `serve --config FILE`: the serve flags as a YAML map, keyed by flag name without the
//! leading `--` (`http-addr: 0.0.0.0:4040`, lists for repeatable flags). Layered as
//! file < environment < command line: the file only sets flags that neither the command
//! line nor a `STACKHOUSE_*` variable sets. Unknown keys are an error naming them.
//!
//! The file becomes extra command-line flags, so it is parsed and validated by the very
//! same flag definitions; the example config is generated from them, so neither can
//! drift from the flags.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, anyhow, bail};
use clap::parser::ValueSource;
use clap::{ArgMatches, Command};

/// Flags that make no sense in a file.
pub(super) const NOT_IN_FILE: [&str; 3] = ["config", "help", "version"];

/// The flags `path` adds to a command line `matches` came from: `--key=value` for each key
/// whose flag the command line and the environment leave unset.
pub fn flags(serve: &Command, matches: &ArgMatches, path: &Path) -> anyhow::Result<Vec<String>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading config file {}", path.display()))?;
    let map: Option<BTreeMap<String, serde_yaml::Value>> =
        serde_yaml::from_str(&text).with_context(|| {
            format!(
                "config file {}: expected a map of flag names to values",
                path.display()
            )
        })?;
    let mut out = Vec::new();
    for (key, value) in map.unwrap_or_default() {
        if key == TENANTS {
            out.extend(
                tenant_flags(serve, matches, &value)
                    .with_context(|| format!("config file {}", path.display()))?,
            );
            continue;
        }
        let arg = serve
            .get_arguments()
            .find(|a| a.get_long() == Some(key.as_str()) && !NOT_IN_FILE.contains(&key.as_str()))
            .ok_or_else(|| {
                anyhow!(
                    "config file {}: unknown key {key:?}; keys are the serve flags without the leading -- (see stackhouse config example)",
                    path.display()
                )
            })?;
        if set_elsewhere(matches, arg) {
            continue;
        }
        for v in
            values(arg, &value).with_context(|| format!("config file {}: key {key:?}", path.display()))?
        {
            out.push(format!("--{key}={v}"));
        }
    }
    Ok(out)
}

/// Whether the command line or the environment sets `arg`: then the file does not.
fn set_elsewhere(matches: &ArgMatches, arg: &clap::Arg) -> bool {
    matches!(
        matches.value_source(arg.get_id().as_str()),
        Some(ValueSource::CommandLine | ValueSource::EnvVariable)
    )
}

/// The key of the per-tenant exceptions.
const TENANTS: &str = "tenants";

/// `--tenant-<key>=<tenant>=<value>` for each tenant's keys, unless the command line or the
/// environment sets that flag.
fn tenant_flags(
    serve: &Command,
    matches: &ArgMatches,
    value: &serde_yaml::Value,
) -> anyhow::Result<Vec<String>> {
    let tenants: BTreeMap<String, BTreeMap<String, serde_yaml::Value>> =
        serde_yaml::from_value(value.clone())
            .context("tenants: expected a map of tenant names to maps of settings")?;
    let mut out = Vec::new();
    for (tenant, settings) in tenants {
        for (key, value) in settings {
            let flag = format!("tenant-{key}");
            let arg = serve
                .get_arguments()
                .find(|a| a.get_long() == Some(flag.as_str()))
                .ok_or_else(|| {
                    let known: Vec<&str> = serve
                        .get_arguments()
                        .filter_map(|a| a.get_long()?.strip_prefix("tenant-"))
                        .collect();
                    anyhow!(
                        "tenants.{tenant}: unknown key {key:?}; per-tenant keys are {}",
                        known.join(", ")
                    )
                })?;
            if set_elsewhere(matches, arg) {
                continue;
            }
            match values(arg, &value)
                .with_context(|| format!("tenants.{tenant}.{key}"))?
                .as_slice()
            {
                [one] => out.push(format!("--{flag}={tenant}={one}")),
                _ => bail!("tenants.{tenant}.{key}: expected one value"),
            }
        }
    }
    Ok(out)
}

/// The flag values of `value`: plain values as they are, and any YAML value (lists of
/// maps, say) as one JSON text for a flag that takes JSON.
fn values(arg: &clap::Arg, value: &serde_yaml::Value) -> anyhow::Result<Vec<String>> {
    let takes_json = arg
        .get_value_names()
        .is_some_and(|names| names.iter().any(|n| n.as_str() == "JSON"));
    match value {
        serde_yaml::Value::String(s) if takes_json => Ok(vec![s.clone()]),
        _ if takes_json => Ok(vec![serde_json::to_string(value).context("converting to JSON")?]),
        _ => scalars(value),
    }
}

fn scalars(value: &serde_yaml::Value) -> anyhow::Result<Vec<String>> {
    use serde_yaml::Value;
    Ok(match value {
        Value::Null => Vec::new(),
        Value::Bool(b) => vec![b.to_string()],
        Value::Number(n) => vec![n.to_string()],
        Value::String(s) => vec![s.clone()],
        Value::Sequence(items) => {
            let mut out = Vec::new();
            for item in items {
                match item {
                    Value::Sequence(_) | Value::Mapping(_) => bail!("a list may only hold plain values"),
                    v => out.extend(scalars(v)?),
                }
            }
            out
        }
        Value::Mapping(_) => bail!("expected a value or a list of values, found a map"),
        Value::Tagged(t) => scalars(&t.value)?,
    })
}

#[cfg(test)]
mod tests {
    use clap::FromArgMatches;

    use super::*;
    use crate::config::example::EXAMPLE;
    use crate::config::{ServeArgs, serve_command};

    fn parse(args: &[&str]) -> ArgMatches {
        serve_command()
            .try_get_matches_from(std::iter::once("serve").chain(args.iter().copied()))
            .unwrap()
    }

    fn write(text: &str) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), text).unwrap();
        file
    }

    #[test]
    fn the_example_sets_every_flag_to_its_default() {
        let file = write(EXAMPLE);
        let flags = flags(&serve_command(), &parse(&[]), file.path()).unwrap();
        let with: Vec<&str> = flags.iter().map(String::as_str).collect();
        let from_file = ServeArgs::from_arg_matches(&parse(&with)).unwrap();
        let defaults = ServeArgs::from_arg_matches(&parse(&[])).unwrap();
        assert_eq!(format!("{from_file:?}"), format!("{defaults:?}"));
        assert!(flags.len() > 20, "{flags:?}");
    }

    #[test]
    fn the_command_line_wins_over_the_file() {
        let file = write("query-max-nodes: 10\nquery-max-points: 20\nrole: [ingest, query]\n");
        let matches = parse(&["--query-max-points", "30"]);
        let flags = flags(&serve_command(), &matches, file.path()).unwrap();
        assert_eq!(flags, ["--query-max-nodes=10", "--role=ingest", "--role=query"]);
    }

    #[test]
    fn tenants_set_the_tenant_flags() {
        let file = write(
            "tenants:\n  team-a:\n    retention: 30d\n    ingest-max-series: 5\n  b:\n    ingest-rate-bytes: 1MiB\n",
        );
        let matches = parse(&["--tenant-retention", "c=1d"]);
        let added = flags(&serve_command(), &matches, file.path()).unwrap();
        // The command line's --tenant-retention replaces the file's, as for any flag.
        assert_eq!(
            added,
            [
                "--tenant-ingest-rate-bytes=b=1MiB",
                "--tenant-ingest-max-series=team-a=5"
            ]
        );
        let with: Vec<&str> = added.iter().map(String::as_str).collect();
        let args = ServeArgs::from_arg_matches(&parse(&with)).unwrap();
        assert_eq!(args.ingest_limits.limits().max_series.of("team-a"), 5);
        assert_eq!(
            args.rate_limits.tenant_ingest_rate_bytes,
            [("b".to_string(), 1 << 20)]
        );

        let unknown = write("tenants:\n  a:\n    max-nodes: 5\n");
        let err = flags(&serve_command(), &parse(&[]), unknown.path()).unwrap_err();
        assert!(
            format!("{err:#}").contains("tenants.a: unknown key \"max-nodes\""),
            "{err:#}"
        );
        assert!(format!("{err:#}").contains("retention"), "{err:#}");
        let list = write("tenants:\n  a:\n    retention: [1d, 2d]\n");
        assert!(flags(&serve_command(), &parse(&[]), list.path()).is_err());
    }

    #[test]
    fn relabel_rules_come_from_the_file_top_level_and_per_tenant() {
        let file = write(
            "ingest-relabel-rules:\n  - source_labels: [env]\n    regex: dev\n    action: drop\n\
             tenants:\n  a:\n    ingest-relabel-rules:\n      - action: labeldrop\n        regex: pod\n",
        );
        let added = flags(&serve_command(), &parse(&[]), file.path()).unwrap();
        let with: Vec<&str> = added.iter().map(String::as_str).collect();
        let limits = ServeArgs::from_arg_matches(&parse(&with))
            .unwrap()
            .ingest_limits
            .limits();
        let labels = |pairs: &[(&str, &str)]| -> stackhouse_storage::model::Labels {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let dev = labels(&[("env", "dev"), ("pod", "p-1")]);
        assert_eq!(
            limits.relabel.of("b").apply(dev.clone(), "cpu"),
            Err(0),
            "the default drops dev"
        );
        assert_eq!(
            limits.relabel.of("a").apply(dev, "cpu"),
            Ok(labels(&[("env", "dev")])),
            "tenant a's rules replace the default's"
        );

        let bad = write(
            "ingest-relabel-rules:\n  - source_labels: [a]\n    action: keep\n  - regex: \"(\"\n    target_label: x\n",
        );
        let added = flags(&serve_command(), &parse(&[]), bad.path()).unwrap();
        let with: Vec<&str> = added.iter().map(String::as_str).collect();
        let err = serve_command()
            .try_get_matches_from(std::iter::once("serve").chain(with.iter().copied()))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("relabel rule 1 (action replace): invalid regex \"(\""),
            "{err}"
        );
    }

    #[test]
    fn rollup_retentions_come_from_the_file_top_level_and_per_tenant() {
        use std::time::Duration;
        let file = write(
            "retention-1m: 90d\nretention-1h: 0\ntenants:\n  a:\n    retention-1m: 1d\n    retention-1h: 2d\n",
        );
        let added = flags(&serve_command(), &parse(&[]), file.path()).unwrap();
        let with: Vec<&str> = added.iter().map(String::as_str).collect();
        let retention = ServeArgs::from_arg_matches(&parse(&with))
            .unwrap()
            .lifecycle
            .maintenance()
            .retention;
        let days = |n: u64| Duration::from_secs(n * 86_400);
        assert_eq!(retention.minute.of("b"), days(90));
        assert_eq!(retention.minute.of("a"), days(1));
        assert_eq!(retention.hour.of("b"), Duration::ZERO);
        assert_eq!(retention.hour.of("a"), days(2));
        assert_eq!(retention.raw.of("a"), days(7));
    }

    #[test]
    fn bad_files_are_named() {
        let unknown = write("http-adress: 1.2.3.4:5\n");
        let err = flags(&serve_command(), &parse(&[]), unknown.path()).unwrap_err();
        assert!(
            format!("{err:#}").contains("unknown key \"http-adress\""),
            "{err:#}"
        );
        let nested = write("role: {a: b}\n");
        let err = flags(&serve_command(), &parse(&[]), nested.path()).unwrap_err();
        assert!(format!("{err:#}").contains("found a map"), "{err:#}");
        let not_a_map = write("- a\n");
        assert!(flags(&serve_command(), &parse(&[]), not_a_map.path()).is_err());
        let config = write("config: other.yaml\n");
        assert!(flags(&serve_command(), &parse(&[]), config.path()).is_err());
        assert!(flags(&serve_command(), &parse(&[]), Path::new("/nonexistent.yaml")).is_err());
    }
}
