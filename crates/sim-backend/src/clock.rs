//! A virtual clock for deterministic runs.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use railwatch_core::Clock;
use railwatch_core::Millis;

/// A virtual millisecond clock: it moves only when told to.
///
/// Clones share one time, so the driver keeps a clone and moves the time
/// while the monitor reads it. It never goes backwards.
///
/// ```
/// use railwatch_core::Millis;
/// use railwatch_core::Clock;
/// use railwatch_sim_backend::SimClock;
///
/// let clock = SimClock::new();
/// let monitor_side = clock.clone();
/// clock.advance(250);
/// assert_eq!(monitor_side.now(), Millis(250));
/// clock.set(Millis(1000));
/// assert_eq!(monitor_side.now(), Millis(1000));
/// ```
#[derive(Debug, Clone, Default)]
pub struct SimClock {
    now: Arc<AtomicU64>,
}

impl SimClock {
    /// A clock at time zero.
    pub fn new() -> SimClock {
        SimClock::default()
    }

    /// A clock at `t`.
    pub fn starting_at(t: Millis) -> SimClock {
        SimClock { now: Arc::new(AtomicU64::new(t.0)) }
    }

    /// Moves the clock to `t`.
    ///
    /// # Panics
    ///
    /// If `t` is earlier than the current time: a monotonic clock never
    /// goes backwards, and a driver that tries has a bug.
    pub fn set(&self, t: Millis) {
        let before = self.now.fetch_max(t.0, Ordering::AcqRel);
        assert!(before <= t.0, "SimClock::set: time would go backwards from {before}ms to {t}");
    }

    /// Moves the clock forward by `ms` (saturating) and returns the new time.
    pub fn advance(&self, ms: u64) -> Millis {
        let mut cur = self.now.load(Ordering::Acquire);
        loop {
            let next = cur.saturating_add(ms);
            match self.now.compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Millis(next),
                Err(actual) => cur = actual,
            }
        }
    }
}

impl Clock for SimClock {
    fn now(&self) -> Millis {
        Millis(self.now.load(Ordering::Acquire))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_and_monotonic() {
        let a = SimClock::starting_at(Millis(5));
        let b = a.clone();
        assert_eq!(b.now(), Millis(5));
        assert_eq!(a.advance(10), Millis(15));
        a.set(Millis(15));
        assert_eq!(b.now(), Millis(15));
        assert_eq!(a.advance(u64::MAX), Millis(u64::MAX));
    }

    #[test]
    #[should_panic(expected = "time would go backwards")]
    fn set_backwards_panics() {
        let c = SimClock::new();
        c.set(Millis(10));
        c.set(Millis(9));
    }
}
