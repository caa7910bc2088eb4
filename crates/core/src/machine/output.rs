//! What the machine asks of its driver ([`Action`]) and tells the engine
//! ([`Notification`]), as plain values.
//!
//! Nothing here owns heap memory: an action is produced and consumed on the
//! event path, which must not allocate.

use std::fmt;

use crate::event::{AsyncEvent, Element, EventKind, ObjectHandle};
use crate::port::{LinkRate, PortState};
use crate::ports::RailId;
use crate::rail::{PauseReason, RailState};
use crate::time::Millis;

/// How a rail came back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecoveredBy {
    /// An async event (`PORT_ACTIVE`, or a port event whose re-read found
    /// the port ACTIVE).
    Event,
    /// The recovery tick read the port ACTIVE (the event was missed).
    Poll,
    /// The device was (re)opened with the port ACTIVE.
    Attach,
    /// The data-path breaker's probe succeeded (the breaker closed).
    Probe,
}

impl RecoveredBy {
    /// Every path, in code order.
    pub const ALL: [RecoveredBy; 4] = [RecoveredBy::Event, RecoveredBy::Poll, RecoveredBy::Attach, RecoveredBy::Probe];

    /// Lower-case name (`"poll"`), as in scenario files and JSON.
    pub const fn name(self) -> &'static str {
        match self {
            RecoveredBy::Event => "event",
            RecoveredBy::Poll => "poll",
            RecoveredBy::Attach => "attach",
            RecoveredBy::Probe => "probe",
        }
    }
}

impl fmt::Display for RecoveredBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a transition happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// A pause or detach, or a change of pause reason, for this reason.
    Reason(PauseReason),
    /// An activation, by this path.
    By(RecoveredBy),
    /// A generation bump without a state change (`cq_err`, `lid_change`,
    /// `gid_change`).
    Bump(EventKind),
    /// A generation bump for a silent flap: a flap counter rose with no
    /// PORT_ERR seen (`silent_flap`).
    SilentFlap,
}

impl Cause {
    /// Every cause a transition carries: each pause reason but `none` and
    /// `probing` (the gate takes a probe without a transition), each
    /// recovery path, the three bumping events and the silent flap.
    pub const ALL: [Cause; 19] = [
        Cause::Reason(PauseReason::PortErr),
        Cause::Reason(PauseReason::PortNotActive),
        Cause::Reason(PauseReason::DeviceFatal),
        Cause::Reason(PauseReason::DeviceRemoved),
        Cause::Reason(PauseReason::NotOpened),
        Cause::Reason(PauseReason::Damped),
        Cause::Reason(PauseReason::Settling),
        Cause::Reason(PauseReason::DataPath),
        Cause::Reason(PauseReason::NoAddress),
        Cause::Reason(PauseReason::HalfOpen),
        Cause::Reason(PauseReason::NoCarrier),
        Cause::By(RecoveredBy::Event),
        Cause::By(RecoveredBy::Poll),
        Cause::By(RecoveredBy::Attach),
        Cause::By(RecoveredBy::Probe),
        Cause::Bump(EventKind::CqErr),
        Cause::Bump(EventKind::LidChange),
        Cause::Bump(EventKind::GidChange),
        Cause::SilentFlap,
    ];

    /// Its snake_case name, as JSON, metrics and logs give it: the pause
    /// reason (`"port_err"`), the recovery path (`"poll"`), the bumping
    /// event (`"gid_change"`) or `"silent_flap"`.
    pub const fn name(self) -> &'static str {
        match self {
            Cause::Reason(r) => r.name(),
            Cause::By(by) => by.name(),
            Cause::Bump(kind) => kind.name(),
            Cause::SilentFlap => "silent_flap",
        }
    }
}

/// Whose posted work will never complete ([`Happening::WorkLost`]): no
/// completion will ever arrive for it, so an engine that waits for one
/// hangs (MORI #655/#670).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkScope {
    /// The work requests posted to one QP (`QP_FATAL`, `QP_REQ_ERR`,
    /// `QP_ACCESS_ERR`; the QP is in the error state).
    Qp {
        /// Which of the three.
        kind: EventKind,
        /// The QP, as an opaque handle.
        handle: Option<ObjectHandle>,
    },
    /// The work posted to one WQ (`WQ_FATAL`).
    Wq(Option<ObjectHandle>),
    /// Every work request whose completion would go to one CQ (`CQ_ERR`:
    /// the CQ overran and is in error).
    Cq(Option<ObjectHandle>),
    /// Everything posted on the device context, every QP, WQ and CQ: it
    /// is gone or closed (`device_fatal`; `device_removed` for a removal,
    /// a hang-up or a failed port query).
    Device(PauseReason),
}

impl WorkScope {
    /// Whose posted work `event` says will never complete, for the events
    /// that say so of one object (a QP, WQ or CQ in error). `DEVICE_FATAL`
    /// loses the whole device's, said when its rails are detached.
    pub fn of_event(event: &AsyncEvent) -> Option<WorkScope> {
        let handle = match event.element {
            Element::Object(h) => Some(h),
            _ => None,
        };
        match event.kind() {
            kind @ (EventKind::QpFatal | EventKind::QpReqErr | EventKind::QpAccessErr) => {
                Some(WorkScope::Qp { kind, handle })
            }
            EventKind::WqFatal => Some(WorkScope::Wq(handle)),
            EventKind::CqErr => Some(WorkScope::Cq(handle)),
            _ => None,
        }
    }

    /// Its name in JSON lines: `qp`, `wq`, `cq`, `device`.
    pub const fn name(self) -> &'static str {
        match self {
            WorkScope::Qp { .. } => "qp",
            WorkScope::Wq(_) => "wq",
            WorkScope::Cq(_) => "cq",
            WorkScope::Device(_) => "device",
        }
    }

    /// The object's handle, for the QP, WQ and CQ scopes.
    pub const fn handle(self) -> Option<ObjectHandle> {
        match self {
            WorkScope::Qp { handle, .. } | WorkScope::Wq(handle) | WorkScope::Cq(handle) => handle,
            WorkScope::Device(_) => None,
        }
    }
}

/// One thing that happened, for the engine.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Happening {
    /// An async event was read (and acknowledged).
    Event {
        /// Device index.
        device: u32,
        /// The port, for port events.
        port: Option<u32>,
        /// What it was.
        kind: EventKind,
    },
    /// A rail's state word changed.
    Transition {
        /// The rail.
        rail: RailId,
        /// State before.
        from: RailState,
        /// State after.
        to: RailState,
        /// Why.
        cause: Cause,
        /// Generation after.
        generation: u64,
    },
    /// The selector's bandwidth for a rail was (re)seeded.
    Reseed {
        /// The rail.
        rail: RailId,
        /// Previous rate (`None`: never seeded).
        from: Option<LinkRate>,
        /// New rate.
        to: LinkRate,
    },
    /// The selector was told a rail is (un)available.
    Available {
        /// The rail.
        rail: RailId,
        /// Its availability now.
        available: bool,
    },
    /// A rail's address (GID table, LID, netdev) changed: endpoints built
    /// on the old one are stale. The generation is the rail's after the
    /// change (bumped by it, or by the activation it came with).
    AddressChanged {
        /// The rail.
        rail: RailId,
        /// Its generation now.
        generation: u64,
    },
    /// Transfers through one peer failed against the local path often
    /// enough to open the breaker, but through no other peer: the peer is
    /// likely the one at fault, and the rail stays in service. Said once
    /// per window.
    PeerFailing {
        /// The rail.
        rail: RailId,
        /// The engine's id of the peer.
        peer: u64,
    },
    /// The data-path breaker's backoff is over and the port reads ACTIVE:
    /// the rail is half-open, and the gate grants one probe
    /// ([`Gate::probe`](crate::Gate::probe)) whose outcome the engine
    /// reports ([`Machine::handle_probe`](super::Machine::handle_probe)).
    HalfOpen {
        /// The rail.
        rail: RailId,
    },
    /// The probe failed, or was not reported within `probe_timeout_ms`:
    /// the breaker is open again, with the next backoff.
    ProbeFailed {
        /// The rail.
        rail: RailId,
        /// No report came in time.
        timed_out: bool,
    },
    /// The rail's address meets `require_address`: endpoints are built on
    /// this GID index (said at each activation, and when it moves).
    GidIndex {
        /// The rail.
        rail: RailId,
        /// The index.
        index: u32,
    },
    /// Work posted to `scope` will never complete: fail it now (free its
    /// buffers, answer its requests) rather than wait for completions.
    /// Queued ahead of everything else the machine has not yet handed
    /// over, so it is the first thing a wake-up tells.
    WorkLost {
        /// Device index.
        device: u32,
        /// Whose work.
        scope: WorkScope,
    },
    /// A drain finished (reported by the driver, which does the reading).
    Drain {
        /// Device index.
        device: u32,
        /// Events read by this drain.
        events: usize,
        /// `None` when the queue was emptied; the errno (or -1 when unknown)
        /// when a read failed.
        errno: Option<i32>,
    },
}

impl Happening {
    /// The index of the device it is about.
    pub fn device(&self) -> u32 {
        match *self {
            Happening::Event { device, .. } | Happening::Drain { device, .. } | Happening::WorkLost { device, .. } => {
                device
            }
            Happening::Transition { rail, .. }
            | Happening::Available { rail, .. }
            | Happening::AddressChanged { rail, .. }
            | Happening::Reseed { rail, .. }
            | Happening::PeerFailing { rail, .. }
            | Happening::HalfOpen { rail }
            | Happening::ProbeFailed { rail, .. }
            | Happening::GidIndex { rail, .. } => rail.device,
        }
    }
}

/// A happening and when it happened.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Notification {
    /// The caller's clock at the input that caused it.
    pub t: Millis,
    /// What happened.
    pub what: Happening,
}

/// An errno value from a failed call (`-1` when the caller has none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Errno(pub i32);

impl Errno {
    /// Linux `EIO`: the device may be gone (a port query decides).
    pub const EIO: Errno = Errno(5);
    /// Linux `EBADF`: the fd is not (or no longer) open.
    pub const EBADF: Errno = Errno(9);
    /// Linux `EOPNOTSUPP`: the backend cannot do it (an address read
    /// answered so is not asked again for the device).
    pub const EOPNOTSUPP: Errno = Errno(95);
    /// No errno known.
    pub const UNKNOWN: Errno = Errno(-1);
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 < 0 { f.write_str("unknown error") } else { write!(f, "errno {}", self.0) }
    }
}

/// Something worth a log line. The machine decides *that* and *when*
/// (once per device and code, at most every `explain_every_ms`, …); the
/// driver decides how to print it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Log {
    /// An event code that is not acted on, seen for the first time on this
    /// device (`capped`: the per-device set of warned codes is full; further
    /// new codes are only counted).
    Unhandled {
        /// Device index.
        device: u32,
        /// The raw code.
        code: u32,
        /// The set of warned codes just filled up.
        capped: bool,
    },
    /// A rail is still paused (said at a low rate).
    StillPaused {
        /// The rail.
        rail: RailId,
        /// Why.
        reason: PauseReason,
        /// Since when.
        since: Millis,
        /// The port state last read.
        port: Option<PortState>,
    },
    /// The port reads ACTIVE but flap damping holds the rail.
    Damped {
        /// The rail.
        rail: RailId,
        /// The penalty now.
        penalty: f64,
        /// When it will be released (if the port still reads ACTIVE).
        until: Millis,
    },
    /// The port reads ACTIVE; the rail waits out the settle delay.
    Settling {
        /// The rail.
        rail: RailId,
        /// Until when.
        until: Millis,
    },
    /// The port went down during the settle delay; activation cancelled.
    SettleCancelled {
        /// The rail.
        rail: RailId,
    },
    /// Reading the device's event fd failed: no longer read, its ports are
    /// polled every tick instead.
    ReadFailed {
        /// Device index.
        device: u32,
        /// Why.
        errno: Errno,
    },
    /// The event fd hung up: the device context is gone.
    HungUp {
        /// Device index.
        device: u32,
    },
    /// A port query failed: the device is gone.
    QueryFailed {
        /// The rail whose port was queried.
        rail: RailId,
        /// Why.
        errno: Errno,
    },
    /// Reading a port's link attributes failed; the cached rate is kept
    /// (an unknown rate is seeded if there was none).
    LinkUnreadable {
        /// The rail.
        rail: RailId,
        /// Why.
        errno: Errno,
    },
    /// The device is closed and will be re-opened with backoff.
    DeviceGone {
        /// Device index.
        device: u32,
        /// Why its rails went inert.
        reason: PauseReason,
        /// When the next re-open is attempted.
        retry_at: Millis,
    },
    /// A re-open failed (`errno`), or its ports could not be queried
    /// (`None`); retried at `retry_at`.
    ReopenFailed {
        /// Device index.
        device: u32,
        /// Why, when the open itself failed.
        errno: Option<Errno>,
        /// When the next attempt is.
        retry_at: Millis,
    },
    /// The port's flap counters cannot be read: the silent-flap rule is off
    /// for it (said once; older drivers have none).
    CountersUnavailable {
        /// The rail.
        rail: RailId,
        /// Why.
        errno: Errno,
    },
    /// A flap counter rose on an active rail with no PORT_ERR seen: a
    /// silent flap (the generation moved).
    SilentFlap {
        /// The rail.
        rail: RailId,
    },
    /// The data-path breaker opened (or opened again after a failed
    /// probe): the rail is out until its backoff ends at `until`, then
    /// half-open.
    BreakerOpen {
        /// The rail.
        rail: RailId,
        /// Failed probes so far (0: the first opening).
        trials: u32,
        /// When the backoff ends.
        until: Millis,
    },
    /// The port reads ACTIVE but has no address `require_address` accepts.
    NoAddress {
        /// The rail.
        rail: RailId,
    },
    /// A device that appeared would not open; asked again at `retry_at`
    /// while the device list still has it.
    OpenFailed {
        /// Device index.
        device: u32,
        /// Why.
        errno: Errno,
        /// When the next attempt is.
        retry_at: Millis,
    },
    /// A device left the host: closed, its rails inert, not re-opened.
    Removed {
        /// Device index.
        device: u32,
    },
    /// A device was (re)opened and its rails attached.
    Attached {
        /// Device index.
        device: u32,
    },
    /// A flap counter reads its width's maximum
    /// ([`saturated_width`](crate::saturated_width)): it counts no more
    /// flaps, so silent flaps are looked for in the others (said once per
    /// counter and device context).
    CounterStuck {
        /// The rail.
        rail: RailId,
        /// Which counter.
        counter: crate::Counter,
        /// Its value.
        value: u64,
        /// No counter of the port is left to witness a flap (port reads
        /// and the carrier remain).
        blind: bool,
    },
    /// The device closed while the rail's data-path breaker was open or
    /// half-open: the breaker is reset with the device context, so the
    /// rail's re-attach re-admits it without a probe.
    BreakerReset {
        /// The rail.
        rail: RailId,
    },
}

/// What the driver must do, in the order polled.
///
/// Each `QueryPort`, `ReadLink`, `ReadAddress`, `Open` and `Reopen` must be
/// answered (with
/// [`Machine::handle_port_state`](super::Machine::handle_port_state),
/// [`handle_link`](super::Machine::handle_link),
/// [`handle_address`](super::Machine::handle_address),
/// [`handle_opened`](super::Machine::handle_opened) and
/// [`handle_reopen`](super::Machine::handle_reopen)); answering at once,
/// before the next input, gives the documented activation order. An answer
/// never given is recovered from by the next tick, never by spinning.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Action {
    /// Register the device's async fd (edge-triggered) and read it after
    /// every wake-up. A failure is reported as a read error.
    StartReading {
        /// Device index.
        device: u32,
    },
    /// Stop reading the device's fd (take it out of the poll set).
    StopReading {
        /// Device index.
        device: u32,
    },
    /// Close the device.
    Close {
        /// Device index.
        device: u32,
    },
    /// Open the device the device list named (it appeared): by its name,
    /// [`Machine::device`](super::Machine::device)`(device).name`; answer
    /// with [`handle_opened`](super::Machine::handle_opened).
    Open {
        /// Device index.
        device: u32,
    },
    /// Open the device again.
    Reopen {
        /// Device index.
        device: u32,
    },
    /// (`device_owner = engine`, instead of `Close` and `Reopen`.) The
    /// device was taken out of use (its rails are inert, its work lost):
    /// make its context usable again (after DEVICE_FATAL, re-initialise
    /// it; otherwise check that it answers, a port query say) and answer
    /// with [`handle_reopen`](super::Machine::handle_reopen): success re-reads
    /// its ports and re-attaches its rails, failure asks again after a
    /// longer backoff. The machine never asks such a device to be closed
    /// unless it left the host.
    Revalidate {
        /// Device index.
        device: u32,
        /// Why it was taken out of use: [`PauseReason::DeviceFatal`] asks
        /// for a re-initialisation, any other for a check that it answers.
        reason: PauseReason,
    },
    /// Query one port's state.
    QueryPort {
        /// Device index.
        device: u32,
        /// The port.
        port: u8,
    },
    /// Read one port's link attributes.
    ReadLink {
        /// Device index.
        device: u32,
        /// The port.
        port: u8,
    },
    /// Read one port's flap counters (answered with
    /// [`Machine::handle_counters`](super::Machine::handle_counters));
    /// asked with every port query while the counters can be read.
    ReadCounters {
        /// Device index.
        device: u32,
        /// The port.
        port: u8,
    },
    /// Read one port's address (answered with
    /// [`Machine::handle_address`](super::Machine::handle_address)).
    ReadAddress {
        /// Device index.
        device: u32,
        /// The port.
        port: u8,
    },
    /// Tell the selector the rail may (or may no longer) be picked.
    SetAvailable {
        /// The rail.
        rail: RailId,
        /// Whether.
        available: bool,
    },
    /// Tell the selector the rail's rate (always before it is made
    /// available).
    Reseed {
        /// The rail.
        rail: RailId,
        /// The rate.
        rate: LinkRate,
    },
    /// Hand this to the engine's subscribers.
    Notify(Notification),
    /// Write this to the log.
    Log(Log),
}
