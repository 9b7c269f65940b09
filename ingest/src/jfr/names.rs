//! How a JFR frame is named: as Pyroscope names it (grafana/jfr-parser v0.18.0, what
//! `/ingest?format=jfr` gives a pyroscope-java user), or in the JDK's dotted style.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;
use std::sync::LazyLock;

use regex::Regex;

/// The naming style of JFR frames.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FrameNames {
    /// `<class-name symbol>.<method-name symbol>` with JVM-internal slashes, both symbols
    /// renamed by [`rewrite_symbol`]; the empty class of async-profiler's native and
    /// placeholder frames gives a leading `.`. A frame whose method or class constant is
    /// missing is dropped.
    #[default]
    Pyroscope,
    /// `<class name with '/' replaced by '.'>.<method name>`, the method name alone when the
    /// class has no name, [`super::UNKNOWN_METHOD`] for a null method: what `jfr print`
    /// and JMC show.
    Jdk,
}

impl FrameNames {
    pub const ALL: [FrameNames; 2] = [FrameNames::Pyroscope, FrameNames::Jdk];

    pub fn as_str(self) -> &'static str {
        match self {
            FrameNames::Pyroscope => "pyroscope",
            FrameNames::Jdk => "jdk",
        }
    }
}

impl fmt::Display for FrameNames {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, thiserror::Error)]
#[error("unknown JFR frame naming {0:?}: use pyroscope or jdk")]
pub struct UnknownFrameNames(String);

impl FromStr for FrameNames {
    type Err = UnknownFrameNames;

    fn from_str(s: &str) -> Result<FrameNames, UnknownFrameNames> {
        FrameNames::ALL
            .into_iter()
            .find(|n| n.as_str() == s)
            .ok_or_else(|| UnknownFrameNames(s.to_string()))
    }
}

/// A frame's name from its class-name and method-name symbols (`None`: null).
pub(crate) fn frame_name(style: FrameNames, class: Option<&str>, method: Option<&str>) -> String {
    let method = method.unwrap_or("");
    match style {
        FrameNames::Pyroscope => format!(
            "{}.{}",
            rewrite_symbol(class.unwrap_or("")),
            rewrite_symbol(method)
        ),
        FrameNames::Jdk => match class {
            Some(class) if !class.is_empty() => format!("{}.{method}", class.replace('/', ".")),
            _ => method.to_string(),
        },
    }
}

/// jfr-parser's `mergeJVMGeneratedClasses` rules, in its order, each applied to the
/// previous one's output: per-run numbers and hashes of generated classes and extracted
/// libraries become `_`, so that flame graphs of different JVMs merge.
static REWRITES: LazyLock<[(Regex, &str); 6]> = LazyLock::new(|| {
    // Go's `\d` is ASCII only: `[0-9]` says so in Rust's Unicode-aware syntax.
    let rule = |pattern: &str, replacement| (Regex::new(pattern).expect("valid pattern"), replacement);
    [
        rule(
            r"^(jdk/internal/reflect/GeneratedMethodAccessor)([0-9]+)$",
            "${1}_",
        ),
        rule(r"^(.+\$\$Lambda)(\$?[0-9]*[./](0x)?[0-9a-f]+|[0-9]+)$", "${1}_"),
        rule(
            r"^(\.?/tmp/)?(libzstd-jni-[0-9]+\.[0-9]+\.[0-9]+-)([0-9]+)(\.so)( \(deleted\))?$",
            "libzstd-jni-_.so",
        ),
        rule(
            r"^(\.?/tmp/)?(lib)?(amazonCorrettoCryptoProvider)(NativeLibraries\.)?([0-9a-f]{16})(/libcrypto|/libamazonCorrettoCryptoProvider)?(\.so)( \(deleted\))?$",
            "libamazonCorrettoCryptoProvider_.so",
        ),
        rule(
            r"^(\.?/tmp/)?(libasyncProfiler)-(linux-arm64|linux-musl-x64|linux-x64|macos)-(17b9a1d8156277a98ccc871afa9a8f69215f92)(\.so)( \(deleted\))?$",
            "libasyncProfiler-_.so",
        ),
        rule(r"^(.+\$\$EnhancerBySpringCGLIB\$\$)(.*)$", "${1}_"),
    ]
});

/// A symbol renamed by every rule of [`REWRITES`] in turn.
pub(crate) fn rewrite_symbol(symbol: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(symbol);
    for (pattern, replacement) in REWRITES.iter() {
        if let Cow::Owned(s) = pattern.replace(&out, *replacement) {
            out = Cow::Owned(s);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rw(s: &str) -> String {
        rewrite_symbol(s).into_owned()
    }

    #[test]
    fn each_rule_renames_what_the_reference_lists() {
        // 1. Reflection accessors of JDK 9+.
        assert_eq!(
            rw("jdk/internal/reflect/GeneratedMethodAccessor1234"),
            "jdk/internal/reflect/GeneratedMethodAccessor_"
        );
        // 2. Lambdas: JDK 17 `$N.0x…`, JDK 21+ `.0x…`, JDK 8 `$N/decimal`, Scala `$$$Lambda`, bare digits.
        assert_eq!(rw("Foo$$Lambda$985.0x0000000800a1b2c8"), "Foo$$Lambda_");
        assert_eq!(rw("Foo$$Lambda.0x0000000800a1b2c8"), "Foo$$Lambda_");
        assert_eq!(rw("Foo$$Lambda$4/1283928880"), "Foo$$Lambda_");
        assert_eq!(rw("X$$$Lambda$7.0x00000008001d4a40"), "X$$$Lambda_");
        assert_eq!(rw("Foo$$Lambda1234"), "Foo$$Lambda_");
        // 3. zstd-jni's extracted library, with or without /tmp/ and " (deleted)".
        assert_eq!(rw("/tmp/libzstd-jni-1.5.2-3456.so (deleted)"), "libzstd-jni-_.so");
        assert_eq!(rw("./tmp/libzstd-jni-1.5.2-3456.so"), "libzstd-jni-_.so");
        assert_eq!(rw("libzstd-jni-1.5.2-3456.so"), "libzstd-jni-_.so");
        // 4. Amazon Corretto Crypto Provider, both layouts.
        assert_eq!(
            rw("/tmp/libamazonCorrettoCryptoProvider0123456789abcdef.so"),
            "libamazonCorrettoCryptoProvider_.so"
        );
        assert_eq!(
            rw("/tmp/amazonCorrettoCryptoProviderNativeLibraries.0123456789abcdef/libcrypto.so (deleted)"),
            "libamazonCorrettoCryptoProvider_.so"
        );
        // 5. async-profiler's own library, only with the hard-coded hash.
        assert_eq!(
            rw("/tmp/libasyncProfiler-linux-x64-17b9a1d8156277a98ccc871afa9a8f69215f92.so"),
            "libasyncProfiler-_.so"
        );
        assert_eq!(
            rw("./tmp/libasyncProfiler-macos-17b9a1d8156277a98ccc871afa9a8f69215f92.so (deleted)"),
            "libasyncProfiler-_.so"
        );
        // 6. Spring CGLIB enhancers.
        assert_eq!(
            rw("com/acme/Service$$EnhancerBySpringCGLIB$$5f2a9c1e"),
            "com/acme/Service$$EnhancerBySpringCGLIB$$_"
        );
        // Rules apply in order to every symbol: a method-name symbol is renamed too.
        assert_eq!(rw("lambda$run$0"), "lambda$run$0");
    }

    #[test]
    fn names_no_rule_matches_stay_as_they_are() {
        for kept in [
            "jdk/proxy2/$Proxy82",
            "com/sun/proxy/$Proxy12",
            "jdk/internal/reflect/GeneratedConstructorAccessor1050",
            "jdk/internal/reflect/GeneratedSerializationConstructorAccessor7",
            "java/lang/invoke/LambdaForm$MH.0x0000000800c0c400",
            "java/lang/invoke/LambdaForm$DMH.0x0000000800c0d000",
            "com/acme/Foo$$LambdaHelper",
            "sun/reflect/GeneratedMethodAccessor12",
            "./tmp/snappy-1.1.10-1a2b3c4d-libsnappyjava.so",
            // Upper-case hex is not a lambda suffix for RE2's [\da-f].
            "Foo$$Lambda$985.0x0000000800A1B2C8",
            // Another hash of async-profiler's library.
            "/tmp/libasyncProfiler-linux-x64-0123456789abcdef0123456789abcdef012345.so",
            "com/acme/Service$$FastClassBySpringCGLIB$$5f2a9c1e",
            "com/acme/Service$$SpringCGLIB$$0",
            // Unreleased jfr-parser rule 2 (ea4c3635) would rename this; v0.18.0 does not.
            "Ctx$$Lambda$lambda$wrap$2$263.0x0000000801234567",
            // Before 986e71d, `Foo$$Lambda$_`; our v0.18.0 rule leaves an already merged name.
            "Foo$$Lambda_",
            // `$N` without an address: neither alternative of rule 2.
            "kafka/cluster/Partition$$Lambda$1234",
            // A zstd-jni version with a fourth part.
            "/tmp/libzstd-jni-1.5.5-4-12345.so",
        ] {
            assert_eq!(rw(kept), kept);
        }
    }

    #[test]
    fn frame_names_in_both_styles() {
        let py = |c, m| frame_name(FrameNames::Pyroscope, c, m);
        let jdk = |c, m| frame_name(FrameNames::Jdk, c, m);
        assert_eq!(
            py(Some("kafka/network/Processor"), Some("poll")),
            "kafka/network/Processor.poll"
        );
        assert_eq!(
            jdk(Some("kafka/network/Processor"), Some("poll")),
            "kafka.network.Processor.poll"
        );
        // async-profiler's empty class: stubs, and unresolved addresses named by library.
        assert_eq!(py(Some(""), Some("itable stub")), ".itable stub");
        assert_eq!(
            py(Some(""), Some("/lib/x86_64-linux-gnu/libc-2.31.so")),
            "./lib/x86_64-linux-gnu/libc-2.31.so"
        );
        assert_eq!(jdk(Some(""), Some("itable stub")), "itable stub");
        // A missing symbol is "".
        assert_eq!(py(None, Some("run")), ".run");
        assert_eq!(py(Some("Foo"), None), "Foo.");
        // Both symbols are rewritten.
        assert_eq!(
            py(
                Some("kafka/cluster/Partition$$Lambda$1234.0x0000000800abcdef"),
                Some("apply")
            ),
            "kafka/cluster/Partition$$Lambda_.apply"
        );
        assert_eq!(
            jdk(Some("Foo$$Lambda$985.0x0000000800a1b2c8"), Some("run")),
            "Foo$$Lambda$985.0x0000000800a1b2c8.run"
        );
    }

    #[test]
    fn styles_parse_from_their_names() {
        assert_eq!("pyroscope".parse::<FrameNames>().unwrap(), FrameNames::Pyroscope);
        assert_eq!("jdk".parse::<FrameNames>().unwrap(), FrameNames::Jdk);
        let e = "dotted".parse::<FrameNames>().unwrap_err().to_string();
        assert!(e.contains("pyroscope or jdk"), "{e}");
        assert_eq!(FrameNames::default(), FrameNames::Pyroscope);
    }
}
