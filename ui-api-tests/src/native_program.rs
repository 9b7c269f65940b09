//! A C program compiled here with `gcc -g -O1` and binutils' view of it: the native
//! symbolization tests compare our frames with what `addr2line -f -i -e` prints for
//! addresses taken with `nm` plus small offsets. gcc and binutils are required: without
//! them the tests fail saying so (CI installs them).

use std::path::{Path, PathBuf};
use std::process::Command;

const PROGRAM: &str = r#"
#include <stdio.h>
#include <stdlib.h>

static inline __attribute__((always_inline)) long square(long x) {
    long y = x * x;
    if (y > 1000) y -= x;
    return y;
}

__attribute__((noinline)) long sum_squares(long n) {
    long total = 0;
    for (long i = 0; i < n; i++) {
        total += square(i);
    }
    return total;
}

__attribute__((noinline)) long twice(long n) {
    return sum_squares(n) + sum_squares(n / 2);
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100;
    printf("%ld\n", twice(n));
    return 0;
}
"#;

pub fn tool(name: &str) -> String {
    let found = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {name}"))
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        found,
        "{name} is required by the native symbolization tests (Debian: gcc, binutils) and is not installed"
    );
    name.to_string()
}

pub fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// The program, built in `dir`, and its split debug file.
pub fn build(dir: &Path) -> (PathBuf, PathBuf) {
    let source = dir.join("prog.c");
    std::fs::write(&source, PROGRAM).unwrap();
    let binary = dir.join("prog");
    run(Command::new(tool("gcc"))
        .args(["-g", "-O1", "-Wl,--build-id=sha1", "-o"])
        .arg(&binary)
        .arg(&source));
    let debug = dir.join("prog.debug");
    run(Command::new(tool("objcopy"))
        .arg("--only-keep-debug")
        .arg(&binary)
        .arg(&debug));
    (binary, debug)
}

/// `nm` addresses of the program's own functions.
pub fn functions(binary: &Path) -> Vec<(String, u64)> {
    run(Command::new(tool("nm")).arg(binary))
        .lines()
        .filter_map(|line| {
            let mut parts = line.split_whitespace();
            let (address, kind, name) = (parts.next()?, parts.next()?, parts.next()?);
            let wanted = ["main", "twice", "sum_squares"].contains(&name);
            (wanted && kind.eq_ignore_ascii_case("t"))
                .then(|| (name.to_string(), u64::from_str_radix(address, 16).unwrap()))
        })
        .collect()
}

/// binutils' frames for `address`, caller first: (function, line).
pub fn addr2line(file: &Path, address: u64) -> Vec<(String, u32)> {
    let out = run(Command::new(tool("addr2line"))
        .args(["-f", "-i", "-e"])
        .arg(file)
        .arg(format!("{address:#x}")));
    let lines: Vec<&str> = out.lines().collect();
    let mut frames: Vec<(String, u32)> = lines
        .chunks(2)
        .map(|pair| {
            let line = pair[1]
                .rsplit(':')
                .next()
                .and_then(|l| l.split_whitespace().next())
                .and_then(|l| l.parse().ok())
                .unwrap_or(0);
            (pair[0].to_string(), line)
        })
        .collect();
    frames.reverse();
    frames
}

/// Every instruction-ish offset into each function, so that inlined code is hit too.
pub fn probes(binary: &Path) -> Vec<u64> {
    let functions = functions(binary);
    assert_eq!(
        functions.len(),
        3,
        "nm found the program's functions: {functions:?}"
    );
    functions
        .iter()
        .flat_map(|&(_, start)| (0..48).step_by(3).map(move |offset| start + offset))
        .collect()
}

/// The GNU build id of `binary` as readelf prints it ("Build ID: <hex>").
pub fn build_id(binary: &Path) -> String {
    let notes = run(Command::new(tool("readelf")).arg("-n").arg(binary));
    notes
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .expect("readelf shows a build id")
        .trim()
        .to_string()
}
