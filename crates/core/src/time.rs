//! Time as the caller passes it in.
//!
//! The core never reads a clock: every transition that records "since when"
//! takes a [`Millis`] from the caller (a monotonic clock in production, a
//! virtual one in the simulator), as quinn-proto takes `now: Instant`.

use std::fmt;

/// The longest a timer may be set ahead (one week): a setting that would
/// put one further is refused, so no deadline overflows or lies beyond
/// any run a user can observe.
pub const MAX_DELAY_MS: u64 = 7 * 24 * 3600 * 1000;

/// Milliseconds on the caller's monotonic clock (its origin is the caller's
/// business; only differences and ordering matter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Millis(pub u64);

impl Millis {
    /// Time zero.
    pub const ZERO: Millis = Millis(0);

    /// `self + ms`, saturating instead of wrapping.
    pub fn plus(self, ms: u64) -> Millis {
        Millis(self.0.saturating_add(ms))
    }

    /// Milliseconds from `earlier` to `self`, zero if `earlier` is later.
    pub fn since(self, earlier: Millis) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ms", self.0)
    }
}

/// A monotonic millisecond clock, for drivers: the machine itself is handed
/// the time, a driver reads it from one of these (the system's in
/// production, a virtual one in the simulator).
pub trait Clock: Send {
    /// Now, in milliseconds since the clock's own origin.
    fn now(&self) -> Millis;
}
