#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stackhouse_fuzz::targets::body(data));
