//! Native symbolization against binutils: a C program compiled here with `gcc -g -O1`,
//! addresses taken with `nm` plus small offsets, and what `addr2line -f -i -e` prints for
//! each as the expected frames. gcc and binutils are required: without them the tests fail
//! saying so (CI installs them).

use std::path::{Path, PathBuf};
use std::process::Command;

use stackhouse_query::native::{DebugFile, DebugFileError, NativeMapping};

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

fn tool(name: &str) -> String {
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

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// The program, built in `dir`, and its split debug file.
fn build(dir: &Path) -> (PathBuf, PathBuf) {
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
fn functions(binary: &Path) -> Vec<(String, u64)> {
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
fn addr2line(file: &Path, address: u64) -> Vec<(String, u32)> {
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

fn ours(file: &DebugFile, address: u64) -> Vec<(String, u32)> {
    file.frames(address)
        .into_iter()
        .map(|f| (f.function, f.line))
        .collect()
}

/// Every instruction-ish offset into each function, so that inlined code is hit too.
fn probes(binary: &Path) -> Vec<u64> {
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

#[test]
fn frames_match_binutils_addr2line_from_the_split_debug_file() {
    let dir = tempfile::tempdir().unwrap();
    let (binary, debug) = build(dir.path());
    let file = DebugFile::parse(&std::fs::read(&debug).unwrap()).unwrap();
    let mut inlined = 0;
    for address in probes(&binary) {
        let expected = addr2line(&debug, address);
        assert_eq!(ours(&file, address), expected, "frames at {address:#x}");
        if expected.iter().any(|(f, _)| f == "square") {
            assert!(expected.len() >= 2, "square is inlined at {address:#x}");
            inlined += 1;
        }
    }
    assert!(inlined > 0, "some probe lands in inlined code");
}

#[test]
fn the_build_id_is_read_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let (binary, debug) = build(dir.path());
    // readelf prints the note as "Build ID: <hex>".
    let notes = run(Command::new(tool("readelf")).arg("-n").arg(&binary));
    let expected = notes
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .expect("readelf shows a build id")
        .trim()
        .to_string();
    for path in [&binary, &debug] {
        let bytes = std::fs::read(path).unwrap();
        let file = DebugFile::parse(&bytes).unwrap();
        assert_eq!(file.build_id_hex().as_deref(), Some(expected.as_str()));
        assert!(DebugFile::parse_for(&bytes, &expected.to_uppercase()).is_ok());
        let other = "00".repeat(20);
        assert_eq!(
            DebugFile::parse_for(&bytes, &other).unwrap_err(),
            DebugFileError::BuildIdMismatch {
                expected: other.clone(),
                actual: expected.clone()
            }
        );
    }
    assert!(matches!(
        DebugFile::parse(b"#!/bin/sh\necho not an ELF file\n"),
        Err(DebugFileError::NotElf(_))
    ));
    let source = std::fs::read(dir.path().join("prog.c")).unwrap();
    assert!(matches!(
        DebugFile::parse(&source),
        Err(DebugFileError::NotElf(_))
    ));
}

#[test]
fn process_addresses_map_through_the_load_segments() {
    let dir = tempfile::tempdir().unwrap();
    let (binary, debug) = build(dir.path());
    let file = DebugFile::parse(&std::fs::read(&debug).unwrap()).unwrap();
    // The text segment's file offset and virtual address, from the program headers.
    let headers = run(Command::new(tool("readelf")).args(["-lW"]).arg(&binary));
    let text = headers
        .lines()
        .map(str::split_whitespace)
        .map(Iterator::collect::<Vec<_>>)
        // Flags are split by spaces ("R E") between the sizes and the alignment.
        .find(|f| f.first() == Some(&"LOAD") && f.len() > 7 && f[6..f.len() - 1].contains(&"E"))
        .expect("an executable LOAD header");
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
    let (offset, vaddr) = (hex(text[1]), hex(text[2]));
    // As the eBPF profiler sees a PIE: the text mapping starts at a page-aligned process
    // address and names the file offset it maps from.
    let mapping = NativeMapping {
        memory_start: 0x5555_5555_0000 + (offset & !0xfff),
        memory_limit: 0x5555_5556_0000,
        file_offset: offset & !0xfff,
    };
    // The binary's program headers map exactly; the debug file's (offsets zeroed by
    // objcopy) through its executable segment.
    let full = DebugFile::parse(&std::fs::read(&binary).unwrap()).unwrap();
    for address in probes(&binary) {
        let process = mapping.memory_start + (address - vaddr + offset) - mapping.file_offset;
        assert_eq!(full.virtual_address(&mapping, process), Some(address));
        assert_eq!(file.virtual_address(&mapping, process), Some(address));
        assert_eq!(ours(&file, address), addr2line(&debug, address));
    }
    // With memory_start 0 the address already is the virtual address.
    assert_eq!(
        file.virtual_address(&NativeMapping::default(), 0x1234),
        Some(0x1234)
    );
    // An address below the mapping, or past every loaded byte, has none.
    for f in [&full, &file] {
        assert_eq!(f.virtual_address(&mapping, mapping.memory_start - 1), None);
        assert_eq!(
            f.virtual_address(&mapping, mapping.memory_start + (1 << 40)),
            None
        );
    }
}

/// Without DWARF (`strip --strip-debug`), the symbol table still names each function.
#[test]
fn the_symbol_table_names_functions_without_dwarf() {
    let dir = tempfile::tempdir().unwrap();
    let (binary, _) = build(dir.path());
    let stripped = dir.path().join("prog.stripped");
    run(Command::new(tool("strip"))
        .arg("--strip-debug")
        .arg("-o")
        .arg(&stripped)
        .arg(&binary));
    let file = DebugFile::parse(&std::fs::read(&stripped).unwrap()).unwrap();
    for (name, start) in functions(&binary) {
        let frames = file.frames(start + 4);
        assert_eq!(frames.len(), 1, "{name}: {frames:?}");
        assert_eq!(frames[0].function, name);
        assert_eq!((frames[0].file.as_str(), frames[0].line), ("", 0));
    }
    // Past the last function of the text, nothing names the address.
    assert!(file.frames(u64::MAX - 1).is_empty());
}
