//! Mangled symbols from real binaries are shown demangled by every read: a C++ program
//! built with g++ and a Rust program built with rustc (legacy and v0 mangling), their own
//! functions read with `nm`, sent as pprof function names through `/ingest`. The readable
//! names the reads must show come from binutils' `c++filt`, never from Stackhouse.
//!
//! g++, nm, c++filt and rustc are required: without one the tests fail saying which (CI
//! installs gcc and binutils; rustc is the toolchain that builds the tests).

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use prost::Message;
use serde_json::Value;
use ui_api_tests::client::gzip;
use ui_api_tests::http_query::{Http, Params, params, with};
use ui_api_tests::ingest_client::Ingest;
use ui_api_tests::node_tool;
use ui_api_tests::pprof_messages as pprof;
use ui_api_tests::pprof_reader;
use ui_api_tests::server::{Options, Server};
use ui_api_tests::trees::{json_folded, json_node_values, parse_folded};

const CPP_PROGRAM: &str = r#"
#include <cstdio>
#include <vector>

namespace zqdm {
namespace geo {
struct Point {
  long x, y;
};

class Shape {
 public:
  explicit Shape(long side) : side_(side) {}
  __attribute__((noinline)) long area(int scale) const;

 private:
  long side_;
};

long Shape::area(int scale) const { return side_ * side_ * scale; }

__attribute__((noinline)) Point operator+(const Point& a, const Point& b) {
  return Point{a.x + b.x, a.y + b.y};
}
}  // namespace geo

template <typename T>
__attribute__((noinline)) T sum(const std::vector<T>& values) {
  T total{};
  for (const T& v : values) total += v;
  return total;
}

__attribute__((noinline)) long scale(long x) { return x * 3; }
__attribute__((noinline)) double scale(double x) { return x * 1.5; }
}  // namespace zqdm

int main(int argc, char**) {
  zqdm::geo::Shape shape(argc + 1);
  zqdm::geo::Point p = zqdm::geo::Point{argc, 2} + zqdm::geo::Point{3, argc};
  std::vector<long> longs{1, 2, argc};
  std::vector<double> doubles{0.5, 1.5, double(argc)};
  double out = shape.area(argc) + p.x + p.y + zqdm::sum(longs) + zqdm::sum(doubles) +
               zqdm::scale(long(argc)) + zqdm::scale(double(argc));
  std::printf("%f\n", out);
  return 0;
}
"#;

/// Built twice under two crate names (legacy and v0 mangling), so each build's symbols
/// are told apart by their crate.
const RUST_PROGRAM: &str = r#"
use std::hint::black_box;
use std::ops::Add;

#[derive(Clone, Copy)]
pub struct Widget {
    n: u64,
}

impl Widget {
    #[inline(never)]
    pub fn spin(&self, k: u64) -> u64 {
        black_box(self.n.wrapping_mul(k))
    }
}

impl Add for Widget {
    type Output = Widget;
    #[inline(never)]
    fn add(self, other: Widget) -> Widget {
        Widget { n: black_box(self.n + other.n) }
    }
}

#[inline(never)]
pub fn widen<T: Into<u64>>(value: T) -> u64 {
    black_box(value.into() * 2)
}

pub mod inner {
    #[inline(never)]
    pub fn leaf(x: u64) -> u64 {
        std::hint::black_box(x + 1)
    }
}

fn main() {
    let w = Widget { n: black_box(3) };
    let a = w.spin(black_box(5));
    let b = (w + Widget { n: black_box(4) }).n;
    let c = widen(black_box(7u32)) + widen(black_box(8u8));
    let d = inner::leaf(black_box(9));
    println!("{}", a + b + c + d);
}
"#;

const PROFILE_TYPE: &str = "cpu:nanoseconds:cpu:nanoseconds";
/// When the sent profiles were recorded (unix ns).
const TIME: i64 = 1_700_000_000_000_000_000;
const MINUTE: i64 = 60_000_000_000;

/// One symbol: as `nm` lists it, as the reference tool reads it, and the value sent for
/// the stack that ends in it.
#[derive(Clone, Debug)]
struct Symbol {
    mangled: String,
    readable: String,
    value: i64,
}

/// One program's symbols: its entry function (the caller of every other one) and its own
/// functions.
#[derive(Clone, Debug)]
struct Program {
    what: &'static str,
    main: Symbol,
    functions: Vec<Symbol>,
}

impl Program {
    /// `[main]` and `[main, f]` for each function, each with its own value.
    fn stacks(&self) -> Vec<(Vec<&Symbol>, i64)> {
        let mut out = vec![(vec![&self.main], self.main.value)];
        out.extend(self.functions.iter().map(|f| (vec![&self.main, f], f.value)));
        out
    }

    /// Readable folded path → summed value: what every read must show.
    fn folded(&self) -> BTreeMap<String, i64> {
        let mut out = BTreeMap::new();
        for (stack, value) in self.stacks() {
            let path: Vec<&str> = stack.iter().map(|s| s.readable.as_str()).collect();
            *out.entry(path.join(";")).or_insert(0) += value;
        }
        out
    }

    fn total(&self) -> i64 {
        self.stacks().iter().map(|(_, v)| v).sum()
    }
}

/// How the names are sent: the mangled symbol as the name (what perf-based converters
/// send), or the readable name with the symbol as the system name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sent {
    MangledOnly,
    ReadableAndSystem,
}

struct Case {
    service: String,
    program: Program,
    sent: Sent,
}

struct State {
    server: Server,
    cases: Vec<Case>,
}

fn require(tool: &str, package: &str) -> String {
    let found = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        found,
        "{tool} is required by the demangled-name tests ({package}) and is not installed"
    );
    tool.to_string()
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// Defined text symbols of `binary` as `nm` lists them (templates are weak: `W`).
fn text_symbols(binary: &Path) -> Vec<String> {
    run(Command::new(require("nm", "Debian: binutils"))
        .arg("--defined-only")
        .arg(binary))
    .lines()
    .filter_map(|line| {
        let mut parts = line.split_whitespace();
        let (_, kind, name) = (parts.next()?, parts.next()?, parts.next()?);
        ["t", "T", "w", "W"].contains(&kind).then(|| name.to_string())
    })
    .collect()
}

/// `c++filt -s <style>` of each symbol, one argument each, in order.
fn cxxfilt(style: &str, symbols: &[String]) -> Vec<String> {
    let out = run(Command::new(require("c++filt", "Debian: binutils"))
        .args(["-s", style])
        .args(symbols));
    let lines: Vec<String> = out.lines().map(str::to_string).collect();
    assert_eq!(
        lines.len(),
        symbols.len(),
        "c++filt prints one line per symbol: {out}"
    );
    lines
}

fn cxxfilt_version() -> String {
    run(Command::new(require("c++filt", "Debian: binutils")).arg("--version"))
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// Gives each symbol its own value, counting on from `next`: distinct values tell the
/// stacks apart in every answer.
fn number(symbols: Vec<(String, String)>, next: &mut i64) -> Vec<Symbol> {
    symbols
        .into_iter()
        .map(|(mangled, readable)| {
            *next += 1;
            Symbol {
                mangled,
                readable,
                value: *next * 100 + *next,
            }
        })
        .collect()
}

fn cpp_program(dir: &Path, next: &mut i64) -> Program {
    let source = dir.join("prog.cpp");
    std::fs::write(&source, CPP_PROGRAM).unwrap();
    let binary = dir.join("prog_cpp");
    run(Command::new(require("g++", "Debian: g++"))
        .args(["-O1", "-o"])
        .arg(&binary)
        .arg(&source));
    let symbols = text_symbols(&binary);
    assert!(symbols.iter().any(|s| s == "main"), "nm lists main: {symbols:?}");
    // the program's own functions: everything under namespace zqdm (`K` for const methods)
    let own: Vec<String> = symbols
        .into_iter()
        .filter(|s| s.starts_with("_ZN4zqdm") || s.starts_with("_ZNK4zqdm"))
        .collect();
    let readable = cxxfilt("gnu-v3", &own);
    for (m, r) in own.iter().zip(&readable) {
        assert_ne!(m, r, "c++filt demangles {m}");
    }
    let mut pairs: Vec<(String, String)> = own.into_iter().zip(readable).collect();
    pairs.sort();
    let main = number(vec![("main".into(), "main".into())], next).remove(0);
    let program = Program {
        what: "C++ (g++)",
        main,
        functions: number(pairs, next),
    };
    // what the program was written to show, as c++filt reads it
    let names: Vec<&str> = program.functions.iter().map(|f| f.readable.as_str()).collect();
    let has = |wanted: &str| names.iter().any(|n| n.contains(wanted));
    assert!(
        has("zqdm::geo::Shape::area(int) const"),
        "a const method: {names:?}"
    );
    assert!(has("zqdm::geo::operator+("), "an operator: {names:?}");
    assert!(
        has("zqdm::sum<long>(") && has("zqdm::sum<double>("),
        "a template twice: {names:?}"
    );
    assert!(
        has("zqdm::scale(long)") && has("zqdm::scale(double)"),
        "an overload: {names:?}"
    );
    program
}

/// The Rust program built as crate `krate` with the given mangling.
fn rust_program(dir: &Path, krate: &str, v0: bool, next: &mut i64) -> Program {
    let source = dir.join(format!("{krate}.rs"));
    std::fs::write(&source, RUST_PROGRAM).unwrap();
    let binary = dir.join(krate);
    let mut cmd = Command::new(require("rustc", "the Rust toolchain"));
    cmd.args(["-O", "--crate-name", krate, "-o"])
        .arg(&binary)
        .arg(&source);
    if v0 {
        cmd.args(["-C", "symbol-mangling-version=v0"]);
    }
    run(&mut cmd);
    let symbols: Vec<String> = text_symbols(&binary)
        .into_iter()
        .filter(|s| s.starts_with(if v0 { "_R" } else { "_ZN" }))
        .collect();
    let readable = cxxfilt("rust", &symbols);
    if v0 {
        // the program's own v0 symbols name the crate as `<len>zqdm_v0`
        let ident = format!("{}{krate}", krate.len());
        let own: Vec<(&String, &String)> = symbols
            .iter()
            .zip(&readable)
            .filter(|(m, _)| m.contains(&ident))
            .collect();
        assert!(!own.is_empty(), "nm lists {krate}'s v0 symbols");
        let undemangled: Vec<&String> = own.iter().filter(|(m, r)| m == r).map(|(m, _)| *m).collect();
        assert!(
            undemangled.is_empty(),
            "c++filt ({}) does NOT demangle Rust v0 symbols, so it cannot be the reference for \
             them (binutils 2.36 or later is needed); not demangled: {undemangled:?}",
            cxxfilt_version()
        );
    }
    let hash = regex::Regex::new(r"::h[0-9a-f]{16}$").unwrap();
    // v0 names the crates with their disambiguator, `krate[1a2b…]`
    let disambiguator = regex::Regex::new(r"([A-Za-z0-9_])\[[0-9a-f]+\]").unwrap();
    let mut pairs = Vec::new();
    let mut main = None;
    for (mangled, demangled) in symbols.into_iter().zip(readable) {
        // rustfilt's form: the legacy hash and the v0 crate disambiguators left out
        let name = hash.replace(&demangled, "");
        let name = disambiguator.replace_all(&name, "$1").into_owned();
        // the program's own functions, inherent and trait impls included
        if !(name.starts_with(&format!("{krate}::")) || name.starts_with(&format!("<{krate}::"))) {
            continue;
        }
        assert_ne!(mangled, demangled, "c++filt demangles {mangled}");
        if name == format!("{krate}::main") {
            main = Some((mangled, name));
        } else {
            pairs.push((mangled, name));
        }
    }
    pairs.sort();
    let main = main.unwrap_or_else(|| panic!("nm lists {krate}::main: {pairs:?}"));
    let program = Program {
        what: if v0 {
            "Rust v0 (rustc)"
        } else {
            "Rust legacy (rustc)"
        },
        main: number(vec![main], next).remove(0),
        functions: number(pairs, next),
    };
    let names: Vec<&str> = program.functions.iter().map(|f| f.readable.as_str()).collect();
    let has = |wanted: String| names.contains(&wanted.as_str());
    assert!(has(format!("{krate}::inner::leaf")), "a nested module: {names:?}");
    assert!(
        has(format!("<{krate}::Widget as core::ops::arith::Add>::add")),
        "a trait impl: {names:?}"
    );
    if v0 {
        assert!(has(format!("<{krate}::Widget>::spin")), "a method: {names:?}");
        assert!(
            has(format!("{krate}::widen::<u8>")) && has(format!("{krate}::widen::<u32>")),
            "a generic twice: {names:?}"
        );
    } else {
        assert!(has(format!("{krate}::Widget::spin")), "a method: {names:?}");
        // legacy names carry no generic arguments: both instances read the same
        let widen = names.iter().filter(|n| **n == format!("{krate}::widen")).count();
        assert_eq!(widen, 2, "a generic twice: {names:?}");
    }
    program
}

/// The v0 names in the legacy form (no generic arguments, inherent impls as paths) and
/// the crate renamed: equal to the legacy build's names, a check that the two references
/// agree.
fn as_legacy(v0: &Program, legacy: &Program) -> (BTreeSet<String>, BTreeSet<String>) {
    let generics = regex::Regex::new(r"::<[^>]*>$").unwrap();
    let inherent = regex::Regex::new(r"^<([^ >]*)>::").unwrap();
    let from_v0 = v0
        .functions
        .iter()
        .map(|f| {
            let name = generics.replace(&f.readable, "");
            let name = inherent.replace(&name, "$1::");
            name.replace("zqdm_v0", "zqdm_legacy")
        })
        .collect();
    let from_legacy = legacy.functions.iter().map(|f| f.readable.clone()).collect();
    (from_v0, from_legacy)
}

/// The program's stacks as a gzipped pprof profile, one function and location per symbol.
fn encode(program: &Program, sent: Sent) -> Vec<u8> {
    let mut strings: Vec<String> = vec![String::new()];
    let mut intern = |s: &str| -> i64 {
        let i = strings.iter().position(|x| x == s).unwrap_or_else(|| {
            strings.push(s.to_string());
            strings.len() - 1
        });
        i64::try_from(i).unwrap()
    };
    let cpu = intern("cpu");
    let ns = intern("nanoseconds");
    let symbols: Vec<&Symbol> = std::iter::once(&program.main).chain(&program.functions).collect();
    let mut function = Vec::new();
    let mut location = Vec::new();
    for (i, s) in symbols.iter().enumerate() {
        let id = u64::try_from(i + 1).unwrap();
        let (name, system_name) = match sent {
            Sent::MangledOnly => (intern(&s.mangled), 0),
            Sent::ReadableAndSystem => (intern(&s.readable), intern(&s.mangled)),
        };
        function.push(pprof::Function {
            id,
            name,
            system_name,
        });
        location.push(pprof::Location {
            id,
            line: vec![pprof::Line { function_id: id }],
        });
    }
    let id_of = |s: &Symbol| {
        let i = symbols.iter().position(|x| x.mangled == s.mangled).unwrap();
        u64::try_from(i + 1).unwrap()
    };
    let sample = program
        .stacks()
        .into_iter()
        .map(|(stack, value)| pprof::Sample {
            // pprof lists the leaf first
            location_id: stack.iter().rev().map(|s| id_of(s)).collect(),
            value: vec![value],
        })
        .collect();
    let profile = pprof::Profile {
        sample_type: vec![pprof::ValueType {
            r#type: cpu,
            unit: ns,
        }],
        sample,
        location,
        function,
        string_table: strings,
        time_nanos: TIME,
        duration_nanos: 10_000_000_000,
        period_type: Some(pprof::ValueType {
            r#type: cpu,
            unit: ns,
        }),
        period: 10_000_000,
    };
    gzip(&profile.encode_to_vec())
}

fn state() -> &'static State {
    static STATE: OnceLock<State> = OnceLock::new();
    ui_api_tests::shared(&STATE, || async {
        let dir = tempfile::tempdir().unwrap();
        let mut next = 0;
        let programs = [
            ("cpp", cpp_program(dir.path(), &mut next)),
            (
                "rust_legacy",
                rust_program(dir.path(), "zqdm_legacy", false, &mut next),
            ),
            ("rust_v0", rust_program(dir.path(), "zqdm_v0", true, &mut next)),
        ];
        eprintln!("references from {}:", cxxfilt_version());
        for (_, p) in &programs {
            for s in std::iter::once(&p.main).chain(&p.functions) {
                eprintln!(
                    "  {:<20} {:>6}  {}  ->  {}",
                    p.what, s.value, s.mangled, s.readable
                );
            }
        }
        let server = Server::start_for_process(Options::default()).await;
        let ingest = Ingest::new(server.http());
        let mut cases = Vec::new();
        for (name, program) in programs {
            for (sent, suffix) in [(Sent::MangledOnly, "mangled"), (Sent::ReadableAndSystem, "named")] {
                let service = format!("dm_{name}_{suffix}");
                let query = [
                    ("name", format!("{service}{{env=demangle}}")),
                    ("format", "pprof".to_string()),
                ];
                let answer = ingest.ingest(&query, encode(&program, sent)).await;
                assert_eq!(answer.status, 200, "{service}: {}", answer.text());
                cases.push(Case {
                    service,
                    program: program.clone(),
                    sent,
                });
            }
        }
        State { server, cases }
    })
}

/// The case's service over the window holding its profile, plus `extra`.
fn read_query(case: &Case, extra: &[(&str, &str)]) -> Params {
    let base = with(
        params(PROFILE_TYPE, TIME - MINUTE, TIME + MINUTE),
        &[("selector", &format!("{{service.name=\"{}\"}}", case.service))],
    );
    with(base, extra)
}

async fn folded(http: &Http, case: &Case, extra: &[(&str, &str)]) -> BTreeMap<String, i64> {
    let mut query = read_query(case, extra);
    query.push(("format".into(), "folded".into()));
    parse_folded(&http.text("/api/v1/flamegraph", &query).await)
}

fn what(case: &Case) -> String {
    format!("{} sent {:?} as {}", case.program.what, case.sent, case.service)
}

#[test]
fn the_references_from_cxxfilt_agree_between_legacy_and_v0() {
    let state = state();
    let program = |service: &str| {
        &state
            .cases
            .iter()
            .find(|c| c.service == service)
            .expect("case")
            .program
    };
    let (from_v0, from_legacy) = as_legacy(program("dm_rust_v0_mangled"), program("dm_rust_legacy_mangled"));
    assert_eq!(from_v0, from_legacy, "the v0 names read as the legacy ones");
}

#[tokio::test]
async fn the_flamegraph_shows_each_function_by_its_readable_name() {
    let state = state();
    let http = Http::new(state.server.http());
    for case in &state.cases {
        let expected = case.program.folded();
        let json = http.json("/api/v1/flamegraph", &read_query(case, &[])).await;
        assert_eq!(
            json_folded(&json["root"]),
            expected,
            "{}: JSON flamegraph",
            what(case)
        );
        let values = json_node_values(&json["root"]);
        assert_eq!(
            values.get(&Vec::new()).map(|v| v.1),
            Some(case.program.total()),
            "{}: root total",
            what(case)
        );
        assert_eq!(folded(&http, case, &[]).await, expected, "{}: folded", what(case));
    }
}

#[tokio::test]
async fn top_lists_each_function_by_its_readable_name() {
    let state = state();
    let http = Http::new(state.server.http());
    for case in &state.cases {
        // self per readable name (the legacy generics share one); main is on every stack
        let mut expected: BTreeMap<String, (i64, i64)> = BTreeMap::new();
        let main = &case.program.main;
        expected.insert(main.readable.clone(), (main.value, case.program.total()));
        for f in &case.program.functions {
            let e = expected.entry(f.readable.clone()).or_insert((0, 0));
            e.0 += f.value;
            e.1 += f.value;
        }
        let top = http
            .json("/api/v1/top", &read_query(case, &[("limit", "1000")]))
            .await;
        let got: BTreeMap<String, (i64, i64)> = top["functions"]
            .as_array()
            .unwrap_or_else(|| panic!("{}: no functions in {top}", what(case)))
            .iter()
            .map(|f| {
                let name = f["name"].as_str().expect("name").to_string();
                (
                    name,
                    (
                        f["self"].as_i64().expect("self"),
                        f["total"].as_i64().expect("total"),
                    ),
                )
            })
            .collect();
        assert_eq!(got, expected, "{}: top", what(case));
        assert_eq!(
            top["total"].as_i64(),
            Some(case.program.total()),
            "{}: top total",
            what(case)
        );
    }
}

/// `(name, system_name)` of every line of every sample, as npm's `pprof-format` decodes
/// them (the crate's reader keeps one name per frame).
fn exported_names(gzipped: &[u8]) -> BTreeSet<(String, String)> {
    let dir = node_tool::install(
        "pprof-reader",
        &["package.json", "read.mjs"],
        "node_modules/pprof-format/package.json",
    );
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), gzipped).unwrap();
    let out = node_tool::run(
        Command::new("node").arg(dir.join("read.mjs")).arg(file.path()),
        "node read.mjs (pprof-format)",
    );
    let doc: Value = serde_json::from_slice(&out).expect("reader output is JSON");
    let mut names = BTreeSet::new();
    for sample in doc["samples"].as_array().expect("samples") {
        for location in sample["locations"].as_array().expect("locations") {
            for line in location["lines"].as_array().expect("lines") {
                let field = |k: &str| line[k].as_str().expect("a string").to_string();
                names.insert((field("name"), field("system_name")));
            }
        }
    }
    names
}

#[tokio::test]
async fn the_pprof_export_names_functions_readably_and_keeps_the_mangled_symbol() {
    let state = state();
    let http = Http::new(state.server.http());
    for case in &state.cases {
        let bytes = http
            .get("/api/v1/flamegraph", &read_query(case, &[("format", "pprof")]))
            .await
            .ok()
            .body;
        let profile = pprof_reader::decode(&bytes);
        let mut paths: BTreeMap<String, i64> = BTreeMap::new();
        for s in &profile.samples {
            assert_eq!(s.values.len(), 1, "{}: one value per sample", what(case));
            *paths.entry(s.frames.join(";")).or_insert(0) += s.values[0];
        }
        assert_eq!(paths, case.program.folded(), "{}: pprof export", what(case));
        // every function by its readable name with its symbol as the system name; an
        // unmangled name (C's main) has no other name to keep
        let expected: BTreeSet<(String, String)> = std::iter::once(&case.program.main)
            .chain(&case.program.functions)
            .filter(|s| s.mangled != s.readable)
            .map(|s| (s.readable.clone(), s.mangled.clone()))
            .collect();
        let got: BTreeSet<(String, String)> = exported_names(&bytes)
            .into_iter()
            .filter(|(name, _)| name != "main")
            .collect();
        assert_eq!(
            got,
            expected,
            "{}: pprof functions (name, system_name)",
            what(case)
        );
    }
}

#[tokio::test]
async fn focus_on_the_mangled_or_the_readable_name_keeps_that_functions_samples() {
    let state = state();
    let http = Http::new(state.server.http());
    for case in &state.cases {
        let main = &case.program.main.readable;
        for f in &case.program.functions {
            let path = format!("{main};{}", f.readable);
            let by_symbol = format!("system_name:{}", regex::escape(&f.mangled));
            assert_eq!(
                folded(&http, case, &[("focus", &by_symbol)]).await,
                BTreeMap::from([(path.clone(), f.value)]),
                "{}: focus={by_symbol}",
                what(case)
            );
            // every function read the same way (legacy generics) is kept
            let same: i64 = case
                .program
                .functions
                .iter()
                .filter(|g| g.readable == f.readable)
                .map(|g| g.value)
                .sum();
            let by_name = regex::escape(&f.readable);
            assert_eq!(
                folded(&http, case, &[("focus", &by_name)]).await,
                BTreeMap::from([(path, same)]),
                "{}: focus={by_name}",
                what(case)
            );
        }
        // a pattern matches the whole field: a part of a symbol keeps nothing
        let f = &case.program.functions[0];
        let part = format!("system_name:{}", regex::escape(&f.mangled[..f.mangled.len() - 1]));
        assert_eq!(
            folded(&http, case, &[("focus", &part)]).await,
            BTreeMap::new(),
            "{}: focus={part}",
            what(case)
        );
    }
}
