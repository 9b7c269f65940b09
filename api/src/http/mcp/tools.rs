//! The tools: their input schemas, and each call made as the REST handler makes it (the
//! arguments become the REST query parameters, read by the same `*Params`), through the
//! same engine methods. An error of the API comes back as the tool's error text.

use serde_json::{Map, Value, json};
use stackhouse_query::endpoints::flamegraph::FlamegraphRequest;
use stackhouse_query::endpoints::timeseries::TimeseriesRequest;
use stackhouse_query::endpoints::top::TopRequest;
use stackhouse_query::request::{TreeAnswer, TreeOutput};

use super::render::{self, Answer};
use crate::error::ApiError;
use crate::read::params::{
    DiffParams, FrameParams, GroupByParams, RangeParams, ScopeParams, TimeseriesParams, TraceIdParams,
};
use crate::state::AppState;
use crate::wire::query_string::QueryMap;

pub(crate) const NAMES: [&str; 8] = [
    "profile_types",
    "label_names",
    "label_values",
    "flamegraph",
    "top_functions",
    "diff",
    "timeseries_summary",
    "trace_flamegraph",
];

/// Default and most lines of a flamegraph answer.
const DEFAULT_LINES: usize = 40;
const MAX_LINES: usize = 200;
/// Default and most rows of top_functions and diff.
const DEFAULT_ROWS: usize = 20;
const MAX_ROWS: usize = 100;
/// Default and most series of timeseries_summary.
const DEFAULT_GROUPS: usize = 10;
const MAX_GROUPS: usize = 50;

/// A tool's failure, shown to the model as the tool's error text.
pub(crate) struct ToolError(pub String);

impl From<ApiError> for ToolError {
    fn from(e: ApiError) -> Self {
        ToolError(e.message)
    }
}

impl From<stackhouse_query::QueryError> for ToolError {
    fn from(e: stackhouse_query::QueryError) -> Self {
        ToolError(ApiError::from(e).message)
    }
}

/// Runs tool `name` for `tenant`.
pub(crate) async fn call(
    state: &AppState,
    tenant: String,
    name: &str,
    args: &Map<String, Value>,
) -> Result<Answer, ToolError> {
    let (params, cap) = arguments(name, args)?;
    let q = &params;
    match name {
        "profile_types" => {
            let request = RangeParams::from_query(q)?.request(tenant);
            let (types, _) = state.engine.read_profile_types(&request).await?;
            Ok(render::list(
                "profile types",
                types.iter().map(|t| t.id()).collect(),
            ))
        }
        "label_names" => {
            let request = RangeParams::from_query(q)?.request(tenant);
            let names = state.engine.read_label_names(&request).await?;
            Ok(render::list("label names", names))
        }
        "label_values" => {
            let label = string(args, "name")?.ok_or_else(|| ToolError("argument name is required".into()))?;
            let request = RangeParams::from_query(q)?.request(tenant);
            let values = state.engine.read_label_values(&request, &label).await?;
            Ok(render::list(&format!("values of {label}"), values))
        }
        "flamegraph" | "trace_flamegraph" => {
            let trace_ids = if name == "trace_flamegraph" {
                let id = string(args, "trace_id")?
                    .ok_or_else(|| ToolError("argument trace_id is required".into()))?;
                vec![id]
            } else {
                TraceIdParams::from_query(q)?.trace_id
            };
            let request = FlamegraphRequest {
                group_by: GroupByParams::from_query(q)?.group_by()?,
                max_nodes: 0,
                output: TreeOutput::Tree,
                scope: ScopeParams::from_query(q)?.request(tenant, trace_ids, FrameParams::from_query(q)?),
            };
            match state.engine.read_flamegraph(&request).await? {
                TreeAnswer::Tree(flamegraph) => Ok(render::flamegraph(&flamegraph, cap)),
                _ => Err(ToolError("the engine answered another format".into())),
            }
        }
        "top_functions" => {
            let request = TopRequest {
                limit: cap.limit,
                scope: ScopeParams::from_query(q)?.request(
                    tenant,
                    TraceIdParams::from_query(q)?.trace_id,
                    FrameParams::from_query(q)?,
                ),
            };
            Ok(render::top(&state.engine.read_top(&request).await?, cap))
        }
        "diff" => {
            let sides = DiffParams::from_query(q)?;
            let request = sides.request(tenant, 0, TreeOutput::Tree, FrameParams::from_query(q)?);
            match state.engine.read_diff(&request).await? {
                TreeAnswer::Tree(diff) => Ok(render::diff(&diff, cap)),
                _ => Err(ToolError("the engine answered another format".into())),
            }
        }
        "timeseries_summary" => {
            let series = TimeseriesParams::from_query(q)?;
            let request = TimeseriesRequest {
                group_by: series.group_by()?,
                aggregation: series.aggregation()?,
                step_nanos: series.step_nanos()?,
                scope: ScopeParams::from_query(q)?.request(
                    tenant,
                    TraceIdParams::from_query(q)?.trace_id,
                    FrameParams::from_query(q)?,
                ),
            };
            Ok(render::timeseries(
                &state.engine.read_timeseries(&request).await?,
                cap,
            ))
        }
        _ => Err(ToolError(format!("unknown tool {name:?}"))),
    }
}

/// A size argument as applied: the value and, when it was cut to the hard cap, what was
/// asked.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Cap {
    pub limit: usize,
    pub asked: Option<usize>,
}

/// The REST query parameters of a call and its size argument; unknown arguments and
/// wrong types are errors naming them.
fn arguments(name: &str, args: &Map<String, Value>) -> Result<(QueryMap, Cap), ToolError> {
    let props = properties(name);
    let mut query = url::form_urlencoded::Serializer::new(String::new());
    let (size_name, default, max) = size_argument(name);
    let mut cap = Cap {
        limit: default,
        asked: None,
    };
    for (key, value) in args {
        if !props.contains_key(key) {
            let known: Vec<&String> = props.keys().collect();
            return Err(ToolError(format!(
                "unknown argument {key:?} for {name}: expected {}",
                known.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(", ")
            )));
        }
        if Some(key.as_str()) == size_name {
            let n = value
                .as_u64()
                .filter(|n| *n >= 1)
                .ok_or_else(|| ToolError(format!("argument {key} must be a positive integer")))?;
            let n = usize::try_from(n).unwrap_or(usize::MAX);
            cap = if n > max {
                Cap {
                    limit: max,
                    asked: Some(n),
                }
            } else {
                Cap {
                    limit: n,
                    asked: None,
                }
            };
            continue;
        }
        match value {
            Value::Null => {}
            Value::String(s) => {
                query.append_pair(key, s);
            }
            Value::Number(n) => {
                query.append_pair(key, &n.to_string());
            }
            Value::Array(items) => {
                for item in items {
                    let item = item
                        .as_str()
                        .ok_or_else(|| ToolError(format!("argument {key} must be a list of strings")))?;
                    query.append_pair(key, item);
                }
            }
            _ => return Err(ToolError(format!("argument {key} must be a string"))),
        }
    }
    Ok((QueryMap::parse(Some(&query.finish())), cap))
}

fn string(args: &Map<String, Value>, key: &str) -> Result<Option<String>, ToolError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.clone())),
        Some(_) => Err(ToolError(format!("argument {key} must be a non-empty string"))),
    }
}

/// The size argument of a tool: name, default, hard cap.
fn size_argument(name: &str) -> (Option<&'static str>, usize, usize) {
    match name {
        "flamegraph" | "trace_flamegraph" => (Some("max_lines"), DEFAULT_LINES, MAX_LINES),
        "top_functions" | "diff" => (Some("limit"), DEFAULT_ROWS, MAX_ROWS),
        "timeseries_summary" => (Some("max_groups"), DEFAULT_GROUPS, MAX_GROUPS),
        _ => (None, 0, 0),
    }
}

fn text(description: &str) -> Value {
    json!({ "type": "string", "description": description })
}

fn strings(description: &str) -> Value {
    json!({ "type": "array", "items": { "type": "string" }, "description": description })
}

fn size(description: &str, default: usize, max: usize) -> Value {
    json!({
        "type": "integer", "minimum": 1, "default": default,
        "description": format!("{description} Default {default}, at most {max}."),
    })
}

const TIME: &str = "unix nanoseconds, RFC 3339, now or now-<duration> such as now-1h";

/// The properties of a tool's input.
fn properties(name: &str) -> Map<String, Value> {
    let mut p = Map::new();
    let from = format!("Start (inclusive): {TIME}. Default: one hour before to.");
    let to = format!("End (exclusive): {TIME}. Default: now.");
    let scope = |p: &mut Map<String, Value>, selector: bool| {
        p.insert(
            "profile_type".into(),
            text("sample_type:sample_unit:period_type:period_unit, one of profile_types."),
        );
        if selector {
            p.insert(
                "selector".into(),
                text("Series and sample attribute matchers: {key=\"v\", key!=\"v\", key=~\"re\", key!~\"re\"}. Default {}."),
            );
        }
    };
    let frames = |p: &mut Map<String, Value>| {
        p.insert(
            "focus".into(),
            strings("Only stacks with a frame matching each rule ([field:]regex; field function, system_name, file, binary or address)."),
        );
        p.insert(
            "drop".into(),
            strings("Without the stacks that have a frame matching any rule."),
        );
        p.insert(
            "hide".into(),
            strings("Without the frames matching any rule, their children joining their parent."),
        );
        p.insert(
            "preset".into(),
            strings("Named rule sets (see the REST /api/v1/filter-presets)."),
        );
        p.insert(
            "aggregate_by".into(),
            text("What a frame is named by: function (default), function_line, file, binary or address."),
        );
    };
    match name {
        "profile_types" | "label_names" => {}
        "label_values" => {
            p.insert("name".into(), text("The label name, one of label_names."));
        }
        "flamegraph" | "trace_flamegraph" | "top_functions" | "timeseries_summary" => {
            scope(&mut p, true);
            frames(&mut p);
            match name {
                "trace_flamegraph" => {
                    p.insert("trace_id".into(), text("The trace id, 32 hex characters."));
                    p.insert(
                        "max_lines".into(),
                        size("Most lines (call tree nodes) shown.", DEFAULT_LINES, MAX_LINES),
                    );
                }
                "flamegraph" => {
                    p.insert(
                        "max_lines".into(),
                        size("Most lines (call tree nodes) shown.", DEFAULT_LINES, MAX_LINES),
                    );
                }
                "top_functions" => {
                    p.insert(
                        "limit".into(),
                        size("Most functions listed.", DEFAULT_ROWS, MAX_ROWS),
                    );
                }
                _ => {
                    p.insert(
                        "step".into(),
                        text("Bucket width: seconds (15, 0.5) or a duration (30s, 1m). Default: from the range."),
                    );
                    p.insert(
                        "group_by".into(),
                        text("Comma-separated label keys; one series per distinct combination of their values."),
                    );
                    p.insert("aggregation".into(), text("sum (default) or avg per bucket."));
                    p.insert(
                        "max_groups".into(),
                        size("Most series summarised.", DEFAULT_GROUPS, MAX_GROUPS),
                    );
                }
            }
        }
        "diff" => {
            scope(&mut p, false);
            for side in ["baseline", "comparison"] {
                p.insert(
                    format!("{side}_selector"),
                    text(&format!("Selector of the {side}. Default {{}}.")),
                );
                p.insert(
                    format!("{side}_from"),
                    text(&format!("Start of the {side}: {TIME}.")),
                );
                p.insert(format!("{side}_to"), text(&format!("End of the {side}: {TIME}.")));
            }
            frames(&mut p);
            p.insert(
                "limit".into(),
                size("Most functions listed.", DEFAULT_ROWS, MAX_ROWS),
            );
        }
        _ => {}
    }
    if name != "diff" {
        p.insert("from".into(), text(&from));
        p.insert("to".into(), text(&to));
    }
    p
}

fn required(name: &str) -> Vec<&'static str> {
    match name {
        "label_values" => vec!["name"],
        "flamegraph" | "top_functions" | "diff" | "timeseries_summary" => vec!["profile_type"],
        "trace_flamegraph" => vec!["trace_id", "profile_type"],
        _ => vec![],
    }
}

fn description(name: &str) -> &'static str {
    match name {
        "profile_types" => "The profile types with samples in the range.",
        "label_names" => {
            "The label names (series labels and sample attribute keys) with samples in the range."
        }
        "label_values" => "The values of one label with samples in the range.",
        "flamegraph" => {
            "The call tree of the selected samples as compact text: the heaviest paths, each node with its total and self value and share of the whole."
        }
        "top_functions" => "Functions by self value (samples whose leaf frame they are), with their totals.",
        "diff" => {
            "Compares two selections (two ranges and/or two selectors) of one profile type: the functions whose share of self value changed most."
        }
        "timeseries_summary" => {
            "The selected samples bucketed over time, one series per group: each series' total and the min, max and mean per bucket."
        }
        "trace_flamegraph" => "The call tree of the samples linked to one trace, as compact text.",
        _ => "",
    }
}

/// Every tool as `tools/list` lists it.
pub(crate) fn definitions() -> Vec<Value> {
    NAMES
        .iter()
        .map(|name| {
            json!({
                "name": name,
                "description": description(name),
                "inputSchema": {
                    "type": "object",
                    "properties": properties(name),
                    "required": required(name),
                    "additionalProperties": false,
                },
                "annotations": { "readOnlyHint": true, "openWorldHint": false },
            })
        })
        .collect()
}
