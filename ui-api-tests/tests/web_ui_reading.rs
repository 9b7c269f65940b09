//! The web UI's reading aids in headless Chromium, against the real binary holding the
//! generated workload: the filter bar (focus, hide and drop rules, presets, granularity,
//! in the URL and in every request), a flame graph frame's menu, the bottom-up table, the
//! call graph and the diff's comparison presets. Every expected value is computed here from
//! the workload's description (its samples, and what each frame's location holds: a
//! function's file, a mapping's binary); the browser script
//! (`ui-api-tests/browser/reading.mjs`) only reports what the page showed. Screenshots are
//! kept in `$CARGO_TARGET_DIR/web-ui-screenshots/reading-*.png`.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};
use ui_api_tests::browser;
use ui_api_tests::server::{Options, Server};
use ui_api_tests::trees::parse_folded;
use ui_api_tests::workload::{self, FROM, Loc, Obs, SECOND, TO, Workload};

const SELECTOR: &str = r#"{service.name="checkout"}"#;
/// The API's name of a frame whose file or binary is unknown.
const UNKNOWN: &str = "<unknown>";
const WEEK: i64 = 7 * 86_400 * SECOND;

/// One frame with what its location says of it.
#[derive(Clone, Debug)]
struct Frame {
    name: String,
    /// Every function of the workload is sent with this file; addresses have none.
    file: Option<&'static str>,
    /// The mapping's file, for addresses in a mapping.
    binary: Option<&'static str>,
}

/// One checkout CPU sample: its value and its frames, caller first.
#[derive(Clone, Debug)]
struct Sample {
    obs: Obs,
    frames: Vec<Frame>,
}

impl Sample {
    fn names(&self) -> Vec<String> {
        self.frames.iter().map(|f| f.name.clone()).collect()
    }

    fn has(&self, name: &str) -> bool {
        self.frames.iter().any(|f| f.name == name)
    }
}

fn frames_of(loc: &Loc) -> Vec<Frame> {
    let (file, binary) = match loc {
        Loc::Func(_) | Loc::Inline(_) | Loc::System => (Some("src/app.rs"), None),
        Loc::Addr { mapping, .. } => (None, *mapping),
    };
    loc.frames()
        .into_iter()
        .map(|name| Frame { name, file, binary })
        .collect()
}

/// The checkout CPU samples of `workload`, given the observations it was sent as.
fn checkout(workload: &Workload, obs: &[Obs]) -> Vec<Sample> {
    let specs = workload.profiles.iter().flat_map(|p| p.samples.iter());
    let samples: Vec<Sample> = specs
        .zip(obs)
        .map(|(spec, o)| Sample {
            obs: o.clone(),
            frames: spec.stack.iter().flat_map(frames_of).collect(),
        })
        .collect();
    assert_eq!(samples.len(), obs.len(), "a sample per observation");
    for s in &samples {
        assert_eq!(s.names(), s.obs.frames, "frames in the observations' order");
    }
    samples
        .into_iter()
        .filter(|s| {
            s.obs.profile_type == workload::CPU
                && s.obs.labels.get("service.name").map(String::as_str) == Some("checkout")
        })
        .collect()
}

fn sum<'a>(samples: impl IntoIterator<Item = &'a Sample>) -> i64 {
    samples.into_iter().map(|s| s.obs.value).sum()
}

/// `root;…;leaf → value` of the stacks as `names` shows them; empty stacks (the root's
/// self value) and zero sums left out.
fn folded(samples: &[Sample], names: impl Fn(&Sample) -> Vec<String>) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for s in samples {
        let names = names(s);
        if !names.is_empty() {
            *out.entry(names.join(";")).or_insert(0) += s.obs.value;
        }
    }
    out.retain(|_, v| *v != 0);
    out
}

/// `(self, total)` per function of folded stacks, a function counting once per stack.
fn top(folded: &BTreeMap<String, i64>) -> BTreeMap<String, (i64, i64)> {
    let mut out: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for (stack, &v) in folded {
        let names: Vec<&str> = stack.split(';').collect();
        out.entry(names[names.len() - 1].to_string()).or_default().0 += v;
        for name in names.iter().collect::<BTreeSet<_>>() {
            out.entry(name.to_string()).or_default().1 += v;
        }
    }
    out
}

/// A run of equal names is one node (aggregate_by file, binary, address).
fn collapsed(names: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for name in names {
        if out.last() != Some(&name) {
            out.push(name);
        }
    }
    out
}

/// Bottom-up: the stacks whose frames, leaf first, start with `path`, summed by the next
/// frame (the caller after the path; with an empty path, the leaf).
fn bottom_up(samples: &[Sample], path: &[&str]) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for s in samples {
        let up: Vec<&str> = s.obs.frames.iter().rev().map(String::as_str).collect();
        if up.len() > path.len() && up[..path.len()] == *path {
            *out.entry(up[path.len()].to_string()).or_insert(0) += s.obs.value;
        }
    }
    out
}

/// The call graph by `query/src/render/dot.rs`'s rule, stack by stack: flat where the
/// function is the leaf; cumulative and each caller → callee edge counted once per stack
/// however often it recurs.
#[allow(clippy::type_complexity)]
fn call_graph(samples: &[Sample]) -> (BTreeMap<String, (i64, i64)>, BTreeMap<(String, String), i64>) {
    let mut functions: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    let mut edges: BTreeMap<(String, String), i64> = BTreeMap::new();
    for s in samples {
        let frames = &s.obs.frames;
        let Some(leaf) = frames.last() else { continue };
        functions.entry(leaf.clone()).or_default().0 += s.obs.value;
        for name in frames.iter().collect::<BTreeSet<_>>() {
            functions.entry(name.clone()).or_default().1 += s.obs.value;
        }
        let pairs: BTreeSet<(String, String)> =
            frames.windows(2).map(|w| (w[0].clone(), w[1].clone())).collect();
        for pair in pairs {
            *edges.entry(pair).or_default() += s.obs.value;
        }
    }
    (functions, edges)
}

fn num(value: &Value) -> i64 {
    value.as_i64().unwrap_or_else(|| panic!("a number: {value}"))
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_else(|| panic!("a string: {value}"))
}

/// The page's flame graph as folded stacks (`[[path, self], …]`).
fn page_folded(value: &Value) -> BTreeMap<String, i64> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("folded stacks: {value}"))
        .iter()
        .map(|p| (text(&p[0]).to_string(), num(&p[1])))
        .collect()
}

/// The page's top table (`[[name, self, total], …]`).
fn page_top(value: &Value) -> BTreeMap<String, (i64, i64)> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("top rows: {value}"))
        .iter()
        .map(|r| (text(&r[0]).to_string(), (num(&r[1]), num(&r[2]))))
        .collect()
}

/// Rows of the bottom-up table at `level` under `parent`: the last name of each path with
/// its value.
fn rows_under(rows: &Value, parent: &[&str]) -> BTreeMap<String, i64> {
    rows.as_array()
        .unwrap()
        .iter()
        .filter_map(|r| {
            let path: Vec<&str> = r["path"].as_array().unwrap().iter().map(text).collect();
            (path.len() == parent.len() + 1 && path[..parent.len()] == *parent)
                .then(|| (path[parent.len()].to_string(), num(&r["value"])))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn web_ui_reading_aids_show_what_the_workload_holds() {
    let server = Server::start(Options::default()).await;
    let workload = Workload::new();
    let obs = workload.export_grpc(server.grpc()).await;
    let cpu = checkout(&workload, &obs);
    let total = sum(&cpu);
    let plain = |s: &Sample| s.names();

    let focus = "recurse";
    let hide_typed = "compute";
    // A name with regex metacharacters: the menu's rule must escape them.
    let hide = "libc.so.6+0x1a2b";
    let preset = "libc-kernel";
    let (bottom, bottom_caller) = ("compute", "recurse");
    let hovered = "compute";
    let (label, label_first, label_value) = ("host.name", "host-a", "host-b");
    let single = json!({
        "profile_type": workload::CPU, "selector": SELECTOR,
        "from": FROM.to_string(), "to": TO.to_string(),
    });
    let plan = json!({
        "base": server.http(), "single": single, "focus": focus, "hideTyped": hide_typed, "hide": hide,
        "preset": preset, "bottomup": bottom, "bottomupCaller": bottom_caller, "callgraphHover": hovered,
        "label": label, "labelFirst": label_first, "labelValue": label_value,
    });
    let seen = browser::observe("reading.mjs", plan).await;
    let at = |pointer: &str| seen.at(pointer);
    assert_eq!(
        at("/unfiltered/total"),
        json!(total),
        "the unfiltered flame graph"
    );
    assert_eq!(page_folded(&at("/unfiltered/folded")), folded(&cpu, plain));

    // Focus typed in the form: a chip, the URL, every request; the flame graph, the top
    // table, the chart and the folded download hold exactly the kept stacks.
    let rule = format!("function:{focus}");
    let kept: Vec<Sample> = cpu.iter().filter(|s| s.has(focus)).cloned().collect();
    let kept_total = sum(&kept);
    assert!(0 < kept_total && kept_total < total, "{focus} is on some stacks");
    assert_eq!(at("/focus/url/focus"), json!([rule]));
    assert_eq!(at("/focus/chips"), json!([format!("focus on {rule}")]));
    for request in ["flamegraph", "top", "timeseries"] {
        assert_eq!(
            at(&format!("/focus/requests/{request}/focus")),
            json!([rule]),
            "the {request} request"
        );
    }
    assert_eq!(
        at("/focus/total"),
        json!(kept_total),
        "flame graph total under focus"
    );
    assert_eq!(
        at("/focus/chartTotal"),
        json!(kept_total),
        "chart total under focus"
    );
    assert_eq!(page_folded(&at("/focus/folded")), folded(&kept, plain));
    assert_eq!(
        page_top(&at("/focus/top")),
        top(&folded(&kept, plain)),
        "top table under focus"
    );
    assert_eq!(
        at("/focus/downloadRequest/focus"),
        json!([rule]),
        "the download's request"
    );
    let downloaded: i64 = parse_folded(text(&at("/focus/download"))).values().sum();
    assert_eq!(downloaded, kept_total, "the folded download under focus");

    // A second rule (hide), then back, forward, reload, and removing its chip.
    let hide_rule = format!("function:{hide_typed}");
    let without = |name: &'static str| {
        move |s: &Sample| s.names().into_iter().filter(|n| n != name).collect::<Vec<_>>()
    };
    let both = folded(&kept, without(hide_typed));
    assert_eq!(at("/twoRules/url/hide"), json!([hide_rule]));
    assert_eq!(page_folded(&at("/twoRules/folded")), both, "focus and hide");
    assert!(at("/back/url").get("hide").is_none(), "back: {}", at("/back/url"));
    assert_eq!(at("/back/url/focus"), json!([rule]));
    assert_eq!(at("/back/chips").as_array().unwrap().len(), 1, "back: one chip");
    assert_eq!(
        page_folded(&at("/back/folded")),
        folded(&kept, plain),
        "back: focus alone"
    );
    for step in ["forward", "reloaded"] {
        assert_eq!(at(&format!("/{step}/url/hide")), json!([hide_rule]), "{step}");
        assert_eq!(
            at(&format!("/{step}/chips")).as_array().unwrap().len(),
            2,
            "{step}: two chips"
        );
        assert_eq!(
            page_folded(&at(&format!("/{step}/folded"))),
            both,
            "{step}: both rules"
        );
    }
    assert!(
        at("/removed/url").get("hide").is_none(),
        "the chip's × removes its rule"
    );
    assert_eq!(page_folded(&at("/removed/folded")), folded(&kept, plain));

    // Hide from the frame's right-click menu: the escaped name; the frame leaves the top
    // table, its value goes to its callers' self.
    let items = at("/menu/items");
    for item in [
        format!("Focus on {hide}"),
        format!("Hide {hide}"),
        format!("Drop stacks with {hide}"),
    ] {
        assert!(
            items.as_array().unwrap().contains(&json!(item)),
            "{item} in {items}"
        );
    }
    assert_eq!(
        at("/menu/focused"),
        format!("Focus on {hide}"),
        "the menu takes focus"
    );
    assert_eq!(at("/hidden/url/hide"), json!([r"function:libc\.so\.6\+0x1a2b"]));
    let shown_top = at("/hidden/topShown");
    let shown: Vec<&str> = shown_top.as_array().unwrap().iter().map(text).collect();
    assert!(
        at("/unfiltered/topShown")
            .as_array()
            .unwrap()
            .contains(&json!(hide)),
        "{hide} is in the unfiltered table"
    );
    assert!(!shown.contains(&hide), "{hide} left the top table: {shown:?}");
    assert_eq!(at("/hidden/total"), json!(total), "hiding keeps every stack");
    let hidden = folded(&cpu, without(hide));
    assert_eq!(page_folded(&at("/hidden/folded")), hidden);
    assert_eq!(
        page_top(&at("/hidden/top")),
        top(&hidden),
        "top table without {hide}"
    );

    // Drop by keyboard: ↓ zooms to the widest root frame, `m` opens its menu, the third
    // item drops its stacks.
    let mut roots: BTreeMap<&str, i64> = BTreeMap::new();
    for s in &cpu {
        if let Some(first) = s.obs.frames.first() {
            *roots.entry(first).or_default() += s.obs.value;
        }
    }
    let widest = roots
        .iter()
        .max_by_key(|(_, v)| **v)
        .map(|(n, _)| n.to_string())
        .unwrap();
    assert_eq!(
        at("/keyboardZoom"),
        widest.as_str(),
        "↓ zooms to the widest frame"
    );
    assert_eq!(at("/keyboardMenu/open"), true);
    assert_eq!(at("/keyboardMenu/focused"), format!("Focus on {widest}"));
    assert_eq!(at("/keyboardMenu/picked"), format!("Drop stacks with {widest}"));
    assert_eq!(at("/dropped/url/drop"), json!([format!("function:{widest}")]));
    let left: Vec<Sample> = cpu.iter().filter(|s| !s.has(&widest)).cloned().collect();
    assert_eq!(
        at("/dropped/total"),
        json!(sum(&left)),
        "without the stacks of {widest}"
    );
    assert_eq!(page_folded(&at("/dropped/folded")), folded(&left, plain));

    // The libc-kernel preset hides frames of libc's binary: their value goes to the caller.
    assert_eq!(at("/preset/url/preset"), json!([preset]));
    assert_eq!(at("/preset/request/preset"), json!([preset]));
    let libc = |s: &Sample| {
        s.frames
            .iter()
            .filter(|f| {
                !f.binary
                    .is_some_and(|b| b.starts_with("libc.") || b.starts_with("libc-"))
            })
            .map(|f| f.name.clone())
            .collect::<Vec<_>>()
    };
    let without_libc = folded(&cpu, libc);
    assert_ne!(without_libc, folded(&cpu, plain), "the preset changes the tree");
    assert_eq!(
        page_folded(&at("/preset/folded")),
        without_libc,
        "the preset's tree"
    );
    assert_eq!(page_top(&at("/preset/top")), top(&without_libc));
    assert_eq!(at("/preset/total"), json!(total));

    // Granularity: frames named by binary (base name, or <unknown>), then by file (the
    // binary when the file is unknown), runs of one name as one node.
    let binary = |s: &Sample| collapsed(s.frames.iter().map(|f| f.binary.unwrap_or(UNKNOWN).to_string()));
    let file = |s: &Sample| {
        collapsed(
            s.frames
                .iter()
                .map(|f| f.file.or(f.binary).unwrap_or(UNKNOWN).to_string()),
        )
    };
    for (granularity, names) in [("binary", folded(&cpu, binary)), ("file", folded(&cpu, file))] {
        assert_eq!(at(&format!("/{granularity}/url/aggregate_by")), granularity);
        assert_eq!(
            page_folded(&at(&format!("/{granularity}/folded"))),
            names,
            "aggregate_by={granularity}"
        );
        assert_eq!(page_top(&at(&format!("/{granularity}/top"))), top(&names));
        assert_eq!(at(&format!("/{granularity}/total")), json!(total));
    }

    // A pattern the API cannot read: its message, naming the rule.
    let error = at("/badRule/error");
    assert!(text(&error).contains("focus"), "the API's message: {error}");

    // Bottom-up: a row per function with its self value, largest first; a function's
    // callers, and a caller's callers, with the value of the stacks ending in it through them.
    let rows = at("/bottomup/top");
    let leaves = bottom_up(&cpu, &[]);
    assert_eq!(rows_under(&rows, &[]), leaves, "self value per function");
    let values: Vec<i64> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| num(&r["value"]))
        .collect();
    assert!(
        values.windows(2).all(|w| w[0] >= w[1]),
        "sorted by self: {values:?}"
    );
    assert_eq!(
        rows_under(&at("/bottomup/expanded"), &[bottom]),
        bottom_up(&cpu, &[bottom]),
        "callers of {bottom}"
    );
    assert_eq!(
        rows_under(&at("/bottomup/expandedTwice"), &[bottom, bottom_caller]),
        bottom_up(&cpu, &[bottom, bottom_caller]),
        "callers of {bottom} through {bottom_caller}"
    );
    assert_eq!(
        at("/bottomup/focused"),
        json!([bottom, bottom_caller]).to_string(),
        "the expanded row keeps focus"
    );

    // Call graph: every function with dot.rs's flat and cumulative values, every call with
    // its value, callers above callees; hovering a function highlights its calls.
    let (functions, edges) = call_graph(&cpu);
    assert!(functions.len() <= 100, "all functions fit the 100 shown");
    let nodes = at("/callgraph/nodes");
    let page_nodes: BTreeMap<String, (i64, i64)> = nodes
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (text(&n["name"]).to_string(), (num(&n["flat"]), num(&n["cum"]))))
        .collect();
    assert_eq!(page_nodes, functions, "call graph nodes (flat, cum)");
    let page_edges: BTreeMap<(String, String), i64> = at("/callgraph/edges")
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                (text(&e["from"]).to_string(), text(&e["to"]).to_string()),
                num(&e["value"]),
            )
        })
        .collect();
    assert_eq!(page_edges, edges, "call graph edges");
    assert!(
        edges.contains_key(&("recurse".to_string(), "recurse".to_string())),
        "recursion is an edge, counted once per stack"
    );
    let place: BTreeMap<&str, (f64, f64)> = nodes
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                text(&n["name"]),
                (n["top"].as_f64().unwrap(), n["bottom"].as_f64().unwrap()),
            )
        })
        .collect();
    for (from, to) in edges.keys().filter(|(a, b)| a != b) {
        assert!(
            place[from.as_str()].1 <= place[to.as_str()].0,
            "{from} is drawn above {to}: {:?} {:?}",
            place[from.as_str()],
            place[to.as_str()]
        );
    }
    let node = nodes
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == hovered)
        .unwrap();
    let lines: Vec<&str> = node["text"].as_array().unwrap().iter().map(text).collect();
    assert_eq!(lines[0], hovered);
    assert!(
        lines[1].starts_with("flat ") && lines[1].ends_with("%)"),
        "{lines:?}"
    );
    assert!(
        lines[2].starts_with("cum ") && lines[2].ends_with("%)"),
        "{lines:?}"
    );
    let touching: BTreeSet<(String, String)> = edges
        .keys()
        .filter(|(a, b)| a == hovered || b == hovered)
        .cloned()
        .collect();
    let lit: BTreeSet<(String, String)> = at("/callgraph/hovered/edges")
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (text(&e[0]).to_string(), text(&e[1]).to_string()))
        .collect();
    assert_eq!(lit, touching, "hovering {hovered} highlights its calls");
    let neighbours: BTreeSet<String> = touching
        .iter()
        .flat_map(|(a, b)| [a.clone(), b.clone()])
        .chain([hovered.to_string()])
        .collect();
    let lit_nodes: BTreeSet<String> = serde_json::from_value(at("/callgraph/hovered/nodes")).unwrap();
    assert_eq!(lit_nodes, neighbours, "and its callers and callees");

    // Diff presets. A week earlier: the baseline is the range shown less 7 days, in the URL
    // and in the diff request; nothing was sent then.
    let week = at("/week/url");
    assert_eq!(week["compare"], "week");
    for (name, value) in [
        ("baseline_from", FROM - WEEK),
        ("baseline_to", TO - WEEK),
        ("comparison_from", FROM),
        ("comparison_to", TO),
    ] {
        assert_eq!(week[name], value.to_string(), "{name} in the URL: {week}");
        assert_eq!(
            at(&format!("/week/request/{name}")),
            json!([value.to_string()]),
            "{name} in the diff request"
        );
    }
    assert_eq!(at("/week/totals"), json!({"baseline": 0, "comparison": total}));

    // The previous value of a label: the comparison selects the value picked, the baseline
    // the value before it in the label's sorted values; the first value has none before it.
    assert!(
        text(&at("/labelFirst/message")).contains("before"),
        "{}",
        at("/labelFirst/message")
    );
    let url = at("/label/url");
    assert_eq!(url["compare"], "label");
    assert_eq!(url["compare_label"], label);
    assert_eq!(url["compare_value"], label_value);
    let matcher = |value: &str| format!(r#"{{service.name="checkout", {label}="{value}"}}"#);
    assert_eq!(url["comparison_selector"], matcher(label_value));
    assert_eq!(
        url["baseline_selector"],
        matcher(label_first),
        "the value before {label_value}"
    );
    assert_eq!(
        at("/label/request/baseline_selector"),
        json!([matcher(label_first)])
    );
    let host = |value: &str| {
        sum(cpu
            .iter()
            .filter(|s| s.obs.labels.get(label).map(String::as_str) == Some(value)))
    };
    let totals = json!({"baseline": host(label_first), "comparison": host(label_value)});
    assert_eq!(
        at("/label/totals"),
        totals,
        "the diff of {label}={label_first} and {label_value}"
    );
    assert_eq!(at("/labelReloaded/compare"), "label", "reload keeps the preset");
    assert_eq!(at("/labelReloaded/label"), label);
    assert_eq!(at("/labelReloaded/value"), label_value);
    assert_eq!(at("/labelReloaded/totals"), totals);

    assert_eq!(at("/pageErrors"), json!([]), "no script errors");
}
