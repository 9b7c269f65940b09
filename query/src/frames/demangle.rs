//! Names as people read them: symbols that arrive mangled (pprof from perf-based
//! converters, native profilers that send ELF symbol names) demangled with the crates the
//! symbolizer's debug-file reader uses. Rust (legacy and v0) is tried first, without the
//! hash as `rustfilt` prints it; then C++ (Itanium), as `c++filt` prints it.

use std::borrow::Cow;

/// `name` demangled, or `name` itself when it is not a mangled symbol.
pub fn demangle(name: &str) -> Cow<'_, str> {
    if !looks_mangled(name) {
        return Cow::Borrowed(name);
    }
    if let Ok(rust) = rustc_demangle::try_demangle(name) {
        return Cow::Owned(format!("{rust:#}"));
    }
    cpp(name).map_or(Cow::Borrowed(name), Cow::Owned)
}

/// Every mangled form starts with one of these; the check keeps ordinary names (most of
/// them) from the demanglers' parsers.
fn looks_mangled(name: &str) -> bool {
    name.starts_with("_Z") || name.starts_with("__Z") || name.starts_with("_R") || name.starts_with("__R")
}

fn cpp(name: &str) -> Option<String> {
    // macOS symbols carry one more leading underscore.
    let name = name
        .strip_prefix('_')
        .filter(|n| n.starts_with("_Z"))
        .unwrap_or(name);
    let symbol = cpp_demangle::Symbol::new(name).ok()?;
    symbol.demangle(&cpp_demangle::DemangleOptions::default()).ok()
}

#[cfg(test)]
mod tests {
    use super::demangle;

    #[test]
    fn rust_legacy_and_v0_lose_their_hash() {
        assert_eq!(
            demangle("_ZN4core3fmt5write17h0123456789abcdefE"),
            "core::fmt::write"
        );
        assert_eq!(demangle("_RNvCs1234_7mycrate3foo"), "mycrate::foo");
    }

    #[test]
    fn cpp_names_keep_their_parameters() {
        assert_eq!(demangle("_ZN3foo3barEi"), "foo::bar(int)");
        assert_eq!(demangle("_Z4mainv"), "main()");
    }

    #[test]
    fn other_names_are_untouched() {
        for name in [
            "main",
            "java.lang.Thread.run",
            "_Z",
            "_R",
            "_ZN4main",
            "__libc_start_main",
            "",
        ] {
            assert_eq!(demangle(name), name);
        }
    }
}
