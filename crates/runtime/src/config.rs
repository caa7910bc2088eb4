//! Monitor settings: the machine's policy settings plus the driver's own.

use railwatch_core::{ConfigError, DampingConfig, MachineConfig};

/// How the monitor behaves. `Default` gives the documented defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Recovery tick period in milliseconds (default 1000). The tick runs
    /// only while something needs it.
    pub tick_ms: u64,
    /// Opt-in audit period (default off): every this many milliseconds the
    /// port state of every active rail is re-read, so a port that went down
    /// with no event at all is noticed.
    pub audit_ms: Option<u64>,
    /// Most `get_event` calls per device per wake-up (default 256); a device
    /// that hits it is serviced again before the next blocking wait, so one
    /// noisy NIC cannot starve the others.
    pub drain_budget: usize,
    /// How often a paused rail is explained in the log (default 30 s).
    pub explain_every_ms: u64,
    /// Capacity of each subscriber's notification channel (default 4096);
    /// when one is full, its notifications are dropped and counted, the
    /// monitor never blocks.
    pub notify_capacity: usize,
    /// First delay before re-opening a device that went away (default 1 s).
    pub reopen_initial_ms: u64,
    /// Longest delay between re-open attempts (default 60 s).
    pub reopen_max_ms: u64,
    /// Each re-open delay is lengthened by a random 0..=this percent of it
    /// (default 20), so hosts do not all re-open at once.
    pub reopen_jitter_pct: u32,
    /// Seed of the jitter (default `None`: drawn anew in every process; the
    /// simulator fixes it so runs are reproducible).
    pub seed: Option<u64>,
    /// After the port reads ACTIVE, wait this long and re-check before
    /// activating (default 0: activate at once). mlx5/RoCE can reject
    /// connection setup right after link-up; the port going down during the
    /// wait cancels it.
    pub settle_ms: u64,
    /// Flap damping (default off): a rail that flaps too often stays
    /// paused (`damped`) until its penalty decays.
    pub damping: Option<DampingConfig>,
}

impl Default for Config {
    fn default() -> Self {
        let m = MachineConfig::default();
        Config {
            tick_ms: m.tick_ms,
            audit_ms: m.audit_ms,
            drain_budget: 256,
            explain_every_ms: m.explain_every_ms,
            notify_capacity: 4096,
            reopen_initial_ms: m.reopen_initial_ms,
            reopen_max_ms: m.reopen_max_ms,
            reopen_jitter_pct: m.reopen_jitter_pct,
            seed: None,
            settle_ms: m.settle_ms,
            damping: m.damping,
        }
    }
}

impl Config {
    /// The machine's share of the settings, with the seed drawn if unset.
    pub fn machine(&self) -> MachineConfig {
        MachineConfig {
            tick_ms: self.tick_ms,
            audit_ms: self.audit_ms,
            explain_every_ms: self.explain_every_ms,
            reopen_initial_ms: self.reopen_initial_ms,
            reopen_max_ms: self.reopen_max_ms,
            reopen_jitter_pct: self.reopen_jitter_pct,
            seed: self.seed.unwrap_or_else(process_seed),
            settle_ms: self.settle_ms,
            damping: self.damping,
        }
    }

    /// Checks every setting; the error names the first bad one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.drain_budget == 0 {
            return Err(ConfigError { key: "drain_budget", message: "must be at least 1".into() });
        }
        if self.notify_capacity == 0 {
            return Err(ConfigError { key: "notify_capacity", message: "must be at least 1".into() });
        }
        self.machine().validate()
    }
}

/// A seed that differs between processes, from std's randomly keyed hasher.
fn process_seed() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::process::id())
}
