//! Names for native frames (C, C++, Rust, libc) that profilers send as a mapping and an
//! address: an ELF file with DWARF or a symbol table, found by the mapping's GNU build id,
//! turns a virtual address into its frames, inlined ones included.
//!
//! Addresses arrive as the OTel eBPF profiler sends them: with `memory_start` 0 the address
//! is already the ELF virtual address; otherwise it is a process address, which
//! `address - memory_start + file_offset` turns into a file offset, and the file offset a
//! `PT_LOAD` program header covers maps to a virtual address.

use std::borrow::Cow;
use std::sync::Arc;

use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SymbolKind};

type Reader = gimli::EndianArcSlice<gimli::RunTimeEndian>;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DebugFileError {
    #[error("not an ELF file: {0}")]
    NotElf(String),
    #[error("malformed debug information: {0}")]
    Malformed(String),
    #[error("the ELF file has no GNU build id note")]
    NoBuildId,
    #[error("the ELF file's GNU build id is {actual}, not {expected}")]
    BuildIdMismatch { expected: String, actual: String },
}

/// Where a mapping was loaded, as OTLP's `Mapping` gives it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NativeMapping {
    pub memory_start: u64,
    pub memory_limit: u64,
    pub file_offset: u64,
}

/// One frame of an address: the function and the source line, for pprof export.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NativeFrame {
    pub function: String,
    pub file: String,
    pub line: u32,
}

/// A `PT_LOAD` program header: file bytes `offset..offset + size` load at `address`.
#[derive(Clone, Copy, Debug)]
struct Load {
    offset: u64,
    size: u64,
    address: u64,
    memory_size: u64,
    executable: bool,
}

/// The page size the kernel maps files with on the platforms the eBPF profiler runs on.
const PAGE: u64 = 4096;

/// A function symbol of the symbol table, for files (or functions) without DWARF.
#[derive(Clone, Debug)]
struct Symbol {
    address: u64,
    size: u64,
    name: String,
}

/// One parsed ELF file with what symbolization needs of it.
pub struct DebugFile {
    build_id: Option<Vec<u8>>,
    loads: Vec<Load>,
    dwarf: addr2line::Context<Reader>,
    /// Sorted by address.
    symbols: Vec<Symbol>,
}

impl std::fmt::Debug for DebugFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DebugFile")
            .field("build_id", &self.build_id.as_deref().map(hex::encode))
            .field("loads", &self.loads)
            .field("symbols", &self.symbols.len())
            .finish_non_exhaustive()
    }
}

impl DebugFile {
    pub fn parse(bytes: &[u8]) -> Result<DebugFile, DebugFileError> {
        let file = object::File::parse(bytes).map_err(|e| DebugFileError::NotElf(e.to_string()))?;
        if !matches!(file.format(), object::BinaryFormat::Elf) {
            return Err(DebugFileError::NotElf(format!("{:?} object", file.format())));
        }
        let build_id = file
            .build_id()
            .map_err(|e| DebugFileError::Malformed(format!("reading the build id note: {e}")))?
            .map(<[u8]>::to_vec);
        let loads: Vec<Load> = file
            .segments()
            .map(|s| {
                let (offset, size) = s.file_range();
                Load {
                    offset,
                    size,
                    address: s.address(),
                    memory_size: s.size(),
                    executable: matches!(
                        s.flags(),
                        object::SegmentFlags::Elf { p_flags } if p_flags & object::elf::PF_X != 0
                    ),
                }
            })
            .collect();
        let endian = if file.is_little_endian() {
            gimli::RunTimeEndian::Little
        } else {
            gimli::RunTimeEndian::Big
        };
        let section = |id: gimli::SectionId| -> Result<Reader, DebugFileError> {
            let data = match file.section_by_name(id.name()) {
                Some(section) => section
                    .uncompressed_data()
                    .map_err(|e| DebugFileError::Malformed(format!("section {}: {e}", id.name())))?,
                None => Cow::Borrowed(&[][..]),
            };
            Ok(gimli::EndianArcSlice::new(Arc::from(&*data), endian))
        };
        let dwarf = gimli::Dwarf::load(section)?;
        let dwarf = addr2line::Context::from_dwarf(dwarf)
            .map_err(|e| DebugFileError::Malformed(format!("reading DWARF: {e}")))?;
        let mut symbols: Vec<Symbol> = file
            .symbols()
            .chain(file.dynamic_symbols())
            .filter(|s| s.kind() == SymbolKind::Text && s.address() != 0)
            .filter_map(|s| {
                Some(Symbol {
                    address: s.address(),
                    size: s.size(),
                    name: s.name().ok().filter(|n| !n.is_empty())?.to_string(),
                })
            })
            .collect();
        symbols.sort_by_key(|s| (s.address, std::cmp::Reverse(s.size)));
        symbols.dedup_by_key(|s| s.address);
        // A symbol without a size (hand-written assembly, `_init`) covers up to the next
        // one, or to the end of the segment holding it.
        let ends: Vec<u64> = symbols
            .iter()
            .enumerate()
            .map(|(i, s)| match symbols.get(i + 1) {
                Some(next) => next.address,
                None => loads
                    .iter()
                    .filter(|l: &&Load| l.executable)
                    .map(|l| l.address + l.memory_size)
                    .find(|&end| end > s.address)
                    .unwrap_or(s.address + 1),
            })
            .collect();
        for (symbol, end) in symbols.iter_mut().zip(ends) {
            if symbol.size == 0 {
                symbol.size = end - symbol.address;
            }
        }
        Ok(DebugFile {
            build_id,
            loads,
            dwarf,
            symbols,
        })
    }

    /// Parses `bytes` and checks that its GNU build id is `expected` (lowercase hex).
    pub fn parse_for(bytes: &[u8], expected: &str) -> Result<DebugFile, DebugFileError> {
        let file = DebugFile::parse(bytes)?;
        let actual = file.build_id_hex().ok_or(DebugFileError::NoBuildId)?;
        if !actual.eq_ignore_ascii_case(expected) {
            return Err(DebugFileError::BuildIdMismatch {
                expected: expected.to_ascii_lowercase(),
                actual,
            });
        }
        Ok(file)
    }

    pub fn build_id_hex(&self) -> Option<String> {
        self.build_id.as_deref().map(hex::encode)
    }

    /// The ELF virtual address of `address` in a process that loaded this file as
    /// `mapping`; `None` when no loaded part of the file covers it.
    pub fn virtual_address(&self, mapping: &NativeMapping, address: u64) -> Option<u64> {
        if mapping.memory_start == 0 {
            return Some(address);
        }
        let into = address.checked_sub(mapping.memory_start)?;
        if !self.loads.iter().any(|l| l.executable && l.size > 0) {
            return self.virtual_address_without_code(into);
        }
        let offset = into.checked_add(mapping.file_offset)?;
        self.loads
            .iter()
            .find(|l| l.offset <= offset && offset - l.offset < l.size)
            .map(|l| offset - l.offset + l.address)
    }

    /// A debug file (`objcopy --only-keep-debug`) keeps the program headers' addresses but
    /// zeroes their file offsets and sizes. Native frames are code, and the kernel maps a
    /// code segment from the page holding its first byte, so the mapping starts at the
    /// segment's address rounded down to a page (file offsets and addresses of a segment
    /// agree modulo the page size).
    fn virtual_address_without_code(&self, into: u64) -> Option<u64> {
        self.loads
            .iter()
            .filter(|l| l.executable)
            .map(|l| (l.address - l.address % PAGE, l))
            .find(|(start, l)| into < l.address + l.memory_size - start)
            .map(|(start, _)| start + into)
    }

    /// The frames at virtual address `address`, caller first (inlined functions after the
    /// function they were inlined into, as OTLP orders a location's lines); empty when
    /// neither DWARF nor the symbol table knows the address.
    pub fn frames(&self, address: u64) -> Vec<NativeFrame> {
        let mut frames = self.dwarf_frames(address).unwrap_or_default();
        // DWARF without a name for the outermost function (or no DWARF at all): the
        // symbol table still names it.
        if frames.first().is_none_or(|f| f.function.is_empty())
            && let Some(name) = self.symbol(address)
        {
            match frames.first_mut() {
                Some(first) => first.function = name.to_string(),
                None => frames.push(NativeFrame {
                    function: name.to_string(),
                    ..NativeFrame::default()
                }),
            }
        }
        frames.retain(|f| !f.function.is_empty());
        frames
    }

    fn dwarf_frames(&self, address: u64) -> Result<Vec<NativeFrame>, gimli::Error> {
        let mut innermost_first = Vec::new();
        let mut iter = self.dwarf.find_frames(address).skip_all_loads()?;
        while let Some(frame) = iter.next()? {
            let function = match &frame.function {
                Some(name) => name.demangle()?.into_owned(),
                None => String::new(),
            };
            let (file, line) = frame.location.as_ref().map_or((String::new(), 0), |l| {
                (l.file.unwrap_or_default().to_string(), l.line.unwrap_or(0))
            });
            innermost_first.push(NativeFrame { function, file, line });
        }
        innermost_first.reverse();
        Ok(innermost_first)
    }

    fn symbol(&self, address: u64) -> Option<&str> {
        let i = self
            .symbols
            .partition_point(|s| s.address <= address)
            .checked_sub(1)?;
        let s = &self.symbols[i];
        (address - s.address < s.size).then_some(s.name.as_str())
    }
}

impl From<gimli::Error> for DebugFileError {
    fn from(e: gimli::Error) -> DebugFileError {
        DebugFileError::Malformed(format!("reading DWARF: {e}"))
    }
}
