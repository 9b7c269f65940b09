//! `serve --config FILE` on the real binary: the file sets flags, the environment
//! overrides the file, the command line overrides both; a bad file stops the server with
//! a message naming the key. Which value won is read back from the limit a query reports.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::process::Command;

use ui_api_tests::server::{Options, Server, binary};

const PT: &str = "profile_type=samples:count:cpu:nanoseconds";

/// The 422 message of an over-limit query.
async fn refusal(server: &Server, query: &str) -> String {
    let response = ui_api_tests::http_client()
        .get(format!("{}{query}", server.http()))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 422, "{query}");
    response.json::<serde_json::Value>().await.unwrap()["error"]
        .as_str()
        .unwrap()
        .to_string()
}

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn file_under_environment_under_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("stackhouse.yaml");
    std::fs::write(
        &file,
        "query-max-nodes: 10\nquery-max-events: 5\nlog-format: json\n",
    )
    .unwrap();
    let config = vec!["--config".to_string(), file.display().to_string()];

    let server = Server::start(Options {
        extra_args: config.clone(),
        env: env(&[("STACKHOUSE_QUERY_MAX_EVENTS", "6")]),
        ..Options::default()
    })
    .await;
    let nodes = refusal(&server, &format!("/api/v1/flamegraph?{PT}&max_nodes=11")).await;
    assert!(
        nodes.contains("max_nodes 11 is more than 10 allowed"),
        "the file's value: {nodes}"
    );
    let events = refusal(&server, &format!("/api/v1/events?{PT}&limit=7")).await;
    assert!(
        events.contains("limit 7 is more than 6 allowed"),
        "the environment's value: {events}"
    );

    let mut args = config;
    args.extend(["--query-max-nodes".to_string(), "30".to_string()]);
    let server = Server::start(Options {
        extra_args: args,
        env: env(&[("STACKHOUSE_QUERY_MAX_NODES", "20")]),
        ..Options::default()
    })
    .await;
    let nodes = refusal(&server, &format!("/api/v1/flamegraph?{PT}&max_nodes=31")).await;
    assert!(
        nodes.contains("max_nodes 31 is more than 30 allowed"),
        "the flag's value: {nodes}"
    );
}

#[test]
fn a_bad_file_stops_the_server_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.yaml");
    std::fs::write(&file, "http-adress: 127.0.0.1:1\n").unwrap();
    let out = Command::new(binary())
        .args(["serve", "--config"])
        .arg(&file)
        .arg("--data-dir")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unknown key \"http-adress\""), "{stderr}");

    let example = Command::new(binary())
        .args(["config", "example"])
        .output()
        .unwrap();
    assert!(example.status.success());
    let text = String::from_utf8(example.stdout).unwrap();
    assert!(text.lines().any(|l| l == "http-addr: '0.0.0.0:4040'"), "{text}");
}
