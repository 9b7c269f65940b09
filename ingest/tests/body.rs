//! Request body decompression, measured with a counting allocator: the limit must hold
//! for memory, not only for the result.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]
// A counting global allocator is the one way to see what decompression allocates.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Write;

use flate2::Compression;
use flate2::write::GzEncoder;
use stackhouse_ingest::body::{BodyError, decompress};

/// Counts live heap bytes per thread, so that tests running in parallel do not disturb
/// each other's measurements.
struct Counting;

thread_local! {
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

fn track(delta: isize) {
    // try_with: the allocator may run while thread locals are being torn down.
    let _ = LIVE.try_with(|live| {
        let now = live.get().saturating_add_signed(delta);
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        track(layout.size() as isize);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        track(-(layout.size() as isize));
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        track(new_size as isize - layout.size() as isize);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Peak of additional heap bytes while `f` runs on this thread.
fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(base));
    let out = f();
    (out, PEAK.with(Cell::get) - base)
}

fn gzip(chunks: impl IntoIterator<Item = Vec<u8>>) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::best());
    for chunk in chunks {
        encoder.write_all(&chunk).unwrap();
    }
    encoder.finish().unwrap()
}

#[test]
fn gzip_bomb_is_too_large_without_being_inflated() {
    const GIB: usize = 1 << 30;
    const MIB: usize = 1 << 20;
    // Streamed in 1 MiB pieces so that the test itself never holds 1 GiB either.
    let zeros = vec![0u8; MIB];
    let bomb = gzip(std::iter::repeat_n(zeros, GIB / MIB));
    assert!(bomb.len() < 8 * MIB, "compressed to {} bytes", bomb.len());

    let limit = 16 * MIB;
    let (result, peak) = peak_during(|| decompress(&bomb, Some("gzip"), limit));
    assert_eq!(result.unwrap_err(), BodyError::TooLarge { limit });
    // The output buffer (limit + 1), a read chunk and the inflate state; nowhere near 1 GiB.
    assert!(
        peak <= limit + 2 * MIB,
        "peak allocation {peak} bytes for a limit of {limit}"
    );
}

#[test]
fn limit_applies_after_decompression() {
    let data: Vec<u8> = (0..100_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
    let compressed = gzip([data.clone()]);
    assert_eq!(
        decompress(&compressed, Some("gzip"), data.len())
            .unwrap()
            .as_ref(),
        &data[..]
    );
    assert_eq!(
        decompress(&compressed, Some("GZIP"), data.len())
            .unwrap()
            .as_ref(),
        &data[..]
    );
    assert_eq!(
        decompress(&compressed, Some("gzip"), data.len() - 1).unwrap_err(),
        BodyError::TooLarge {
            limit: data.len() - 1
        }
    );
}

#[test]
fn concatenated_gzip_members_are_one_body() {
    let mut body = gzip([b"hello ".to_vec()]);
    body.extend(gzip([b"world".to_vec()]));
    assert_eq!(
        decompress(&body, Some("gzip"), 100).unwrap().as_ref(),
        b"hello world"
    );
}

#[test]
fn corrupt_gzip_is_malformed() {
    let mut body = gzip([vec![7u8; 10_000]]);
    let middle = body.len() / 2;
    body.truncate(middle);
    assert!(matches!(
        decompress(&body, Some("gzip"), 1 << 20),
        Err(BodyError::Malformed(_))
    ));
    assert!(matches!(
        decompress(b"not gzip", Some("gzip"), 1 << 20),
        Err(BodyError::Malformed(_))
    ));
}

#[test]
fn unknown_encodings_are_refused() {
    assert_eq!(
        decompress(b"x", Some("zstd"), 10).unwrap_err(),
        BodyError::UnsupportedEncoding("zstd".into())
    );
}
