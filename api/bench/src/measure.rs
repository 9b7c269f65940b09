//! Process CPU time, peak memory and timing statistics, read from the kernel.

// getrusage and mallinfo have no safe wrapper in the crates we use.
#![allow(unsafe_code)]

use std::time::Duration;

/// User + system CPU time of the whole process so far.
pub fn cpu_time() -> Duration {
    // SAFETY: getrusage only writes the struct we pass.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    if rc != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, (t.tv_usec as u32) * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// CPU time of the calling thread so far.
pub fn thread_cpu_time() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the struct we pass.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// Runs `f` and returns its result with the process CPU time it took.
pub fn cpu<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let start = cpu_time();
    let out = f();
    (out, cpu_time().saturating_sub(start))
}

/// Gives freed heap back to the kernel and restarts the peak-RSS counter, so the next
/// [`peak_rss`] covers only what runs after this.
pub fn reset_peak() {
    // SAFETY: malloc_trim only releases free memory of glibc's arenas.
    #[cfg(target_env = "gnu")]
    unsafe {
        libc::malloc_trim(0);
    }
    // Writing 5 resets VmHWM to the current RSS (Linux ≥ 4.0); without it the peak covers
    // the whole run, which only overstates it.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Peak resident set size (VmHWM) since the last [`reset_peak`], in bytes.
pub fn peak_rss() -> u64 {
    status_kib("VmHWM:") * 1024
}

/// Current resident set size, in bytes.
pub fn rss() -> u64 {
    status_kib("VmRSS:") * 1024
}

fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

pub fn median(mut values: Vec<Duration>) -> Duration {
    if values.is_empty() {
        return Duration::ZERO;
    }
    values.sort();
    values[values.len() / 2]
}

/// The value at quantile `q` (0..=1) by nearest rank.
pub fn quantile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}
