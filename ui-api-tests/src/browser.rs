//! The built-in web UI as a user sees it: Debian's Chromium, headless, driven by npm's
//! `playwright-core` (`ui-api-tests/browser/`, installed into the target dir on first use).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::node_tool;

/// Where Debian's `chromium` package puts the browser.
pub const CHROMIUM: &str = "/usr/bin/chromium";

/// Where the screenshots of a run are kept (a CI artifact): beside the build.
pub fn screenshots_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::workspace_dir().join("target"));
    let dir = target.join("web-ui-screenshots");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    dir
}

/// Runs `script` (a file of `ui-api-tests/browser/`) with `plan` as its input, plus the
/// browser's path and the screenshot directory; returns what it observed.
pub fn drive(script: &str, mut plan: Value) -> Value {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: the web UI tests need Debian's chromium (apt-get install chromium; .ci/run installs it)"
    );
    let dir = node_tool::install(
        "browser",
        &["package.json", "session.mjs", script],
        "node_modules/playwright-core/package.json",
    );
    plan["chromium"] = CHROMIUM.into();
    plan["screenshots"] = screenshots_dir().to_string_lossy().into_owned().into();
    node_tool::run_json(&format!("browser script {script}"), &dir.join(script), &[], &plan)
}

/// What a browser script observed, read by JSON pointer.
pub struct Observed(pub Value);

impl Observed {
    /// The value at `pointer`; a missing one fails the test, showing everything observed.
    pub fn at(&self, pointer: &str) -> Value {
        self.0
            .pointer(pointer)
            .unwrap_or_else(|| panic!("{pointer} observed: {:#}", self.0))
            .clone()
    }
}

/// [`drive`] off the async runtime (the script blocks while the test's server answers it).
pub async fn observe(script: &'static str, plan: Value) -> Observed {
    Observed(
        tokio::task::spawn_blocking(move || drive(script, plan))
            .await
            .expect("the browser script's thread"),
    )
}
