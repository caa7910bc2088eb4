//! The rail state word: state, pause reason, last port state and generation
//! packed into one atomic, changed only by compare-and-swap.
//!
//! Layout of the `u64` (low bits first):
//!
//! | bits   | field                                            |
//! |--------|--------------------------------------------------|
//! | 0..2   | [`RailState`]                                    |
//! | 2..8   | [`PauseReason`]                                  |
//! | 8..24  | last [`PortState`] seen (`0xFFFF`: none yet)     |
//! | 24..64 | generation (40 bits: 10¹² bumps before it wraps) |
//!
//! One word means a reader never sees a state from one transition and a
//! generation from another, and the gate admits with a single load.

use std::fmt;

use crate::port::PortState;
use crate::sync::{AtomicU64, Ordering};
use crate::time::Millis;

/// Where a rail is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RailState {
    /// Port ACTIVE: the selector may pick it and the gate admits.
    Active,
    /// Device open, port not usable: the gate refuses with the reason.
    Paused,
    /// No usable device. Left only by an explicit [`RailCell::attach`].
    Inert,
}

impl RailState {
    const fn bits(self) -> u64 {
        match self {
            RailState::Active => 0,
            RailState::Paused => 1,
            RailState::Inert => 2,
        }
    }

    /// The state's code in the word (see [`layout`]).
    pub const fn code(self) -> u32 {
        self.bits() as u32
    }

    const fn from_bits(bits: u64) -> RailState {
        match bits & 0b11 {
            0 => RailState::Active,
            1 => RailState::Paused,
            // 3 is never written; reading it as inert is the safe side.
            _ => RailState::Inert,
        }
    }

    /// Lower-case name (`"paused"`).
    pub const fn name(self) -> &'static str {
        match self {
            RailState::Active => "active",
            RailState::Paused => "paused",
            RailState::Inert => "inert",
        }
    }
}

impl fmt::Display for RailState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a rail is not active.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PauseReason {
    /// Active rails carry no reason.
    None,
    /// `IBV_EVENT_PORT_ERR` for this port.
    PortErr,
    /// A port query read a state other than ACTIVE (at attach, or by the
    /// poll of a device whose fd failed).
    PortNotActive,
    /// `IBV_EVENT_DEVICE_FATAL`.
    DeviceFatal,
    /// The device went away (EIO/EPOLLERR confirmed by a failing port query).
    DeviceRemoved,
    /// The device was never opened, or was closed.
    NotOpened,
    /// Flap damping holds the rail down until its penalty decays.
    Damped,
    /// Waiting out the settle delay after the port read ACTIVE.
    Settling,
    /// The data-path breaker is open: transfers failed against the local
    /// path through enough distinct peers; a probe after a backoff.
    DataPath,
    /// The port reads ACTIVE but has no address of the kind
    /// `require_address` asks for.
    NoAddress,
    /// The data-path breaker's backoff is over and the port reads ACTIVE:
    /// the gate refuses ordinary work and grants one probe
    /// ([`Gate::probe`]).
    HalfOpen,
    /// A probe was granted; its outcome is awaited. Every admission is
    /// refused, probes too.
    Probing,
    /// The port reads ACTIVE but its netdev has no carrier (`port_witness`
    /// `both`), or the carrier alone says so (`carrier`).
    NoCarrier,
}

impl PauseReason {
    /// Every reason, in code order.
    pub const ALL: [PauseReason; 13] = [
        PauseReason::None,
        PauseReason::PortErr,
        PauseReason::PortNotActive,
        PauseReason::DeviceFatal,
        PauseReason::DeviceRemoved,
        PauseReason::NotOpened,
        PauseReason::Damped,
        PauseReason::Settling,
        PauseReason::DataPath,
        PauseReason::NoAddress,
        PauseReason::HalfOpen,
        PauseReason::Probing,
        PauseReason::NoCarrier,
    ];

    const fn bits(self) -> u64 {
        match self {
            PauseReason::None => 0,
            PauseReason::PortErr => 1,
            PauseReason::PortNotActive => 2,
            PauseReason::DeviceFatal => 3,
            PauseReason::DeviceRemoved => 4,
            PauseReason::NotOpened => 5,
            PauseReason::Damped => 6,
            PauseReason::Settling => 7,
            PauseReason::DataPath => 8,
            PauseReason::NoAddress => 9,
            PauseReason::HalfOpen => 10,
            PauseReason::Probing => 11,
            PauseReason::NoCarrier => 12,
        }
    }

    /// A reason that holds a rail whose port reads ACTIVE (settling,
    /// damped, the data-path breaker in any stage, no address, no
    /// carrier): the port
    /// going down replaces it with what the port says.
    pub const fn is_hold(self) -> bool {
        matches!(
            self,
            PauseReason::Settling
                | PauseReason::Damped
                | PauseReason::DataPath
                | PauseReason::NoAddress
                | PauseReason::HalfOpen
                | PauseReason::Probing
                | PauseReason::NoCarrier
        )
    }

    /// The data-path breaker's half-open stages: `half_open`, `probing`.
    pub const fn is_probe_stage(self) -> bool {
        matches!(self, PauseReason::HalfOpen | PauseReason::Probing)
    }

    /// The reason's code in the word (see [`layout`]).
    pub const fn code(self) -> u32 {
        self.bits() as u32
    }

    fn from_bits(bits: u64) -> PauseReason {
        PauseReason::ALL.get(bits as usize).copied().unwrap_or(PauseReason::None)
    }

    /// snake_case name used in logs and JSON.
    pub const fn name(self) -> &'static str {
        match self {
            PauseReason::None => "none",
            PauseReason::PortErr => "port_err",
            PauseReason::PortNotActive => "port_not_active",
            PauseReason::DeviceFatal => "device_fatal",
            PauseReason::DeviceRemoved => "device_removed",
            PauseReason::NotOpened => "not_opened",
            PauseReason::Damped => "damped",
            PauseReason::Settling => "settling",
            PauseReason::DataPath => "data_path",
            PauseReason::NoAddress => "no_address",
            PauseReason::HalfOpen => "half_open",
            PauseReason::Probing => "probing",
            PauseReason::NoCarrier => "no_carrier",
        }
    }
}

impl fmt::Display for PauseReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The result of a transition: what happened, never an inverted int.
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The word changed.
    Changed,
    /// The rail was already where the transition leads; nothing changed.
    AlreadyThere,
    /// The transition does not apply from `from`; nothing changed.
    Refused {
        /// The state the rail was in.
        from: RailState,
    },
}

/// The bit layout of a rail's 64-bit state word. It is part of the C API
/// (`railwatch.h` decodes the word inline, on the workers' hot path), so it
/// changes only with [`layout::VERSION`].
///
/// | bits | field |
/// |---|---|
/// | 0–1 | state: 0 active, 1 paused, 2 inert ([`RailState::code`]) |
/// | 2–7 | pause reason ([`PauseReason::code`]; 0 when active) |
/// | 8–23 | last port state read (`ibv_port_state`), `0xFFFF` never read |
/// | 24–63 | generation (wraps at 2⁴⁰) |
pub mod layout {
    /// Bumped whenever a field below moves or changes meaning.
    pub const VERSION: u32 = 1;
    /// The state bits.
    pub const STATE_MASK: u64 = 0b11;
    /// Where the pause reason starts.
    pub const REASON_SHIFT: u32 = 2;
    /// The pause reason's bits, after the shift.
    pub const REASON_MASK: u64 = 0b11_1111;
    /// Where the last port state starts.
    pub const PORT_SHIFT: u32 = 8;
    /// The last port state's bits, after the shift.
    pub const PORT_MASK: u64 = 0xFFFF;
    /// The last port state's value when the port was never read.
    pub const PORT_NONE: u64 = 0xFFFF;
    /// Where the generation starts.
    pub const GEN_SHIFT: u32 = 24;
    /// The generation's bits, after the shift.
    pub const GEN_MASK: u64 = (1 << 40) - 1;
}

use layout::{GEN_MASK, GEN_SHIFT, PORT_MASK, PORT_NONE, PORT_SHIFT, REASON_MASK, REASON_SHIFT, STATE_MASK};

/// A decoded copy of the state word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RailWord {
    /// The state.
    pub state: RailState,
    /// Why it is not active ([`PauseReason::None`] when active).
    pub reason: PauseReason,
    /// The last port state the monitor read or was told (codes above
    /// 0xFFFE are kept as 0xFFFE).
    pub last_port_state: Option<PortState>,
    /// Bumped on every resume, restart (CQ_ERR), address change and attach.
    pub generation: u64,
}

impl RailWord {
    /// Decodes a raw word (see [`layout`]).
    pub fn from_raw(raw: u64) -> RailWord {
        RailWord::decode(raw)
    }

    /// The raw word (see [`layout`]).
    pub fn to_raw(&self) -> u64 {
        self.encode()
    }

    fn decode(raw: u64) -> RailWord {
        let port = (raw >> PORT_SHIFT) & PORT_MASK;
        RailWord {
            state: RailState::from_bits(raw & STATE_MASK),
            reason: PauseReason::from_bits((raw >> REASON_SHIFT) & REASON_MASK),
            last_port_state: (port != PORT_NONE).then(|| PortState::from_code(port as u32)),
            generation: (raw >> GEN_SHIFT) & GEN_MASK,
        }
    }

    fn encode(&self) -> u64 {
        let port = match self.last_port_state {
            Some(p) => u64::from(p.code()).min(PORT_NONE - 1),
            None => PORT_NONE,
        };
        self.state.bits()
            | (self.reason.bits() << REASON_SHIFT)
            | (port << PORT_SHIFT)
            | ((self.generation & GEN_MASK) << GEN_SHIFT)
    }
}

/// The shared cell behind one rail: the state word and the time of its last
/// state change. The monitor changes it; [`Gate`]s read it.
#[derive(Debug)]
pub struct RailCell {
    word: AtomicU64,
    since: AtomicU64,
}

impl RailCell {
    /// A rail that has no device yet: inert, `not_opened`, generation 0.
    pub fn new(now: Millis) -> RailCell {
        let word =
            RailWord { state: RailState::Inert, reason: PauseReason::NotOpened, last_port_state: None, generation: 0 };
        RailCell { word: AtomicU64::new(word.encode()), since: AtomicU64::new(now.0) }
    }

    /// The current word (one acquire load).
    pub fn load(&self) -> RailWord {
        RailWord::decode(self.word.load(Ordering::Acquire))
    }

    /// When the state last changed.
    pub fn since(&self) -> Millis {
        Millis(self.since.load(Ordering::Acquire))
    }

    /// The CAS loop every transition goes through. `step` sees the current
    /// word and returns the new one, or the outcome to report unchanged.
    fn transition(&self, now: Option<Millis>, step: impl Fn(RailWord) -> Result<RailWord, Outcome>) -> Outcome {
        let mut raw = self.word.load(Ordering::Acquire);
        loop {
            let new = match step(RailWord::decode(raw)) {
                Ok(new) => new,
                Err(outcome) => return outcome,
            };
            match self.word.compare_exchange_weak(raw, new.encode(), Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    if let Some(now) = now {
                        self.since.store(now.0, Ordering::Release);
                    }
                    return Outcome::Changed;
                }
                Err(actual) => raw = actual,
            }
        }
    }

    /// active → paused with `reason`. Paused → `AlreadyThere` (the first
    /// reason is kept); inert → `Refused`.
    pub fn pause(&self, reason: PauseReason, now: Millis) -> Outcome {
        self.transition(Some(now), |w| match w.state {
            RailState::Active => Ok(RailWord { state: RailState::Paused, reason, ..w }),
            RailState::Paused => Err(Outcome::AlreadyThere),
            RailState::Inert => Err(Outcome::Refused { from: RailState::Inert }),
        })
    }

    /// paused → active, bumping the generation (endpoints built before the
    /// pause are stale). Active → `AlreadyThere`, bumping nothing; inert →
    /// `Refused`.
    pub fn resume(&self, now: Millis) -> Outcome {
        self.transition(Some(now), |w| match w.state {
            RailState::Paused => Ok(RailWord {
                state: RailState::Active,
                reason: PauseReason::None,
                last_port_state: Some(PortState::Active),
                generation: w.generation + 1,
            }),
            RailState::Active => Err(Outcome::AlreadyThere),
            RailState::Inert => Err(Outcome::Refused { from: RailState::Inert }),
        })
    }

    /// Any state → inert with `reason` (the device is gone or closed).
    pub fn detach(&self, reason: PauseReason, now: Millis) -> Outcome {
        self.transition(Some(now), |w| match w.state {
            RailState::Inert => Err(Outcome::AlreadyThere),
            _ => Ok(RailWord { state: RailState::Inert, reason, ..w }),
        })
    }

    /// inert → active (port reads ACTIVE) or paused (`port_not_active`),
    /// bumping the generation: the device was (re)opened. Refused from any
    /// other state.
    pub fn attach(&self, port: PortState, now: Millis) -> Outcome {
        match port.is_usable() {
            true => self.attach_active(port, now),
            false => self.attach_paused(port, PauseReason::PortNotActive, now),
        }
    }

    /// inert → active whatever `port` reads, bumping the generation: the
    /// device was (re)opened and a witness other than the port state
    /// (`port_witness = "carrier"`) says the port is usable. Refused from
    /// any other state.
    pub fn attach_active(&self, port: PortState, now: Millis) -> Outcome {
        self.transition(Some(now), |w| match w.state {
            RailState::Inert => Ok(RailWord {
                state: RailState::Active,
                reason: PauseReason::None,
                last_port_state: Some(port),
                generation: w.generation + 1,
            }),
            from => Err(Outcome::Refused { from }),
        })
    }

    /// inert → paused with `reason`, bumping the generation: the device was
    /// re-opened and the port reads `port`, but the rail is held (flap
    /// damping, the settle delay). Refused from any other state.
    pub fn attach_paused(&self, port: PortState, reason: PauseReason, now: Millis) -> Outcome {
        self.transition(Some(now), |w| match w.state {
            RailState::Inert => Ok(RailWord {
                state: RailState::Paused,
                reason,
                last_port_state: Some(port),
                generation: w.generation + 1,
            }),
            from => Err(Outcome::Refused { from }),
        })
    }

    /// A CQ_ERR restart or a LID/GID change: bump the generation, state
    /// unchanged. Refused on an inert rail (there is nothing to rebuild).
    pub fn bump_generation(&self) -> Outcome {
        self.transition(None, |w| match w.state {
            RailState::Inert => Err(Outcome::Refused { from: RailState::Inert }),
            _ => Ok(RailWord { generation: w.generation + 1, ..w }),
        })
    }

    /// Takes the half-open breaker's one probe: `half_open` → `probing`,
    /// the only transition a worker makes. Of workers racing for it exactly
    /// one gets the word it changed; every other sees it refused.
    fn take_probe(&self) -> Result<RailWord, u64> {
        let half_open = RailState::Paused.bits() | (PauseReason::HalfOpen.bits() << REASON_SHIFT);
        let probing = RailState::Paused.bits() | (PauseReason::Probing.bits() << REASON_SHIFT);
        let low = STATE_MASK | (REASON_MASK << REASON_SHIFT);
        let raw = self.word.load(Ordering::Acquire);
        if raw & low != half_open {
            return Err(raw);
        }
        let taken = (raw & !low) | probing;
        match self.word.compare_exchange(raw, taken, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => Ok(RailWord::decode(taken)),
            Err(actual) => Err(actual),
        }
    }

    /// Changes the reason of a paused rail (e.g. `port_err` → `damped`).
    /// Refused unless paused; `AlreadyThere` if the reason is the same.
    pub fn set_reason(&self, reason: PauseReason) -> Outcome {
        self.transition(None, |w| match w.state {
            RailState::Paused if w.reason == reason => Err(Outcome::AlreadyThere),
            RailState::Paused => Ok(RailWord { reason, ..w }),
            from => Err(Outcome::Refused { from }),
        })
    }

    /// Records the port state just read; changes nothing else.
    pub fn observe_port(&self, port: PortState) {
        let _ = self.transition(None, |w| {
            if w.last_port_state == Some(port) {
                Err(Outcome::AlreadyThere)
            } else {
                Ok(RailWord { last_port_state: Some(port), ..w })
            }
        });
    }
}

/// Admission to a rail: taken by a worker before each transfer.
///
/// The ticket carries the generation: an engine tags its endpoints with it,
/// and a ticket with a newer generation than an endpoint's means that
/// endpoint was built before a pause, restart or address change and must be
/// rebuilt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket {
    /// The rail's generation at admission.
    pub generation: u64,
}

/// The half-open breaker's one probe, granted by [`Gate::probe`]: send one
/// transfer under it and report its outcome
/// ([`Machine::handle_probe`](crate::Machine::handle_probe)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeTicket {
    /// The generation the probe's endpoint must have been built for.
    pub generation: u64,
}

/// Why the gate refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("rail {state} ({reason}) since {since}, port last seen {}", match .last_port_state { Some(p) => p.ibv_str(), None => "never" })]
pub struct Rejection {
    /// Paused or inert.
    pub state: RailState,
    /// Why.
    pub reason: PauseReason,
    /// Since when (the caller's clock).
    pub since: Millis,
    /// The port state last read, if any.
    pub last_port_state: Option<PortState>,
    /// The generation at the time of refusal.
    pub generation: u64,
}

/// A cheap, cloneable read-only view of one rail for worker threads.
#[derive(Debug, Clone)]
pub struct Gate {
    cell: crate::sync::Arc<RailCell>,
}

impl Gate {
    /// A gate over `cell`.
    pub fn new(cell: crate::sync::Arc<RailCell>) -> Gate {
        Gate { cell }
    }

    /// Admits when the rail is active. The admission path is one acquire
    /// load of the state word: no lock, no allocation.
    #[inline]
    pub fn check(&self) -> Result<Ticket, Rejection> {
        let raw = self.cell.word.load(Ordering::Acquire);
        // Only the state bits and the generation are looked at to admit;
        // the full decode is for a refusal (decoding first cost ~6x a bare
        // load, docs/PERFORMANCE.md).
        if raw & STATE_MASK == RailState::Active.bits() {
            Ok(Ticket { generation: (raw >> GEN_SHIFT) & GEN_MASK })
        } else {
            Err(self.reject(raw))
        }
    }

    /// The half-open breaker's one probe: granted (one compare-and-swap,
    /// `half_open` → `probing`) only while the rail is half-open and no
    /// other probe is out; refused otherwise, with the rail's state as
    /// [`check`](Self::check) refuses. Of any number of workers racing,
    /// exactly one is granted. The outcome goes to the machine
    /// ([`Machine::handle_probe`](crate::Machine::handle_probe)), which
    /// closes or re-opens the breaker; an unreported probe times out.
    pub fn probe(&self) -> Result<ProbeTicket, Rejection> {
        match self.cell.take_probe() {
            Ok(w) => Ok(ProbeTicket { generation: w.generation }),
            Err(raw) => Err(self.reject(raw)),
        }
    }

    #[cold]
    #[inline(never)]
    fn reject(&self, raw: u64) -> Rejection {
        let w = RailWord::decode(raw);
        Rejection {
            state: w.state,
            reason: w.reason,
            since: self.cell.since(),
            last_port_state: w.last_port_state,
            generation: w.generation,
        }
    }

    /// The full current word, for diagnostics.
    pub fn word(&self) -> RailWord {
        self.cell.load()
    }

    /// The address of the rail's state word, for a C worker that checks it
    /// inline with an acquire load (the C API's gate). It stays valid while
    /// this gate (or a clone) lives; only the monitor writes it.
    #[cfg(not(loom))]
    pub fn word_ptr(&self) -> *const u64 {
        self.cell.word.as_ptr().cast_const()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn active_cell() -> RailCell {
        let cell = RailCell::new(Millis(0));
        assert_eq!(cell.attach(PortState::Active, Millis(1)), Outcome::Changed);
        cell
    }

    #[test]
    fn new_rail_is_inert_and_never_opened() {
        let w = RailCell::new(Millis(5)).load();
        assert_eq!(
            (w.state, w.reason, w.generation, w.last_port_state),
            (RailState::Inert, PauseReason::NotOpened, 0, None)
        );
    }

    #[test]
    fn attach_goes_active_or_paused_by_port_state() {
        let cell = active_cell();
        let w = cell.load();
        assert_eq!((w.state, w.generation), (RailState::Active, 1));
        let cell = RailCell::new(Millis(0));
        assert_eq!(cell.attach(PortState::Init, Millis(3)), Outcome::Changed);
        let w = cell.load();
        assert_eq!(
            (w.state, w.reason, w.last_port_state),
            (RailState::Paused, PauseReason::PortNotActive, Some(PortState::Init))
        );
        assert_eq!(cell.since(), Millis(3));
        assert_eq!(cell.attach(PortState::Active, Millis(4)), Outcome::Refused { from: RailState::Paused });
        assert_eq!(active_cell().attach(PortState::Active, Millis(4)), Outcome::Refused { from: RailState::Active });
    }

    #[test]
    fn pause_outcomes() {
        let cell = active_cell();
        assert_eq!(cell.pause(PauseReason::PortErr, Millis(10)), Outcome::Changed);
        assert_eq!(cell.since(), Millis(10));
        assert_eq!(cell.pause(PauseReason::PortNotActive, Millis(11)), Outcome::AlreadyThere);
        assert_eq!(cell.load().reason, PauseReason::PortErr, "first reason kept");
        assert_eq!(cell.since(), Millis(10), "since untouched by a no-op");
        cell.detach(PauseReason::DeviceFatal, Millis(12)).ok_changed();
        assert_eq!(cell.pause(PauseReason::PortErr, Millis(13)), Outcome::Refused { from: RailState::Inert });
    }

    #[test]
    fn resume_bumps_once() {
        let cell = active_cell();
        let g0 = cell.load().generation;
        assert_eq!(cell.resume(Millis(2)), Outcome::AlreadyThere);
        assert_eq!(cell.load().generation, g0, "resume of an active rail bumps nothing");
        let _ = cell.pause(PauseReason::PortErr, Millis(3));
        assert_eq!(cell.resume(Millis(4)), Outcome::Changed);
        assert_eq!(cell.load().generation, g0 + 1);
        assert_eq!(cell.resume(Millis(5)), Outcome::AlreadyThere);
        assert_eq!(cell.load().generation, g0 + 1, "a second resume bumps nothing");
        assert_eq!(cell.load().reason, PauseReason::None);
    }

    #[test]
    fn inert_is_left_only_by_attach() {
        let cell = active_cell();
        assert_eq!(cell.detach(PauseReason::DeviceRemoved, Millis(2)), Outcome::Changed);
        assert_eq!(cell.detach(PauseReason::DeviceRemoved, Millis(3)), Outcome::AlreadyThere);
        assert_eq!(cell.resume(Millis(4)), Outcome::Refused { from: RailState::Inert });
        assert_eq!(cell.bump_generation(), Outcome::Refused { from: RailState::Inert });
        assert_eq!(cell.set_reason(PauseReason::Damped), Outcome::Refused { from: RailState::Inert });
        assert_eq!(cell.load().state, RailState::Inert);
        assert_eq!(cell.attach(PortState::Active, Millis(5)), Outcome::Changed);
        assert_eq!(cell.load().state, RailState::Active);
    }

    #[test]
    fn bump_generation_keeps_state() {
        let cell = active_cell();
        let _ = cell.pause(PauseReason::PortErr, Millis(2));
        let before = cell.load();
        assert_eq!(cell.bump_generation(), Outcome::Changed);
        let after = cell.load();
        assert_eq!((after.state, after.reason, after.generation), (before.state, before.reason, before.generation + 1));
        assert_eq!(cell.since(), Millis(2), "a bump is not a state change");
    }

    #[test]
    fn set_reason_and_observe_port() {
        let cell = active_cell();
        assert_eq!(cell.set_reason(PauseReason::Damped), Outcome::Refused { from: RailState::Active });
        let _ = cell.pause(PauseReason::PortErr, Millis(2));
        assert_eq!(cell.set_reason(PauseReason::Damped), Outcome::Changed);
        assert_eq!(cell.set_reason(PauseReason::Damped), Outcome::AlreadyThere);
        cell.observe_port(PortState::Armed);
        cell.observe_port(PortState::Unknown(1 << 20));
        let w = cell.load();
        assert_eq!(w.last_port_state, Some(PortState::Unknown(0xFFFE)), "huge codes saturate");
        assert_eq!((w.state, w.reason), (RailState::Paused, PauseReason::Damped));
    }

    #[test]
    fn gate_admits_with_generation_and_explains_refusals() {
        let cell = Arc::new(RailCell::new(Millis(0)));
        let gate = Gate::new(cell.clone());
        let r = gate.check().unwrap_err();
        assert_eq!((r.state, r.reason, r.last_port_state), (RailState::Inert, PauseReason::NotOpened, None));
        assert_eq!(r.to_string(), "rail inert (not_opened) since 0ms, port last seen never");
        let _ = cell.attach(PortState::Active, Millis(1));
        assert_eq!(gate.check(), Ok(Ticket { generation: 1 }));
        let _ = cell.pause(PauseReason::PortErr, Millis(7));
        cell.observe_port(PortState::Down);
        let r = gate.clone().check().unwrap_err();
        assert_eq!(
            (r.state, r.reason, r.since, r.last_port_state),
            (RailState::Paused, PauseReason::PortErr, Millis(7), Some(PortState::Down))
        );
        let _ = cell.resume(Millis(9));
        assert_eq!(gate.check(), Ok(Ticket { generation: 2 }));
    }

    /// The probe is granted only on a half-open word, once, with the
    /// generation; ordinary admissions stay refused throughout.
    #[test]
    fn one_probe_is_granted_only_while_half_open() {
        let cell = Arc::new(active_cell());
        let gate = Gate::new(cell.clone());
        assert_eq!(gate.probe().unwrap_err().state, RailState::Active, "closed: no probe");
        let _ = cell.pause(PauseReason::DataPath, Millis(2));
        assert_eq!(gate.probe().unwrap_err().reason, PauseReason::DataPath, "open: no probe");
        cell.set_reason(PauseReason::HalfOpen).ok_changed();
        assert_eq!(gate.check().unwrap_err().reason, PauseReason::HalfOpen, "half-open refuses ordinary work");
        assert_eq!(gate.probe(), Ok(ProbeTicket { generation: 1 }));
        let refused = gate.probe().unwrap_err();
        assert_eq!((refused.state, refused.reason), (RailState::Paused, PauseReason::Probing), "one at a time");
        assert_eq!(gate.check().unwrap_err().reason, PauseReason::Probing);
        // Racing workers: exactly one wins each half-open.
        for _ in 0..50 {
            cell.set_reason(PauseReason::HalfOpen).ok_changed();
            let granted: usize = std::thread::scope(|s| {
                let handles: Vec<_> = (0..4).map(|_| s.spawn(|| gate.probe().is_ok())).collect();
                handles.into_iter().map(|h| usize::from(h.join().unwrap())).sum()
            });
            assert_eq!(granted, 1);
        }
    }

    #[test]
    fn word_round_trips() {
        for state in [RailState::Active, RailState::Paused, RailState::Inert] {
            for reason in PauseReason::ALL {
                for port in [None, Some(PortState::Active), Some(PortState::Unknown(77))] {
                    for generation in [0, 1, GEN_MASK] {
                        let w = RailWord { state, reason, last_port_state: port, generation };
                        assert_eq!(RailWord::decode(w.encode()), w);
                    }
                }
            }
        }
    }

    trait OkChanged {
        fn ok_changed(self);
    }
    impl OkChanged for Outcome {
        fn ok_changed(self) {
            assert_eq!(self, Outcome::Changed);
        }
    }
}
