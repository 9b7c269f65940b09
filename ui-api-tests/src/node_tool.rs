//! Independent clients written for node (`ui-api-tests/<name>/`), installed with npm into
//! the target directory on first use, so that the source tree stays clean.

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

use serde_json::Value;

use crate::workspace_dir;

/// Runs a command to success and returns its stdout; `what` names it in the failure.
pub fn run(cmd: &mut Command, what: &str) -> Vec<u8> {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run ({e}); node and npm are needed for these checks"));
    assert!(
        out.status.success(),
        "{what} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// The tool's directory under the target dir with `files` copied from the source tree and
/// its dependencies installed; `installed` is a path (relative to it) that exists once
/// npm has installed them.
pub fn install(name: &str, files: &[&str], installed: &str) -> PathBuf {
    // Tests of one binary run in parallel: without this, a second test sees `installed`
    // as soon as the first one's npm has unpacked it and runs node against a half-installed
    // package (seen on a fresh machine: "Cannot find package .../playwright-core/index.js").
    static INSTALLING: Mutex<()> = Mutex::new(());
    let _one_at_a_time = INSTALLING.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_dir().join("target"));
    let dir = target.join(name);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    let src = workspace_dir().join("ui-api-tests").join(name);
    let mut changed = false;
    for file in files {
        let text = std::fs::read(src.join(file)).unwrap_or_else(|e| panic!("reading {name}/{file}: {e}"));
        if std::fs::read(dir.join(file)).ok().as_ref() != Some(&text) {
            std::fs::write(dir.join(file), text).unwrap_or_else(|e| panic!("copying {name}/{file}: {e}"));
            changed = true;
        }
    }
    if changed || !Path::new(&dir.join(installed)).exists() {
        run(
            Command::new("npm")
                .args(["install", "--no-audit", "--no-fund", "--no-package-lock"])
                .current_dir(&dir),
            &format!("npm install for {name}"),
        );
    }
    dir
}

/// Runs `node script args...` with `input` as JSON on stdin and returns the JSON it prints;
/// `what` names the tool in failures.
pub fn run_json(what: &str, script: &Path, args: &[&OsStr], input: &Value) -> Value {
    let mut child = Command::new("node")
        .arg(script)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: cannot run node ({e}); node is needed for these checks"));
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(input.to_string().as_bytes())
        .unwrap_or_else(|e| panic!("{what}: writing its input: {e}"));
    let out = child.wait_with_output().expect("waiting for node");
    assert!(
        out.status.success(),
        "{what} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{what} printed no JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}
