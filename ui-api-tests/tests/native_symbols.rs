//! Native symbolization against binutils, on the C program of
//! `ui_api_tests::native_program`: our frames for each address equal what
//! `addr2line -f -i -e` prints.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::process::Command;

use stackhouse_query::native::{DebugFile, DebugFileError, NativeMapping};
use ui_api_tests::native_program::{addr2line, build, build_id, functions, probes, run, tool};

fn ours(file: &DebugFile, address: u64) -> Vec<(String, u32)> {
    file.frames(address)
        .into_iter()
        .map(|f| (f.function, f.line))
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
    let expected = build_id(&binary);
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
