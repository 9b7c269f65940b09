//! A CPU quota for one process, as a pod's CPU limit gives it: a cgroup of its own with
//! the CFS bandwidth of `cores` (cgroup v1's `cpu` controller, `cpu.cfs_quota_us` over
//! `cpu.cfs_period_us`; or cgroup v2's `cpu.max`). Creating one needs root; where it
//! cannot be created the error says why rather than measuring without a quota.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// A cgroup with a CPU quota, removed when dropped (once its processes have exited).
pub(crate) struct CpuGroup {
    dir: PathBuf,
}

/// Where CPU cgroups are made on this machine.
enum Hierarchy {
    /// cgroup v1: the `cpu` controller's own mount.
    V1(PathBuf),
    /// cgroup v2: the unified hierarchy, with `cpu` in its controllers.
    V2(PathBuf),
}

fn hierarchy() -> anyhow::Result<Hierarchy> {
    let v1 = Path::new("/sys/fs/cgroup/cpu");
    if v1.join("cpu.cfs_quota_us").exists() {
        return Ok(Hierarchy::V1(v1.to_path_buf()));
    }
    let v2 = Path::new("/sys/fs/cgroup");
    match std::fs::read_to_string(v2.join("cgroup.controllers")) {
        Ok(controllers) if controllers.split_whitespace().any(|c| c == "cpu") => Ok(Hierarchy::V2(v2.into())),
        Ok(controllers) => bail!(
            "cgroup v2 at {} offers no cpu controller (controllers: {:?}), and there is no cgroup v1 \
             cpu controller at /sys/fs/cgroup/cpu: a CPU quota cannot be set",
            v2.display(),
            controllers.trim()
        ),
        Err(e) => bail!(
            "neither a cgroup v1 cpu controller (/sys/fs/cgroup/cpu/cpu.cfs_quota_us) nor cgroup v2 \
             (/sys/fs/cgroup/cgroup.controllers: {e}) is mounted: a CPU quota cannot be set"
        ),
    }
}

impl CpuGroup {
    /// A new cgroup named `name` (made unique to this process) limited to `cores` CPUs in
    /// every CFS period of `period`.
    pub(crate) fn create(name: &str, cores: f64, period: std::time::Duration) -> anyhow::Result<CpuGroup> {
        let period_us = period.as_micros().clamp(1000, 1_000_000) as u64;
        let quota = ((cores * period_us as f64).round() as u64).max(1000);
        let unique = format!("stackhouse-bench-{}-{name}", std::process::id());
        let (dir, files) = match hierarchy()? {
            Hierarchy::V1(root) => (
                root.join(unique),
                vec![
                    ("cpu.cfs_period_us", period_us.to_string()),
                    ("cpu.cfs_quota_us", quota.to_string()),
                ],
            ),
            Hierarchy::V2(root) => {
                // A child gets the cpu controller only if its parent hands it down.
                let control = root.join("cgroup.subtree_control");
                std::fs::write(&control, "+cpu").with_context(|| {
                    format!(
                        "enabling the cpu controller in {} (run as root)",
                        control.display()
                    )
                })?;
                (
                    root.join(unique),
                    vec![("cpu.max", format!("{quota} {period_us}"))],
                )
            }
        };
        std::fs::create_dir(&dir)
            .with_context(|| format!("creating the cgroup {} (this needs root)", dir.display()))?;
        let group = CpuGroup { dir };
        for (file, value) in files {
            let path = group.dir.join(file);
            std::fs::write(&path, &value)
                .with_context(|| format!("writing {value} to {}", path.display()))?;
        }
        Ok(group)
    }

    /// Moves process `pid` (every thread of it, and the threads it starts later) into the
    /// group.
    pub(crate) fn add(&self, pid: u32) -> anyhow::Result<()> {
        let procs = self.dir.join("cgroup.procs");
        std::fs::write(&procs, pid.to_string())
            .with_context(|| format!("moving process {pid} into {}", procs.display()))?;
        let listed =
            std::fs::read_to_string(&procs).with_context(|| format!("reading {}", procs.display()))?;
        if !listed.lines().any(|l| l.trim() == pid.to_string()) {
            bail!(
                "process {pid} is not in {} after moving it there",
                procs.display()
            );
        }
        Ok(())
    }
}

impl Drop for CpuGroup {
    fn drop(&mut self) {
        // Fails while a process is still inside; the caller kills and reaps them first.
        if let Err(e) = std::fs::remove_dir(&self.dir) {
            eprintln!("bench: removing the cgroup {}: {e}", self.dir.display());
        }
    }
}
