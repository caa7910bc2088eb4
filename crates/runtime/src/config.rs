//! Monitor settings.

/// How the monitor behaves. `Default` gives the documented defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
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
        }
    }
}
