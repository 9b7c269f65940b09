//! Every seed and every input a fuzzing campaign found (`regressions/<target>/`, one file
//! per finding, named for what it broke) through its target: what once crashed stays fixed.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::path::Path;

use stackhouse_fuzz::targets::ALL;

fn inputs(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn seeds_and_past_findings_pass_their_targets() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut ran = 0;
    for (target, run) in ALL {
        for folder in ["seeds", "regressions"] {
            for file in inputs(&root.join(folder).join(target)) {
                let data = std::fs::read(&file).unwrap();
                if let Err(panic) = std::panic::catch_unwind(|| run(&data)) {
                    let message = panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    panic!("{target} fails on {}: {message}", file.display());
                }
                ran += 1;
            }
        }
    }
    assert!(ran >= 40, "only {ran} inputs found");
}

#[test]
fn every_target_has_a_binary() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (target, _) in ALL {
        assert!(
            root.join("fuzz_targets").join(format!("{target}.rs")).exists(),
            "{target} has no fuzz_targets/{target}.rs"
        );
    }
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    assert_eq!(
        manifest.matches("[[bin]]").count(),
        ALL.len(),
        "a [[bin]] per target"
    );
}
