//! Monitor settings.

use railwatch_core::DampingConfig;

/// How the monitor behaves. `Default` gives the documented defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Recovery tick period in milliseconds (default 1000). The tick runs
    /// only while something needs it.
    pub tick_ms: u64,
    /// Most `get_event` calls per device per wake-up (default 256); a device
    /// that hits it is serviced again before the next blocking wait, so one
    /// noisy NIC cannot starve the others.
    pub drain_budget: usize,
    /// How often a paused rail is explained in the log (default 30 s).
    pub explain_every_ms: u64,
    /// Capacity of the notification channel (default 4096); when full,
    /// notifications are dropped and counted, the monitor never blocks.
    pub notify_capacity: usize,
    /// First delay before re-opening a device that went away (default 1 s).
    pub reopen_initial_ms: u64,
    /// Longest delay between re-open attempts (default 60 s).
    pub reopen_max_ms: u64,
    /// Each re-open delay is lengthened by a random 0..=this percent of it
    /// (default 20), so hosts do not all re-open at once.
    pub reopen_jitter_pct: u32,
    /// Seed of the jitter (default: different in every process; the
    /// simulator fixes it so runs are reproducible).
    pub seed: u64,
    /// After the port reads ACTIVE, wait this long and re-check before
    /// activating (default 0: activate at once). mlx5/RoCE can reject
    /// connection setup right after link-up; a PORT_ERR during the wait
    /// cancels it.
    pub settle_ms: u64,
    /// Flap damping (default off): a rail that flaps too often stays
    /// paused (`damped`) until its penalty decays.
    pub damping: Option<DampingConfig>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            tick_ms: 1000,
            drain_budget: 256,
            explain_every_ms: 30_000,
            notify_capacity: 4096,
            reopen_initial_ms: 1000,
            reopen_max_ms: 60_000,
            reopen_jitter_pct: 20,
            seed: process_seed(),
            settle_ms: 0,
            damping: None,
        }
    }
}

/// A seed that differs between processes, from std's randomly keyed hasher.
fn process_seed() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::process::id())
}
