//! Real processes profiled by the real Pyroscope SDKs (PyPI `pyroscope-io` over Connect
//! Push, npm `@pyroscope/nodejs` over `/ingest`) push to a running Stackhouse; their
//! service names, tags and busy functions come back through the query API.
//!
//! An SDK's values cannot be predicted exactly, so the checks are structural and derived
//! from the apps' own source (`ui-api-tests/sdk/`): the service names and tags they
//! configure, the call chain of the busy function, the profile types the SDKs document
//! (see `sdk/README.md`), and totals bounded by how long the apps ran.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use ui_api_tests::client::Api;
use ui_api_tests::http_query::{Http, Params};
use ui_api_tests::server::{Options, Server};
use ui_api_tests::workspace_dir;

/// The version `.ci/run` installs; the captured facts in `sdk/README.md` are for it.
const PYROSCOPE_IO: &str = "1.4.0";
const RUN_SECS: u64 = 8;

const PY_SERVICE: &str = "py-sdk-app";
const NODE_SERVICE: &str = "node-sdk-app";
/// pyroscope-io samples on-CPU time as a pprof `cpu/nanoseconds` profile.
const PY_CPU: &str = "cpu:nanoseconds:cpu:nanoseconds";
/// @pyroscope/nodejs sends a wall profile with two sample types, and a heap profile.
const NODE_WALL: &str = "wall:nanoseconds:wall:nanoseconds";
const NODE_SAMPLES: &str = "samples:count:wall:nanoseconds";
const NODE_HEAP: &str = "inuse_space:bytes:inuse_space:bytes";

fn sdk_dir() -> PathBuf {
    workspace_dir().join("ui-api-tests/sdk")
}

fn run_checked(cmd: &mut Command, what: &str, hint: &str) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run ({e}); {hint}"));
    assert!(
        out.status.success(),
        "{what} failed ({}); {hint}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// python3 with pyroscope-io, node with the locked npm packages; missing tools fail the
/// test with what to install, never skip it.
fn preflight() {
    let hint = format!("install it with: python3 -m pip install pyroscope-io=={PYROSCOPE_IO}");
    let out = run_checked(
        Command::new("python3").args([
            "-c",
            "import importlib.metadata as m, pyroscope; print(m.version('pyroscope-io'))",
        ]),
        "python3 importing pyroscope-io",
        &hint,
    );
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(
        version, PYROSCOPE_IO,
        "pyroscope-io {version} is installed; {hint}"
    );

    let dir = sdk_dir();
    if !dir.join("node_modules/@pyroscope/nodejs/package.json").exists() {
        run_checked(
            Command::new("npm")
                .args(["ci", "--no-audit", "--no-fund"])
                .current_dir(&dir),
            "npm ci in ui-api-tests/sdk",
            "node and npm are needed for the @pyroscope/nodejs test",
        );
    }
    run_checked(
        Command::new("node")
            .args(["-e", "require('@pyroscope/nodejs')"])
            .current_dir(&dir),
        "node loading @pyroscope/nodejs",
        "run `npm ci` in ui-api-tests/sdk",
    );
}

/// Runs both apps at once against `url`; returns their outputs.
fn run_apps(url: &str) -> (Output, Output) {
    let secs = RUN_SECS.to_string();
    let spawn = |program: &str, script: &str| {
        Command::new(program)
            .args([script, url, &secs])
            .current_dir(sdk_dir())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {program} {script}: {e}"))
    };
    let py = spawn("python3", "app.py");
    let node = spawn("node", "app.js");
    let (py, node) = (py.wait_with_output().unwrap(), node.wait_with_output().unwrap());
    for (what, out) in [("app.py", &py), ("app.js", &node)] {
        assert!(
            out.status.success(),
            "{what} failed ({}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    (py, node)
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    v[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key:?} array in {v}"))
        .iter()
        .map(|s| {
            s.as_str()
                .unwrap_or_else(|| panic!("not a string: {s}"))
                .to_string()
        })
        .collect()
}

fn range(from: i64, to: i64) -> Params {
    vec![("from".into(), from.to_string()), ("to".into(), to.to_string())]
}

/// The 1-based line of `needle` in an app's source: the Node SDK names frames
/// `<file>:<function>:<line of the function>`.
fn line_of(script: &str, needle: &str) -> usize {
    let text = std::fs::read_to_string(sdk_dir().join(script)).unwrap();
    text.lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("{needle:?} not in {script}"))
        + 1
}

/// The folded flamegraph's total and the value of the paths ending in `suffix`.
fn share(folded: &BTreeMap<String, i64>, suffix: &str) -> (i64, i64) {
    let total = folded.values().sum();
    let busy = folded
        .iter()
        .filter(|(path, _)| path.ends_with(suffix))
        .map(|(_, v)| v)
        .sum();
    (total, busy)
}

#[tokio::test(flavor = "multi_thread")]
async fn python_and_node_sdks_show_up_with_their_tags() {
    preflight();
    let server = Server::start(Options::default()).await;
    let api = Api::new(server.http());
    let http = Http::new(server.http());

    let started = ui_now();
    let (py_out, node_out) = run_apps(&server.http());
    let ended = ui_now();
    let apps_output = format!(
        "app.py stderr:\n{}\napp.js stderr:\n{}",
        String::from_utf8_lossy(&py_out.stderr),
        String::from_utf8_lossy(&node_out.stderr)
    );
    // Profiles are stamped with the SDKs' own times, which lie within the run; a second
    // of slack covers clock rounding (Node's /ingest `from` is whole seconds).
    let (from, to) = (started - 1_000_000_000, ended + 1_000_000_000);

    // Both services become visible once the server has flushed what it received.
    let deadline = Instant::now() + Duration::from_secs(30);
    let services = loop {
        let v = http
            .json("/api/v1/labels/service.name/values", &range(from, to))
            .await;
        let values = strings(&v, "values");
        if values.iter().any(|s| s == PY_SERVICE) && values.iter().any(|s| s == NODE_SERVICE) {
            break values;
        }
        if Instant::now() > deadline {
            let types = http.json("/api/v1/profile-types", &range(from, to)).await;
            panic!(
                "services {PY_SERVICE} and {NODE_SERVICE} not found within 30 s; service.name \
                 values: {values:?}; profile types: {types}\n{apps_output}"
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert!(
        services.iter().all(|s| s == PY_SERVICE || s == NODE_SERVICE),
        "{services:?}"
    );

    // The tags are labels with the values the apps set.
    let names = strings(&http.json("/api/v1/labels", &range(from, to)).await, "names");
    for key in ["service.name", "env", "region"] {
        assert!(
            names.iter().any(|n| n == key),
            "label {key} missing from {names:?}"
        );
    }
    for (key, value) in [("env", "test"), ("region", "eu")] {
        let v = http
            .json(&format!("/api/v1/labels/{key}/values"), &range(from, to))
            .await;
        assert_eq!(strings(&v, "values"), vec![value.to_string()], "{key} values");
    }

    let types: Vec<String> = http.json("/api/v1/profile-types", &range(from, to)).await["profile_types"]
        .as_array()
        .expect("profile_types array")
        .iter()
        .map(|t| t["id"].as_str().expect("profile type id").to_string())
        .collect();
    for t in [PY_CPU, NODE_WALL, NODE_SAMPLES, NODE_HEAP] {
        assert!(
            types.iter().any(|s| s == t),
            "profile type {t} missing from {types:?}"
        );
    }

    let run_nanos = ended - started;

    // Python: on-CPU time of one busy thread, nearly all of it in the busy loop, whose
    // callers are the script's main() and the module body.
    let py = api
        .folded(
            PY_CPU,
            r#"{service.name="py-sdk-app",env="test",region="eu"}"#,
            from,
            to,
        )
        .await;
    let (total, busy) = share(&py, "<module>;main;stackhouse_busy_loop");
    assert!(
        total > run_nanos / 4 && total < run_nanos * 2,
        "python cpu total {total} ns for a {run_nanos} ns run: {py:?}"
    );
    assert!(
        busy * 2 > total,
        "stackhouse_busy_loop has {busy} of {total} ns: {py:?}"
    );

    // Node: wall time of the main thread, mostly in the busy loop called from main(). The
    // SDK names frames `./<file>:<function>:<line>` relative to the app's cwd.
    let busy_frame = format!(
        "./app.js:main:{};./app.js:stackhouseBusyLoop:{}",
        line_of("app.js", "async function main("),
        line_of("app.js", "function stackhouseBusyLoop(")
    );
    let node = api
        .folded(
            NODE_WALL,
            r#"{service.name="node-sdk-app",env="test",region="eu"}"#,
            from,
            to,
        )
        .await;
    let (total, busy) = share(&node, &busy_frame);
    assert!(
        total > run_nanos / 2 && total < run_nanos * 2,
        "node wall total {total} ns for a {run_nanos} ns run: {node:?}"
    );
    assert!(
        busy * 2 > total,
        "{busy_frame} has {busy} of {total} ns: {node:?}"
    );
    // About one sample per 10 ms of wall time.
    let samples = api
        .folded(NODE_SAMPLES, r#"{service.name="node-sdk-app"}"#, from, to)
        .await;
    let count: i64 = samples.values().sum();
    let expected = run_nanos / 10_000_000;
    assert!(
        count > expected / 3 && count < expected * 2,
        "{count} wall samples for a {run_nanos} ns run"
    );
    let heap = api
        .folded(NODE_HEAP, r#"{service.name="node-sdk-app"}"#, from, to)
        .await;
    assert!(heap.values().sum::<i64>() > 0, "node heap profile is empty");

    // Selectors on the tags select: a wrong tag value, or another app's name, selects nothing.
    for (t, selector) in [
        (PY_CPU, r#"{service.name="py-sdk-app",env="prod"}"#),
        (PY_CPU, r#"{region="us"}"#),
        (PY_CPU, r#"{service.name="node-sdk-app"}"#),
        (NODE_WALL, r#"{service.name="node-sdk-app",region="us"}"#),
        (NODE_WALL, r#"{service.name="py-sdk-app"}"#),
    ] {
        let folded = api.folded(t, selector, from, to).await;
        assert!(folded.is_empty(), "{t} {selector} selects {folded:?}");
    }
    for (t, selector, expected) in [
        (PY_CPU, r#"{env="test"}"#, &py),
        (PY_CPU, r#"{region=~"e.*"}"#, &py),
        (NODE_WALL, r#"{env="test",region="eu"}"#, &node),
    ] {
        assert_eq!(
            &api.folded(t, selector, from, to).await,
            expected,
            "{t} {selector}"
        );
    }
}

fn ui_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64
}
