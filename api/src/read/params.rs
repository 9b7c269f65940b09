//! Query parameters of the query API, parsed in one place.
//!
//! Each `*Params` struct is both what a handler reads from the query string (raw, as sent)
//! and, through `IntoParams`, what the OpenAPI document says it reads; a unit test checks
//! that the names read and the names documented are the same. Converting the raw values
//! (validation, defaults, limits) is separate, so every name is read before any error.

#[cfg(test)]
use std::collections::BTreeSet;

use stackhouse_query::endpoints::diff::{DiffRequest, SideRequest};
use stackhouse_query::frames::FrameRequest;
use stackhouse_query::render::{FORMATS, OutputFormat};
use stackhouse_query::request::{ListingRequest, RangeRequest, ScopeRequest, TreeOutput};
use stackhouse_query::{Aggregation, GroupKey, parse_group_by};
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::{IntoParams, PartialSchema, ToSchema};

use crate::error::ApiError;
use crate::wire::query_string::QueryMap;

/// Functions listed by `top` without `limit`.
pub const DEFAULT_TOP_LIMIT: usize = 100;
const NANOS_PER_SEC: i64 = 1_000_000_000;

/// Output format of a tree (flamegraph, profile, diff): the `Format` schema of the OpenAPI
/// document, whose values are [`FORMATS`]. Never built; values are `&'static OutputFormat`.
pub struct Format;

impl PartialSchema for Format {
    fn schema() -> RefOr<Schema> {
        let names = FORMATS.iter().map(OutputFormat::name);
        ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some("Output format of a tree (flamegraph, profile, diff)."))
            .enum_values(Some(names))
            .into()
    }
}

impl ToSchema for Format {}

/// `format=`; absent is the first of [`FORMATS`].
fn parse_format(value: Option<&str>) -> Result<&'static OutputFormat, ApiError> {
    let Some(name) = value else {
        return Ok(&FORMATS[0]);
    };
    OutputFormat::by_name(name).ok_or_else(|| {
        let names: Vec<&str> = FORMATS.iter().map(OutputFormat::name).collect();
        let (last, rest) = names.split_last().unwrap_or((&"", &[]));
        ApiError::invalid(format!(
            "invalid format {name:?}: expected {} or {last}",
            rest.join(", ")
        ))
    })
}

/// The tenant header, documented on every query endpoint.
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Header)]
pub struct TenantHeader {
    /// Tenant; `anonymous` when absent. 1 to 150 characters of `[A-Za-z0-9_.-]`. A read may
    /// name several joined by `|` (`team-a|team-b`): it answers over their union, each series
    /// labelled `__tenant_id__`; writes and administration name one.
    #[param(rename = "X-Scope-OrgID")]
    pub tenant: Option<String>,
}

pub use crate::tenant::from_headers as tenant_of;

/// A time range alone.
#[derive(Debug, Default, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RangeParams {
    /// Start (inclusive): unix nanoseconds, RFC 3339, `now` or `now-<duration>` such as
    /// `now-1h`. Default: one hour before `to`.
    pub from: Option<String>,
    /// End (exclusive), in the same forms. Default: now.
    pub to: Option<String>,
}

impl RangeParams {
    pub fn from_query(q: &QueryMap) -> Result<RangeParams, ApiError> {
        Ok(RangeParams {
            from: q.one("from")?,
            to: q.one("to")?,
        })
    }

    pub fn request(self, tenant: String) -> ListingRequest {
        ListingRequest {
            tenant,
            range: RangeRequest {
                from: self.from,
                to: self.to,
            },
        }
    }
}

/// What a query selects: profile type, series, time range, span and profile ids.
#[derive(Debug, Default, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ScopeParams {
    /// `sample_type:sample_unit:period_type:period_unit`, one of `/api/v1/profile-types`.
    #[param(required = true, value_type = String, example = "samples:count:cpu:nanoseconds")]
    pub profile_type: Option<String>,
    /// Series and sample attribute matchers: `{key="v", key!="v", key=~"re", key!~"re"}`.
    /// Default `{}`, everything.
    #[param(example = "{service.name=\"api\"}")]
    pub selector: Option<String>,
    /// Start (inclusive): unix nanoseconds, RFC 3339, `now` or `now-<duration>` such as
    /// `now-1h`. Default: one hour before `to`.
    pub from: Option<String>,
    /// End (exclusive), in the same forms. Default: now.
    pub to: Option<String>,
    /// Only samples linked to one of these spans (16 hex characters each); comma-separated
    /// and/or repeated.
    #[param(value_type = Option<Vec<String>>, style = Form, explode)]
    pub span_id: Vec<String>,
    /// Only samples of one of these profiles (32 hex characters each); comma-separated
    /// and/or repeated.
    #[param(value_type = Option<Vec<String>>, style = Form, explode)]
    pub profile_id: Vec<String>,
}

impl ScopeParams {
    pub fn from_query(q: &QueryMap) -> Result<ScopeParams, ApiError> {
        let profile_type = q.one("profile_type");
        let selector = q.one("selector");
        let from = q.one("from");
        let to = q.one("to");
        Ok(ScopeParams {
            profile_type: profile_type?,
            selector: selector?,
            from: from?,
            to: to?,
            span_id: q.list("span_id"),
            profile_id: q.list("profile_id"),
        })
    }

    /// The scope these parameters select, plus the given trace ids (hex) and frame rules.
    pub fn request(self, tenant: String, trace_ids: Vec<String>, frames: FrameParams) -> ScopeRequest {
        ScopeRequest {
            tenant,
            profile_type: self.profile_type,
            selector: self.selector,
            range: RangeRequest {
                from: self.from,
                to: self.to,
            },
            trace_ids,
            span_ids: self.span_id,
            profile_ids: self.profile_id,
            frames: frames.request(),
        }
    }
}

/// Which stacks and frames a read keeps, and what a frame is named by. A rule is
/// `[field:]pattern`: the field `function` (the default), `system_name`, `file`, `binary`
/// or `address`, and a regular expression that must match the whole field.
#[derive(Debug, Default, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct FrameParams {
    /// Only stacks with a frame that matches; repeated, each must be met.
    #[param(value_type = Option<Vec<String>>, style = Form, explode, example = "function:.*handler.*")]
    pub focus: Vec<String>,
    /// Without the stacks that have a frame that matches any of these; repeatable.
    #[param(value_type = Option<Vec<String>>, style = Form, explode, example = "binary:libc\\.so.*")]
    pub drop: Vec<String>,
    /// Without the frames that match any of these, their children joining their parent;
    /// repeatable.
    #[param(value_type = Option<Vec<String>>, style = Form, explode, example = "tokio::.*")]
    pub hide: Vec<String>,
    /// Named sets of rules, listed at `/api/v1/filter-presets`; repeatable.
    #[param(value_type = Option<Vec<String>>, style = Form, explode, example = "rust-async")]
    pub preset: Vec<String>,
    /// What a frame is named by: `function` (default), `function_line`, `file`, `binary`
    /// or `address`.
    #[param(example = "function")]
    pub aggregate_by: Option<String>,
}

impl FrameParams {
    pub fn from_query(q: &QueryMap) -> Result<FrameParams, ApiError> {
        Ok(FrameParams {
            focus: q.repeated("focus"),
            drop: q.repeated("drop"),
            hide: q.repeated("hide"),
            preset: q.list("preset"),
            aggregate_by: q.one("aggregate_by")?,
        })
    }

    pub fn request(self) -> FrameRequest {
        FrameRequest {
            focus: self.focus,
            drop: self.drop,
            hide: self.hide,
            presets: self.preset,
            aggregate_by: self.aggregate_by,
        }
    }
}

/// The trace filter, separate from [`ScopeParams`] because `/traces/{trace_id}/…` takes
/// the trace from its path.
#[derive(Debug, Default, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TraceIdParams {
    /// Only samples linked to one of these traces (32 hex characters each);
    /// comma-separated and/or repeated.
    #[param(value_type = Option<Vec<String>>, style = Form, explode)]
    pub trace_id: Vec<String>,
}

impl TraceIdParams {
    pub fn from_query(q: &QueryMap) -> Result<TraceIdParams, ApiError> {
        Ok(TraceIdParams {
            trace_id: q.list("trace_id"),
        })
    }
}

/// The profile type of `/profiles/{profile_id}`, optional there.
#[derive(Debug, Default, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ProfileTypeParams {
    /// Which profile type of the profile to show, when it was sent with several.
    #[param(example = "samples:count:cpu:nanoseconds")]
    pub profile_type: Option<String>,
}

impl ProfileTypeParams {
    pub fn from_query(q: &QueryMap) -> Result<ProfileTypeParams, ApiError> {
        Ok(ProfileTypeParams {
            profile_type: q.one("profile_type")?,
        })
    }
}

/// How a tree is grouped.
#[derive(Debug, Default, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct GroupByParams {
    /// Comma-separated keys (labels, sample attributes, or `trace_id`, `span_id`,
    /// `profile_id`); puts one level of `key=value` nodes under the root.
    #[param(example = "thread.name")]
    pub group_by: Option<String>,
}

impl GroupByParams {
    pub fn from_query(q: &QueryMap) -> Result<GroupByParams, ApiError> {
        Ok(GroupByParams {
            group_by: q.one("group_by")?,
        })
    }

    pub fn group_by(&self) -> Result<Vec<GroupKey>, ApiError> {
        group_by(self.group_by.as_deref())
    }
}

fn group_by(value: Option<&str>) -> Result<Vec<GroupKey>, ApiError> {
    parse_group_by(value.unwrap_or("")).map_err(ApiError::from)
}

/// Size and format of a tree.
#[derive(Debug, Default, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TreeParams {
    /// Node budget: the smallest nodes fold into `other` nodes, totals stay exact.
    /// Default 8192; at most the server's `--query-max-nodes`. Not applied to pprof.
    #[param(value_type = Option<u64>, minimum = 1)]
    pub max_nodes: Option<String>,
    /// Response format. Default `json`.
    #[param(value_type = Option<Format>)]
    pub format: Option<String>,
}

impl TreeParams {
    pub fn from_query(q: &QueryMap) -> Result<TreeParams, ApiError> {
        let max_nodes = q.one("max_nodes");
        let format = q.one("format");
        Ok(TreeParams {
            max_nodes: max_nodes?,
            format: format?,
        })
    }

    /// `max_nodes` as given; 0 when absent. The engine checks it against
    /// `--query-max-nodes` before anything else is looked at.
    pub fn asked_max_nodes(&self) -> Result<usize, ApiError> {
        self.max_nodes
            .as_deref()
            .map_or(Ok(0), |value| positive("max_nodes", value))
    }

    pub fn format(&self) -> Result<&'static OutputFormat, ApiError> {
        parse_format(self.format.as_deref())
    }

    /// What the engine answers for the format asked for: its own JSON or pprof, or the cut
    /// tree a renderer writes.
    pub fn output(&self) -> Result<TreeOutput, ApiError> {
        Ok(match self.format()? {
            OutputFormat::Json => TreeOutput::Json,
            OutputFormat::Pprof => TreeOutput::Pprof,
            OutputFormat::Rendered(_) => TreeOutput::Tree,
        })
    }
}

/// Bucketing of a time series.
#[derive(Debug, Default, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TimeseriesParams {
    /// Bucket width: seconds (`15`, `0.5`) or a duration (`30s`, `1m`). Default: the
    /// smallest whole number of seconds giving at most 1000 buckets.
    #[param(example = "15")]
    pub step: Option<String>,
    /// Comma-separated keys; one series per distinct combination of their values.
    #[param(example = "thread.name")]
    pub group_by: Option<String>,
    /// `sum` (default): the sum of the values in a bucket; `avg`: that sum divided by the
    /// number of (series, timestamp) points in the bucket.
    #[param(value_type = Option<Aggregation>)]
    pub aggregation: Option<String>,
}

impl TimeseriesParams {
    pub fn from_query(q: &QueryMap) -> Result<TimeseriesParams, ApiError> {
        let step = q.one("step");
        let group_by = q.one("group_by");
        let aggregation = q.one("aggregation");
        Ok(TimeseriesParams {
            step: step?,
            group_by: group_by?,
            aggregation: aggregation?,
        })
    }

    /// The step in nanoseconds, when given; without one the engine picks it from the range.
    pub fn step_nanos(&self) -> Result<Option<i64>, ApiError> {
        self.step.as_deref().map(parse_step).transpose()
    }

    pub fn group_by(&self) -> Result<Vec<GroupKey>, ApiError> {
        group_by(self.group_by.as_deref())
    }

    pub fn aggregation(&self) -> Result<Aggregation, ApiError> {
        match self.aggregation.as_deref() {
            None => Ok(Aggregation::Sum),
            Some(value) => Aggregation::parse(value).ok_or_else(|| {
                ApiError::invalid(format!("invalid aggregation {value:?}: expected sum or avg"))
            }),
        }
    }
}

/// `step`: a number of seconds or a humantime duration; must be positive.
pub fn parse_step(value: &str) -> Result<i64, ApiError> {
    let invalid = || {
        ApiError::invalid(format!(
            "invalid step {value:?}: expected a positive number of seconds (15, 0.5) or a duration (30s, 1m)"
        ))
    };
    let nanos = if let Ok(secs) = value.parse::<f64>() {
        if !secs.is_finite() {
            return Err(invalid());
        }
        let nanos = (secs * NANOS_PER_SEC as f64).round();
        // Comparing as f64 keeps the cast below in range.
        if nanos >= i64::MAX as f64 {
            return Err(invalid());
        }
        nanos as i64
    } else {
        let d = humantime::parse_duration(value).map_err(|_| invalid())?;
        i64::try_from(d.as_nanos()).map_err(|_| invalid())?
    };
    if nanos <= 0 {
        return Err(invalid());
    }
    Ok(nanos)
}

/// Size of the top table.
#[derive(Debug, Default, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TopParams {
    /// Most functions returned. Default 100.
    #[param(value_type = Option<u64>, minimum = 1)]
    pub limit: Option<String>,
}

impl TopParams {
    pub fn from_query(q: &QueryMap) -> Result<TopParams, ApiError> {
        Ok(TopParams {
            limit: q.one("limit")?,
        })
    }

    pub fn limit(&self) -> Result<usize, ApiError> {
        match self.limit.as_deref() {
            None => Ok(DEFAULT_TOP_LIMIT),
            Some(value) => positive("limit", value),
        }
    }
}

/// Paging of events.
#[derive(Debug, Default, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventsParams {
    /// Page size. Default 1000; at most the server's `--query-max-events`.
    #[param(value_type = Option<u64>, minimum = 1)]
    pub limit: Option<String>,
    /// `next_cursor` of the previous page; absent for the first page.
    pub cursor: Option<String>,
}

impl EventsParams {
    pub fn from_query(q: &QueryMap) -> Result<EventsParams, ApiError> {
        let limit = q.one("limit");
        let cursor = q.one("cursor");
        Ok(EventsParams {
            limit: limit?,
            cursor: cursor?,
        })
    }

    /// `limit` as given; 0 when absent. The engine checks it against `--query-max-events`
    /// before anything else is looked at.
    pub fn asked_limit(&self) -> Result<usize, ApiError> {
        self.limit
            .as_deref()
            .map_or(Ok(0), |value| positive("limit", value))
    }
}

/// The two sides of a diff, of one profile type.
#[derive(Debug, Default, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DiffParams {
    /// `sample_type:sample_unit:period_type:period_unit` of both sides.
    #[param(required = true, value_type = String, example = "samples:count:cpu:nanoseconds")]
    pub profile_type: Option<String>,
    /// Selector of the baseline. Default `{}`.
    pub baseline_selector: Option<String>,
    /// Start of the baseline (same forms as `from`). Default: one hour before
    /// `baseline_to`.
    pub baseline_from: Option<String>,
    /// End of the baseline. Default: now.
    pub baseline_to: Option<String>,
    /// Selector of the comparison. Default `{}`.
    pub comparison_selector: Option<String>,
    /// Start of the comparison. Default: one hour before `comparison_to`.
    pub comparison_from: Option<String>,
    /// End of the comparison. Default: now.
    pub comparison_to: Option<String>,
}

impl DiffParams {
    pub fn from_query(q: &QueryMap) -> Result<DiffParams, ApiError> {
        let profile_type = q.one("profile_type");
        let baseline_selector = q.one("baseline_selector");
        let baseline_from = q.one("baseline_from");
        let baseline_to = q.one("baseline_to");
        let comparison_selector = q.one("comparison_selector");
        let comparison_from = q.one("comparison_from");
        let comparison_to = q.one("comparison_to");
        Ok(DiffParams {
            profile_type: profile_type?,
            baseline_selector: baseline_selector?,
            baseline_from: baseline_from?,
            baseline_to: baseline_to?,
            comparison_selector: comparison_selector?,
            comparison_from: comparison_from?,
            comparison_to: comparison_to?,
        })
    }

    /// Both sides as one request.
    pub fn request(
        self,
        tenant: String,
        max_nodes: usize,
        output: TreeOutput,
        frames: FrameParams,
    ) -> DiffRequest {
        let side = |selector, from, to| SideRequest {
            selector,
            range: RangeRequest { from, to },
        };
        DiffRequest {
            tenant,
            profile_type: self.profile_type,
            baseline: side(self.baseline_selector, self.baseline_from, self.baseline_to),
            comparison: side(self.comparison_selector, self.comparison_from, self.comparison_to),
            max_nodes,
            output,
            frames: frames.request(),
        }
    }
}

fn positive(name: &str, value: &str) -> Result<usize, ApiError> {
    value
        .trim()
        .parse::<usize>()
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| ApiError::invalid(format!("invalid {name} {value:?}: expected a positive integer")))
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;
    use utoipa::openapi::path::ParameterIn;

    use super::*;

    fn documented<P: IntoParams>() -> BTreeSet<String> {
        P::into_params(|| Some(ParameterIn::Query))
            .into_iter()
            .map(|p| p.name)
            .collect()
    }

    /// Every parameter a handler reads is documented, and nothing else is.
    #[test]
    fn names_read_are_the_names_documented() {
        fn check<P: IntoParams>(read: impl Fn(&QueryMap) -> Result<P, ApiError>) {
            let q = QueryMap::parse(None);
            let _ = read(&q);
            assert_eq!(
                q.names_read(),
                documented::<P>(),
                "{}",
                std::any::type_name::<P>()
            );
        }
        check(RangeParams::from_query);
        check(ScopeParams::from_query);
        check(TraceIdParams::from_query);
        check(ProfileTypeParams::from_query);
        check(GroupByParams::from_query);
        check(TreeParams::from_query);
        check(TimeseriesParams::from_query);
        check(TopParams::from_query);
        check(EventsParams::from_query);
        check(DiffParams::from_query);
        check(FrameParams::from_query);
    }

    #[test]
    fn lists_are_comma_separated_and_repeated() {
        let q = QueryMap::parse(Some("trace_id=a,b&x=1&trace_id=c&trace_id=&trace_id=d,%20e,"));
        assert_eq!(q.list("trace_id"), ["a", "b", "c", "d", "e"]);
        assert_eq!(q.one("x").unwrap().as_deref(), Some("1"));
        assert_eq!(q.one("missing").unwrap(), None);
        let e = QueryMap::parse(Some("x=1&x=2")).one("x").unwrap_err();
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
        assert!(e.message.contains("x given more than once"), "{}", e.message);
        // An empty value is the same as none, as HTML forms send unset fields.
        assert_eq!(
            QueryMap::parse(Some("x=&x=3")).one("x").unwrap().as_deref(),
            Some("3")
        );
    }

    #[test]
    fn steps() {
        assert_eq!(parse_step("15").unwrap(), 15 * NANOS_PER_SEC);
        assert_eq!(parse_step("0.5").unwrap(), NANOS_PER_SEC / 2);
        assert_eq!(parse_step("30s").unwrap(), 30 * NANOS_PER_SEC);
        assert_eq!(parse_step("1m").unwrap(), 60 * NANOS_PER_SEC);
        assert_eq!(parse_step("250ms").unwrap(), NANOS_PER_SEC / 4);
        for bad in ["0", "-1", "0s", "NaN", "inf", "1e300", "soon", "", "0.0000000001"] {
            let e = parse_step(bad).unwrap_err();
            assert_eq!(e.status(), StatusCode::BAD_REQUEST, "{bad}");
            assert!(e.message.contains("step"), "{}", e.message);
        }
    }

    #[test]
    fn max_nodes_and_limits() {
        let tree = |v: &str| TreeParams {
            max_nodes: Some(v.to_string()),
            format: None,
        };
        assert_eq!(TreeParams::default().asked_max_nodes().unwrap(), 0);
        assert_eq!(tree("101").asked_max_nodes().unwrap(), 101);
        for bad in ["0", "-3", "many"] {
            assert_eq!(
                tree(bad).asked_max_nodes().unwrap_err().status(),
                StatusCode::BAD_REQUEST
            );
        }

        let events = |v: Option<&str>| EventsParams {
            limit: v.map(str::to_string),
            cursor: None,
        };
        assert_eq!(events(None).asked_limit().unwrap(), 0);
        assert_eq!(events(Some("51")).asked_limit().unwrap(), 51);
        assert_eq!(
            events(Some("0")).asked_limit().unwrap_err().status(),
            StatusCode::BAD_REQUEST
        );

        let top = |v: &str| TopParams {
            limit: Some(v.to_string()),
        };
        assert_eq!(TopParams::default().limit().unwrap(), 100);
        assert_eq!(top("7").limit().unwrap(), 7);
        assert_eq!(top("0").limit().unwrap_err().status(), StatusCode::BAD_REQUEST);
    }

    #[test]
    fn formats_and_aggregations() {
        assert!(matches!(parse_format(None).unwrap(), OutputFormat::Json));
        let documented = serde_json::to_value(Format::schema()).unwrap();
        for s in ["json", "folded", "flamebearer", "pprof"] {
            assert_eq!(parse_format(Some(s)).unwrap().name(), s);
            assert!(
                documented["enum"].as_array().unwrap().contains(&s.into()),
                "the documented name is the parsed one"
            );
        }
        let e = parse_format(Some("svg")).unwrap_err();
        assert!(e.message.contains("svg") && e.message.contains("format"));
        assert!(
            e.message.ends_with("expected json, folded, flamebearer or pprof"),
            "{}",
            e.message
        );

        let agg = |v: Option<&str>| TimeseriesParams {
            aggregation: v.map(str::to_string),
            ..TimeseriesParams::default()
        };
        assert_eq!(agg(None).aggregation().unwrap(), Aggregation::Sum);
        assert_eq!(agg(Some("avg")).aggregation().unwrap(), Aggregation::Avg);
        assert_eq!(
            agg(Some("max")).aggregation().unwrap_err().status(),
            StatusCode::BAD_REQUEST
        );
        let keys = TimeseriesParams {
            group_by: Some("thread.name,span_id".into()),
            ..TimeseriesParams::default()
        };
        assert_eq!(
            keys.group_by().unwrap(),
            vec![GroupKey::Label("thread.name".into()), GroupKey::SpanId]
        );
        let e = GroupByParams {
            group_by: Some("a,a".into()),
        }
        .group_by()
        .unwrap_err();
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
    }
}
