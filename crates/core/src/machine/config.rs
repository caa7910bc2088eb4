//! The machine's settings and their validation.

use crate::damping::DampingConfig;

/// The longest a timer may be set ahead (one week): a setting that would
/// put one further is refused, so no deadline overflows or lies beyond
/// any run a user can observe.
pub const MAX_DELAY_MS: u64 = 7 * 24 * 3600 * 1000;

/// Policy settings. `Default` gives the documented defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct MachineConfig {
    /// Recovery tick period in milliseconds (default 1000). The tick runs
    /// only while something needs it (a paused rail, a poll-only device).
    pub tick_ms: u64,
    /// Opt-in audit period: every this many milliseconds the port state of
    /// every active rail is re-read, so a port that went down with no event
    /// at all is noticed. `None` (the default) keeps a healthy host at zero
    /// idle wake-ups.
    pub audit_ms: Option<u64>,
    /// How often a paused rail is explained in the log (default 30 s).
    pub explain_every_ms: u64,
    /// First delay before re-opening a device that went away (default 1 s).
    pub reopen_initial_ms: u64,
    /// Longest delay between re-open attempts (default 60 s).
    pub reopen_max_ms: u64,
    /// Each re-open delay is lengthened by a random 0..=this percent of it
    /// (default 20, at most 100), so hosts do not all re-open at once.
    pub reopen_jitter_pct: u32,
    /// Seed of the re-open jitter (fixed here; the runtime draws one per
    /// process unless told otherwise).
    pub seed: u64,
    /// After the port reads ACTIVE, wait this long and re-check before
    /// activating (default 0: activate at once). mlx5/RoCE can reject
    /// connection setup right after link-up; the port going down during the
    /// wait cancels it. Applies to re-attached devices too.
    pub settle_ms: u64,
    /// Flap damping (default off): a rail that flaps too often stays paused
    /// (`damped`) until its penalty decays.
    pub damping: Option<DampingConfig>,
}

impl Default for MachineConfig {
    fn default() -> Self {
        MachineConfig {
            tick_ms: 1000,
            audit_ms: None,
            explain_every_ms: 30_000,
            reopen_initial_ms: 1000,
            reopen_max_ms: 60_000,
            reopen_jitter_pct: 20,
            seed: 1,
            settle_ms: 0,
            damping: None,
        }
    }
}

/// A setting the machine refuses, with the key and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {message}")]
pub struct ConfigError {
    /// The setting (`"tick_ms"`, `"damping.half_life_ms"`).
    pub key: &'static str,
    /// What is wrong with it.
    pub message: String,
}

fn refuse(key: &'static str, message: String) -> Result<(), ConfigError> {
    Err(ConfigError { key, message })
}

fn delay(key: &'static str, value: u64, zero_ok: bool) -> Result<(), ConfigError> {
    if value == 0 && !zero_ok {
        return refuse(key, "must be at least 1 ms".into());
    }
    if value > MAX_DELAY_MS {
        return refuse(key, format!("{value} ms is more than the limit of {MAX_DELAY_MS} ms (one week)"));
    }
    Ok(())
}

/// A damping setting's name as the machine's settings name it.
fn damping_key(key: &'static str) -> &'static str {
    match key {
        "penalty_per_flap" => "damping.penalty_per_flap",
        "suppress" => "damping.suppress",
        "reuse" => "damping.reuse",
        "half_life_ms" => "damping.half_life_ms",
        "max_penalty" => "damping.max_penalty",
        other => other,
    }
}

impl MachineConfig {
    /// Checks every setting; the error names the first bad one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        delay("tick_ms", self.tick_ms, false)?;
        if let Some(a) = self.audit_ms {
            delay("audit_ms", a, false)?;
        }
        delay("explain_every_ms", self.explain_every_ms, true)?;
        delay("reopen_initial_ms", self.reopen_initial_ms, false)?;
        delay("reopen_max_ms", self.reopen_max_ms, false)?;
        if self.reopen_max_ms < self.reopen_initial_ms {
            return refuse(
                "reopen_max_ms",
                format!("{} ms is less than reopen_initial_ms ({} ms)", self.reopen_max_ms, self.reopen_initial_ms),
            );
        }
        if self.reopen_jitter_pct > 100 {
            return refuse("reopen_jitter_pct", format!("{} is more than 100", self.reopen_jitter_pct));
        }
        delay("settle_ms", self.settle_ms, true)?;
        if let Some(d) = &self.damping {
            d.validate().map_err(|(key, message)| ConfigError { key: damping_key(key), message })?;
        }
        Ok(())
    }
}
