//! The one clock the server reads for "now": ingest's accepted time window, when segments
//! are created, retention cutoffs, lease and deletion times, when tokens and debug files
//! are recorded. Injected, so tests move time instead of sleeping. Durations (timeouts,
//! cache ages, rate buckets, metrics) stay on the monotonic clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

pub trait Clock: Send + Sync + std::fmt::Debug + 'static {
    /// Nanoseconds since the Unix epoch.
    fn now_nanos(&self) -> i64;

    /// Milliseconds since the Unix epoch, as tokens and debug files record times.
    fn now_millis(&self) -> i64 {
        self.now_nanos().div_euclid(1_000_000)
    }
}

/// The shared handle every component holds.
pub type SharedClock = Arc<dyn Clock>;

/// Wall-clock time.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_nanos(&self) -> i64 {
        system_now_nanos()
    }
}

/// The system clock as a shared handle.
pub fn system() -> SharedClock {
    Arc::new(SystemClock)
}

/// Wall-clock nanoseconds; saturates rather than wrapping past 2262.
pub fn system_now_nanos() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// A clock that stands still until a test moves it.
#[derive(Debug, Default)]
pub struct ManualClock {
    nanos: AtomicI64,
}

impl ManualClock {
    pub fn at(nanos: i64) -> Arc<ManualClock> {
        Arc::new(ManualClock {
            nanos: AtomicI64::new(nanos),
        })
    }

    pub fn set(&self, nanos: i64) {
        self.nanos.store(nanos, Ordering::SeqCst);
    }

    pub fn advance(&self, by: std::time::Duration) {
        let by = i64::try_from(by.as_nanos()).unwrap_or(i64::MAX);
        self.nanos.fetch_add(by, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_nanos(&self) -> i64 {
        self.nanos.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_told() {
        let clock = ManualClock::at(1_000);
        assert_eq!(clock.now_nanos(), 1_000);
        clock.advance(std::time::Duration::from_nanos(500));
        assert_eq!(clock.now_nanos(), 1_500);
        clock.set(7);
        assert_eq!(clock.now_nanos(), 7);
        clock.set(1_999_999);
        assert_eq!(clock.now_millis(), 1);
        clock.set(-1);
        assert_eq!(clock.now_millis(), -1, "millis before the epoch round down");
        let shared: SharedClock = clock;
        assert_eq!(shared.now_nanos(), -1);
        assert!(system().now_nanos() > 1_700_000_000_000_000_000);
    }
}
