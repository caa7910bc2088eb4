//! Where the monitor's time comes from.
//!
//! The monitor reads a [`Clock`] (the trait lives in core) and hands the
//! time to the machine: the simulator passes a virtual one, so a ten-minute
//! scenario runs in milliseconds and the same file gives the same timeline
//! every time.

use std::time::Instant;

use railwatch_core::{Clock, Millis};

/// The real monotonic clock, counting from its creation.
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    origin: Instant,
}

impl SystemClock {
    /// A clock whose zero is now.
    pub fn new() -> SystemClock {
        SystemClock { origin: Instant::now() }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock::new()
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Millis {
        Millis(u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX))
    }
}
