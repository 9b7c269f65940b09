//! Frame rules and granularity (`focus`, `drop`, `hide`, `preset`, `aggregate_by`) on every
//! tree endpoint and format, against the real binary. The workload is described here
//! frame by frame (function, system name, file, line, binary, address), sent over OTLP
//! with the independent `opentelemetry-proto` client, and every expected tree, table and
//! total is computed from that description by the rules as docs/queries.md states them.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::collections::BTreeMap;
use std::sync::OnceLock;

use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use opentelemetry_proto::tonic::collector::profiles::v1development::profiles_service_client::ProfilesServiceClient;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::profiles::v1development::{
    Function, Line, Location, Mapping, Profile, ProfilesDictionary, ResourceProfiles, Sample, ScopeProfiles,
    Stack, ValueType,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use regex::Regex;
use ui_api_tests::http_query::{Http, Params, params, with};
use ui_api_tests::pprof_reader;
use ui_api_tests::server::{Options, Server};
use ui_api_tests::trees::{
    decode_flamebearer, flamebearer_folded, json_diff_values, json_folded, parse_folded, parse_folded_diff,
};

const CPU: &str = "samples:count:cpu:nanoseconds";
const SECOND: i64 = 1_000_000_000;
/// Minute-aligned start of the data.
const T0: i64 = 1_700_000_040 * SECOND;
/// The baseline half of the data is `[T0, MID)`, the comparison half `[MID, END)`.
const MID: i64 = T0 + 60 * SECOND;
const END: i64 = T0 + 120 * SECOND;
const UNKNOWN: &str = "<unknown>";
/// The one profile every sample belongs to.
const PROFILE_ID: &str = "6f1c0de5a1b2c3d4e5f60718293a4b5c";

/// One frame as sent: a function's line in a location.
#[derive(Clone, Copy, Debug)]
struct Fr {
    /// As sent in the function's name; a mangled one reads as `reads_as`.
    name: &'static str,
    reads_as: &'static str,
    file: &'static str,
    line: i64,
}

/// One location: frames caller first (several: inlined), or none (an unsymbolized
/// address).
#[derive(Clone, Debug)]
struct Loc {
    binary: &'static str,
    address: u64,
    frames: Vec<Fr>,
}

const fn fr(name: &'static str, file: &'static str, line: i64) -> Fr {
    Fr {
        name,
        reads_as: name,
        file,
        line,
    }
}

const APP: &str = "/usr/bin/app";
const LIBC: &str = "/lib/x86_64-linux-gnu/libc.so.6";
const KERNEL: &str = "vmlinux";
const PYTHON: &str = "/usr/lib/libpython3.11.so.1.0";
/// JIT-compiled and interpreted code: a mapping without a file name.
const JIT: &str = "";

fn loc(binary: &'static str, address: u64, frames: &[Fr]) -> Loc {
    Loc {
        binary,
        address,
        frames: frames.to_vec(),
    }
}

/// The stacks of the workload (caller first) with their values in the baseline and the
/// comparison half.
fn stacks() -> Vec<(Vec<Loc>, i64, i64)> {
    let start = loc(LIBC, 0x29d90, &[fr("__libc_start_main", "", 0)]);
    let main = loc(APP, 0x1000, &[fr("main", "src/main.rs", 10)]);
    let run = loc(
        APP,
        0x1100,
        &[Fr {
            name: "_ZN3app6server3run17h0123456789abcdefE",
            reads_as: "app::server::run",
            file: "src/server.rs",
            line: 31,
        }],
    );
    let serve_20 = loc(APP, 0x1200, &[fr("app::handler::serve", "src/handler.rs", 20)]);
    let serve_35 = loc(APP, 0x1235, &[fr("app::handler::serve", "src/handler.rs", 35)]);
    let parse = loc(APP, 0x1300, &[fr("app::parse", "src/parse.rs", 7)]);
    let inlined = loc(
        APP,
        0x1340,
        &[
            fr("app::handler::serve", "src/handler.rs", 40),
            fr("app::parse::helper", "src/parse.rs", 5),
        ],
    );
    let task_poll = loc(
        APP,
        0x2000,
        &[fr(
            "tokio::runtime::task::harness::poll",
            "tokio/src/runtime/task/harness.rs",
            151,
        )],
    );
    let pin_poll = loc(
        APP,
        0x2100,
        &[fr(
            "<core::pin::Pin<P> as core::future::future::Future>::poll",
            "core/src/future/future.rs",
            124,
        )],
    );
    let memcpy = loc(LIBC, 0x1a0a0, &[fr("memcpy", "", 0)]);
    let unsymbolized = loc("/usr/lib/libfoo.so", 0x2abc, &[]);
    let entry = loc(
        KERNEL,
        0xffff_0100,
        &[fr("entry_SYSCALL_64_after_hwframe", "", 0)],
    );
    let syscall = loc(KERNEL, 0xffff_0200, &[fr("do_syscall_64", "", 0)]);
    let schedule = loc(KERNEL, 0xffff_0300, &[fr("schedule", "", 0)]);
    let eval = loc(PYTHON, 0x5000, &[fr("_PyEval_EvalFrameDefault", "", 0)]);
    // Interpreted frames come without a binary.
    let handle = loc(JIT, 0x5100, &[fr("handle_request", "app.py", 12)]);
    let thread_run = loc(JIT, 0x7000, &[fr("java.lang.Thread.run", "Thread.java", 840)]);
    let lambda = loc(
        JIT,
        0x7100,
        &[fr(
            "java.lang.invoke.LambdaForm$DMH.invokeStatic",
            "LambdaForm$DMH",
            0,
        )],
    );
    let handler = loc(
        JIT,
        0x7200,
        &[fr("com.example.Handler.handle", "Handler.java", 21)],
    );
    vec![
        (
            vec![
                start.clone(),
                main.clone(),
                run.clone(),
                serve_20.clone(),
                parse.clone(),
            ],
            7,
            3,
        ),
        (
            vec![
                start.clone(),
                main.clone(),
                run.clone(),
                task_poll.clone(),
                pin_poll.clone(),
                serve_35.clone(),
                memcpy.clone(),
            ],
            11,
            22,
        ),
        (
            vec![
                start.clone(),
                main.clone(),
                run.clone(),
                task_poll,
                pin_poll,
                inlined,
            ],
            13,
            5,
        ),
        (
            vec![start.clone(), main.clone(), run.clone(), serve_20, unsymbolized],
            17,
            0,
        ),
        (vec![entry.clone(), syscall.clone(), schedule], 19, 40),
        (
            vec![start.clone(), main.clone(), run.clone(), serve_35, entry, syscall],
            23,
            9,
        ),
        (vec![eval.clone(), handle, eval, memcpy], 29, 31),
        (vec![start.clone(), main.clone(), run.clone(), run, parse], 31, 2),
        (vec![start, main], 37, 41),
        (vec![thread_run, lambda, handler], 43, 47),
    ]
}

// ---- The rules, as docs/queries.md states them ----

#[derive(Clone, Copy, Debug, PartialEq)]
enum Field {
    Function,
    SystemName,
    File,
    Binary,
    Address,
}

/// What is known of one frame.
#[derive(Clone, Debug)]
struct Facts {
    function: String,
    system_name: String,
    file: String,
    line: i64,
    binary: String,
    address: u64,
}

fn base(path: &str) -> &str {
    path.rsplit('/').next().unwrap()
}

/// The frames of a stack, caller first, with what is known of each.
fn facts(stack: &[Loc]) -> Vec<Facts> {
    stack
        .iter()
        .flat_map(|l| {
            let unsymbolized = Facts {
                function: format!("{}+0x{:x}", l.binary, l.address),
                system_name: String::new(),
                file: String::new(),
                line: 0,
                binary: l.binary.to_string(),
                address: l.address,
            };
            if l.frames.is_empty() {
                return vec![unsymbolized];
            }
            l.frames
                .iter()
                .map(|f| Facts {
                    function: f.reads_as.to_string(),
                    system_name: if f.name != f.reads_as {
                        f.name.to_string()
                    } else {
                        String::new()
                    },
                    file: f.file.to_string(),
                    line: f.line,
                    binary: l.binary.to_string(),
                    address: l.address,
                })
                .collect()
        })
        .collect()
}

struct Rule {
    field: Field,
    regex: Regex,
}

impl Rule {
    fn parse(text: &str) -> Rule {
        let fields = [
            ("function:", Field::Function),
            ("system_name:", Field::SystemName),
            ("file:", Field::File),
            ("binary:", Field::Binary),
            ("address:", Field::Address),
        ];
        let (field, pattern) = fields
            .iter()
            .find_map(|(p, f)| text.strip_prefix(p).map(|rest| (*f, rest)))
            .unwrap_or((Field::Function, text));
        Rule {
            field,
            regex: Regex::new(&format!("^(?:{pattern})$")).unwrap(),
        }
    }

    fn matches(&self, f: &Facts) -> bool {
        match self.field {
            Field::Function => self.regex.is_match(&f.function),
            Field::SystemName => self.regex.is_match(if f.system_name.is_empty() {
                &f.function
            } else {
                &f.system_name
            }),
            Field::File => self.regex.is_match(&f.file),
            // An unknown binary matches nothing.
            Field::Binary => {
                !f.binary.is_empty()
                    && (self.regex.is_match(&f.binary) || self.regex.is_match(base(&f.binary)))
            }
            Field::Address => self.regex.is_match(&format!("0x{:x}", f.address)),
        }
    }
}

/// A read's frame parameters, and what they do to one stack.
#[derive(Clone, Debug, Default)]
struct View {
    focus: Vec<&'static str>,
    drop: Vec<&'static str>,
    hide: Vec<&'static str>,
    aggregate_by: Option<&'static str>,
}

impl View {
    fn params(&self) -> Params {
        let mut out: Params = Vec::new();
        for (name, rules) in [("focus", &self.focus), ("drop", &self.drop), ("hide", &self.hide)] {
            out.extend(rules.iter().map(|r| (name.to_string(), r.to_string())));
        }
        if let Some(g) = self.aggregate_by {
            out.push(("aggregate_by".into(), g.into()));
        }
        out
    }

    fn keeps(&self, stack: &[Facts]) -> bool {
        let any = |text: &str| {
            let rule = Rule::parse(text);
            stack.iter().any(|f| rule.matches(f))
        };
        self.focus.iter().all(|r| any(r)) && !self.drop.iter().any(|r| any(r))
    }

    fn name(&self, f: &Facts) -> Option<String> {
        if self.hide.iter().any(|r| Rule::parse(r).matches(f)) {
            return None;
        }
        let binary = if f.binary.is_empty() {
            UNKNOWN.to_string()
        } else {
            base(&f.binary).to_string()
        };
        Some(match self.aggregate_by.unwrap_or("function") {
            "function" => f.function.clone(),
            "function_line" if f.line > 0 => format!("{}:{}", f.function, f.line),
            "function_line" => f.function.clone(),
            "file" if !f.file.is_empty() => f.file.clone(),
            "file" | "binary" => binary,
            "address" if f.binary.is_empty() => format!("0x{:x}", f.address),
            "address" => format!("{binary}+0x{:x}", f.address),
            other => panic!("granularity {other}"),
        })
    }

    fn collapses(&self) -> bool {
        matches!(self.aggregate_by, Some("file" | "binary" | "address"))
    }

    /// The path a kept stack is shown as; `collapse` merges consecutive equal names, as
    /// trees do at file, binary and address granularity (pprof keeps every frame).
    fn path(&self, stack: &[Facts], collapse: bool) -> Option<Vec<String>> {
        if !self.keeps(stack) {
            return None;
        }
        let mut path: Vec<String> = Vec::new();
        for name in stack.iter().filter_map(|f| self.name(f)) {
            if collapse && self.collapses() && path.last() == Some(&name) {
                continue;
            }
            path.push(name);
        }
        Some(path)
    }
}

/// `a;b;c → value` of the kept stacks in one half (0 baseline, 1 comparison), zero sums
/// and empty paths (a stack with every frame hidden) left out, as folded output does.
fn expected_folded(view: &View, side: usize, collapse: bool) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for (stack, base, comp) in stacks() {
        let value = [base, comp][side];
        if let Some(path) = view.path(&facts(&stack), collapse)
            && !path.is_empty()
        {
            *out.entry(path.join(";")).or_insert(0) += value;
        }
    }
    out.retain(|_, v| *v != 0);
    out
}

/// Everything kept over both halves: the value of the root.
fn expected_total(view: &View, side: Option<usize>) -> i64 {
    stacks()
        .into_iter()
        .filter(|(stack, _, _)| view.keeps(&facts(stack)))
        .map(|(_, b, c)| match side {
            Some(0) => b,
            Some(_) => c,
            None => b + c,
        })
        .sum()
}

fn both_halves(view: &View) -> BTreeMap<String, i64> {
    let mut out = expected_folded(view, 0, true);
    for (path, v) in expected_folded(view, 1, true) {
        *out.entry(path).or_insert(0) += v;
    }
    out
}

/// `name → (self, total)` of a folded tree, a name counted once per path.
fn top_of(folded: &BTreeMap<String, i64>) -> BTreeMap<String, (i64, i64)> {
    let mut out: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for (path, value) in folded {
        let names: Vec<&str> = path.split(';').collect();
        out.entry(names.last().unwrap().to_string()).or_default().0 += value;
        let mut seen: Vec<&str> = Vec::new();
        for name in names {
            if !seen.contains(&name) {
                seen.push(name);
                out.entry(name.to_string()).or_default().1 += value;
            }
        }
    }
    out
}

// ---- Sending the workload ----

struct Dict {
    d: ProfilesDictionary,
    strings: BTreeMap<String, i32>,
}

impl Dict {
    fn string(&mut self, s: &str) -> i32 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = self.d.string_table.len() as i32;
        self.d.string_table.push(s.to_string());
        self.strings.insert(s.to_string(), i);
        i
    }

    fn push<T>(table: &mut Vec<T>, item: T) -> i32 {
        table.push(item);
        table.len() as i32 - 1
    }

    fn location(&mut self, l: &Loc) -> i32 {
        let filename_strindex = self.string(l.binary);
        let mapping_index = Dict::push(
            &mut self.d.mapping_table,
            Mapping {
                memory_limit: 0x1_0000_0000,
                filename_strindex,
                ..Default::default()
            },
        );
        // OTLP lists the innermost line first.
        let lines = l
            .frames
            .iter()
            .rev()
            .map(|f| {
                let function = Function {
                    name_strindex: self.string(f.name),
                    system_name_strindex: 0,
                    filename_strindex: self.string(f.file),
                    start_line: 0,
                };
                Line {
                    function_index: Dict::push(&mut self.d.function_table, function),
                    line: f.line,
                    column: 0,
                }
            })
            .collect();
        Dict::push(
            &mut self.d.location_table,
            Location {
                mapping_index,
                address: l.address,
                lines,
                ..Default::default()
            },
        )
    }
}

fn request() -> ExportProfilesServiceRequest {
    let mut dict = Dict {
        d: ProfilesDictionary {
            string_table: Vec::new(),
            function_table: vec![Function::default()],
            mapping_table: vec![Mapping::default()],
            location_table: vec![Location::default()],
            stack_table: vec![Stack::default()],
            attribute_table: vec![Default::default()],
            link_table: vec![Default::default()],
        },
        strings: BTreeMap::new(),
    };
    dict.string("");
    let mut samples = Vec::new();
    for (i, (stack, base, comp)) in stacks().into_iter().enumerate() {
        // Leaf first on the wire.
        let location_indices = stack.iter().rev().map(|l| dict.location(l)).collect();
        let stack_index = Dict::push(&mut dict.d.stack_table, Stack { location_indices });
        let (mut values, mut times) = (Vec::new(), Vec::new());
        for (value, at) in [(base, T0), (comp, MID)] {
            if value != 0 {
                values.push(value);
                times.push((at + (i as i64 + 1) * SECOND) as u64);
            }
        }
        samples.push(Sample {
            stack_index,
            values,
            timestamps_unix_nano: times,
            ..Default::default()
        });
    }
    let sample_type = Some(ValueType {
        type_strindex: dict.string("samples"),
        unit_strindex: dict.string("count"),
    });
    let period_type = Some(ValueType {
        type_strindex: dict.string("cpu"),
        unit_strindex: dict.string("nanoseconds"),
    });
    let profile = Profile {
        sample_type,
        period_type,
        period: 10_000_000,
        time_unix_nano: T0 as u64,
        duration_nano: (END - T0) as u64,
        profile_id: hex::decode(PROFILE_ID).unwrap(),
        samples,
        ..Default::default()
    };
    ExportProfilesServiceRequest {
        resource_profiles: vec![ResourceProfiles {
            resource: Some(Resource {
                attributes: vec![KeyValue {
                    key: "service.name".into(),
                    value: Some(AnyValue {
                        value: Some(any_value::Value::StringValue("frames".into())),
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            scope_profiles: vec![ScopeProfiles {
                profiles: vec![profile],
                ..Default::default()
            }],
            ..Default::default()
        }],
        dictionary: Some(dict.d),
    }
}

async fn http() -> Http {
    static SERVER: OnceLock<Server> = OnceLock::new();
    let server = ui_api_tests::shared(&SERVER, || async {
        let server = Server::start_for_process(Options::default()).await;
        let mut client = ProfilesServiceClient::connect(server.grpc()).await.unwrap();
        let response = client.export(request()).await.unwrap().into_inner();
        assert!(
            response
                .partial_success
                .is_none_or(|p| p.rejected_profiles == 0 && p.error_message.is_empty()),
            "the workload is accepted whole"
        );
        server
    });
    Http::new(server.http())
}

fn query(view: &View, from: i64, to: i64) -> Params {
    let mut q = params(CPU, from, to);
    q.extend(view.params());
    q
}

// ---- The views every endpoint is checked with ----

fn views() -> Vec<(&'static str, View)> {
    let v = View::default;
    vec![
        ("default", v()),
        (
            "focus by function",
            View {
                focus: vec!["app::handler::serve"],
                ..v()
            },
        ),
        (
            "focus by regex and file, both met",
            View {
                focus: vec!["app::.*", "file:src/parse\\.rs"],
                ..v()
            },
        ),
        (
            "focus by system name",
            View {
                focus: vec!["system_name:_ZN3app6server3run.*"],
                ..v()
            },
        ),
        (
            "focus by address",
            View {
                focus: vec!["address:0x2abc"],
                ..v()
            },
        ),
        (
            "drop by binary base name",
            View {
                drop: vec!["binary:libc\\.so\\.6"],
                ..v()
            },
        ),
        (
            "drop by binary path and function",
            View {
                drop: vec!["binary:/usr/lib/libpython.*", "schedule"],
                ..v()
            },
        ),
        (
            "hide frames",
            View {
                hide: vec!["app::server::run", "file:src/handler\\.rs"],
                ..v()
            },
        ),
        (
            "hide every frame of some stacks",
            View {
                hide: vec!["binary:vmlinux"],
                ..v()
            },
        ),
        (
            "focus, drop and hide together",
            View {
                focus: vec!["main"],
                drop: vec!["address:0x2abc"],
                hide: vec!["tokio::.*"],
                ..v()
            },
        ),
        (
            "function_line",
            View {
                aggregate_by: Some("function_line"),
                ..v()
            },
        ),
        (
            "file",
            View {
                aggregate_by: Some("file"),
                ..v()
            },
        ),
        (
            "binary",
            View {
                aggregate_by: Some("binary"),
                ..v()
            },
        ),
        (
            "address",
            View {
                aggregate_by: Some("address"),
                ..v()
            },
        ),
        (
            "binary, focused",
            View {
                aggregate_by: Some("binary"),
                focus: vec!["app::parse.*"],
                ..v()
            },
        ),
    ]
}

#[tokio::test]
async fn flamegraphs_in_every_format_follow_the_rules() {
    let http = http().await;
    for (name, view) in views() {
        let want = both_halves(&view);
        let q = query(&view, T0, END);
        let json = http.json("/api/v1/flamegraph", &q).await;
        assert_eq!(json_folded(&json["root"]), want, "{name}: json");
        assert_eq!(
            json["root"]["total"].as_i64(),
            Some(expected_total(&view, None)),
            "{name}: total"
        );
        let folded = http
            .text("/api/v1/flamegraph", &with(q.clone(), &[("format", "folded")]))
            .await;
        assert_eq!(parse_folded(&folded), want, "{name}: folded");
        let mut by_id = view.params();
        by_id.push(("format".into(), "folded".into()));
        let folded = http.text(&format!("/api/v1/profiles/{PROFILE_ID}"), &by_id).await;
        assert_eq!(parse_folded(&folded), want, "{name}: the profile by its id");
        let fb = http
            .json(
                "/api/v1/flamegraph",
                &with(q.clone(), &[("format", "flamebearer")]),
            )
            .await;
        assert_eq!(
            flamebearer_folded(&decode_flamebearer(&fb), 0),
            want,
            "{name}: flamebearer"
        );
        // pprof carries every frame the view names (no merging of equal neighbours):
        // readers aggregate as they please.
        let resp = http
            .get("/api/v1/flamegraph", &with(q.clone(), &[("format", "pprof")]))
            .await
            .ok();
        let mut got: BTreeMap<String, i64> = BTreeMap::new();
        for s in pprof_reader::decode(&resp.body).samples {
            if !s.frames.is_empty() {
                *got.entry(s.frames.join(";")).or_insert(0) += s.values[0];
            }
        }
        got.retain(|_, v| *v != 0);
        let mut want_pprof = expected_folded(&view, 0, false);
        for (path, v) in expected_folded(&view, 1, false) {
            *want_pprof.entry(path).or_insert(0) += v;
        }
        assert_eq!(got, want_pprof, "{name}: pprof");
    }
}

#[tokio::test]
async fn top_tables_follow_the_rules() {
    let http = http().await;
    for (name, view) in views() {
        let json = http.json("/api/v1/top", &query(&view, T0, END)).await;
        let got: BTreeMap<String, (i64, i64)> = json["functions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                (
                    f["name"].as_str().unwrap().to_string(),
                    (f["self"].as_i64().unwrap(), f["total"].as_i64().unwrap()),
                )
            })
            .filter(|(_, (s, t))| *s != 0 || *t != 0)
            .collect();
        assert_eq!(got, top_of(&both_halves(&view)), "{name}");
        assert_eq!(
            json["total"].as_i64(),
            Some(expected_total(&view, None)),
            "{name}: total"
        );
    }
}

#[tokio::test]
async fn diffs_follow_the_rules_on_both_sides() {
    let http = http().await;
    for (name, view) in views() {
        let mut q = view.params();
        q.extend(with(
            vec![("profile_type".to_string(), CPU.to_string())],
            &[
                ("baseline_from", &T0.to_string()),
                ("baseline_to", &MID.to_string()),
                ("comparison_from", &MID.to_string()),
                ("comparison_to", &END.to_string()),
            ],
        ));
        let json = http.json("/api/v1/diff", &q).await;
        let values = json_diff_values(&json["root"]);
        let folded = parse_folded_diff(
            &http
                .text("/api/v1/diff", &with(q.clone(), &[("format", "folded")]))
                .await,
        );
        for side in 0..2 {
            let got: BTreeMap<String, i64> = folded
                .iter()
                .map(|(path, v)| (path.clone(), [v.0, v.1][side]))
                .filter(|(_, v)| *v != 0)
                .collect();
            assert_eq!(
                got,
                expected_folded(&view, side, true),
                "{name}: folded side {side}"
            );
        }
        for side in 0..2 {
            let got: BTreeMap<String, i64> = values
                .iter()
                .filter(|(path, v)| !path.is_empty() && v[side * 2] != 0)
                .map(|(path, v)| (path.join(";"), v[side * 2]))
                .collect();
            assert_eq!(got, expected_folded(&view, side, true), "{name}: side {side}");
            assert_eq!(
                values[&Vec::<String>::new()][side * 2 + 1],
                expected_total(&view, Some(side)),
                "{name}: side {side} total"
            );
        }
    }
}

#[tokio::test]
async fn time_series_count_only_the_kept_stacks() {
    let http = http().await;
    for (name, view) in views() {
        let q = with(query(&view, T0, END), &[("step", "60")]);
        let json = http.json("/api/v1/timeseries", &q).await;
        let series = json["series"].as_array().unwrap();
        let points: Vec<i64> = series
            .iter()
            .flat_map(|s| s["points"].as_array().unwrap())
            .map(|p| p[1].as_f64().unwrap() as i64)
            .collect();
        let want = [expected_total(&view, Some(0)), expected_total(&view, Some(1))];
        assert_eq!(points.iter().sum::<i64>(), want[0] + want[1], "{name}: {json}");
        if want[0] + want[1] != 0 {
            assert_eq!(
                points,
                want.iter().copied().filter(|v| *v != 0).collect::<Vec<_>>(),
                "{name}: per minute"
            );
        }
    }
}

#[tokio::test]
async fn presets_are_listed_and_hide_their_frames() {
    let http = http().await;
    let json = http.json("/api/v1/filter-presets", &Vec::new()).await;
    let presets = json["presets"].as_array().unwrap();
    let names: Vec<&str> = presets.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["rust-async", "python-internals", "jvm-internals", "libc-kernel"]
    );
    for preset in presets {
        let name = preset["name"].as_str().unwrap();
        // The preset's own listing is the rule set the expected tree is computed with.
        let rules: Vec<String> = preset["rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                assert_eq!(r["kind"], "hide", "{name}");
                format!(
                    "{}:{}",
                    r["field"].as_str().unwrap(),
                    r["pattern"].as_str().unwrap()
                )
            })
            .collect();
        let rules: Vec<&'static str> = rules
            .into_iter()
            .map(|r| &*Box::leak(r.into_boxed_str()))
            .collect();
        let view = View {
            hide: rules,
            ..View::default()
        };
        let q = with(params(CPU, T0, END), &[("preset", name)]);
        let got = json_folded(&http.json("/api/v1/flamegraph", &q).await["root"]);
        let want = both_halves(&view);
        assert_eq!(got, want, "{name}");
        assert_ne!(
            want,
            both_halves(&View::default()),
            "{name} hides some frame of the workload"
        );
    }
    // The frames each preset is for.
    for (preset, frame, is_hidden) in [
        ("rust-async", "tokio::runtime::task::harness::poll", true),
        (
            "rust-async",
            "<core::pin::Pin<P> as core::future::future::Future>::poll",
            true,
        ),
        ("rust-async", "app::handler::serve", false),
        ("python-internals", "_PyEval_EvalFrameDefault", true),
        ("python-internals", "handle_request", false),
        ("libc-kernel", "memcpy", true),
        ("libc-kernel", "do_syscall_64", true),
        ("libc-kernel", "main", false),
    ] {
        let q = with(params(CPU, T0, END), &[("preset", preset), ("format", "folded")]);
        let folded = parse_folded(&http.text("/api/v1/flamegraph", &q).await);
        let shown = folded.keys().any(|path| path.split(';').any(|f| f == frame));
        assert_eq!(shown, !is_hidden, "{preset}: {frame}");
    }
}

#[tokio::test]
async fn mangled_names_read_demangled_and_match_as_sent() {
    let http = http().await;
    let q = with(params(CPU, T0, END), &[("format", "folded")]);
    let folded = parse_folded(&http.text("/api/v1/flamegraph", &q).await);
    assert!(
        folded.keys().any(|p| p.contains(";app::server::run;")),
        "{folded:?}"
    );
    assert!(!folded.keys().any(|p| p.contains("_ZN")), "{folded:?}");
    let resp = http
        .get(
            "/api/v1/flamegraph",
            &with(params(CPU, T0, END), &[("format", "pprof")]),
        )
        .await
        .ok();
    let pprof = pprof_reader::decode(&resp.body);
    assert!(
        pprof
            .samples
            .iter()
            .any(|s| s.frames.iter().any(|f| f == "app::server::run"))
    );
}

#[tokio::test]
async fn bad_rules_are_refused_by_name() {
    let http = http().await;
    for (param, value, says) in [
        ("focus", "(", "invalid focus pattern \"(\""),
        ("drop", "file:[z-a]", "invalid drop pattern \"[z-a]\""),
        ("hide", "binary:", "empty pattern"),
        ("aggregate_by", "line", "invalid aggregate_by \"line\""),
        ("preset", "go", "unknown preset \"go\""),
    ] {
        for path in ["/api/v1/flamegraph", "/api/v1/top", "/api/v1/timeseries"] {
            let resp = http
                .get(path, &with(params(CPU, T0, END), &[(param, value)]))
                .await;
            assert_eq!(resp.status, 400, "{path} {param}={value}: {}", resp.text());
            assert!(
                resp.error().contains(says),
                "{path} {param}={value}: {}",
                resp.error()
            );
        }
    }
}
