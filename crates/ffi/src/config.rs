//! Settings from C: one plain struct for both embeddings, filled with the
//! defaults by `rw_config_default` and checked before anything starts.

use railwatch_core::{DampingConfig, MachineConfig};
use railwatch_runtime::Config;

use crate::args::put;
use crate::status::{Error, Result, guard, rw_status};

/// Flap damping settings (see `docs/STATE-MACHINE.md`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rw_damping {
    /// Damping on: 0 off (the default), anything else on. (An integer, not
    /// a `bool`: any value C puts here is valid.)
    pub enabled: u8,
    /// Added per flap (default 1000).
    pub penalty_per_flap: f64,
    /// At or above this the rail is held (default 2500).
    pub suppress: f64,
    /// A held rail is released below this (default 750).
    pub reuse: f64,
    /// The penalty halves every this many milliseconds (default 15000).
    pub half_life_ms: u64,
    /// The penalty's ceiling (default 6000).
    pub max_penalty: f64,
}

/// Every setting. Start from `rw_config_default` and change what you need.
/// The struct may grow at the end in later versions: `size` (set by
/// `rw_config_default`) says which version the caller was built with, and
/// a library reads no more than that (this one accepts exactly its own
/// size; later ones will also accept the sizes before them).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rw_config {
    /// `sizeof(rw_config)` as the caller knows it; set by
    /// `rw_config_default`.
    pub size: u32,
    /// Recovery tick period, ms (default 1000); runs only while needed.
    pub tick_ms: u64,
    /// Re-read every active rail's port this often, ms; 0 = off (default).
    pub audit_ms: u64,
    /// How often a paused rail is explained in the log, ms (default 30000).
    pub explain_every_ms: u64,
    /// First delay before re-opening a device that went away, ms
    /// (default 1000).
    pub reopen_initial_ms: u64,
    /// Longest delay between re-opens, ms (default 60000).
    pub reopen_max_ms: u64,
    /// Each re-open delay is lengthened by a random 0..=this percent
    /// (default 20, at most 100).
    pub reopen_jitter_pct: u32,
    /// Seed of that jitter; 0 (the default) draws one per process.
    pub seed: u64,
    /// Wait this long after a port reads ACTIVE before activating, ms
    /// (default 0).
    pub settle_ms: u64,
    /// Flap damping (default off).
    pub damping: rw_damping,
    /// Monitor only: most events read per device per wake-up (default 256).
    pub drain_budget: u32,
}

impl Default for rw_config {
    fn default() -> Self {
        rw_config::from(&Config::default())
    }
}

impl From<&Config> for rw_config {
    /// The C struct of a config. Exhaustive: a new setting is a compile
    /// error here until the C struct carries it.
    fn from(c: &Config) -> Self {
        let Config { machine, drain_budget, notify_capacity: _ } = c;
        let MachineConfig {
            tick_ms,
            audit_ms,
            explain_every_ms,
            reopen_initial_ms,
            reopen_max_ms,
            reopen_jitter_pct,
            seed,
            settle_ms,
            damping,
        } = machine;
        let d = damping.unwrap_or_default();
        rw_config {
            size: std::mem::size_of::<rw_config>() as u32,
            tick_ms: *tick_ms,
            audit_ms: audit_ms.unwrap_or(0),
            explain_every_ms: *explain_every_ms,
            reopen_initial_ms: *reopen_initial_ms,
            reopen_max_ms: *reopen_max_ms,
            reopen_jitter_pct: *reopen_jitter_pct,
            seed: seed.unwrap_or(0),
            settle_ms: *settle_ms,
            damping: rw_damping {
                enabled: u8::from(damping.is_some()),
                penalty_per_flap: d.penalty_per_flap,
                suppress: d.suppress,
                reuse: d.reuse,
                half_life_ms: d.half_life_ms,
                max_penalty: d.max_penalty,
            },
            drain_budget: u32::try_from(*drain_budget).unwrap_or(u32::MAX),
        }
    }
}

impl rw_config {
    /// The monitor's settings, validated: the one conversion from C.
    pub(crate) fn runtime(&self) -> Result<Config> {
        let d = &self.damping;
        let machine = MachineConfig {
            tick_ms: self.tick_ms,
            audit_ms: (self.audit_ms != 0).then_some(self.audit_ms),
            explain_every_ms: self.explain_every_ms,
            reopen_initial_ms: self.reopen_initial_ms,
            reopen_max_ms: self.reopen_max_ms,
            reopen_jitter_pct: self.reopen_jitter_pct,
            seed: (self.seed != 0).then_some(self.seed),
            settle_ms: self.settle_ms,
            damping: (d.enabled != 0).then_some(DampingConfig {
                penalty_per_flap: d.penalty_per_flap,
                suppress: d.suppress,
                reuse: d.reuse,
                half_life_ms: d.half_life_ms,
                max_penalty: d.max_penalty,
            }),
        };
        let config = Config { machine, drain_budget: self.drain_budget as usize, ..Config::default() };
        config.validate().map_err(|e| Error::new(rw_status::RW_ERR_INVALID, format!("rw_config: {e}")))?;
        Ok(config)
    }

    /// The machine's settings, validated (its seed drawn when 0, as the
    /// monitor's is).
    pub(crate) fn machine(&self) -> Result<MachineConfig> {
        Ok(self.runtime()?.machine_seeded())
    }
}

/// Writes the defaults to `*config`.
#[unsafe(no_mangle)]
pub extern "C" fn rw_config_default(config: *mut rw_config) -> rw_status {
    // SAFETY: the caller passes a writable config or NULL.
    guard(|| unsafe { put(config, rw_config::default(), "config") })
}

/// The settings at `p`, or the defaults for NULL; `RW_ERR_INVALID` when
/// its `size` is not this library's (not from `rw_config_default`, or
/// another version of the header).
///
/// # Safety
/// `p` is NULL or points to at least a `u32` (its `size`), and to `size`
/// bytes of config when that size is this library's.
pub(crate) unsafe fn read(p: *const rw_config) -> Result<rw_config> {
    if p.is_null() {
        return Ok(rw_config::default());
    }
    let expected = std::mem::size_of::<rw_config>();
    // SAFETY: non-null; `size` is the first field, a u32 any bits of which
    // are a valid value, and the caller promises it is readable.
    let size = unsafe { (&raw const (*p).size).read() } as usize;
    if size != expected {
        return Err(Error::new(
            rw_status::RW_ERR_INVALID,
            format!("rw_config.size is {size}, this library's is {expected}: start from rw_config_default()"),
        ));
    }
    // SAFETY: the caller's struct is this library's (same size, same
    // header), so all of it is readable, and every field is an integer or
    // a float: any bits C left there are a valid value.
    Ok(unsafe { p.read() })
}
