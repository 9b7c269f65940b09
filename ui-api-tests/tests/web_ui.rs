//! The built-in web UI in headless Chromium (playwright-core), against the real binary
//! holding the generated workload. Every expected value is computed from the workload's
//! samples; the browser script (`ui-api-tests/browser/ui.mjs`) only reports what the page
//! showed. Screenshots are kept in `$CARGO_TARGET_DIR/web-ui-screenshots/`.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};
use ui_api_tests::server::{Options, Server};
use ui_api_tests::trees::parse_folded;
use ui_api_tests::workload::{self, FROM, Loc, Obs, ProfileSpec, SECOND, SampleSpec, T0, TO, Workload};
use ui_api_tests::{browser, reads};

const SELECTOR: &str = r#"{service.name="checkout"}"#;

fn checkout(obs: &[Obs]) -> Vec<&Obs> {
    obs.iter()
        .filter(|o| {
            o.profile_type == workload::CPU
                && o.labels.get("service.name").map(String::as_str) == Some("checkout")
        })
        .collect()
}

fn sum<'a>(obs: impl IntoIterator<Item = &'a &'a Obs>) -> i64 {
    obs.into_iter().map(|o| o.value).sum()
}

/// Self value per function: the value of every sample whose leaf it is.
fn self_values(obs: &[&Obs]) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for o in obs {
        if let Some(leaf) = o.frames.last() {
            *out.entry(leaf.clone()).or_default() += o.value;
        }
    }
    out
}

/// Total value per function: every sample with the function anywhere on its stack, once.
fn total_values(obs: &[&Obs]) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for o in obs {
        for frame in o.frames.iter().collect::<BTreeSet<_>>() {
            *out.entry(frame.clone()).or_default() += o.value;
        }
    }
    out
}

/// The single largest entry; a tie would make "the first row" ambiguous, so it fails.
fn largest(values: &BTreeMap<String, i64>) -> (String, i64) {
    let max = *values.values().max().expect("values");
    let top: Vec<_> = values.iter().filter(|(_, v)| **v == max).collect();
    assert_eq!(top.len(), 1, "the workload has one largest function: {top:?}");
    (top[0].0.clone(), max)
}

/// A time the page put in the URL: unix nanoseconds, as the API reads them.
fn nanos(value: &Value) -> i64 {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("a time in the URL: {value}"));
    text.parse()
        .unwrap_or_else(|e| panic!("{text} is not unix nanoseconds: {e}"))
}

fn num(value: &Value) -> i64 {
    value.as_i64().unwrap_or_else(|| panic!("a number: {value}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn web_ui_shows_what_the_workload_holds() {
    let server = Server::start(Options::default()).await;
    let obs = Workload::new().export_grpc(server.grpc()).await;
    // A second tenant, read together with the first from the Tenant field.
    let other = reads::input(T0 as u64);
    reads::send(&server, "team-b", &other).await;
    let cpu = checkout(&obs);
    let total = sum(&cpu);
    let (top_function, top_self) = largest(&self_values(&cpu));
    let (widest, widest_total) = largest(&total_values(&cpu));
    let trace = workload::TRACES[0];
    let trace_total = sum(cpu.iter().filter(|o| o.trace_id.as_deref() == Some(trace)));
    let search = "compute";
    let search_total = sum(cpu.iter().filter(|o| o.frames.iter().any(|f| f.contains(search))));
    let empty_stacks = sum(cpu.iter().filter(|o| o.frames.is_empty()));
    let middle = (FROM + TO) / 2;
    let before_middle = sum(cpu.iter().filter(|o| o.time < middle));

    let single = json!({
        "profile_type": workload::CPU, "selector": SELECTOR,
        "from": FROM.to_string(), "to": TO.to_string(),
    });
    let mut diff = single.clone();
    diff["view"] = "diff".into();
    for (side, from, to) in [("baseline", FROM, middle), ("comparison", middle, TO)] {
        diff[format!("{side}_selector")] = SELECTOR.into();
        diff[format!("{side}_from")] = from.to_string().into();
        diff[format!("{side}_to")] = to.to_string().into();
    }
    let mut bad = single.clone();
    bad["selector"] = "{service.name=checkout}".into();
    let mut empty = single.clone();
    empty["tenant"] = "nobody-here".into();
    empty.as_object_mut().unwrap().remove("profile_type");

    let mut tenants = single.clone();
    tenants["tenant"] = "anonymous|team-b".into();
    tenants["selector"] = "{}".into();
    tenants["group_by"] = "__tenant_id__".into();
    let tenant_totals = json!([
        [
            "__tenant_id__=anonymous",
            obs.iter()
                .filter(|o| o.profile_type == workload::CPU)
                .map(|o| o.value)
                .sum::<i64>()
        ],
        ["__tenant_id__=team-b", other.iter().map(|p| p.value).sum::<i64>()],
    ]);

    let plan = json!({
        "base": server.http(), "single": single, "diff": diff, "badSelector": bad, "empty": empty,
        "tenants": tenants,
        "zoom": "handle", "search": search, "groupBy": "host.name", "traceId": trace,
    });
    let seen = browser::observe("ui.mjs", plan).await;
    let at = |pointer: &str| seen.at(pointer);

    // The deep link: a drawn flame graph of exactly the selected samples, a top table whose
    // first row is the largest self value, the service picker following the selector.
    assert_eq!(num(&at("/single/flame/total")), total, "flame graph total");
    assert!(
        num(&at("/single/flame/frames")) > 5,
        "frames drawn: {}",
        at("/single/flame")
    );
    assert!(
        num(&at("/single/pixels/painted")) > 10_000,
        "the flame graph canvas is painted"
    );
    assert!(
        num(&at("/single/chart/painted")) > 1_000,
        "the chart canvas is painted"
    );
    assert!(num(&at("/single/bars")) > 0, "the chart has bars");
    assert_eq!(
        at("/single/rows/0/0"),
        top_function.as_str(),
        "first row of the top table"
    );
    assert_eq!(at("/single/tableSelf/0"), json!([top_function, top_self]));
    assert_eq!(at("/single/service"), "checkout");
    assert_eq!(at("/single/error"), "");

    // Tooltip and click to zoom: the frame then spans the whole width.
    let tooltip = at("/tooltip");
    assert!(
        tooltip.as_str().unwrap().starts_with("handle"),
        "tooltip names the frame: {tooltip}"
    );
    assert!(
        tooltip.as_str().unwrap().contains("Total"),
        "tooltip gives the total: {tooltip}"
    );
    let before = at("/zoomBefore/width").as_f64().unwrap();
    let width = at("/zoomAfter/state/width").as_f64().unwrap();
    assert!(
        before < width - 10.0,
        "handle is narrower than the graph before zooming"
    );
    assert_eq!(at("/zoomAfter/state/zoom"), "handle");
    assert!(
        (at("/zoomAfter/frame/width").as_f64().unwrap() - width).abs() < 1.0,
        "zoomed frame spans the graph"
    );
    assert_eq!(at("/zoomAfter/resetEnabled"), true);
    assert_eq!(at("/zoomReset/zoom"), "", "reset zoom");

    // Search: matching frames highlighted, the rest dimmed; the matched value from the input.
    let highlighted = num(&at("/search/state/highlighted"));
    assert!(
        highlighted > 0 && highlighted < num(&at("/search/state/frames")),
        "some frames highlighted: {highlighted}"
    );
    assert_eq!(
        at("/search/value"),
        search_total.to_string(),
        "value of the frames matching {search}"
    );
    assert_eq!(at("/search/url/search"), search);

    assert_eq!(
        at("/sortedByTotal/0"),
        json!([widest, widest_total]),
        "sorted by total"
    );

    // Autocomplete of label names and values.
    let names = at("/nameSuggestions");
    assert!(
        names.as_array().unwrap().contains(&json!("service.name")),
        "names: {names}"
    );
    let values = at("/valueSuggestions");
    let values: BTreeSet<&str> = values
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(values, BTreeSet::from(["checkout", "payments"]));
    assert_eq!(at("/completed"), r#"{service.name="payments"}"#);

    // Brush to zoom: the URL holds the dragged range, the flame graph exactly its samples.
    let (from, to) = (nanos(&at("/brush/url/from")), nanos(&at("/brush/url/to")));
    assert!(
        FROM < from && from < to && to < TO,
        "brushed inside the range: {from}..{to}"
    );
    let in_range = sum(cpu.iter().filter(|o| from <= o.time && o.time < to));
    assert_eq!(
        num(&at("/brush/flame/total")),
        in_range,
        "flame graph of the brushed range"
    );
    assert_eq!(at("/back/from"), FROM.to_string(), "back restores the range");

    // Group by: one top-level node and one legend entry per host.
    let groups: BTreeSet<String> = cpu.iter().map(|o| o.group_name(&["host.name"])).collect();
    let children: BTreeSet<String> = serde_json::from_value(at("/groupBy/flame/rootChildren")).unwrap();
    assert_eq!(children, groups);
    assert_eq!(at("/groupBy/legend").as_array().unwrap().len(), groups.len());

    // Trace id lookup.
    assert_eq!(at("/trace/url/trace_id"), trace);
    assert_eq!(
        num(&at("/trace/flame/total")),
        trace_total,
        "flame graph of trace {trace}"
    );
    assert!(at("/trace/chips").as_str().unwrap().contains(trace));

    // Downloads.
    assert_eq!(at("/pprof/gzip"), true, "pprof is gzipped");
    assert!(num(&at("/pprof/text")) > 0, "pprof inflates");
    let folded: i64 = parse_folded(at("/folded/text").as_str().unwrap()).values().sum();
    assert_eq!(folded, total - empty_stacks, "folded download");

    // Diff from a link: both totals from the input, frames colored both ways.
    assert_eq!(
        at("/diff/flame/totals"),
        json!({"baseline": before_middle, "comparison": total - before_middle})
    );
    assert!(num(&at("/diff/pixels/red")) > 0, "grown frames in red");
    assert!(num(&at("/diff/pixels/green")) > 0, "shrunk frames in green");
    assert!(num(&at("/diff/rows")) > 0, "diff table");
    // From the tab: both sides filled in, halves of the range shown.
    let sides = at("/diffFromTab/url");
    for name in ["baseline_from", "baseline_to", "comparison_from", "comparison_to"] {
        assert!(sides.get(name).is_some(), "{name} in the URL: {sides}");
    }
    let totals = at("/diffFromTab/flame/totals");
    assert_eq!(
        num(&totals["baseline"]) + num(&totals["comparison"]),
        total,
        "the halves add up"
    );

    // Two tenants from the Tenant field, grouped by tenant: one top-level node per tenant
    // holding what that tenant was sent.
    assert_eq!(at("/tenants/tenantField"), "anonymous|team-b");
    let mut groups = at("/tenants/groups");
    groups
        .as_array_mut()
        .unwrap()
        .sort_by_key(|g| g[0].as_str().unwrap().to_string());
    assert_eq!(groups, tenant_totals, "groups by tenant");

    assert_eq!(at("/pageErrors"), json!([]), "no script errors");
    assert_eq!(at("/consoleErrors"), json!([]), "nothing logged as an error");

    // Error and empty states name the problem.
    let error = at("/badSelector/error");
    assert!(
        error.as_str().unwrap().contains("selector"),
        "the API's message is shown: {error}"
    );
    let message = at("/empty/message");
    assert!(
        message.as_str().unwrap().contains("No profiles"),
        "empty state: {message}"
    );
    assert_eq!(at("/pageErrorsAtEnd"), json!([]), "no script errors");
}

/// The page and its files come from the binary, with caching and a strict policy.
#[tokio::test]
async fn web_ui_is_served_from_the_binary() {
    let server = Server::start(Options::default()).await;
    let client = ui_api_tests::http_client();
    let page = client.get(server.http()).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(
        page.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    assert!(
        page.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("script-src 'self'")
    );
    let etag = page.headers()["etag"].clone();
    let html = page.text().await.unwrap();
    assert!(html.contains(r#"src="/ui/app.js""#));

    let script = client
        .get(format!("{}/ui/app.js", server.http()))
        .send()
        .await
        .unwrap();
    assert_eq!(script.status(), 200);
    assert!(
        script.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/javascript")
    );
    let again = client
        .get(server.http())
        .header("if-none-match", etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 304, "revalidated by ETag");
    let missing = client
        .get(format!("{}/ui/nope.js", server.http()))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
}

/// The zone the browser runs in for the second round: no daylight saving time and a
/// half-hour offset, so a date-time read in the wrong zone cannot pass.
const ZONE: &str = "Asia/Kolkata";
const ZONE_OFFSET_SECONDS: i32 = 5 * 3600 + 30 * 60;
/// Samples of the timeline's render-time measurement.
const PERF_SAMPLES: usize = 100_000;
/// Render-time targets of issue 35 (first paint, one zoom step), in milliseconds.
const FIRST_PAINT_TARGET_MS: f64 = 500.0;
const ZOOM_TARGET_MS: f64 = 50.0;

/// Unix nanoseconds as the page shows them in `offset`: `YYYY-MM-DD HH:MM:SS[.mmm]`.
fn shown_at(nanos: i64, offset_seconds: i32) -> String {
    let offset = chrono::FixedOffset::east_opt(offset_seconds).unwrap();
    let time = chrono::DateTime::from_timestamp_nanos(nanos).with_timezone(&offset);
    let millis = time.timestamp_subsec_millis();
    let text = time.format("%Y-%m-%d %H:%M:%S").to_string();
    if millis == 0 {
        text
    } else {
        format!("{text}.{millis:03}")
    }
}

/// The timeline's lane of a sample: `thread.name`, else `thread.id`, else none.
fn thread_lane(o: &Obs) -> String {
    o.sample_attrs
        .get("thread.name")
        .or_else(|| o.sample_attrs.get("thread.id"))
        .cloned()
        .unwrap_or_default()
}

/// Direct callers and callees of `function` (its first call on each stack) with the
/// values below them; a stack where it is the root or the leaf counts under `""`.
fn sandwich_neighbours(obs: &[&Obs], function: &str) -> (BTreeMap<String, i64>, BTreeMap<String, i64>) {
    let (mut callers, mut callees) = (BTreeMap::new(), BTreeMap::new());
    for o in obs {
        let Some(k) = o.frames.iter().position(|f| f == function) else {
            continue;
        };
        let caller = if k > 0 {
            o.frames[k - 1].clone()
        } else {
            String::new()
        };
        let callee = o.frames.get(k + 1).cloned().unwrap_or_default();
        *callers.entry(caller).or_default() += o.value;
        *callees.entry(callee).or_default() += o.value;
    }
    (callers, callees)
}

/// A drawn sandwich tree's children as `{name: total}`, its self value under `""`.
fn children_of(tree: &Value) -> BTreeMap<String, i64> {
    let mut out: BTreeMap<String, i64> = tree["children"]
        .as_array()
        .unwrap_or_else(|| panic!("a tree: {tree}"))
        .iter()
        .map(|c| (c[0].as_str().unwrap().to_string(), num(&c[1])))
        .collect();
    let own = num(&tree["self"]);
    if own != 0 {
        out.insert(String::new(), own);
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn web_ui_times_timeline_sandwich_exemplars_and_keyboard() {
    let server = Server::start(Options::default()).await;
    let obs = Workload::new().export_grpc(server.grpc()).await;
    let cpu = checkout(&obs);
    let totals = total_values(&cpu);

    // A lane and an instant where exactly one sample was sent, a second apart from the
    // lane's others, with a stack at least two frames deep.
    let lane = "worker-1";
    let mut in_lane: Vec<&Obs> = cpu.iter().copied().filter(|o| thread_lane(o) == lane).collect();
    in_lane.sort_by_key(|o| o.time);
    let chosen = in_lane
        .iter()
        .enumerate()
        .find(|(i, o)| {
            let apart = |other: Option<&&Obs>| other.is_none_or(|p| (p.time - o.time).abs() >= SECOND);
            o.frames.len() >= 2
                && apart(i.checked_sub(1).and_then(|j| in_lane.get(j)))
                && apart(in_lane.get(i + 1))
        })
        .map(|(_, o)| *o)
        .expect("a lone sample in the lane");
    let mut lanes: BTreeMap<String, i64> = BTreeMap::new();
    for o in &cpu {
        *lanes.entry(thread_lane(o)).or_default() += 1;
    }

    // A sample budget that ends between two instants, about half way.
    let mut by_time: Vec<&Obs> = cpu.clone();
    by_time.sort_by_key(|o| o.time);
    let budget = (by_time.len() / 2..by_time.len())
        .find(|&n| by_time[n - 1].time < by_time[n].time)
        .expect("two instants apart");
    let read_value = sum(&by_time[..budget]);

    let single = json!({
        "profile_type": workload::CPU, "selector": SELECTOR,
        "from": FROM.to_string(), "to": TO.to_string(),
    });
    let sandwiched = "recurse";
    let picked = "compute";
    let plan = json!({
        "base": server.http(), "single": single, "timezone": ZONE,
        "typedFrom": shown_at(FROM, ZONE_OFFSET_SECONDS), "typedTo": shown_at(TO, ZONE_OFFSET_SECONDS),
        "hover": {"lane": lane, "time": chosen.time, "window": [chosen.time - SECOND, chosen.time + SECOND]},
        "sandwich": sandwiched, "sandwichPick": picked, "perfSamples": PERF_SAMPLES, "budget": budget,
    });
    let seen = browser::observe("views.mjs", plan).await;
    let at = |pointer: &str| seen.at(pointer);

    // Time: the nanosecond link is shown in the zone, and typing those date-times asks the
    // API exactly what the link asked; UTC shows the same instant; now-6h is sent as typed.
    assert_eq!(at("/time/shownFrom"), shown_at(FROM, ZONE_OFFSET_SECONDS));
    assert_eq!(at("/time/shownTo"), shown_at(TO, ZONE_OFFSET_SECONDS));
    let by_url = at("/time/byUrl");
    assert_eq!(by_url["from"], FROM.to_string(), "the link's request: {by_url}");
    assert_eq!(by_url["to"], TO.to_string());
    assert_eq!(at("/time/typed"), by_url, "typed local date-times ask the same");
    assert_eq!(
        at("/time/url/from"),
        FROM.to_string(),
        "the URL keeps nanoseconds"
    );
    assert_eq!(at("/time/utcFrom"), shown_at(FROM, 0));
    assert_eq!(at("/time/utcUrl/tz"), "utc");
    assert_eq!(at("/time/utcUrl/from"), FROM.to_string());
    assert_eq!(at("/time/relative/from"), "now-6h");
    assert_eq!(at("/time/relative/to"), "now");
    let bad = at("/time/badError");
    assert!(
        bad.as_str().unwrap().contains("cannot read from"),
        "unreadable time: {bad}"
    );

    // Timeline: a lane per thread with its samples; at the chosen instant of the chosen
    // lane, the tooltip gives the time and the stack that was sent then.
    let drawn: BTreeMap<String, i64> = at("/timeline/lanes")
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l[0].as_str().unwrap().to_string(), num(&l[1])))
        .collect();
    assert_eq!(drawn, lanes, "samples per lane");
    assert_eq!(
        at("/timeline/tooltipTitle"),
        format!("{lane} · {}", shown_at(chosen.time, ZONE_OFFSET_SECONDS)),
        "the hovered sample's lane and time"
    );
    assert_eq!(
        at("/timeline/tooltipFrames"),
        json!(chosen.frames),
        "the stack sent at {} on {lane}",
        chosen.time
    );
    assert_eq!(
        at("/timeline/keyboardZoomed"),
        true,
        "- zooms out the focused timeline"
    );
    assert!(
        at("/timeline/clicked/url").get("view").is_none(),
        "the flame graph, the default view"
    );
    assert_eq!(
        at("/timeline/clicked/zoom"),
        chosen.frames[1].as_str(),
        "a click on the second frame opens the flame graph zoomed to it"
    );

    // Lanes by a label of the series.
    let mut hosts: BTreeMap<String, i64> = BTreeMap::new();
    for o in &cpu {
        *hosts.entry(o.labels["host.name"].clone()).or_default() += 1;
    }
    let by_host: BTreeMap<String, i64> = at("/lanesByHost")
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l[0].as_str().unwrap().to_string(), num(&l[1])))
        .collect();
    assert_eq!(by_host, hosts, "samples per host lane");

    // Over the budget: the page says how much was left out (the value after the samples it
    // read) and narrows the range to end just after the last one read.
    let first = at("/budget/first");
    assert_eq!(first["shown"], true, "the left-out notice: {first}");
    assert_eq!(first["loaded"], budget.to_string());
    assert_eq!(first["leftOut"], (sum(&cpu) - read_value).to_string(), "{first}");
    assert!(first["text"].as_str().unwrap().contains("left out"));
    let narrowed = at("/budget/narrowed");
    assert_eq!(
        nanos(&narrowed["url"]["to"]),
        by_time[budget - 1].time + 1000,
        "narrowed to the samples read: {narrowed}"
    );
    assert_eq!(num(&narrowed["samples"]), budget as i64, "{narrowed}");
    assert_eq!(narrowed["status"]["shown"], false, "nothing left out: {narrowed}");

    // Sandwich: the function's callers and callees, both totalling its total.
    let (callers, callees) = sandwich_neighbours(&cpu, sandwiched);
    let sandwich = at("/sandwich");
    assert_eq!(
        num(&sandwich["callers"]["total"]),
        totals[sandwiched],
        "callers total"
    );
    assert_eq!(
        num(&sandwich["callees"]["total"]),
        totals[sandwiched],
        "callees total"
    );
    assert_eq!(children_of(&sandwich["callers"]), callers, "direct callers");
    assert_eq!(children_of(&sandwich["callees"]), callees, "direct callees");
    assert_eq!(at("/sandwich/picked/url/function"), picked);
    assert_eq!(
        num(&at("/sandwich/picked/callees/total")),
        totals[picked],
        "the sandwich picked from the table"
    );

    // Keyboard: every control before the table is reached by Tab, with a visible outline;
    // the table's rows read out each function with its values.
    let reached: BTreeSet<String> = serde_json::from_value(at("/keyboard/reached")).unwrap();
    let controls: Vec<String> = serde_json::from_value(at("/keyboard/controls")).unwrap();
    assert!(controls.len() > 15, "controls found: {controls:?}");
    let missed: Vec<&String> = controls.iter().filter(|c| !reached.contains(*c)).collect();
    assert!(missed.is_empty(), "not reached by Tab: {missed:?}");
    let outline = at("/keyboard/runOutline");
    assert!(
        outline
            .as_str()
            .is_some_and(|o| o.starts_with("solid") && !o.ends_with(" 0px")),
        "a visible focus outline: {outline}"
    );
    let (top_function, top_self) = largest(&self_values(&cpu));
    let label = at("/keyboard/rowLabels/0");
    let label = label.as_str().unwrap();
    assert!(
        label.starts_with(&top_function) && label.contains("Self") && label.contains("Total"),
        "the first row's label: {label}"
    );
    assert!(label.contains(&top_self.to_string()), "{label} gives {top_self}");
    assert_eq!(at("/keyboard/flameLabel/1"), "top-table");

    // Exemplars: a dot per step with samples; each a checkout CPU profile of the input, and
    // a click shows exactly that profile.
    let dots = at("/exemplars/dots");
    let dots = dots.as_array().unwrap();
    assert!(!dots.is_empty(), "exemplar dots drawn");
    let profiles: BTreeSet<&str> = cpu.iter().filter_map(|o| o.profile_id.as_deref()).collect();
    for dot in dots {
        let id = dot["profileId"].as_str().unwrap();
        assert!(profiles.contains(id), "{id} is a checkout CPU profile");
    }
    let second = dots[1]["profileId"].as_str().unwrap();
    let announced = at("/exemplars/announced");
    assert!(
        announced.as_str().unwrap().contains(second),
        "the second dot announced: {announced}"
    );
    assert_eq!(at("/exemplars/byKeyboard/url/profile_id"), second);
    assert_eq!(
        num(&at("/exemplars/byKeyboard/total")),
        sum(cpu.iter().filter(|o| o.profile_id.as_deref() == Some(second))),
        "the flame graph of profile {second}, opened by keyboard"
    );
    let clicked = dots[0]["profileId"].as_str().unwrap();
    assert_eq!(at("/exemplars/clicked/url/profile_id"), clicked);
    let profile_total = sum(cpu.iter().filter(|o| o.profile_id.as_deref() == Some(clicked)));
    assert_eq!(
        num(&at("/exemplars/clicked/total")),
        profile_total,
        "the flame graph of profile {clicked}"
    );

    // Render time of the timeline for 100,000 samples.
    let perf = at("/perf");
    assert_eq!(num(&perf["samples"]), PERF_SAMPLES as i64);
    let first_paint = perf["firstPaintMs"].as_f64().unwrap();
    let mut zooms: Vec<f64> = serde_json::from_value(perf["zoomMs"].clone()).unwrap();
    zooms.sort_by(f64::total_cmp);
    let (zoom_median, zoom_max) = (zooms[zooms.len() / 2], zooms[zooms.len() - 1]);
    println!(
        "timeline render time, {PERF_SAMPLES} samples: first paint {first_paint:.1} ms (target {FIRST_PAINT_TARGET_MS}), \
         zoom step median {zoom_median:.1} ms, max {zoom_max:.1} ms (target {ZOOM_TARGET_MS}); {} rectangles drawn",
        perf["rects"]
    );
    assert!(
        first_paint <= FIRST_PAINT_TARGET_MS,
        "first paint {first_paint} ms"
    );
    assert!(zoom_median <= ZOOM_TARGET_MS, "zoom step {zoom_median} ms");
    assert_eq!(at("/pageErrors"), json!([]), "no script errors");
}

/// Threads of the large workload, and samples per thread.
const BULK_THREADS: usize = 8;
const BULK_PER_THREAD: usize = 12_500;
/// Thread `k`'s sample `i` is at `T0 + i × 48 ms + k × 6 ms`: 10 minutes per thread.
const BULK_STEP: i64 = 48_000_000;
const BULK_OFFSET: i64 = 6_000_000;
/// Stacks change every this many samples of a thread, as code runs for a while.
const BULK_RUN: usize = 50;

/// The large workload's stack of thread `k`'s sample `i`.
fn bulk_stack(k: usize, i: usize) -> Vec<Loc> {
    const STACKS: [&[&str]; 5] = [
        &["main", "serve", "handle", "parse"],
        &["main", "serve", "handle", "compute", "hash"],
        &["main", "serve", "handle", "compute", "encode", "write"],
        &["main", "gc", "mark"],
        &["main", "serve", "poll"],
    ];
    STACKS[(i / BULK_RUN + k) % STACKS.len()]
        .iter()
        .map(|name| Loc::Func(name))
        .collect()
}

/// 100,000 timestamped samples of 8 threads on 4 hosts, one profile per host and minute.
fn bulk_workload() -> Workload {
    let mut profiles = Vec::new();
    for host in 0..4 {
        for minute in 0..10i64 {
            let start = T0 + minute * 60 * SECOND;
            let mut samples = Vec::new();
            for k in (0..BULK_THREADS).filter(|k| k % 4 == host) {
                for i in 0..BULK_PER_THREAD {
                    let time = T0 + i as i64 * BULK_STEP + k as i64 * BULK_OFFSET;
                    if (time - start).div_euclid(60 * SECOND) != 0 {
                        continue;
                    }
                    samples.push(SampleSpec {
                        stack: bulk_stack(k, i),
                        value: 1,
                        time: Some(time),
                        attrs: vec![("thread.name".into(), format!("thread-{k}"))],
                        link: None,
                    });
                }
            }
            profiles.push(ProfileSpec {
                profile_type: workload::CPU,
                resource: vec![
                    ("service.name".into(), "bulk".into()),
                    ("host.name".into(), format!("host-{host}")),
                ],
                attrs: Vec::new(),
                time: start,
                duration: 60 * SECOND,
                period: 10_000_000,
                profile_id: None,
                samples,
            });
        }
    }
    Workload { profiles }
}

/// The timeline of 100,000 samples read from the server: every sample in its thread's
/// lane, the stack sent at a chosen instant in the tooltip, and the time it took.
#[tokio::test(flavor = "multi_thread")]
async fn web_ui_timeline_of_100k_samples_from_the_server() {
    let server = Server::start(Options::default()).await;
    let obs = bulk_workload().export_grpc(server.grpc()).await;
    assert_eq!(obs.len(), BULK_THREADS * BULK_PER_THREAD);
    let (k, i) = (5, 7_777);
    let time = T0 + i as i64 * BULK_STEP + k as i64 * BULK_OFFSET;
    let sent: Vec<String> = bulk_stack(k, i).iter().flat_map(Loc::frames).collect();

    let plan = json!({
        "base": server.http(),
        "query": {
            "view": "timeline", "profile_type": workload::CPU, "selector": r#"{service.name="bulk"}"#,
            "from": (T0 - 60 * SECOND).to_string(), "to": (T0 + 11 * 60 * SECOND).to_string(),
        },
        "hover": {"lane": format!("thread-{k}"), "time": time, "window": [time - 200_000_000, time + 200_000_000]},
    });
    let seen = browser::observe("timeline-load.mjs", plan).await;
    let at = |pointer: &str| seen.at(pointer);
    assert_eq!(num(&at("/samples")), obs.len() as i64, "every sample read");
    assert_eq!(at("/leftOutShown"), false, "nothing left out");
    let lanes: BTreeMap<String, i64> = at("/lanes")
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l[0].as_str().unwrap().to_string(), num(&l[1])))
        .collect();
    let want: BTreeMap<String, i64> = (0..BULK_THREADS)
        .map(|k| (format!("thread-{k}"), BULK_PER_THREAD as i64))
        .collect();
    assert_eq!(lanes, want, "a lane per thread");
    assert_eq!(at("/tooltipFrames"), json!(sent), "thread-{k}'s stack at {time}");

    let load = num(&at("/loadMs"));
    let first_paint = at("/firstPaintMs").as_f64().unwrap();
    let mut zooms: Vec<f64> = serde_json::from_value(at("/zoomMs")).unwrap();
    zooms.sort_by(f64::total_cmp);
    let (zoom_median, zoom_max) = (zooms[zooms.len() / 2], zooms[zooms.len() - 1]);
    println!(
        "timeline of {} samples from the server (debug build): loaded and drawn in {load} ms; first paint {first_paint:.1} ms \
         (target {FIRST_PAINT_TARGET_MS}), keyboard zoom step median {zoom_median:.1} ms, max {zoom_max:.1} ms (target {ZOOM_TARGET_MS})",
        obs.len()
    );
    assert!(
        first_paint <= FIRST_PAINT_TARGET_MS,
        "first paint {first_paint} ms"
    );
    assert!(zoom_median <= ZOOM_TARGET_MS, "zoom step {zoom_median} ms");
    assert_eq!(at("/pageErrors"), json!([]), "no script errors");
}
