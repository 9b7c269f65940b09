//! Every shell example in README.md and docs/*.md that talks to a server works as pasted.
//!
//! The examples are read from the markdown itself: each command of a ```sh, ```bash,
//! ```shell or ```console block (a `\` continues it on the next line; in console blocks
//! only `$ ` lines are commands), and each inline code span that starts with `curl `.
//!
//! Which run (the rule, by the command's first words):
//! - `curl …` and `stackhouse import …` / `stackhouse debuginfo upload …` talk to the
//!   server: they run, and they are what the minimum count counts;
//! - `printf …` and `echo …` write the local files such examples send: they run too;
//! - everything else is skipped, named in the printed list: building and starting the
//!   server (`cargo`, `.ci/run`), images, Helm, fuzzing, and `stackhouse tenant token …`,
//!   which writes the catalog rather than calling the server.
//!
//! Each runs with `bash -e -o pipefail -c` in one scratch directory shared by all (so a
//! file written by one example is there for the next), with the binary on `PATH`, against
//! a live server holding a generated workload placed in the last minutes. Addresses are
//! rewritten to the test server: `localhost`, `127.0.0.1`, `0.0.0.0` and `<host>`-style
//! placeholders with port 4040 (HTTP) or 4317 (gRPC). Any other `<placeholder>` left in a
//! command that runs fails the test, as does a command that exits non-zero; `curl` is
//! wrapped to add `--fail-with-body --show-error`, so a 4xx/5xx answer fails its command
//! even under `-s`, and to report the URL and status it got. Query answers are then checked
//! against the workload: listed profile types, folded flamegraphs path by path, totals of
//! top lists and time series, and the stored-profiles counter of `/metrics`.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use serde_json::Value;
use ui_api_tests::ingest_client::{ImportSummary, parse_summary};
use ui_api_tests::server::{Options, Server, binary};
use ui_api_tests::workload::{self, Obs, SECOND, T0, Workload};
use ui_api_tests::workspace_dir;

/// Commands that talk to a server in README.md and docs/ when this test was written: two
/// quickstart queries, an import, the metrics scrape, a top list and a time series. Fewer
/// means the parser lost some.
const MIN_SERVER_EXAMPLES: usize = 6;

#[derive(Debug)]
struct Example {
    file: String,
    line: usize,
    command: String,
}

impl std::fmt::Display for Example {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.command)
    }
}

enum Rule {
    /// Talks to the server.
    Server,
    /// Writes what a later example sends.
    Local,
    Skip,
}

fn rule(command: &str) -> Rule {
    let words: Vec<&str> = command.split_whitespace().take(3).collect();
    match words.as_slice() {
        ["curl", ..] | ["stackhouse", "import", ..] | ["stackhouse", "debuginfo", "upload", ..] => {
            Rule::Server
        }
        ["printf" | "echo", ..] => Rule::Local,
        _ => Rule::Skip,
    }
}

/// The documents whose examples a reader pastes.
fn documents() -> Vec<String> {
    let root = workspace_dir();
    let mut docs: Vec<String> = std::fs::read_dir(root.join("docs"))
        .expect("reading docs/")
        .map(|e| e.expect("a docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .map(|p| format!("docs/{}", p.file_name().unwrap().to_string_lossy()))
        .collect();
    docs.sort();
    docs.insert(0, "README.md".into());
    docs.push("deploy/helm/stackhouse/README.md".into());
    docs
}

/// The shell commands of one markdown text, in order, with the line each starts on.
fn shell_examples(file: &str, text: &str) -> Vec<Example> {
    let inline = regex::Regex::new(r"`(curl [^`]+)`").unwrap();
    let mut out = Vec::new();
    let mut fence: Option<(String, String)> = None; // (marker, info)
    let mut pending: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let number = i + 1;
        let trimmed = line.trim_start();
        let marker: String = trimmed.chars().take_while(|&c| c == '`' || c == '~').collect();
        if marker.len() >= 3 {
            match &fence {
                None => {
                    let info = trimmed[marker.len()..].split_whitespace().next().unwrap_or("");
                    fence = Some((marker, info.to_lowercase()));
                    continue;
                }
                Some((open, _)) if trimmed.starts_with(open.as_str()) => {
                    assert!(
                        pending.is_none(),
                        "{file}:{number}: a block ends inside a continued command"
                    );
                    fence = None;
                    continue;
                }
                Some(_) => {}
            }
        }
        let Some((_, info)) = &fence else {
            for m in inline.captures_iter(line) {
                out.push(Example {
                    file: file.into(),
                    line: number,
                    command: m[1].to_string(),
                });
            }
            continue;
        };
        let console = info == "console";
        if !matches!(info.as_str(), "sh" | "bash" | "shell" | "console") {
            continue;
        }
        let entry = match pending.take() {
            Some((start, mut so_far)) => {
                so_far.push('\n');
                so_far.push_str(line);
                (start, so_far)
            }
            None => {
                let command = if console {
                    match trimmed.strip_prefix("$ ") {
                        Some(c) => c,
                        None => continue, // output
                    }
                } else {
                    trimmed
                };
                if command.is_empty() || command.starts_with('#') {
                    continue;
                }
                (number, command.to_string())
            }
        };
        if entry.1.ends_with('\\') {
            pending = Some(entry);
        } else {
            out.push(Example {
                file: file.into(),
                line: entry.0,
                command: entry.1,
            });
        }
    }
    assert!(fence.is_none(), "{file}: a code block is not closed");
    out
}

/// `command` aimed at the test server.
fn retarget(command: &str, server: &Server) -> String {
    let host = r"(?:localhost|127\.0\.0\.1|0\.0\.0\.0|<[A-Za-z_-]+>)";
    let http = regex::Regex::new(&format!(r"{host}:4040\b")).unwrap();
    let grpc = regex::Regex::new(&format!(r"{host}:4317\b")).unwrap();
    let command = http.replace_all(command, format!("127.0.0.1:{}", server.http_port));
    grpc.replace_all(&command, format!("127.0.0.1:{}", server.grpc_port))
        .into_owned()
}

/// Every curl fails on a 4xx/5xx answer and reports on stderr what it asked and got.
const PRELUDE: &str = r#"curl() { command curl --fail-with-body --show-error --write-out '%{stderr}doc-example-sent %{http_code} %{url_effective}\n' "$@"; }"#;

struct Run {
    ok: bool,
    stdout: String,
    stderr: String,
    /// `(status, url)` of each HTTP request curl made.
    sent: Vec<(u16, String)>,
}

fn run(command: &str, cwd: &Path, server: &Server) -> Run {
    let bin_dir = binary().parent().expect("the binary's directory").to_path_buf();
    let path = std::env::join_paths(std::iter::once(bin_dir).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();
    let out = Command::new("bash")
        .args(["-e", "-o", "pipefail", "-c"])
        .arg(format!("{PRELUDE}\n{command}"))
        .current_dir(cwd)
        .env("PATH", path)
        // `stackhouse import`'s default URL (http://127.0.0.1:4040), moved like the others.
        .env("STACKHOUSE_URL", server.http())
        .output()
        .expect("bash is needed to run the documentation's shell examples");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let sent = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("doc-example-sent "))
        .map(|l| {
            let (status, url) = l.split_once(' ').expect("status and URL");
            (status.parse().expect("an HTTP status"), url.to_string())
        })
        .collect();
    Run {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr,
        sent,
    }
}

/// The equality matchers of a selector; other matchers are refused (no expected value).
fn matchers(selector: &str) -> Vec<(String, String)> {
    let inner = selector.trim().trim_start_matches('{').trim_end_matches('}');
    let one = regex::Regex::new(r#"^\s*([A-Za-z_][A-Za-z0-9_.]*)\s*=\s*"([^"]*)"\s*$"#).unwrap();
    inner
        .split(',')
        .filter(|m| !m.trim().is_empty())
        .map(|m| {
            let c = one.captures(m).unwrap_or_else(|| {
                panic!("matcher {m:?}: this test computes expected values for key=\"value\" matchers only")
            });
            (c[1].to_string(), c[2].to_string())
        })
        .collect()
}

/// What the workload holds for the query `url` asks: its profile type and selector.
fn selected<'a>(obs: &'a [Obs], url: &reqwest::Url) -> Vec<&'a Obs> {
    let param = |name: &str| {
        url.query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    };
    let profile_type = param("profile_type").expect("a query names its profile type");
    let matchers = matchers(&param("selector").unwrap_or_default());
    obs.iter()
        .filter(|o| o.profile_type == profile_type)
        .filter(|o| matchers.iter().all(|(k, v)| o.attr(k).unwrap_or("") == v))
        .collect()
}

fn json(stdout: &str) -> Result<Value, String> {
    serde_json::from_str(stdout).map_err(|e| format!("not JSON ({e}): {stdout}"))
}

/// Checks an example's answer against the workload; `Err` says how it differs.
fn check_answer(run: &Run, workload: &[Obs], profiles: usize) -> Result<String, String> {
    if run.stdout.trim().is_empty() {
        return Err("an empty answer".into());
    }
    if let Some(summary) = parse_summary(&run.stdout) {
        return match summary {
            ImportSummary {
                files: 1..,
                profiles: 1..,
                samples: 1..,
                rejected: 0,
                ..
            } => Ok(format!("{summary:?}")),
            _ => Err(format!(
                "imported nothing, or something was rejected: {summary:?}"
            )),
        };
    }
    let [(_, url)] = run.sent.as_slice() else {
        return Ok("answered".into());
    };
    let url = reqwest::Url::parse(url).map_err(|e| format!("{url}: {e}"))?;
    let format = url
        .query_pairs()
        .find(|(k, _)| k == "format")
        .map(|(_, v)| v.into_owned());
    match url.path() {
        "/api/v1/profile-types" => {
            let listed: BTreeSet<String> = json(&run.stdout)?["profile_types"]
                .as_array()
                .ok_or("no profile_types")?
                .iter()
                .map(|t| t["id"].as_str().unwrap_or_default().to_string())
                .collect();
            let sent: BTreeSet<String> = workload.iter().map(|o| o.profile_type.clone()).collect();
            // Superset: examples that ran before may have imported more.
            if sent.is_subset(&listed) {
                Ok(format!("lists the workload's types {sent:?}"))
            } else {
                Err(format!("lists {listed:?}, the workload has {sent:?}"))
            }
        }
        "/api/v1/flamegraph" if format.as_deref() == Some("folded") => {
            let expected = workload::folded(selected(workload, &url));
            let got: BTreeMap<String, i64> = run
                .stdout
                .lines()
                .filter(|l| !l.is_empty())
                .map(|l| {
                    let (path, value) = l.rsplit_once(' ').ok_or(format!("bad folded line {l:?}"))?;
                    Ok((
                        path.to_string(),
                        value.parse::<i64>().map_err(|e| format!("{l:?}: {e}"))?,
                    ))
                })
                .collect::<Result<_, String>>()?;
            if expected.is_empty() {
                return Err("the workload has nothing this query selects: a test bug".into());
            }
            let sum: i64 = got.values().sum();
            if got == expected {
                Ok(format!("{} paths summing to {sum}, as sent", got.len()))
            } else {
                Err(format!("folded {got:?}, sent {expected:?}"))
            }
        }
        path @ ("/api/v1/flamegraph" | "/api/v1/top" | "/api/v1/timeseries") => {
            let answer = json(&run.stdout)?;
            let got = if path == "/api/v1/timeseries" {
                answer["series"]
                    .as_array()
                    .ok_or("no series")?
                    .iter()
                    .map(|s| s["total"].as_i64().unwrap_or(0))
                    .sum()
            } else {
                answer["total"].as_i64().ok_or("no total")?
            };
            let expected = workload::total(selected(workload, &url));
            if expected == 0 {
                Err("the workload has nothing this query selects: a test bug".into())
            } else if got == expected {
                Ok(format!("total {got}, as sent"))
            } else {
                Err(format!("total {got}, sent {expected}"))
            }
        }
        "/metrics" => {
            let line = r#"stackhouse_ingest_profiles_total{protocol="otlp_grpc",outcome="stored"} "#;
            match run.stdout.lines().find_map(|l| l.strip_prefix(line)) {
                Some(v) if v.trim().parse::<f64>() == Ok(profiles as f64) => {
                    Ok(format!("{profiles} profiles stored over OTLP gRPC, as sent"))
                }
                Some(v) => Err(format!("{v} profiles stored over OTLP gRPC, sent {profiles}")),
                None => Ok("answered".into()),
            }
        }
        _ => Ok("answered".into()),
    }
}

fn now_nanos() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64
}

#[tokio::test(flavor = "multi_thread")]
async fn documented_shell_examples_work_as_pasted() {
    let curl = Command::new("curl").arg("--help").arg("all").output();
    assert!(
        curl.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("--fail-with-body")),
        "the documentation's examples need curl 7.76 or later (--fail-with-body): apt-get install curl"
    );
    let mut examples = Vec::new();
    for doc in documents() {
        let text =
            std::fs::read_to_string(workspace_dir().join(&doc)).unwrap_or_else(|e| panic!("{doc}: {e}"));
        examples.extend(shell_examples(&doc, &text));
    }

    // The generated workload (services checkout and payments, CPU and off-CPU), moved to
    // start 10 minutes ago: it spans about 5 minutes, so `now-15m` and `now-1h` cover it.
    let server = Server::start(Options::default()).await;
    let shift = (now_nanos() - 10 * 60 * SECOND) - T0;
    let workload = Workload::new().shifted(shift);
    let profiles = workload.profiles.len();
    let obs = workload.export_grpc(server.grpc()).await;
    let newest = obs.iter().map(|o| o.time).max().unwrap();
    assert!(
        newest < now_nanos() - 60 * SECOND,
        "the workload ends before the examples' now"
    );

    let cwd = tempfile::tempdir().unwrap();
    let placeholder = regex::Regex::new(r"<[A-Za-z_-]+>").unwrap();
    let (mut ran, mut skipped, mut failures) = (Vec::new(), Vec::new(), Vec::new());
    let mut server_examples = 0;
    for example in &examples {
        match rule(&example.command) {
            Rule::Skip => {
                skipped.push(example);
                continue;
            }
            Rule::Server => server_examples += 1,
            Rule::Local => {}
        }
        let command = retarget(&example.command, &server);
        if let Some(p) = placeholder.find(&command) {
            failures.push(format!(
                "{example}\n  placeholder {} is left: write a runnable value, or teach this test to fill it",
                p.as_str()
            ));
            continue;
        }
        let run = run(&command, cwd.path(), &server);
        if !run.ok {
            failures.push(format!(
                "{example}\n  exited non-zero; requests {:?}\n  stdout: {}\n  stderr: {}",
                run.sent, run.stdout, run.stderr
            ));
            continue;
        }
        if let Some((status, url)) = run.sent.iter().find(|(s, _)| *s >= 400) {
            failures.push(format!("{example}\n  {url} answered {status}"));
            continue;
        }
        match rule(&example.command) {
            Rule::Server => match check_answer(&run, &obs, profiles) {
                Ok(what) => ran.push(format!("{example}\n    -> {what}")),
                Err(why) => failures.push(format!("{example}\n  {why}")),
            },
            _ => ran.push(format!("{example}\n    -> (local)")),
        }
    }

    println!("ran {} examples:", ran.len());
    for r in &ran {
        println!("  {r}");
    }
    println!(
        "skipped {} (not a call to a server, see the rule above):",
        skipped.len()
    );
    for s in &skipped {
        println!("  {s}");
    }
    assert!(
        failures.is_empty(),
        "{} documented examples fail:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        server_examples >= MIN_SERVER_EXAMPLES,
        "found {server_examples} examples that call the server, expected at least {MIN_SERVER_EXAMPLES}: \
         is the markdown parser missing some?"
    );
}
