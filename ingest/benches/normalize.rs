//! Throughput of the OTLP hot path on the real eBPF capture, without a benchmark
//! framework: `cargo bench -p stackhouse-ingest`.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use std::collections::HashSet;

use stackhouse_ingest::otlp::{
    Dictionary, Limits, SeriesAdmission, Tenant, decode_json, decode_protobuf, layout, normalize,
    normalize_within,
};
use stackhouse_storage::model::Series;
use stackhouse_storage::symbols::KnownSymbols;

const CAPTURE: &str = "/work/shared/testdata/otlp/ebpf-cpu-offcpu.v1_10";

fn time<T>(name: &str, rows: usize, mut f: impl FnMut() -> T) {
    f(); // warm up caches and lazy statics
    let start = Instant::now();
    let mut iterations = 0u32;
    while start.elapsed() < Duration::from_secs(2) {
        black_box(f());
        iterations += 1;
    }
    let per_iteration = start.elapsed() / iterations;
    let rows_per_second = rows as f64 / per_iteration.as_secs_f64();
    println!("{name:<20} {per_iteration:>12.2?}/request  {rows_per_second:>14.0} rows/s");
}

/// A series limit as the server keeps it: a set of known ids behind a lock.
struct KnownSeries(std::sync::Mutex<HashSet<i64>>);

impl SeriesAdmission for &KnownSeries {
    fn admit(&mut self, series: &Series) -> Result<(), String> {
        let mut known = self.0.lock().unwrap();
        if known.len() < 100_000 || known.contains(&series.id) {
            known.insert(series.id);
            return Ok(());
        }
        Err("full".into())
    }
}

fn main() {
    let pb = std::fs::read(format!("{CAPTURE}.pb")).expect("capture present");
    let json = std::fs::read(format!("{CAPTURE}.json")).expect("capture present");
    let request = decode_protobuf(&pb).unwrap();
    let rows = normalize("bench", &request, 0).unwrap().batch.samples.len();
    time("decode_protobuf", rows, || decode_protobuf(&pb).unwrap());
    time("decode_protobuf_flat", rows, || {
        layout::decode_protobuf_flat(&pb, None).unwrap()
    });
    time("decode_json", rows, || decode_json(&json).unwrap());
    time("normalize", rows, || normalize("bench", &request, 0).unwrap());
    // The server's path: default depth and label limits, and a series limit.
    let limits = Limits {
        max_stack_depth: 1024,
        max_label_names: 64,
        ..Limits::NONE
    };
    let dictionary = Dictionary::of(&request);
    let known = KnownSeries(Default::default());
    let stored = KnownSymbols::default();
    time("normalize+limits", rows, || {
        let tenant = Tenant {
            limits: &limits,
            series: &mut &known,
            relabel: &stackhouse_ingest::relabel::NO_RULES,
            usage: &stackhouse_ingest::usage::NO_GROUPS,
            known: &stored,
        };
        normalize_within("bench", &request, &dictionary, 0, tenant).unwrap()
    });
}
