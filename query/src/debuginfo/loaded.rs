//! Debug files in memory and the per-query view of them that symbolization reads.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use stackhouse_storage::model::{FastMap, Location, Mapping};
use stackhouse_storage::symbols::SymbolIndex;

use crate::native::{DebugFile, NativeFrame, NativeMapping};

/// Addresses a file remembers the frames of before it forgets them all: a bound on the
/// memory of a file symbolized at ever-new addresses (JIT-like churn, corrupt senders).
const MAX_REMEMBERED_ADDRESSES: usize = 1 << 20;

/// A parsed debug file and the frames already found in it: the same address is looked up
/// in DWARF once per process, whichever query asks.
pub struct LoadedFile {
    // addr2line parses compilation units lazily through cells that are not `Sync`.
    file: Mutex<DebugFile>,
    frames: Mutex<FastMap<u64, Arc<[NativeFrame]>>>,
}

impl LoadedFile {
    pub fn new(file: DebugFile) -> LoadedFile {
        LoadedFile {
            file: Mutex::new(file),
            frames: Mutex::default(),
        }
    }

    /// Frames at a process address of `mapping`, caller first; empty when the file does
    /// not know it.
    fn frames(&self, mapping: &NativeMapping, address: u64) -> Arc<[NativeFrame]> {
        let file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let Some(vaddr) = file.virtual_address(mapping, address) else {
            return Arc::from([]);
        };
        let mut frames = self.frames.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(found) = frames.get(&vaddr) {
            return found.clone();
        }
        let found: Arc<[NativeFrame]> = file.frames(vaddr).into();
        if frames.len() >= MAX_REMEMBERED_ADDRESSES {
            frames.clear();
        }
        frames.insert(vaddr, found.clone());
        found
    }
}

/// The debug files one query may use, by GNU build id (lowercase hex). Empty for a tenant
/// without debug files, which then costs its queries nothing.
#[derive(Clone, Default)]
pub struct NativeFiles {
    files: HashMap<String, Arc<LoadedFile>>,
    fingerprint: u64,
}

impl NativeFiles {
    /// `files` with the version each was loaded at (an upload time): what
    /// [`NativeFiles::fingerprint`] tells apart.
    pub(crate) fn new(files: Vec<(String, u64, Arc<LoadedFile>)>) -> NativeFiles {
        let versions: Vec<(&str, u64)> = files.iter().map(|(id, v, _)| (id.as_str(), *v)).collect();
        let fingerprint = fingerprint(versions);
        NativeFiles {
            files: files.into_iter().map(|(id, _, file)| (id, file)).collect(),
            fingerprint,
        }
    }

    /// Tells two sets of files apart (0 for none): names resolved with one set are stale
    /// under another.
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }

    /// The frames of a location without lines whose mapping has a debug file here,
    /// caller first; `None` when there is no such file or it does not know the address.
    pub fn location(&self, index: &SymbolIndex, location: &Location) -> Option<Arc<[NativeFrame]>> {
        if self.files.is_empty() || !location.lines.is_empty() || location.mapping_id.is_zero() {
            return None;
        }
        let mapping = index.mappings.get(&location.mapping_id)?;
        let file = self.files.get(&normalize_build_id(&mapping.build_id)?)?;
        let frames = file.frames(&native_mapping(mapping), location.address);
        (!frames.is_empty()).then_some(frames)
    }
}

/// 0 for no files; otherwise a hash of the sorted (build id, version) pairs, never 0.
fn fingerprint(mut versions: Vec<(&str, u64)>) -> u64 {
    if versions.is_empty() {
        return 0;
    }
    versions.sort_unstable();
    let mut hasher = std::hash::DefaultHasher::new();
    versions.hash(&mut hasher);
    hasher.finish() | 1
}

fn native_mapping(mapping: &Mapping) -> NativeMapping {
    NativeMapping {
        memory_start: mapping.memory_start,
        memory_limit: mapping.memory_limit,
        file_offset: mapping.file_offset,
    }
}

/// A GNU build id as the catalog and object keys hold it: lowercase hex, an even number
/// of 8 to 128 digits (linkers write 8 to 64 bytes; 20 for the default SHA-1). Anything
/// else (a profiler's own file hash, say) names no debug file.
pub fn normalize_build_id(id: &str) -> Option<String> {
    let valid = (8..=128).contains(&id.len())
        && id.len().is_multiple_of(2)
        && id.bytes().all(|b| b.is_ascii_hexdigit());
    valid.then(|| id.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_ids_are_lowercase_hex() {
        assert_eq!(normalize_build_id("ABCDEF0123").as_deref(), Some("abcdef0123"));
        for bad in ["", "abc", "abcdefg0", "0123456", "../../etc", &"a".repeat(130)] {
            assert_eq!(normalize_build_id(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn fingerprints_tell_file_sets_apart() {
        assert_eq!(NativeFiles::default().fingerprint(), 0);
        assert_eq!(NativeFiles::new(Vec::new()).fingerprint(), 0);
        let one = fingerprint(vec![("aa", 1), ("bb", 2)]);
        assert_ne!(one, 0);
        assert_eq!(
            one,
            fingerprint(vec![("bb", 2), ("aa", 1)]),
            "order does not matter"
        );
        assert_ne!(one, fingerprint(vec![("aa", 1), ("bb", 3)]), "a re-upload");
        assert_ne!(one, fingerprint(vec![("aa", 1)]), "a deletion");
    }
}
