#![no_main]
// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stackhouse_fuzz::targets::jfr(data));
