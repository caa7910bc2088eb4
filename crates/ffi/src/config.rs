//! Settings from C: one plain struct for both embeddings, filled with the
//! defaults by `rw_config_default` and checked before anything starts.

use railwatch_core::{AddressRequirement, DampingConfig, DataPathConfig, MachineConfig, PortWitness};
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

/// The data-path breaker's settings (see `docs/STATE-MACHINE.md`, "The
/// data-path breaker").
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rw_data_path {
    /// The breaker on: 0 off, anything else on (the default).
    pub enabled: u8,
    /// Local-path failures within the window that open it (default 8).
    pub failures: u64,
    /// The window, ms (default 10000).
    pub window_ms: u64,
    /// The distinct peers the failures must come through (default 2, at
    /// most 16).
    pub min_peers: u64,
    /// The first wait before a probe, ms (default 1000).
    pub backoff_initial_ms: u64,
    /// The longest wait before a probe, ms (default 60000).
    pub backoff_max_ms: u64,
    /// A granted probe unreported this long counts as failed, ms (default
    /// 40000).
    pub probe_timeout_ms: u64,
}

/// What a rail needs in its GID table before it is used
/// (`rw_config.require_address`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rw_address_requirement {
    /// Nothing (the default).
    RW_ADDRESS_NONE = 0,
    /// Any GID.
    RW_ADDRESS_ANY = 1,
    /// A RoCE v2 GID.
    RW_ADDRESS_ROCE_V2 = 2,
    /// A RoCE v2 GID that is an IPv4-mapped address.
    RW_ADDRESS_ROCE_V2_IPV4 = 3,
    /// An InfiniBand LID.
    RW_ADDRESS_IB = 4,
}

/// Which witness says a port is usable (`rw_config.port_witness`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rw_port_witness {
    /// The port state and, where the port has a netdev, its carrier (the
    /// default): a port that reads ACTIVE with no carrier is paused
    /// `RW_REASON_NO_CARRIER`.
    RW_WITNESS_BOTH = 0,
    /// The port state alone.
    RW_WITNESS_PORT = 1,
    /// The carrier alone where there is one (providers whose ports always
    /// read ACTIVE).
    RW_WITNESS_CARRIER = 2,
}

/// Every setting. Start from `rw_config_default` and change what you need.
/// The struct may grow at the end in later versions: `size` (set by
/// `rw_config_default`) says which version the caller was built with, and
/// a library reads no more than that: this one accepts its own size and
/// 0.1.0's (the struct up to `drain_budget`; the fields after it are then
/// at their defaults).
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
    /// The data-path breaker (default on).
    pub data_path: rw_data_path,
    /// Silent flaps (a flap counter rising with no PORT_ERR) bump the
    /// generation: 0 off, anything else on (the default).
    pub silent_flaps: u8,
    /// `rw_address_requirement` (default `RW_ADDRESS_NONE`).
    pub require_address: u32,
    /// `rw_port_witness` (default `RW_WITNESS_BOTH`).
    pub port_witness: u32,
}

/// The struct as version 0.1.0's header had it (up to `drain_budget`): a
/// caller built with it is read as it was, the later fields at their
/// defaults.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct rw_config_v1 {
    size: u32,
    tick_ms: u64,
    audit_ms: u64,
    explain_every_ms: u64,
    reopen_initial_ms: u64,
    reopen_max_ms: u64,
    reopen_jitter_pct: u32,
    seed: u64,
    settle_ms: u64,
    damping: rw_damping,
    drain_budget: u32,
}

const WITNESS: [(rw_port_witness, PortWitness); 3] = [
    (rw_port_witness::RW_WITNESS_BOTH, PortWitness::Both),
    (rw_port_witness::RW_WITNESS_PORT, PortWitness::Port),
    (rw_port_witness::RW_WITNESS_CARRIER, PortWitness::Carrier),
];

/// The C code of `value` in a table of (code, value) (0 if absent).
fn code_of<C: Copy + Into<u32>, V: PartialEq>(table: &[(C, V)], value: &V) -> u32 {
    table.iter().find(|(_, v)| v == value).map_or(0, |(c, _)| (*c).into())
}

/// The value of C code `code` in a table of (code, value); an error naming
/// the `field` and the C `type` when it has none.
fn value_of<C: Copy + Into<u32>, V: Copy>(table: &[(C, V)], code: u32, field: &str, type_name: &str) -> Result<V> {
    table.iter().find(|(c, _)| (*c).into() == code).map(|(_, v)| *v).ok_or_else(|| {
        Error::new(rw_status::RW_ERR_INVALID, format!("rw_config: {field}: {code} is not an {type_name}"))
    })
}

const ADDRESS: [(rw_address_requirement, AddressRequirement); 5] = [
    (rw_address_requirement::RW_ADDRESS_NONE, AddressRequirement::None),
    (rw_address_requirement::RW_ADDRESS_ANY, AddressRequirement::Any),
    (rw_address_requirement::RW_ADDRESS_ROCE_V2, AddressRequirement::RoceV2),
    (rw_address_requirement::RW_ADDRESS_ROCE_V2_IPV4, AddressRequirement::RoceV2Ipv4),
    (rw_address_requirement::RW_ADDRESS_IB, AddressRequirement::Ib),
];

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
            data_path,
            silent_flaps,
            require_address,
            port_witness,
            // Not in the C struct: C sets them by key only.
            query_retries: _,
            device_owner: _,
        } = machine;
        let d = damping.unwrap_or_default();
        let p = data_path.unwrap_or_default();
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
            data_path: rw_data_path {
                enabled: u8::from(data_path.is_some()),
                failures: p.failures,
                window_ms: p.window_ms,
                min_peers: p.min_peers,
                backoff_initial_ms: p.backoff_initial_ms,
                backoff_max_ms: p.backoff_max_ms,
                probe_timeout_ms: p.probe_timeout_ms,
            },
            silent_flaps: u8::from(*silent_flaps),
            require_address: code_of(&ADDRESS, require_address),
            port_witness: code_of(&WITNESS, port_witness),
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
            data_path: (self.data_path.enabled != 0).then_some(DataPathConfig {
                failures: self.data_path.failures,
                window_ms: self.data_path.window_ms,
                min_peers: self.data_path.min_peers,
                backoff_initial_ms: self.data_path.backoff_initial_ms,
                backoff_max_ms: self.data_path.backoff_max_ms,
                probe_timeout_ms: self.data_path.probe_timeout_ms,
            }),
            silent_flaps: self.silent_flaps != 0,
            require_address: value_of(&ADDRESS, self.require_address, "require_address", "rw_address_requirement")?,
            port_witness: value_of(&WITNESS, self.port_witness, "port_witness", "rw_port_witness")?,
            query_retries: MachineConfig::default().query_retries,
            device_owner: MachineConfig::default().device_owner,
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

impl rw_config {
    /// An earlier version's settings, the later ones at their defaults.
    fn from_v1(o: &rw_config_v1) -> rw_config {
        rw_config {
            size: std::mem::size_of::<rw_config>() as u32,
            tick_ms: o.tick_ms,
            audit_ms: o.audit_ms,
            explain_every_ms: o.explain_every_ms,
            reopen_initial_ms: o.reopen_initial_ms,
            reopen_max_ms: o.reopen_max_ms,
            reopen_jitter_pct: o.reopen_jitter_pct,
            seed: o.seed,
            settle_ms: o.settle_ms,
            damping: o.damping,
            drain_budget: o.drain_budget,
            ..rw_config::default()
        }
    }
}

/// Writes the defaults to `*config`.
#[unsafe(no_mangle)]
pub extern "C" fn rw_config_default(config: *mut rw_config) -> rw_status {
    crate::status::quiet_panics();
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
    if size == std::mem::size_of::<rw_config_v1>() {
        // SAFETY: the caller's struct is the earlier version (its size),
        // all of it readable; every field is an integer or a float.
        let old = unsafe { p.cast::<rw_config_v1>().read() };
        return Ok(rw_config::from_v1(&old));
    }
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

impl From<rw_address_requirement> for u32 {
    fn from(c: rw_address_requirement) -> u32 {
        c as u32
    }
}

impl From<rw_port_witness> for u32 {
    fn from(c: rw_port_witness) -> u32 {
        c as u32
    }
}
