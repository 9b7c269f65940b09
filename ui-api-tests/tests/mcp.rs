//! `/mcp` against the real binary, driven by the official MCP Python SDK client
//! (`python/mcp_client.py`: `streamablehttp_client` + `ClientSession`), with
//! `--auth required` and two tenants holding different data. Every tool is called; its
//! answer is checked against values computed from the workload's observations. The wire
//! details the SDK does not show (status codes, JSON-RPC errors, session and version
//! headers) are checked with plain HTTP.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use opentelemetry_proto::tonic::collector::profiles::v1development::profiles_service_client::ProfilesServiceClient;
use serde_json::{Value, json};
use ui_api_tests::server::{Options, Server, binary};
use ui_api_tests::workload::{
    self, CPU, FROM, OFF_CPU, Obs, SECOND, TO, TRACES, Workload, buckets, folded, node_values,
};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/python/mcp_client.py");

/// A new token of `tenant` made with the real CLI.
fn create_token(server: &Server, tenant: &str) -> String {
    let out = Command::new(binary())
        .args(["tenant", "token", "create", "--tenant", tenant, "--name", "mcp"])
        .arg("--data-dir")
        .arg(server.data_path())
        .output()
        .expect("running stackhouse tenant token");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "token create failed: {stdout}");
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("token:"))
        .unwrap_or_else(|| panic!("token: in {stdout}"))
        .trim()
        .to_string()
}

async fn export(server: &Server, requests: Vec<ExportProfilesServiceRequest>, token: &str) {
    let mut client = ProfilesServiceClient::connect(server.grpc()).await.unwrap();
    for request in requests {
        let mut request = tonic::Request::new(request);
        let bearer = format!("Bearer {token}").parse().unwrap();
        request.metadata_mut().insert("authorization", bearer);
        let response = client.export(request).await.expect("export").into_inner();
        assert!(response.partial_success.is_none_or(|p| p.rejected_profiles == 0));
    }
}

/// Runs the SDK client with `config`; what it observed.
fn sdk(config: Value) -> Value {
    let check = Command::new("python3")
        .args(["-c", "import mcp.client.streamable_http"])
        .output()
        .expect("python3 is required for the MCP tests");
    assert!(
        check.status.success(),
        "the MCP Python SDK is missing: install it with python3 -m pip install --quiet mcp ({})",
        String::from_utf8_lossy(&check.stderr)
    );
    let out = Command::new("python3")
        .arg(SCRIPT)
        .arg(config.to_string())
        .output()
        .expect("running mcp_client.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "mcp_client.py failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("mcp_client.py output ({e}): {stdout}"))
}

fn range() -> Value {
    json!({ "from": FROM.to_string(), "to": TO.to_string() })
}

/// `base` with `extra`'s fields added.
fn args(base: Value, extra: Value) -> Value {
    let mut out = base;
    for (k, v) in extra.as_object().unwrap() {
        out[k] = v.clone();
    }
    out
}

fn call(tool: &str, arguments: Value) -> Value {
    json!({ "tool": tool, "arguments": arguments })
}

/// The calls of one tenant's session, in order; [`check_tenant`] reads their answers.
fn calls(trace: &str) -> Vec<Value> {
    let cpu = || args(range(), json!({ "profile_type": CPU }));
    vec![
        call("profile_types", range()),
        call("label_names", range()),
        call("label_values", args(range(), json!({ "name": "host.name" }))),
        call("flamegraph", args(cpu(), json!({ "max_lines": 12 }))),
        call("top_functions", args(cpu(), json!({ "limit": 5 }))),
        call(
            "diff",
            json!({
                "profile_type": CPU, "limit": 6,
                "baseline_selector": "{host.name=\"host-a\"}",
                "baseline_from": FROM.to_string(), "baseline_to": TO.to_string(),
                "comparison_selector": "{host.name=\"host-b\"}",
                "comparison_from": FROM.to_string(), "comparison_to": TO.to_string(),
            }),
        ),
        call(
            "timeseries_summary",
            args(cpu(), json!({ "step": "60", "group_by": "service.name" })),
        ),
        call("trace_flamegraph", args(cpu(), json!({ "trace_id": trace }))),
        // Bounds: the hard caps apply and are named.
        call("top_functions", args(cpu(), json!({ "limit": 100000 }))),
        call("flamegraph", args(cpu(), json!({ "max_lines": 100000 }))),
        // Frame rules as REST takes them.
        call(
            "flamegraph",
            args(cpu(), json!({ "focus": ["FOCUS"], "max_lines": 3 })),
        ),
        // Errors come back as tool errors naming the problem.
        call("flamegraph", args(cpu(), json!({ "selector": "{service.name=" }))),
        call(
            "top_functions",
            args(range(), json!({ "profile_type": "nope:x:y:z" })),
        ),
        call("top_functions", args(cpu(), json!({ "colour": "red" }))),
    ]
}

/// `(depth, name, total, self)` of each line of a flamegraph text, after the header.
fn tree_lines(text: &str) -> Vec<(usize, String, i64, i64)> {
    text.lines()
        .skip(1)
        .filter(|l| !l.starts_with('['))
        .map(|line| {
            let trimmed = line.trim_start();
            let depth = (line.len() - trimmed.len()) / 2;
            let rest = trimmed
                .strip_prefix("- ")
                .unwrap_or_else(|| panic!("line {line:?}"));
            let (name, values) = rest.rsplit_once(" [total ").unwrap();
            let (total, rest) = values.split_once(" = ").unwrap();
            let self_value = rest.split("self ").nth(1).unwrap().trim_end_matches(']');
            (
                depth,
                name.to_string(),
                total.parse().unwrap(),
                self_value.parse().unwrap(),
            )
        })
        .collect()
}

/// Checks a flamegraph answer: header total, every line's values against the tree of
/// `obs`, the number of lines, and heaviest-first selection at the top level.
fn check_flamegraph(answer: &Value, obs: &[&Obs], max_lines: usize, what: &str) {
    assert_eq!(answer["is_error"], false, "{what}: {}", answer["text"]);
    let text = answer["text"].as_str().unwrap();
    let total: i64 = obs.iter().map(|o| o.value).sum();
    let empty: i64 = obs.iter().filter(|o| o.frames.is_empty()).map(|o| o.value).sum();
    let expected = node_values(&folded(obs.iter().copied()), empty);
    assert!(
        text.starts_with(&format!("flamegraph of {CPU}: total {total} count;")),
        "{what}: {text}"
    );
    let lines = tree_lines(text);
    let nodes = expected.values().filter(|v| v.1 > 0).count() - 1;
    assert_eq!(lines.len(), max_lines.min(nodes), "{what}: {text}");
    assert_eq!(
        answer["structured"]["lines"].as_array().unwrap().len(),
        lines.len()
    );
    if nodes > lines.len() {
        assert!(
            text.contains(&format!("[{} smaller nodes not shown", nodes - lines.len())),
            "{text}"
        );
    }
    let mut path: Vec<String> = Vec::new();
    for (depth, name, total, self_value) in &lines {
        assert!(*depth <= path.len(), "{what}: a line without its parent: {text}");
        path.truncate(*depth);
        path.push(name.clone());
        assert_eq!(
            expected.get(&path),
            Some(&(*self_value, *total)),
            "{what}: {path:?}\n{text}"
        );
    }
    // The heaviest top-level path comes first.
    let heaviest = expected
        .iter()
        .filter(|(p, _)| p.len() == 1)
        .map(|(_, v)| v.1)
        .max()
        .unwrap();
    assert_eq!(lines[0].2, heaviest, "{what}: {text}");
}

/// Expected top rows: `(name, self, total)` by self, then total, then name.
fn expected_top(obs: &[&Obs]) -> Vec<(String, i64, i64)> {
    let mut rows: Vec<(String, i64, i64)> = workload::top(obs.iter().copied())
        .into_iter()
        .map(|(name, (s, t))| (name, s, t))
        .collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then(b.2.cmp(&a.2)).then(a.0.cmp(&b.0)));
    rows
}

fn pct(part: i64, whole: i64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

fn regex_escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            let special = "\\.+*?()|[]{}^$".contains(c);
            special.then_some('\\').into_iter().chain([c])
        })
        .collect()
}

fn strings(v: &Value) -> BTreeSet<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// Checks one tenant's session against its observations.
fn check_tenant(observed: &Value, obs: &[Obs], tenant: &str) {
    let what = |call: &str| format!("{tenant} {call}");
    assert!(observed.get("error").is_none(), "{tenant}: {observed}");
    let calls = observed["calls"].as_array().unwrap();
    let cpu: Vec<&Obs> = obs.iter().filter(|o| o.profile_type == CPU).collect();

    // profile_types, label_names, label_values.
    let types: BTreeSet<String> = obs.iter().map(|o| o.profile_type.clone()).collect();
    assert_eq!(
        strings(&calls[0]["structured"]["items"]),
        types,
        "{}",
        what("profile_types")
    );
    assert!(calls[0]["text"].as_str().unwrap().contains(CPU));
    let names = strings(&calls[1]["structured"]["items"]);
    for o in obs {
        for key in o.labels.keys().chain(o.sample_attrs.keys()) {
            assert!(names.contains(key), "{}: {key} in {names:?}", what("label_names"));
        }
    }
    let hosts: BTreeSet<String> = obs.iter().map(|o| o.labels["host.name"].clone()).collect();
    assert_eq!(
        strings(&calls[2]["structured"]["items"]),
        hosts,
        "{}",
        what("label_values")
    );

    // flamegraph: the heaviest 12 nodes, exact.
    check_flamegraph(&calls[3], &cpu, 12, &what("flamegraph"));

    // top_functions: the first five, exact, in order.
    let total: i64 = cpu.iter().map(|o| o.value).sum();
    let top = &calls[4];
    assert_eq!(top["is_error"], false, "{}", top["text"]);
    assert_eq!(top["structured"]["total"], total);
    let expected = expected_top(&cpu);
    let rows = named_pairs(&top["structured"]["functions"], ["self", "total"]);
    assert_eq!(
        rows,
        expected[..5.min(expected.len())],
        "{}",
        what("top_functions")
    );
    let text = top["text"].as_str().unwrap();
    for (rank, (name, s, _)) in rows.iter().enumerate() {
        assert!(
            text.contains(&format!("{}. {name} [self {s} = ", rank + 1)),
            "{text}"
        );
    }

    // diff: host-a against host-b, the functions whose self share moved most.
    let side = |host: &str| -> Vec<&Obs> {
        cpu.iter()
            .copied()
            .filter(|o| o.labels["host.name"] == host)
            .collect()
    };
    let (base, comp) = (side("host-a"), side("host-b"));
    let (bt, ct) = (
        workload::total(base.iter().copied()),
        workload::total(comp.iter().copied()),
    );
    let mut by_name: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for (name, (s, _)) in workload::top(base.iter().copied()) {
        by_name.entry(name).or_default().0 += s;
    }
    for (name, (s, _)) in workload::top(comp.iter().copied()) {
        by_name.entry(name).or_default().1 += s;
    }
    let mut expected: Vec<(String, i64, i64, f64)> = by_name
        .into_iter()
        .filter(|(_, (b, c))| *b != 0 || *c != 0)
        .map(|(n, (b, c))| (n, b, c, pct(c, ct) - pct(b, bt)))
        .collect();
    expected.sort_by(|a, b| b.3.abs().total_cmp(&a.3.abs()).then_with(|| a.0.cmp(&b.0)));
    let diff = &calls[5];
    assert_eq!(diff["is_error"], false, "{}", diff["text"]);
    assert_eq!(diff["structured"]["baseline_total"], bt);
    assert_eq!(diff["structured"]["comparison_total"], ct);
    assert_eq!(diff["structured"]["functions"], expected.len());
    let rows = named_pairs(&diff["structured"]["rows"], ["baseline_self", "comparison_self"]);
    let expected_rows: Vec<(String, i64, i64)> = expected
        .iter()
        .take(6)
        .map(|(n, b, c, _)| (n.clone(), *b, *c))
        .collect();
    assert_eq!(rows, expected_rows, "{}: {}", what("diff"), diff["text"]);
    assert!(
        diff["text"]
            .as_str()
            .unwrap()
            .contains(&format!("baseline total {bt} count, comparison total {ct}"))
    );

    // timeseries_summary: per service, total and min/max/mean of the minute buckets.
    let ts = &calls[6];
    assert_eq!(ts["is_error"], false, "{}", ts["text"]);
    let mut services: BTreeMap<String, Vec<&Obs>> = BTreeMap::new();
    for o in &cpu {
        services
            .entry(o.labels["service.name"].clone())
            .or_default()
            .push(o);
    }
    let series = ts["structured"]["series"].as_array().unwrap();
    assert_eq!(series.len(), services.len(), "{}", ts["text"]);
    for s in series {
        let service = s["group"]["service.name"].as_str().unwrap();
        let group = &services[service];
        let sums: Vec<f64> = buckets(group.iter().copied(), FROM, 60 * SECOND)
            .values()
            .map(|(sum, _)| *sum as f64)
            .filter(|v| *v != 0.0)
            .collect();
        assert_eq!(s["total"], workload::total(group.iter().copied()), "{service}");
        assert_eq!(s["buckets"], sums.len(), "{service}");
        assert_eq!(
            s["min"].as_f64().unwrap(),
            sums.iter().copied().fold(f64::INFINITY, f64::min)
        );
        assert_eq!(
            s["max"].as_f64().unwrap(),
            sums.iter().copied().fold(f64::NEG_INFINITY, f64::max)
        );
        let mean = sums.iter().sum::<f64>() / sums.len() as f64;
        assert!((s["mean"].as_f64().unwrap() - mean).abs() < 1e-6, "{service}");
        assert!(
            ts["text"]
                .as_str()
                .unwrap()
                .contains(&format!("service.name={service} [total {}", s["total"]))
        );
    }

    // trace_flamegraph: the samples of one trace.
    let trace: Vec<&Obs> = cpu
        .iter()
        .copied()
        .filter(|o| o.trace_id.as_deref() == Some(TRACES[0]))
        .collect();
    assert!(!trace.is_empty());
    check_flamegraph(&calls[7], &trace, 40, &what("trace_flamegraph"));

    // Caps.
    let capped = &calls[8];
    assert!(
        capped["text"]
            .as_str()
            .unwrap()
            .contains("(limit 100000 capped to 100)"),
        "{}",
        capped["text"]
    );
    assert!(capped["structured"]["functions"].as_array().unwrap().len() <= 100);
    let capped = &calls[9];
    assert!(
        capped["text"]
            .as_str()
            .unwrap()
            .contains("(max_lines 100000 capped to 200)"),
        "{}",
        capped["text"]
    );
    assert!(tree_lines(capped["text"].as_str().unwrap()).len() <= 200);

    // focus keeps only the stacks through the top function.
    let focused: Vec<&Obs> = cpu
        .iter()
        .copied()
        .filter(|o| o.frames.contains(&expected_top(&cpu)[0].0))
        .collect();
    check_flamegraph(&calls[10], &focused, 3, &what("focus"));

    // Errors.
    let bad_selector = &calls[11];
    assert_eq!(bad_selector["is_error"], true, "{bad_selector}");
    assert!(
        bad_selector["text"].as_str().unwrap().contains("selector"),
        "{bad_selector}"
    );
    let unknown_type = &calls[12];
    assert_eq!(unknown_type["is_error"], true, "{unknown_type}");
    let message = unknown_type["text"].as_str().unwrap();
    assert!(
        message.contains("nope:x:y:z") && message.contains(CPU),
        "{message}"
    );
    let unknown_arg = &calls[13];
    assert_eq!(unknown_arg["is_error"], true);
    assert!(
        unknown_arg["text"]
            .as_str()
            .unwrap()
            .contains("unknown argument \"colour\""),
        "{unknown_arg}"
    );
}

fn session(server: &Server, headers: Value, mode: &str, obs: &[Obs]) -> Value {
    let cpu: Vec<&Obs> = obs.iter().filter(|o| o.profile_type == CPU).collect();
    let focus = format!("function:{}", regex_escape(&expected_top(&cpu)[0].0));
    let mut calls = calls(TRACES[0]);
    calls[10]["arguments"]["focus"] = json!([focus]);
    sdk(json!({ "url": format!("{}/mcp", server.http()), "headers": headers, "mode": mode, "calls": calls }))
}

#[tokio::test]
async fn assistants_read_their_tenants_profiles_over_mcp() {
    let server = Server::start(Options {
        extra_args: ["--auth", "required", "--auth-cache-ttl", "0s"]
            .map(String::from)
            .to_vec(),
        ..Options::default()
    })
    .await;
    let token_a = create_token(&server, "team-a");
    let token_b = create_token(&server, "team-b");
    let work = Workload::new();
    export(&server, work.requests(), &token_a).await;
    // Tenant b holds only the first resource's profiles.
    let mut requests = work.requests();
    requests.truncate(1);
    export(&server, requests, &token_b).await;
    let first = workload::resources().remove(0);
    let obs_a = work.observations();
    let obs_b: Vec<Obs> = obs_a
        .iter()
        .filter(|o| work.profiles[o.profile].resource == first)
        .cloned()
        .collect();
    assert!(!obs_b.is_empty() && obs_b.len() < obs_a.len());
    assert!(obs_a.iter().any(|o| o.profile_type == OFF_CPU));

    // Tenant a over the initialize handshake: every tool, every answer checked.
    let bearer_a = json!({ "Authorization": format!("Bearer {token_a}") });
    let observed = session(&server, bearer_a.clone(), "legacy", &obs_a);
    assert_eq!(observed["protocol_version"], "2025-11-25", "{observed}");
    assert_eq!(observed["server_name"], "stackhouse");
    assert_eq!(observed["capabilities_tools"], true);
    let listed: BTreeSet<String> = observed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    let expected: BTreeSet<String> = [
        "profile_types",
        "label_names",
        "label_values",
        "flamegraph",
        "top_functions",
        "diff",
        "timeseries_summary",
        "trace_flamegraph",
    ]
    .map(String::from)
    .into();
    assert_eq!(listed, expected);
    for tool in observed["tools"].as_array().unwrap() {
        let required = strings(&tool["required"]);
        let properties = strings(&tool["properties"]);
        assert!(required.is_subset(&properties), "{tool}");
    }
    check_tenant(&observed, &obs_a, "team-a");

    // Tenant b sees only its own data, through the same tools.
    let bearer_b = json!({ "Authorization": format!("Bearer {token_b}") });
    let observed = session(&server, bearer_b, "legacy", &obs_b);
    check_tenant(&observed, &obs_b, "team-b");
    assert_eq!(
        strings(&observed["calls"][2]["structured"]["items"]),
        BTreeSet::from(["host-a".to_string()])
    );

    // The stateless revision: server/discover, then the same tools.
    let observed = session(&server, bearer_a.clone(), "modern", &obs_a);
    assert_eq!(observed["protocol_version"], "2026-07-28", "{observed}");
    assert!(strings(&observed["supported_versions"]).contains("2025-06-18"));
    check_tenant(&observed, &obs_a, "team-a (2026-07-28)");

    // Without a token the SDK client is refused.
    let refused =
        sdk(json!({ "url": format!("{}/mcp", server.http()), "headers": {}, "mode": "legacy", "calls": [] }));
    assert!(refused["error"].is_string(), "{refused}");
    assert_eq!(refused["http_statuses"], json!([401]), "{refused}");

    wire_details(&server, &token_a).await;
}

/// What the SDK hides: HTTP statuses, headers and JSON-RPC errors.
async fn wire_details(server: &Server, token: &str) {
    let url = format!("{}/mcp", server.http());
    let http = reqwest::Client::new();
    let post = |body: String, extra: &[(&str, &str)]| {
        let mut request = http
            .post(&url)
            .header("authorization", format!("Bearer {token}"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body);
        for (k, v) in extra {
            request = request.header(*k, *v);
        }
        request.send()
    };
    let init = |version: &str| {
        json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } })
        .to_string()
    };

    // Negotiation: the earlier revisions are answered as asked, unknown ones get the newest.
    for (asked, answered) in [
        ("2025-03-26", "2025-03-26"),
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        ("2024-01-01", "2025-11-25"),
    ] {
        let response = post(init(asked), &[]).await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "application/json");
        let session = response
            .headers()
            .get("mcp-session-id")
            .expect("a session id")
            .to_str()
            .unwrap()
            .to_string();
        assert!(session.len() >= 16);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["result"]["protocolVersion"], answered, "{body}");
        assert_eq!(body["id"], 1);

        let note = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }).to_string();
        let headers = [
            ("mcp-session-id", session.as_str()),
            ("mcp-protocol-version", answered),
        ];
        assert_eq!(post(note, &headers).await.unwrap().status(), 202);
        let ping = json!({ "jsonrpc": "2.0", "id": "p", "method": "ping" }).to_string();
        let body: Value = post(ping, &headers).await.unwrap().json().await.unwrap();
        assert_eq!(body, json!({ "jsonrpc": "2.0", "id": "p", "result": {} }));
    }

    // JSON-RPC errors.
    let response = post("{not json".into(), &[]).await.unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32700, "{body}");
    let rpc = |method: &str, params: Value| {
        json!({ "jsonrpc": "2.0", "id": 9, "method": method, "params": params }).to_string()
    };
    let body: Value = post(rpc("resources/list", json!({})), &[])
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["error"]["code"], -32601, "{body}");
    let body: Value = post(rpc("tools/call", json!({ "name": "no_such_tool" })), &[])
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["error"]["code"], -32602, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no_such_tool")
    );
    let body: Value = post(rpc("tools/call", json!({})), &[])
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["error"]["code"], -32602, "{body}");

    // An unsupported MCP-Protocol-Version header is refused.
    let response = post(
        rpc("tools/list", json!({})),
        &[("mcp-protocol-version", "1999-01-01")],
    )
    .await
    .unwrap();
    assert_eq!(response.status(), 400);

    // No server-initiated stream.
    let response = http
        .get(&url)
        .header("authorization", format!("Bearer {token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 405);

    // Authentication and tenants as on REST: no token 401, another tenant's header 403.
    let response = http
        .post(&url)
        .header("content-type", "application/json")
        .body(init("2025-06-18"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    let response = post(rpc("tools/list", json!({})), &[("x-scope-orgid", "team-b")])
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
}

/// `(name, row[a], row[b])` of each row of a structured answer.
fn named_pairs(rows: &Value, [a, b]: [&str; 2]) -> Vec<(String, i64, i64)> {
    rows.as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let int = |k: &str| r[k].as_i64().unwrap_or_else(|| panic!("{k} of {r}"));
            (r["name"].as_str().unwrap().to_string(), int(a), int(b))
        })
        .collect()
}
