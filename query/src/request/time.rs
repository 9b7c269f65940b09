//! `from` / `to` query parameters: unix nanoseconds, RFC 3339, `now` or `now-<duration>`.

use stackhouse_storage::model::TimeRange;

const DEFAULT_WINDOW_NANOS: i64 = 3_600 * 1_000_000_000;

pub fn parse_time(value: &str, now_nanos: i64) -> Result<i64, String> {
    let value = value.trim();
    if let Some(rest) = value.strip_prefix("now") {
        if rest.is_empty() {
            return Ok(now_nanos);
        }
        let ago = rest
            .strip_prefix('-')
            .and_then(|d| humantime::parse_duration(d).ok())
            .ok_or_else(|| {
                format!("invalid time {value:?}: expected now or now-<duration> such as now-1h")
            })?;
        return Ok(now_nanos.saturating_sub(ago.as_nanos().min(i64::MAX as u128) as i64));
    }
    if let Ok(nanos) = value.parse::<i64>() {
        return Ok(nanos);
    }
    let parsed = chrono::DateTime::parse_from_rfc3339(value).map_err(|_| {
        format!("invalid time {value:?}: expected unix nanoseconds or RFC 3339 (2026-01-02T15:04:05Z)")
    })?;
    parsed
        .timestamp_nanos_opt()
        .ok_or_else(|| format!("time {value:?} is out of the representable range"))
}

/// `[from, to)`; `to` defaults to now and `from` to one hour before `to`.
pub fn parse_range(from: Option<&str>, to: Option<&str>, now_nanos: i64) -> Result<TimeRange, String> {
    let end = match to {
        Some(t) => parse_time(t, now_nanos)?,
        None => now_nanos,
    };
    let start = match from {
        Some(f) => parse_time(f, now_nanos)?,
        None => end.saturating_sub(DEFAULT_WINDOW_NANOS),
    };
    if start >= end {
        return Err(format!(
            "invalid time range: from ({start}) must be before to ({end})"
        ));
    }
    Ok(TimeRange { start, end })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(parse_time("1774910497545532978", 0).unwrap(), 1774910497545532978);
        assert_eq!(parse_time("1970-01-01T00:00:01Z", 0).unwrap(), 1_000_000_000);
        assert_eq!(
            parse_time("1970-01-01T01:00:01.5+01:00", 0).unwrap(),
            1_500_000_000
        );
        assert_eq!(parse_time("now-1s", 5_000_000_000).unwrap(), 4_000_000_000);
        assert!(parse_time("yesterday", 0).is_err());
        assert!(parse_range(Some("10"), Some("10"), 0).is_err());
        let r = parse_range(None, Some("7200000000000"), 0).unwrap();
        assert_eq!((r.start, r.end), (3_600_000_000_000, 7_200_000_000_000));
    }
}
