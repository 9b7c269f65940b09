//! The built-in web UI in headless Chromium (playwright-core), against the real binary
//! holding the generated workload. Every expected value is computed from the workload's
//! samples; the browser script (`ui-api-tests/browser/ui.mjs`) only reports what the page
//! showed. Screenshots are kept in `$CARGO_TARGET_DIR/web-ui-screenshots/`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};
use ui_api_tests::browser;
use ui_api_tests::server::{Options, Server};
use ui_api_tests::workload::{self, FROM, Obs, TO, Workload};

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

fn rfc3339_nanos(value: &Value) -> i64 {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("a time in the URL: {value}"));
    chrono::DateTime::parse_from_rfc3339(text)
        .unwrap_or_else(|e| panic!("{text} is not RFC 3339: {e}"))
        .timestamp_nanos_opt()
        .unwrap()
}

fn num(value: &Value) -> i64 {
    value.as_i64().unwrap_or_else(|| panic!("a number: {value}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn web_ui_shows_what_the_workload_holds() {
    let server = Server::start(Options::default()).await;
    let obs = Workload::new().export_grpc(server.grpc()).await;
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

    let seen = tokio::task::spawn_blocking({
        let plan = json!({
            "base": server.http(), "single": single, "diff": diff, "badSelector": bad, "empty": empty,
            "zoom": "handle", "search": search, "groupBy": "host.name", "traceId": trace,
        });
        move || browser::drive("ui.mjs", plan)
    })
    .await
    .unwrap();
    let at = |pointer: &str| {
        seen.pointer(pointer)
            .unwrap_or_else(|| panic!("{pointer} observed: {seen:#}"))
            .clone()
    };

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
    let (from, to) = (
        rfc3339_nanos(&at("/brush/url/from")),
        rfc3339_nanos(&at("/brush/url/to")),
    );
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
    let folded: i64 = at("/folded/text")
        .as_str()
        .unwrap()
        .lines()
        .map(|line| {
            line.rsplit_once(' ')
                .expect("STACK VALUE")
                .1
                .parse::<i64>()
                .unwrap()
        })
        .sum();
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
