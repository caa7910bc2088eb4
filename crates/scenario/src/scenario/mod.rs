//! Scenario files: devices, a timeline of steps, and expectations, in TOML.
//!
//! docs/SCENARIOS.md is the contract for the format. [`Scenario::parse`] and
//! [`Scenario::load`] refuse a bad file before anything runs, with the file,
//! the 1-based line and the problem ([`ScenarioError`]). A valid scenario
//! builds its devices ([`Scenario::build_devices`]) and applies its steps to
//! them ([`Scenario::apply_step`]); checking the expectations is the
//! driver's job.

mod evidence;
mod parse;
pub(crate) mod write;

use std::fmt;
use std::io;
use std::path::Path;

use railwatch_core::{AsyncEvent, Carrier, Element, EventKind, LinkAttrs, LinkRate, PortState, RailState};

use railwatch_sim_backend::{PortSpec, SimDevice, SimHandle};

/// Largest `repeat` a step may ask for (each queued copy costs memory until
/// it is read).
pub const MAX_REPEAT: u64 = 10_000_000;

/// Most events (all `repeat`s, a device-wide event counted once per port of
/// its device) and scripted EINTRs (all `count`s) a whole scenario may queue.
pub const MAX_TOTAL_EVENTS: u64 = 10_000_000;

/// Longest `duration_ms`: seven days of virtual time.
pub const MAX_DURATION_MS: u64 = 7 * 24 * 3600 * 1000;

/// Most `[[device]]`s in one scenario (each is a pipe, two fds).
pub const MAX_DEVICES: usize = 4096;

/// Most ports (rails) over all devices of one scenario.
pub const MAX_RAILS: usize = 65_536;

/// Largest scenario file `Scenario::load` reads: 16 MiB.
pub use crate::toml_input::MAX_FILE_BYTES;
pub use evidence::{CountersChange, ProbeOutcome, ProbeStep, TransferStep};

/// A parsed, validated scenario file.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// The file name the scenario was parsed under (used in messages).
    pub file: String,
    /// `name`; defaults to the file name without directory and extension.
    pub name: String,
    /// `description`, if given.
    pub description: Option<String>,
    /// `duration_ms`: the run ends at this virtual time.
    pub duration_ms: u64,
    /// The monitor's settings written in the file (`tick_ms`, `settle_ms`,
    /// `audit_ms`, `[damping]`, the re-open backoff, `drain_budget`, …:
    /// the same keys as `watch`'s config file), the defaults for the rest.
    /// The jitter's seed is not a file setting: the driver fixes it.
    pub config: railwatch_runtime::Config,
    /// `[[device]]` tables, in file order (a device's index here is its index
    /// in [`build_devices`](Self::build_devices)).
    pub devices: Vec<DeviceDecl>,
    /// `[[step]]` tables, in file order (non-decreasing `at_ms`).
    pub steps: Vec<Step>,
    /// `[[expect]]` tables, in file order (any `at_ms` order).
    pub expects: Vec<Expect>,
}

/// One `[[device]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceDecl {
    /// Line of the device's `name` key.
    pub line: usize,
    /// Device name (unique in the file).
    pub name: String,
    /// Its ports, in file order.
    pub ports: Vec<PortSpec>,
    /// The ports' GID tables at the start (their `gids` keys), if any port
    /// gave one: such a device reads addresses from the start.
    pub gids: Option<Vec<GidChange>>,
    /// `present`: in the host's device list at the start (default). A
    /// device that is not appears with its first `plug` step.
    pub present: bool,
    /// The ports' flap counters at the start (their `counters` keys); a
    /// port without answers counter reads with `Unsupported`.
    pub counters: Vec<CountersChange>,
    /// The ports' netdev carriers at the start (their `carrier` keys;
    /// `notify` is unused); a port without one has no netdev.
    pub carriers: Vec<CarrierChange>,
}

impl DeviceDecl {
    /// True if the device declares `port`.
    pub fn has_port(&self, port: u8) -> bool {
        self.ports.iter().any(|p| p.port == port)
    }
}

/// One `[[step]]`: what happens to one device at one virtual time.
///
/// Applied in this order (after the `drain`, which is the driver's):
/// `port_state`, `link`, `gid`, `counters` and `carrier` first, then `fault`, then `event` — so an event
/// always sees the port state set in its own step, and an event in a
/// `remove` step is dropped with the device.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// 1-based position among the steps, in file order.
    pub index: usize,
    /// Line of the step's `[[step]]` header.
    pub line: usize,
    /// When it happens, in virtual ms.
    pub at_ms: u64,
    /// The device's name.
    pub device: String,
    /// The device's index in [`Scenario::devices`].
    pub device_index: usize,
    /// `port_state`: what a port query returns from now on (silent).
    pub port_state: Option<PortStateChange>,
    /// `link`: the port's new link attributes (silent).
    pub link: Option<LinkChange>,
    /// `fault` (with `count` for `eintr`).
    pub fault: Option<Fault>,
    /// `event` with its element (`port` or `object`) and `repeat`.
    pub event: Option<StepEvent>,
    /// `gid`: a GID table entry set or emptied (silent).
    pub gid: Option<GidChange>,
    /// `counters`: what a counter read of the port returns from now on
    /// (silent).
    pub counters: Option<CountersChange>,
    /// `carrier`: the port's netdev carrier from now on, notified (the
    /// rtnetlink message's twin) unless `notify = false`.
    pub carrier: Option<CarrierChange>,
    /// `transfers`: outcomes the engine reports on one of the device's
    /// rails (the driver hands them to the monitor).
    pub transfers: Option<TransferStep>,
    /// `probe`: the engine takes the half-open breaker's probe on one of
    /// the device's rails and reports its outcome.
    pub probe: Option<ProbeStep>,
    /// `drain = true`: before the step is applied, the monitor reads what
    /// the devices queued so far in the instant (and runs its timers due),
    /// as it does before a transfer report. Recordings write it where the
    /// live monitor read an instant in several wake-ups.
    pub drain: bool,
}

/// A step's `gid = { port, index, address }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GidChange {
    /// The port (declared on the device).
    pub port: u8,
    /// The table index (0..=255).
    pub index: u32,
    /// The GID, or `None` to empty the slot (no `address`).
    pub gid: Option<[u8; 16]>,
}

/// A step's `carrier = { port, state, notify }`, or a port's `carrier`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CarrierChange {
    /// The port (declared on the device).
    pub port: u8,
    /// Its netdev's carrier from now on.
    pub carrier: Carrier,
    /// The host is told (default): a monitor following carriers reads it
    /// at once. `false`: silent, read with the next port query.
    pub notify: bool,
}

/// A step's `port_state = { port, state }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortStateChange {
    /// The port (declared on the device).
    pub port: u8,
    /// Its new state.
    pub state: PortState,
}

/// A step's `link = { port, speed, width, effective_mbps }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkChange {
    /// The port (declared on the device).
    pub port: u8,
    /// Its new link attributes.
    pub link: LinkAttrs,
}

/// A step's `event`, `port`/`object` and `repeat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepEvent {
    /// The event to queue (raw code and element).
    pub event: AsyncEvent,
    /// How many copies to queue (at least 1).
    pub repeat: u64,
}

/// A step's `fault`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The next `count` reads fail with EINTR.
    Eintr {
        /// How many reads.
        count: u64,
    },
    /// From now on reads fail with EIO; the device lives.
    Eio,
    /// From now on reads fail with EBADF; the device lives.
    Ebadf,
    /// The device is gone (hang-up on the fd, reads EIO, port queries ENODEV).
    Remove,
    /// The device can be opened again.
    Restore,
    /// The device leaves the host's device list, silently (Soft-RoCE's
    /// `rdma link delete` with a handle open): its fd says nothing, port
    /// queries still answer; only the list and a uevent tell.
    Unplug,
    /// The device is listed again: a new device of the same name.
    Plug,
}

impl Fault {
    /// The name used in scenario files.
    pub const fn name(self) -> &'static str {
        match self {
            Fault::Eintr { .. } => "eintr",
            Fault::Eio => "eio",
            Fault::Ebadf => "ebadf",
            Fault::Remove => "remove",
            Fault::Restore => "restore",
            Fault::Unplug => "unplug",
            Fault::Plug => "plug",
        }
    }

    /// Applies the fault to a device.
    pub fn apply(self, handle: &SimHandle) {
        match self {
            Fault::Eintr { count } => handle.eintr(count),
            Fault::Eio => handle.eio(),
            Fault::Ebadf => handle.ebadf(),
            Fault::Remove => handle.remove(),
            Fault::Restore => handle.restore(),
            Fault::Unplug => handle.unplug(),
            Fault::Plug => handle.plug(),
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Eintr { count } => write!(f, "eintr x{count}"),
            other => f.write_str(other.name()),
        }
    }
}

/// A rail named in an expectation (`rail = "mlx5_0/1"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RailRef {
    /// The device's name.
    pub device: String,
    /// The device's index in [`Scenario::devices`] (and in the monitor, if
    /// the driver adds the devices in that order).
    pub device_index: usize,
    /// The port.
    pub port: u8,
}

impl fmt::Display for RailRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.device, self.port)
    }
}

/// How a rail's last activation happened (`recovered_by`): the runtime's
/// own type, so an expectation compares like with like.
pub use railwatch_core::RecoveredBy;

/// One `[[expect]]`: what must hold for one rail at one virtual time. Only
/// the fields that are `Some` are checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Expect {
    /// 1-based position among the expectations, in file order.
    pub index: usize,
    /// Line of the `[[expect]]` header.
    pub line: usize,
    /// When it is checked, in virtual ms (at most `duration_ms`).
    pub at_ms: u64,
    /// The rail.
    pub rail: RailRef,
    /// `state`.
    pub state: Option<RailState>,
    /// `available`.
    pub available: Option<bool>,
    /// `bandwidth_gbps`, as a rate (always [`LinkRate::Known`], a whole
    /// number of Mb/s).
    pub bandwidth: Option<LinkRate>,
    /// `recovered_by`.
    pub recovered_by: Option<RecoveredBy>,
    /// `reason`: why it is not active (`none` when active; `half_open` and
    /// `probing` are the breaker's probe stages).
    pub reason: Option<railwatch_core::PauseReason>,
    /// `half_open`: the data-path breaker is half-open or probing.
    pub half_open: Option<bool>,
    /// `generation`.
    pub generation: Option<u64>,
}

/// Why a scenario file was refused: the file, the line when there is one,
/// and the problem. Displays on one line as `file:line: problem` (or
/// `file: problem`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.render())]
pub struct ScenarioError {
    file: String,
    line: Option<usize>,
    message: String,
}

impl ScenarioError {
    pub(crate) fn new(file: &str, line: Option<usize>, message: impl Into<String>) -> ScenarioError {
        // One line, always: fold whatever the TOML parser wrapped.
        let message = message.into().lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(": ");
        // Whatever of the file it repeats: escaped and bounded.
        let message = railwatch_core::error_line(&message);
        ScenarioError { file: file.to_owned(), line, message }
    }

    /// The file name as given.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The 1-based line, when the problem has one.
    pub fn line(&self) -> Option<usize> {
        self.line
    }

    /// The problem, without file and line.
    pub fn message(&self) -> &str {
        &self.message
    }

    fn render(&self) -> String {
        match self.line {
            Some(line) => format!("{}:{}: {}", self.file, line, self.message),
            None => format!("{}: {}", self.file, self.message),
        }
    }
}

impl Scenario {
    /// Parses and validates scenario text. `file_name` is used in error
    /// messages and, without directory and extension, as the default
    /// `name`.
    pub fn parse(text: &str, file_name: &str) -> Result<Scenario, ScenarioError> {
        parse::parse(text, file_name)
    }

    /// Reads and parses a scenario file. A missing file, a directory, an
    /// empty file and a binary file (invalid UTF-8 or a NUL byte) each get a
    /// one-line error naming the path.
    pub fn load(path: impl AsRef<Path>) -> Result<Scenario, ScenarioError> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        let text = crate::toml_input::read_text(path, "a scenario file")
            .map_err(|msg| ScenarioError::new(&shown, None, msg))?;
        Scenario::parse(&text, &shown)
    }

    /// The scenario as canonical TOML text (every default written out);
    /// parsing it gives the same scenario (line numbers aside).
    pub fn to_toml(&self) -> String {
        write::to_toml(self)
    }

    /// Creates one [`SimDevice`] per `[[device]]`, in file order, each with
    /// its declared ports, states and links, plus the matching handles (same
    /// order). The devices are open; give them to the monitor in this order.
    ///
    /// Errors: the OS error if a pipe cannot be created.
    pub fn build_devices(&self) -> io::Result<(Vec<SimDevice>, Vec<SimHandle>)> {
        let mut devices = Vec::with_capacity(self.devices.len());
        let mut handles = Vec::with_capacity(self.devices.len());
        for (i, decl) in self.devices.iter().enumerate() {
            let dev = SimDevice::new(decl.name.clone(), &decl.ports)?;
            // A device with a GID table, or whose GIDs the script changes,
            // reads addresses from the start, as a real one does.
            if decl.gids.is_some() || self.steps.iter().any(|s| s.device_index == i && s.gid.is_some()) {
                dev.handle().read_addresses();
            }
            for g in decl.gids.iter().flatten() {
                dev.handle().set_gid(g.port, g.index, g.gid);
            }
            for c in &decl.counters {
                dev.handle().set_flap_counters(c.port, c.counters);
            }
            for c in &decl.carriers {
                dev.handle().set_carrier(c.port, c.carrier);
            }
            handles.push(dev.handle());
            devices.push(dev);
        }
        Ok((devices, handles))
    }

    /// Applies one step to the handles from [`build_devices`](Self::build_devices)
    /// and returns how many events it queued (see [`Step::apply`]).
    pub fn apply_step(&self, step: &Step, handles: &[SimHandle]) -> u64 {
        step.apply(handles)
    }

    /// The steps due in `(after, until]`, in file order: what a driver
    /// applies when it moves the clock from `after` to `until`. Pass `None`
    /// for `after` to include time 0.
    pub fn steps_between(&self, after: Option<u64>, until: u64) -> impl Iterator<Item = &Step> {
        self.steps.iter().filter(move |s| after.is_none_or(|a| s.at_ms > a) && s.at_ms <= until)
    }
}

impl Step {
    /// Applies the step to its device, `handles[self.device_index]`: port
    /// state and link first, then the fault, then the event (which is queued
    /// into the device's real pipe, behind everything already queued).
    /// Returns how many events were queued (0 when the device is removed or
    /// closed, or the step has no event).
    ///
    /// # Panics
    ///
    /// If `handles` has no device at `device_index` or that device lacks a
    /// port the step names: the handles did not come from this scenario's
    /// [`Scenario::build_devices`].
    pub fn apply(&self, handles: &[SimHandle]) -> u64 {
        let handle = &handles[self.device_index];
        assert_eq!(handle.name(), self.device, "step {} applied to the wrong device", self.index);
        if let Some(ps) = self.port_state {
            handle.set_port_state(ps.port, ps.state);
        }
        if let Some(link) = self.link {
            handle.set_link(link.port, link.link);
        }
        if let Some(g) = self.gid {
            handle.set_gid(g.port, g.index, g.gid);
        }
        if let Some(c) = self.counters {
            handle.set_flap_counters(c.port, c.counters);
        }
        match self.carrier {
            Some(c) if c.notify => handle.carrier_change(c.port, c.carrier),
            Some(c) => handle.set_carrier(c.port, c.carrier),
            None => {}
        }
        if let Some(fault) = self.fault {
            fault.apply(handle);
        }
        match self.event {
            Some(ev) => handle.queue(ev.event, ev.repeat),
            None => 0,
        }
    }
}

/// Describes an event as a scenario file would: `port_err port 1`.
fn describe_event(ev: &AsyncEvent) -> String {
    let name = match ev.kind() {
        EventKind::Unknown(code) => code.to_string(),
        kind => kind.name().to_owned(),
    };
    match ev.element {
        Element::Port(p) => format!("{name} port {p}"),
        Element::Object(h) => format!("{name} object {:#x}", h.0),
        Element::None => name,
    }
}

impl fmt::Display for Step {
    /// A one-line summary for timelines:
    /// `mlx5_0: port 1 -> down, fault eio, event port_err port 1 x3`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if self.drain {
            parts.push("drain".to_owned());
        }
        if let Some(ps) = self.port_state {
            parts.push(format!("port {} -> {}", ps.port, ps.state));
        }
        if let Some(l) = self.link {
            parts.push(format!("port {} link {}", l.port, l.link.rate()));
        }
        if let Some(c) = self.carrier {
            let silent = if c.notify { "" } else { " (silent)" };
            parts.push(format!("port {} carrier {}{silent}", c.port, c.carrier.name()));
        }
        if let Some(fault) = self.fault {
            parts.push(format!("fault {fault}"));
        }
        if let Some(ev) = self.event {
            let mut s = format!("event {}", describe_event(&ev.event));
            if ev.repeat != 1 {
                s.push_str(&format!(" x{}", ev.repeat));
            }
            parts.push(s);
        }
        write!(f, "{}: {}", self.device, parts.join(", "))
    }
}
