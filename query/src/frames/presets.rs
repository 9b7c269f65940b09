//! Named sets of frame rules (`preset=`), listed at `GET /api/v1/filter-presets`: the
//! frames a reader usually wants out of the way, as Parca's presets do.

use serde::Serialize;
use utoipa::ToSchema;

use super::rule::{FrameField, FrameRule, RuleKind};
use crate::error::QueryError;

/// A preset as listed.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Preset {
    pub name: &'static str,
    pub description: &'static str,
    pub rules: Vec<PresetRule>,
}

#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct PresetRule {
    /// `focus`, `drop` or `hide`.
    pub kind: &'static str,
    /// The frame field matched.
    pub field: &'static str,
    /// A regular expression that must match the whole field.
    pub pattern: &'static str,
}

type Rule = (RuleKind, FrameField, &'static str);

const RUST_ASYNC: &[Rule] = &[
    (
        RuleKind::Hide,
        FrameField::Function,
        r"(tokio|tokio_util|futures|futures_util|futures_core|futures_executor|async_std|async_task|async_executor|smol)::.*",
    ),
    (
        RuleKind::Hide,
        FrameField::Function,
        r"<(tokio|tokio_util|futures_util|futures_core|async_std|core::future|core::pin::Pin|std::panic)[^ ]* as .*>::.*",
    ),
    (
        RuleKind::Hide,
        FrameField::Function,
        r"(core::future|std::panicking|std::panic|core::ops::function)::.*",
    ),
];

const PYTHON: &[Rule] = &[
    (
        RuleKind::Hide,
        FrameField::Function,
        r"_?Py[A-Za-z]*_.*|pymain_.*|method_vectorcall.*|cfunction_(call|vectorcall).*|slot_tp_.*|_call_with_frames_removed",
    ),
    (
        RuleKind::Hide,
        FrameField::File,
        r"<frozen importlib\._bootstrap.*>",
    ),
    (RuleKind::Hide, FrameField::Binary, r"libpython[0-9.]*\.so.*"),
];

const JVM: &[Rule] = &[
    (
        RuleKind::Hide,
        FrameField::Function,
        r"(java\.lang\.invoke|jdk\.internal|sun\.reflect|java\.lang\.reflect)\..*|.*\$\$Lambda.*|JavaCalls::.*|JavaMain|thread_native_entry|call_stub|StubRoutines::.*|Interpreter",
    ),
    (RuleKind::Hide, FrameField::Binary, r"libjvm\.so"),
];

const LIBC_KERNEL: &[Rule] = &[
    (
        RuleKind::Hide,
        FrameField::Binary,
        r"(libc|libpthread|libm|libdl|librt)[-.].*|ld-(linux|musl)[-.].*|vmlinux|\[kernel\.kallsyms\]|\[vdso\]",
    ),
    (
        RuleKind::Hide,
        FrameField::Function,
        r"entry_SYSCALL_64.*|do_syscall_64|(__x64|__arm64|__ia32)_sys_.*|el0_svc.*|ret_from_fork.*|__libc_start_main.*|__libc_start_call_main|_start",
    ),
];

const PRESETS: [(&str, &str, &[Rule]); 4] = [
    (
        "rust-async",
        "Hides the frames of Rust async runtimes (tokio, futures, async-std, smol) and of polling and unwinding in core and std.",
        RUST_ASYNC,
    ),
    (
        "python-internals",
        "Hides CPython interpreter frames (the C API, the eval loop, vectorcall, importlib's bootstrap).",
        PYTHON,
    ),
    (
        "jvm-internals",
        "Hides JVM internals: method handles and reflection, lambda forms, the VM's own C++ frames.",
        JVM,
    ),
    (
        "libc-kernel",
        "Hides libc, the dynamic loader, the kernel and the syscall entry path.",
        LIBC_KERNEL,
    ),
];

/// Every preset, for listing.
pub fn presets() -> Vec<Preset> {
    PRESETS
        .iter()
        .map(|(name, description, rules)| Preset {
            name,
            description,
            rules: rules
                .iter()
                .map(|(kind, field, pattern)| PresetRule {
                    kind: kind.name(),
                    field: field.name(),
                    pattern,
                })
                .collect(),
        })
        .collect()
}

/// The rules of the preset `name`.
pub(crate) fn rules(name: &str) -> Result<Vec<FrameRule>, QueryError> {
    let Some((_, _, rules)) = PRESETS.iter().find(|(n, _, _)| *n == name) else {
        let names: Vec<&str> = PRESETS.iter().map(|(n, _, _)| *n).collect();
        return Err(QueryError::bad_request(format!(
            "unknown preset {name:?}: expected one of {} (see /api/v1/filter-presets)",
            names.join(", ")
        )));
    };
    rules
        .iter()
        .map(|(kind, field, pattern)| FrameRule::new(*kind, *field, pattern))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frames::Frame;

    fn hidden(preset: &str, function: &str, file: &str, binary: &str) -> bool {
        let frame = Frame {
            function: function.into(),
            file: file.into(),
            binary: binary.into(),
            ..Frame::default()
        };
        rules(preset).unwrap().iter().any(|r| r.matches(&frame))
    }

    #[test]
    fn every_preset_compiles() {
        for p in presets() {
            assert!(!p.rules.is_empty());
            rules(p.name).unwrap();
        }
        let err = rules("go").unwrap_err().to_string();
        assert!(
            err.contains("unknown preset \"go\": expected one of rust-async"),
            "{err}"
        );
    }

    #[test]
    fn presets_hide_their_frames_only() {
        assert!(hidden(
            "rust-async",
            "tokio::runtime::task::harness::poll",
            "",
            ""
        ));
        assert!(hidden(
            "rust-async",
            "<core::pin::Pin<P> as core::future::future::Future>::poll",
            "",
            ""
        ));
        assert!(!hidden("rust-async", "myapp::handler", "", ""));
        assert!(hidden("python-internals", "_PyEval_EvalFrameDefault", "", ""));
        assert!(hidden(
            "python-internals",
            "x",
            "",
            "/usr/lib/libpython3.11.so.1.0"
        ));
        assert!(!hidden("python-internals", "handle_request", "app.py", ""));
        assert!(hidden(
            "jvm-internals",
            "java.lang.invoke.LambdaForm$DMH.invokeStatic",
            "",
            ""
        ));
        assert!(!hidden("jvm-internals", "java.lang.Thread.run", "", ""));
        assert!(hidden(
            "libc-kernel",
            "memcpy",
            "",
            "/lib/x86_64-linux-gnu/libc.so.6"
        ));
        assert!(hidden("libc-kernel", "do_syscall_64", "", ""));
        assert!(hidden("libc-kernel", "schedule", "", "vmlinux"));
        assert!(!hidden("libc-kernel", "main", "", "/usr/bin/libcurl-app"));
    }
}
