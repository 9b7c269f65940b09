//! `stackhouse-bench`: measure ingest, storage and query against baselines in the same run
//! (in-process, temporary local store and SQLite catalog) and print a markdown table.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use clap::Parser;

fn main() -> anyhow::Result<()> {
    stackhouse_bench::main(stackhouse_bench::BenchArgs::parse())
}
