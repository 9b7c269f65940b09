//! Guard rails of the query API: `--query-max-*` and `--query-timeout`.

use std::time::Duration;

use clap::Args;
use stackhouse_query::QueryLimits;

/// Guard rails of the query API; a query over one is refused with 422 naming the limit.
#[derive(Args, Debug, Clone)]
pub struct QueryLimitArgs {
    /// Longest time a query may cover, counted over the part of its range that holds the
    /// tenant's data (`from=0` over a store of one day counts as a day).
    #[arg(long, env = "STACKHOUSE_QUERY_MAX_RANGE", default_value = "31d", value_parser = humantime::parse_duration)]
    pub query_max_range: Duration,

    /// Most series one query may select.
    #[arg(long, env = "STACKHOUSE_QUERY_MAX_SERIES", default_value_t = 100_000)]
    pub query_max_series: usize,

    /// Largest `max_nodes` a client may ask for.
    #[arg(long, env = "STACKHOUSE_QUERY_MAX_NODES", default_value_t = 65_536)]
    pub query_max_nodes: usize,

    /// Most groups a `group_by` may produce.
    #[arg(long, env = "STACKHOUSE_QUERY_MAX_GROUPS", default_value_t = 1_000)]
    pub query_max_groups: usize,

    /// Most points per series of a time series (range / step).
    #[arg(long, env = "STACKHOUSE_QUERY_MAX_POINTS", default_value_t = 11_000)]
    pub query_max_points: usize,

    /// Largest page of events.
    #[arg(long, env = "STACKHOUSE_QUERY_MAX_EVENTS", default_value_t = 10_000)]
    pub query_max_events: usize,

    /// Most trace, span and profile ids in one query.
    #[arg(long, env = "STACKHOUSE_QUERY_MAX_IDS", default_value_t = 1_000)]
    pub query_max_ids: usize,

    /// Longest a query may run before it is cancelled.
    #[arg(long, env = "STACKHOUSE_QUERY_TIMEOUT", default_value = "60s", value_parser = humantime::parse_duration)]
    pub query_timeout: Duration,
}

impl QueryLimitArgs {
    pub fn limits(&self) -> QueryLimits {
        QueryLimits {
            max_range: self.query_max_range,
            max_series: self.query_max_series,
            max_nodes: self.query_max_nodes,
            max_groups: self.query_max_groups,
            max_points: self.query_max_points,
            max_events: self.query_max_events,
            max_ids: self.query_max_ids,
            timeout: self.query_timeout,
        }
    }
}

/// The flag that raises a limit, by the name of its [`QueryLimits`] field (as
/// `QueryError::LimitExceeded` names it).
pub fn limit_flag(limit: &str) -> Option<&'static str> {
    Some(match limit {
        "max_range" => "--query-max-range",
        "max_series" => "--query-max-series",
        "max_nodes" => "--query-max-nodes",
        "max_groups" => "--query-max-groups",
        "max_points" => "--query-max-points",
        "max_events" => "--query-max-events",
        "max_ids" => "--query-max-ids",
        "timeout" => "--query-timeout",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        query_limits: QueryLimitArgs,
    }

    #[test]
    fn limit_defaults_match_the_engine_defaults() {
        let cli = Cli::try_parse_from(["stackhouse"]).unwrap();
        let ours = cli.query_limits.limits();
        let engine = QueryLimits::default();
        assert_eq!(format!("{ours:?}"), format!("{engine:?}"));
    }

    #[test]
    fn limits_are_configurable() {
        let cli = Cli::try_parse_from([
            "stackhouse",
            "--query-max-range",
            "2h",
            "--query-max-points",
            "50",
            "--query-timeout",
            "1500ms",
        ])
        .unwrap();
        let limits = cli.query_limits.limits();
        assert_eq!(limits.max_range, Duration::from_secs(7200));
        assert_eq!(limits.max_points, 50);
        assert_eq!(limits.timeout, Duration::from_millis(1500));
        assert_eq!(limits.max_nodes, 65_536);
    }

    #[test]
    fn every_limit_has_a_flag() {
        let help = format!("{:?}", QueryLimits::default());
        for field in [
            "max_range",
            "max_series",
            "max_nodes",
            "max_groups",
            "max_points",
            "max_events",
            "max_ids",
            "timeout",
        ] {
            assert!(
                help.contains(&format!("{field}:")),
                "{field} is not a QueryLimits field"
            );
            assert!(limit_flag(field).is_some(), "{field} has no flag");
        }
        assert_eq!(limit_flag("nonsense"), None);
    }
}
