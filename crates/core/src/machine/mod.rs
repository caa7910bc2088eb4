//! The rail machine: every device and rail of a host and all of their
//! policy, sans-I/O.
//!
//! In the style of quinn-proto's `Connection`: inputs are `handle_*` calls
//! with the time passed in (an event read from a device, a read error or
//! hang-up on its fd, the answer to a port-state or link query, the result
//! of a re-open, a timeout); outputs are polled ([`Machine::poll_action`]
//! and [`Machine::poll_timeout`]). The machine never reads a clock, an fd or
//! a device: the driver (the runtime's `Monitor`, the scenario driver, an
//! engine's own loop, the C API) carries out its [`Action`]s and feeds the
//! answers back.
//!
//! docs/STATE-MACHINE.md describes the inputs, outputs, timers and
//! invariants; the pure decision tables it applies are in `decide.rs`.

mod evidence;
mod lifecycle;
mod on_demand;
mod output;
mod policy;
mod timers;

use crate::sync::Arc;
use std::collections::VecDeque;
use std::ops::Range;

pub use evidence::TransferReport;
pub use lifecycle::{ListChange, MAX_DEVICES, SlotError};
pub use output::{Action, Cause, Errno, Happening, Log, Notification, RecoveredBy, WorkScope};

use crate::counters::{CountersBaseline, PortCounters};
use crate::decide::{EventClass, RailDecision, classify, decide_event};
use crate::event::{AsyncEvent, EventKind};
use crate::port::{Carrier, LinkAttrs, LinkRate, PortState};
use crate::ports::RailId;
use crate::rail::{Gate, PauseReason, RailCell, RailState, RailWord};
use crate::settings::{ConfigError, MachineConfig};
use crate::time::Millis;
use crate::wc::{WC_STATUSES, WcClass};
use crate::witness::PortWitness;

/// Distinct unhandled codes warned about per device; past this they are
/// only counted, so a device spraying codes cannot grow memory.
const MAX_WARNED_CODES: usize = 64;

/// How the machine learns about a device's ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceMode {
    /// Its async fd is read; events arrive as they happen.
    Events,
    /// Its fd failed but port queries work: the tick polls every rail of the
    /// device, active ones too, and reads their links.
    PollOnly,
    /// Closed (DEVICE_FATAL, a hang-up, a failing port query, or it never
    /// opened): its rails are inert; re-opened with backoff.
    Gone {
        /// When the next re-open is attempted.
        next_reopen: Millis,
        /// The delay that led to `next_reopen`, doubled after a failure.
        backoff_ms: u64,
    },
    /// Listed by the host's device source but not open: an
    /// [`Action::Open`] is asked for at `next_open` (again with backoff
    /// while it fails). No rails until the first open succeeds.
    Opening {
        /// When the next open is asked for.
        next_open: Millis,
        /// The delay applied after the next failure (doubled each time).
        backoff_ms: u64,
    },
    /// Left the host (hot-unplug: the device list no longer has it): closed,
    /// its rails inert, never re-opened. A device of the same name that
    /// appears later is attached as a new device under the same index.
    Removed,
}

impl DeviceMode {
    /// Lower-case name (`"poll_only"`).
    pub fn name(&self) -> &'static str {
        match self {
            DeviceMode::Events => "events",
            DeviceMode::PollOnly => "poll_only",
            DeviceMode::Gone { .. } => "gone",
            DeviceMode::Opening { .. } => "opening",
            DeviceMode::Removed => "removed",
        }
    }

    /// Not open: gone (re-opened with backoff), not opened yet, or removed.
    pub fn is_closed(&self) -> bool {
        matches!(self, DeviceMode::Gone { .. } | DeviceMode::Opening { .. } | DeviceMode::Removed)
    }
}

/// What the machine counted for one device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceStats {
    /// Events handed in.
    pub events: u64,
    /// `COMM_EST` events among them.
    pub comm_est: u64,
    /// Events with a code nothing acts on (unknown codes included).
    pub unhandled: u64,
    /// Read errors handed in.
    pub read_errors: u64,
    /// Port-state queries asked for.
    pub port_queries: u64,
    /// Link reads asked for.
    pub link_reads: u64,
    /// Re-open attempts asked for.
    pub reopen_attempts: u64,
    /// Re-opens that ended with every rail attached.
    pub reopens: u64,
}

/// An attach in progress: every port is queried, and the rails attach
/// together once all answered, or not at all (a failing port query means
/// the device is not usable after all).
#[derive(Debug, Clone, Copy)]
struct Attach {
    /// Answers still missing.
    left: u32,
}

struct Device {
    name: Box<str>,
    /// Its rails' indexes ([`rails`](Device::rails)), held in 8 bytes.
    rail_range: Range<u32>,
    mode: DeviceMode,
    /// A `Reopen` was asked for and not answered yet.
    reopen_in_flight: bool,
    /// An `Open` was asked for and not answered yet. Apart from the
    /// re-open's flag: whatever happens to the device meanwhile (it leaves,
    /// the engine adds it, it fails), the answer still comes, and a driver
    /// that opened it holds a handle the machine must take or close.
    open_in_flight: bool,
    /// The delay of the last re-open scheduled (doubled after a failure).
    backoff_ms: u64,
    attach: Option<Attach>,
    /// Its rails were attached once: a later attach is a re-attach, which
    /// goes through damping and the settle delay.
    attached_before: bool,
    /// It was given rails once: only then can a rail of its id be in the
    /// list outside its range (a port it no longer has, or had before it
    /// came back), so a new device's ports are not looked for among every
    /// other device's rails.
    had_rails: bool,
    /// Cleared when an address read is answered `EOPNOTSUPP`: the backend
    /// cannot read addresses, so they are not asked for again (until the
    /// device is added anew).
    reads_addresses: bool,
    stats: DeviceStats,
    /// Codes already warned about, at most [`MAX_WARNED_CODES`] (grown only
    /// when a new unhandled code first shows up; most devices never see one).
    warned: Vec<u32>,
    /// Ticks at which port queries failed in a row (`query_retries` of
    /// them are retried at the next ticks before the device counts as
    /// gone), and the tick that retries: failures before it are the same.
    query_failures: u32,
    query_retry_at: Millis,
}

/// A settle delay in progress.
#[derive(Debug, Clone, Copy)]
struct Settle {
    until: Millis,
    /// What made the port read ACTIVE, for the activation that follows.
    by: RecoveredBy,
    /// The confirming query was asked for; its answer decides.
    confirming: bool,
}

struct Rail {
    id: RailId,
    name: Box<str>,
    cell: Arc<RailCell>,
    /// The rate last seeded into the selector.
    seeded: Option<LinkRate>,
    /// Seed on the next link answer even if the rate is the same (the
    /// device was (re)attached: the selector hears about it again).
    must_seed: bool,
    /// What the selector was last told.
    available: bool,
    recovered_by: Option<RecoveredBy>,
    explained_at: Option<Millis>,
    /// The machine's last knowledge of the port: read ACTIVE (and not
    /// reported down since). A change from up to down is a flap.
    port_up: bool,
    /// The netdev's carrier as last read or heard; `None` while none was
    /// (a port with no netdev: the port state alone witnesses).
    carrier: Option<Carrier>,
    /// An event asked for the pending port query (the activation it leads
    /// to is "by event", not "by poll").
    wake_by: Option<RecoveredBy>,
    /// The settle delay and flap damping, once either is used.
    holds: Option<Box<on_demand::Holds>>,
    /// Resumed; waiting for the link answer before it is made available.
    activating: bool,
    /// The answer of an attach in progress.
    attach_answer: Option<PortState>,
    /// The fingerprint of the address last read.
    address: Option<u64>,
    /// A LID/GID change asked for the pending address read: if the address
    /// changed (or cannot be read), the generation is bumped for it.
    address_event: Option<EventKind>,
    /// Transfers reported successful (wrapping at 2^64).
    transfers_ok: u64,
    /// Failed transfers, the data-path breaker and silent flaps, once the
    /// rail has seen one.
    trouble: Option<Box<on_demand::Trouble>>,
    /// The flap counters last read (the baseline), if any.
    counters: CountersBaseline,
    /// Cleared when a counter read says they cannot be read.
    counters_readable: bool,
    /// The port was seen going down, and the rail has not been read active
    /// since: a rise then is a flap already handled, not a silent one.
    down_since_counters: bool,
    /// The last address read meets `require_address` (reset by a pause: a
    /// GID index can move across a flap).
    address_ok: bool,
    /// The GID index `require_address` chose, if it names one.
    gid_index: Option<u32>,
    /// An activation waits for an address read (`require_address`).
    wants_address: Option<RecoveredBy>,
}

/// The data-path breaker of one rail, once it has tripped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Breaker {
    /// Out of service until its backoff ends at `until`; `trials` probes
    /// failed before.
    Open { until: Millis, trials: u32 },
    /// The backoff is over: the next activation makes the rail half-open.
    Due { trials: u32 },
    /// Half-open (or probing: the word says which): one probe at a time.
    /// `taken` is when a tick first saw a probe out, for its timeout.
    HalfOpen { trials: u32, taken: Option<Millis> },
}

/// What a rail's transfer reports and counters said, for snapshots and
/// metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Evidence {
    /// Transfers reported successful.
    pub transfers_ok: u64,
    /// Transfers reported failed, by `ibv_wc_status` code (the table's).
    pub failed_by_status: [u64; WC_STATUSES.len()],
    /// Failed transfers with a code this build does not know.
    pub failed_unknown: u64,
    /// Times the breaker opened.
    pub breaker_trips: u64,
    /// Silent flaps seen (a flap counter rose with no PORT_ERR).
    pub silent_flaps: u64,
}

impl Default for Evidence {
    fn default() -> Self {
        Evidence {
            transfers_ok: 0,
            failed_by_status: [0; WC_STATUSES.len()],
            failed_unknown: 0,
            breaker_trips: 0,
            silent_flaps: 0,
        }
    }
}

impl Evidence {
    /// Failed transfers of `class` (summed over its statuses).
    pub fn failed(&self, class: WcClass) -> u64 {
        let known: u64 =
            WC_STATUSES.iter().filter(|s| s.class == class).map(|s| self.failed_by_status[s.code as usize]).sum();
        if class == WcClass::Unknown { self.failed_unknown } else { known }
    }
}

impl Rail {
    fn view(&self) -> RailView<'_> {
        RailView {
            id: self.id,
            name: &self.name,
            word: self.cell.load(),
            since: self.cell.since(),
            available: self.available,
            rate: self.seeded,
            recovered_by: self.recovered_by,
            damped_until: self.damped_until(),
            settling_until: self.settle().map(|s| s.until),
            breaker_until: match self.breaker() {
                Some(Breaker::Open { until, .. }) => Some(until),
                _ => None,
            },
            gid_index: self.gid_index,
            carrier: self.carrier,
            counters: self.counters.get(),
            evidence: self.evidence(),
        }
    }
}

impl Device {
    /// Its rails' indexes in the machine's rail list.
    #[inline]
    fn rails(&self) -> Range<usize> {
        self.rail_range.start as usize..self.rail_range.end as usize
    }

    /// Sets its rails' indexes (fewer than 2^32 rails: each takes more
    /// than a hundred bytes).
    fn set_rails(&mut self, rails: Range<usize>) {
        let index = |i: usize| u32::try_from(i).expect("fewer than 2^32 rails");
        self.rail_range = index(rails.start)..index(rails.end);
    }

    fn view(&self, index: u32) -> DeviceView<'_> {
        DeviceView { index, name: &self.name, mode: self.mode, stats: self.stats }
    }

    /// A slot [`Machine::add_device_at`] left empty: no name, no rails.
    fn is_empty_slot(&self) -> bool {
        self.name.is_empty()
    }
}

/// The rails of [`Machine::rails`]: the list without the placeholders
/// of moved rails (an empty name), `left` of them still to come.
struct Listed<'a> {
    rails: std::slice::Iter<'a, Rail>,
    left: usize,
}

impl<'a> Iterator for Listed<'a> {
    type Item = &'a Rail;

    fn next(&mut self) -> Option<&'a Rail> {
        let rail = self.rails.find(|r| !r.name.is_empty())?;
        self.left -= 1;
        Some(rail)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Listed<'_> {}

/// One rail as the machine sees it now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RailView<'a> {
    /// Its id.
    pub id: RailId,
    /// `"mlx5_0/1"`.
    pub name: &'a str,
    /// The state word.
    pub word: RailWord,
    /// When the state last changed.
    pub since: Millis,
    /// Whether the selector may pick it.
    pub available: bool,
    /// The rate last seeded into the selector.
    pub rate: Option<LinkRate>,
    /// How its last activation happened.
    pub recovered_by: Option<RecoveredBy>,
    /// Held by flap damping until then.
    pub damped_until: Option<Millis>,
    /// Waiting out the settle delay until then.
    pub settling_until: Option<Millis>,
    /// Out by the data-path breaker until its backoff ends then.
    pub breaker_until: Option<Millis>,
    /// The GID index `require_address` chose, if it names one.
    pub gid_index: Option<u32>,
    /// The netdev's carrier as last read or heard (`None`: none was).
    pub carrier: Option<Carrier>,
    /// The flap counters last read.
    pub counters: Option<PortCounters>,
    /// What transfer reports and counters said.
    pub evidence: Evidence,
}

impl RailView<'_> {
    /// The data-path breaker is half-open (a probe may be granted) or
    /// probing (one is out).
    pub fn half_open(&self) -> bool {
        self.word.reason.is_probe_stage()
    }
}

/// One device as the machine sees it now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DeviceView<'a> {
    /// Its index (the `device` of its rails' ids).
    pub index: u32,
    /// Its name (empty for a slot `add_device_at` left empty).
    pub name: &'a str,
    /// How it is watched.
    pub mode: DeviceMode,
    /// What the machine counted.
    pub stats: DeviceStats,
}

/// Every device and rail of a host, and all of their policy.
///
/// ```
/// use railwatch_core::{Action, AsyncEvent, EventKind, Machine, MachineConfig, Millis, PortState, RailState};
///
/// let mut m = Machine::new(MachineConfig::default()).unwrap();
/// let dev = m.add_device("mlx5_0", &[1], Millis(0)).expect("under MAX_DEVICES");
/// // The driver carries out what the machine asks: here, answer the
/// // attach query and the link read, ignore the rest.
/// fn serve(m: &mut Machine, port_state: PortState, now: Millis) {
///     while let Some(action) = m.poll_action() {
///         match action {
///             Action::QueryPort { device, port } => m.handle_port_state(device, port, Ok(port_state), now),
///             Action::ReadLink { device, port } => m.handle_link(device, port, Ok(Default::default()), now),
///             _ => {}
///         }
///     }
/// }
/// serve(&mut m, PortState::Active, Millis(0));
/// let gate = m.gate_of("mlx5_0/1").unwrap();
/// assert!(gate.check().is_ok());
///
/// // PORT_ERR pauses; the tick is armed to recover a lost PORT_ACTIVE.
/// m.handle_event(dev, AsyncEvent::port(EventKind::PortErr, 1), Millis(100));
/// serve(&mut m, PortState::Down, Millis(100));
/// assert_eq!(gate.word().state, RailState::Paused);
/// assert_eq!(m.poll_timeout(), Some(Millis(1100)));
///
/// // The PORT_ACTIVE is lost; the tick's query finds the port ACTIVE.
/// m.handle_timeout(Millis(1100));
/// serve(&mut m, PortState::Active, Millis(1100));
/// assert_eq!(gate.word().state, RailState::Active);
/// assert_eq!(m.poll_timeout(), None, "a healthy host has no deadline");
/// ```
pub struct Machine {
    config: MachineConfig,
    devices: Vec<Device>,
    rails: Vec<Rail>,
    actions: VecDeque<Action>,
    /// Devices with time-driven work (a paused or activating rail, a timer,
    /// poll-only, gone), in index order: the tick and the timers visit
    /// these, so their cost follows the paused rails, not every rail.
    watched: Vec<u32>,
    next_tick: Option<Millis>,
    next_audit: Option<Millis>,
    /// State of the re-open jitter generator.
    rng: u64,
    /// The latest time handed in: time never goes backwards in here.
    now: Millis,
    ticks: u64,
    stray: u64,
    /// How many `WorkLost` notifications lead the action queue.
    lost_ahead: usize,
    /// Placeholders in `rails` (an empty name) where a rail was before a
    /// device that came back with other ports moved it to its new ones:
    /// [`rails`](Machine::rails) skips them.
    moved_rails: usize,
}

impl Machine {
    /// A machine with no devices yet; refuses a config that
    /// [`MachineConfig::validate`] refuses.
    pub fn new(config: MachineConfig) -> Result<Machine, ConfigError> {
        config.validate()?;
        Ok(Machine {
            rng: config.seed.unwrap_or(1) | 1,
            config,
            devices: Vec::new(),
            rails: Vec::new(),
            actions: VecDeque::with_capacity(64),
            watched: Vec::new(),
            next_tick: None,
            next_audit: None,
            now: Millis::ZERO,
            ticks: 0,
            stray: 0,
            lost_ahead: 0,
            moved_rails: 0,
        })
    }

    /// The settings in force.
    pub fn config(&self) -> &MachineConfig {
        &self.config
    }

    /// An event read from device `device` (already acknowledged).
    pub fn handle_event(&mut self, device: u32, event: AsyncEvent, now: Millis) {
        let now = self.at(now);
        let Some(dev) = self.devices.get_mut(device as usize) else { return self.stray() };
        dev.stats.events += 1;
        let kind = event.kind();
        let class = classify(kind);
        match class {
            EventClass::CountOnly => {
                dev.stats.comm_est += 1;
                return;
            }
            EventClass::Unhandled => {
                dev.stats.unhandled += 1;
                if dev.warned.len() < MAX_WARNED_CODES && !dev.warned.contains(&event.code) {
                    dev.warned.push(event.code);
                    let capped = dev.warned.len() == MAX_WARNED_CODES;
                    self.push(Action::Log(Log::Unhandled { device, code: event.code, capped }));
                }
            }
            EventClass::NotifyObject | EventClass::Handled => {}
        }
        if let Some(scope) = WorkScope::of_event(&event) {
            self.work_lost(device, scope, now);
        }
        self.notify(now, Happening::Event { device, port: event.port_num(), kind });
        let idx = device as usize;
        if class != EventClass::Handled || self.devices[idx].mode.is_closed() {
            return;
        }
        for ri in self.devices[idx].rails() {
            let state = self.rails[ri].cell.load().state;
            match decide_event(&event, self.rails[ri].id.port, state) {
                RailDecision::Leave | RailDecision::Detach(_) => {}
                RailDecision::Pause(reason) => self.pause_rail(ri, reason, now),
                // A duplicate PORT_ACTIVE for an active rail is harmless.
                RailDecision::Activate if state == RailState::Active => {}
                // Activation from an event is confirmed by one port query
                // reading exactly ACTIVE.
                RailDecision::Activate | RailDecision::Recheck => self.recheck(ri),
                RailDecision::Restart => self.bump(ri, kind, now),
                RailDecision::AddressChanged if self.devices[idx].reads_addresses => {
                    // Re-read the address (the generation is bumped if it
                    // changed) and the port: a lost PORT_ERR is real (a
                    // deleted netdev under Soft-RoCE delivers only
                    // GID_CHANGE).
                    self.rails[ri].address_event = Some(kind);
                    self.read_address(ri);
                    self.recheck(ri);
                    // Until the answer comes, the tick asks again.
                    self.watch(idx);
                    self.arm_tick(now);
                }
                RailDecision::AddressChanged => {
                    // The device cannot read addresses: assume it changed,
                    // as an unreadable answer would, and re-read the port.
                    self.bump(ri, kind, now);
                    let rail = self.rails[ri].id;
                    let generation = self.rails[ri].cell.load().generation;
                    self.notify(now, Happening::AddressChanged { rail, generation });
                    self.recheck(ri);
                }
                RailDecision::RefreshLink => self.read_link(ri),
            }
        }
        if kind == EventKind::DeviceFatal {
            self.device_gone(idx, PauseReason::DeviceFatal, now);
        }
    }

    /// Reading device `device`'s fd failed with `errno` (not `EAGAIN`, not
    /// `EINTR`): it is no longer read and its ports are polled every tick.
    /// An `EIO` may mean the device is gone: one port query decides.
    pub fn handle_read_error(&mut self, device: u32, errno: Errno, now: Millis) {
        let now = self.at(now);
        let idx = device as usize;
        let Some(dev) = self.devices.get_mut(idx) else { return self.stray() };
        if dev.mode != DeviceMode::Events {
            return;
        }
        dev.stats.read_errors += 1;
        dev.mode = DeviceMode::PollOnly;
        let attaching = dev.attach.is_some();
        let first = dev.rails().start;
        let has_rails = !dev.rails().is_empty();
        self.push(Action::Log(Log::ReadFailed { device, errno }));
        self.push(Action::StopReading { device });
        self.watch(idx);
        self.arm_tick(now);
        if errno == Errno::EIO && has_rails && !attaching {
            self.query(first);
        }
    }

    /// Device `device`'s fd hung up (or reported an error): its context is
    /// gone, whatever port queries still say. The device is closed and
    /// re-opened with backoff.
    pub fn handle_hangup(&mut self, device: u32, now: Millis) {
        let now = self.at(now);
        let idx = device as usize;
        let Some(dev) = self.devices.get(idx) else { return self.stray() };
        if dev.mode.is_closed() {
            return;
        }
        self.push(Action::Log(Log::HungUp { device }));
        self.device_gone(idx, PauseReason::DeviceRemoved, now);
    }

    /// The answer to a [`Action::QueryPort`] (or any fresh reading of the
    /// port: an answer is an observation, whoever asked). A failure means
    /// the device is gone. The carrier last read or heard stands; a driver
    /// that reads the netdev's carrier with the port calls
    /// [`handle_port_reading`](Self::handle_port_reading) instead.
    pub fn handle_port_state(&mut self, device: u32, port: u8, answer: Result<PortState, Errno>, now: Millis) {
        self.handle_port_reading(device, port, answer, None, now);
    }

    /// [`handle_port_state`](Self::handle_port_state) with the netdev's
    /// carrier read beside the port (`None`: the port has no netdev, or it
    /// could not be read; the carrier last known stands). Under
    /// `port_witness` `both` a port that reads ACTIVE with no carrier is
    /// not active (`no_carrier`).
    pub fn handle_port_reading(
        &mut self,
        device: u32,
        port: u8,
        answer: Result<PortState, Errno>,
        carrier: Option<Carrier>,
        now: Millis,
    ) {
        let now = self.at(now);
        let Some(ri) = self.rail_index(device, port) else { return self.stray() };
        let idx = device as usize;
        if self.devices[idx].mode.is_closed() {
            // A late answer from before the device was closed.
            return;
        }
        if carrier.is_some() {
            self.rails[ri].carrier = carrier;
        }
        if self.devices[idx].attach.is_some() {
            return self.attach_answer(idx, ri, answer, now);
        }
        let state = match answer {
            Ok(state) => state,
            Err(errno) => return self.query_failed(ri, errno, now),
        };
        self.devices[idx].query_failures = 0;
        self.observe(ri, state, now);
        // The flap counters with every port read, after what the read led
        // to (an activation is not delayed by them).
        self.read_counters(ri);
    }

    /// The netdev of `device`'s `port` says its carrier is `carrier` (an
    /// rtnetlink link message, or a read outside a port query). A change
    /// is followed as an event is: a loss pauses an active rail
    /// (`no_carrier`) unless `port_witness` is `port`; a return asks for a
    /// port query, whose answer (with the carrier) decides.
    pub fn handle_carrier(&mut self, device: u32, port: u8, carrier: Carrier, now: Millis) {
        let now = self.at(now);
        let Some(ri) = self.rail_index(device, port) else { return self.stray() };
        if self.devices[device as usize].mode.is_closed() {
            return;
        }
        let before = self.rails[ri].carrier.replace(carrier);
        let state = self.rails[ri].cell.load().state;
        let attaching = self.devices[device as usize].attach.is_some();
        if before == Some(carrier) || self.config.port_witness == PortWitness::Port || attaching {
            return;
        }
        match carrier {
            Carrier::Down => self.lose_carrier(ri, now),
            // A paused rail may come back: a query decides, as after
            // PORT_ACTIVE.
            Carrier::Up if state == RailState::Paused => self.recheck(ri),
            Carrier::Up => {}
        }
    }

    /// The answer to a [`Action::ReadLink`]: re-seeds the selector if the
    /// rate changed or was never seeded, then finishes an activation
    /// (available last).
    pub fn handle_link(&mut self, device: u32, port: u8, answer: Result<LinkAttrs, Errno>, now: Millis) {
        let now = self.at(now);
        let Some(ri) = self.rail_index(device, port) else { return self.stray() };
        if self.devices[device as usize].mode.is_closed() || self.rails[ri].cell.load().state == RailState::Inert {
            return;
        }
        self.link_answer(ri, answer, now);
    }

    /// The answer to a [`Action::ReadAddress`]. After a `LID_CHANGE` or
    /// `GID_CHANGE`, a changed address (or one that cannot be read) bumps
    /// the generation; any change is notified
    /// ([`Happening::AddressChanged`]), so engines rebuild endpoints built
    /// on the old one.
    pub fn handle_address(
        &mut self,
        device: u32,
        port: u8,
        answer: Result<&crate::address::PortAddress, Errno>,
        now: Millis,
    ) {
        let now = self.at(now);
        let Some(ri) = self.rail_index(device, port) else { return self.stray() };
        if self.devices[device as usize].mode.is_closed() || self.rails[ri].cell.load().state == RailState::Inert {
            return;
        }
        let event = self.rails[ri].address_event.take();
        if answer == Err(Errno::EOPNOTSUPP) {
            self.devices[device as usize].reads_addresses = false;
        }
        if event.is_some() {
            self.disarm_tick_if_idle();
        }
        let changed = match answer {
            Ok(address) => {
                let fresh = address.fingerprint();
                match self.rails[ri].address.replace(fresh) {
                    Some(old) => old != fresh,
                    // No baseline (nothing read since attach): after a change
                    // event, assume it changed.
                    None => event.is_some(),
                }
            }
            // Cannot tell: after a change event, assume it changed.
            Err(_) => event.is_some(),
        };
        if changed {
            if let Some(kind) = event {
                self.bump(ri, kind, now);
            }
            let rail = self.rails[ri].id;
            let generation = self.rails[ri].cell.load().generation;
            self.notify(now, Happening::AddressChanged { rail, generation });
        }
        self.check_address(ri, answer.ok(), now);
    }

    /// Runs whatever is due at `now`: re-opens, settle and damping timers,
    /// the recovery tick and the audit. Call it when
    /// [`poll_timeout`](Self::poll_timeout) is reached (calling it early
    /// does nothing that is not due).
    pub fn handle_timeout(&mut self, now: Millis) {
        let now = self.at(now);
        self.run_due(now);
    }

    /// The next action for the driver, in order.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.lost_ahead = self.lost_ahead.saturating_sub(1);
        self.actions.pop_front()
    }

    /// The action [`poll_action`](Self::poll_action) would give next, left
    /// in the queue: a driver that copies it out (the C API) reads it where
    /// it has been for a while rather than from a fresh copy.
    pub fn peek_action(&self) -> Option<&Action> {
        self.actions.front()
    }

    /// Whether actions are waiting.
    pub fn has_actions(&self) -> bool {
        !self.actions.is_empty()
    }

    /// How many actions are waiting (what a driver polling them in
    /// batches needs room for).
    pub fn pending_actions(&self) -> usize {
        self.actions.len()
    }

    // ---- views ----------------------------------------------------------

    /// A gate for `rail`, to clone into worker threads.
    pub fn gate(&self, rail: RailId) -> Option<Gate> {
        let ri = self.rail_index(rail.device, rail.port)?;
        Some(Gate::new(self.rails[ri].cell.clone()))
    }

    /// A gate for the rail called `name` (`"mlx5_0/1"`; the latest device
    /// of that name when one was removed and another added).
    pub fn gate_of(&self, name: &str) -> Option<Gate> {
        self.rails.iter().rev().find(|r| &*r.name == name && !name.is_empty()).map(|r| Gate::new(r.cell.clone()))
    }

    /// Every rail, in the order devices and ports were added (a port a
    /// device had before it came back with other ports: listed once, where
    /// its rail is now; one it no longer has: where it was, inert).
    pub fn rails(&self) -> impl ExactSizeIterator<Item = RailView<'_>> {
        Listed { rails: self.rails.iter(), left: self.rails.len() - self.moved_rails }.map(Rail::view)
    }

    /// One rail.
    pub fn rail(&self, rail: RailId) -> Option<RailView<'_>> {
        self.rail_index(rail.device, rail.port).map(|ri| self.rails[ri].view())
    }

    /// The first rail of [`rails`](Self::rails) called `name`
    /// (`"mlx5_0/1"`), found by its name alone: only that one is viewed.
    pub fn rail_named(&self, name: &str) -> Option<RailView<'_>> {
        // The placeholders of moved rails, which `rails` skips, have no name.
        self.rails.iter().find(|r| !r.name.is_empty() && &*r.name == name).map(Rail::view)
    }

    /// Whether the rail exists (cheaper than [`rail`](Self::rail)).
    pub fn has_rail(&self, rail: RailId) -> bool {
        self.rail_index(rail.device, rail.port).is_some()
    }

    /// Every device, in the order added.
    pub fn devices(&self) -> impl ExactSizeIterator<Item = DeviceView<'_>> {
        self.devices.iter().enumerate().map(|(i, d)| d.view(i as u32))
    }

    /// One device.
    pub fn device(&self, device: u32) -> Option<DeviceView<'_>> {
        self.devices.get(device as usize).map(|d| d.view(device))
    }

    /// Recovery ticks run.
    pub fn ticks(&self) -> u64 {
        self.ticks
    }

    /// Inputs that named no device or rail the machine has, or answered
    /// nothing it asked (counted, otherwise ignored).
    pub fn stray_inputs(&self) -> u64 {
        self.stray
    }

    // ---- plumbing -------------------------------------------------------

    fn at(&mut self, now: Millis) -> Millis {
        self.now = self.now.max(now);
        self.now
    }

    fn stray(&mut self) {
        self.stray += 1;
    }

    fn push(&mut self, action: Action) {
        self.actions.push_back(action);
    }

    fn notify(&mut self, t: Millis, what: Happening) {
        self.push(Action::Notify(Notification { t, what }));
    }

    /// Notifies lost work ahead of every action not yet polled (after the
    /// lost work notified before it): an engine fails it before it acts on
    /// anything else the same inputs said.
    fn work_lost(&mut self, device: u32, scope: WorkScope, t: Millis) {
        let note = Action::Notify(Notification { t, what: Happening::WorkLost { device, scope } });
        self.actions.insert(self.lost_ahead, note);
        self.lost_ahead += 1;
    }

    #[inline]
    fn rail_index(&self, device: u32, port: u8) -> Option<usize> {
        self.guess_rail(device, port).or_else(|| self.search_rail(device, port))
    }

    /// The rail of `device`'s `port` if it is where ports numbered from 1
    /// in order (as on nearly every device) put it.
    #[inline]
    fn guess_rail(&self, device: u32, port: u8) -> Option<usize> {
        let rails = self.devices.get(device as usize)?.rails();
        let ri = (rails.start + usize::from(port)).checked_sub(1)?;
        (rails.contains(&ri) && self.rails.get(ri)?.id.port == port).then_some(ri)
    }

    /// [`rail_index`](Self::rail_index) past its guess: out of the hot
    /// path, so the callers' own code keeps its registers. Finds the
    /// first rail of the port, as the guess does when it hits.
    #[cold]
    #[inline(never)]
    fn search_rail(&self, device: u32, port: u8) -> Option<usize> {
        let dev = self.devices.get(device as usize)?;
        dev.rails().find(|&ri| self.rails[ri].id.port == port)
    }

    /// Asks for a port query of rail `ri`.
    fn query(&mut self, ri: usize) {
        let id = self.rails[ri].id;
        self.devices[id.device as usize].stats.port_queries += 1;
        self.push(Action::QueryPort { device: id.device, port: id.port });
    }

    /// Asks for a port query on behalf of an event.
    fn recheck(&mut self, ri: usize) {
        self.rails[ri].wake_by = Some(RecoveredBy::Event);
        self.query(ri);
    }

    /// Asks for an address read of rail `ri`, unless its device cannot
    /// read addresses.
    pub(super) fn read_address(&mut self, ri: usize) {
        let id = self.rails[ri].id;
        if self.devices[id.device as usize].reads_addresses {
            self.push(Action::ReadAddress { device: id.device, port: id.port });
        }
    }

    /// Asks for a link read of rail `ri`.
    fn read_link(&mut self, ri: usize) {
        let id = self.rails[ri].id;
        self.devices[id.device as usize].stats.link_reads += 1;
        self.push(Action::ReadLink { device: id.device, port: id.port });
    }
}
