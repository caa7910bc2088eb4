//! The gate: the rail's state word, its bit layout, and a handle that keeps
//! the word alive for workers that check it inline (`rw_gate_check_inline`
//! in the header: one acquire load, no call).

use railwatch_core::{Gate, PauseReason, PortState, RailState, RailWord, word_layout as layout};

use crate::args::{handle, put, take};
use crate::status::{guard, guard_void, rw_status};

/// Version of the word's bit layout below; the header's inline gate is
/// only valid when [`rw_word_layout_version`] returns the same.
pub const RW_WORD_LAYOUT_VERSION: u32 = 1;
/// The state bits (`rw_rail_state`).
pub const RW_WORD_STATE_MASK: u64 = 0x3;
/// Where the pause reason (`rw_pause_reason`) starts.
pub const RW_WORD_REASON_SHIFT: u32 = 2;
/// The pause reason's bits, after the shift.
pub const RW_WORD_REASON_MASK: u64 = 0x3F;
/// Where the last port state read (`ibv_port_state`) starts.
pub const RW_WORD_PORT_SHIFT: u32 = 8;
/// The last port state's bits, after the shift.
pub const RW_WORD_PORT_MASK: u64 = 0xFFFF;
/// The last port state when the port was never read.
pub const RW_WORD_PORT_NONE: u64 = 0xFFFF;
/// Where the generation starts.
pub const RW_WORD_GEN_SHIFT: u32 = 24;
/// The generation's bits, after the shift (40 bits).
pub const RW_WORD_GEN_MASK: u64 = 0xFF_FFFF_FFFF;

// The header's constants are the core's layout; a change there fails the
// build here (and the header test then shows the new header).
const _: () = {
    assert!(RW_WORD_LAYOUT_VERSION == layout::VERSION);
    assert!(RW_WORD_STATE_MASK == layout::STATE_MASK);
    assert!(RW_WORD_REASON_SHIFT == layout::REASON_SHIFT);
    assert!(RW_WORD_REASON_MASK == layout::REASON_MASK);
    assert!(RW_WORD_PORT_SHIFT == layout::PORT_SHIFT);
    assert!(RW_WORD_PORT_MASK == layout::PORT_MASK);
    assert!(RW_WORD_PORT_NONE == layout::PORT_NONE);
    assert!(RW_WORD_GEN_SHIFT == layout::GEN_SHIFT);
    assert!(RW_WORD_GEN_MASK == layout::GEN_MASK);
    // The header's `rw_word_generation` shifts without masking: the
    // generation must stay the word's top field.
    assert!(RW_WORD_GEN_MASK == u64::MAX >> RW_WORD_GEN_SHIFT);
};

/// A rail's state (bits 0–1 of the word).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rw_rail_state {
    /// The port is ACTIVE: the gate admits.
    RW_RAIL_ACTIVE = 0,
    /// The device is open, the port not usable: the gate refuses.
    RW_RAIL_PAUSED = 1,
    /// No usable device.
    RW_RAIL_INERT = 2,
}

/// Why a rail is not active (bits 2–7 of the word).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rw_pause_reason {
    /// Active rails carry no reason.
    RW_REASON_NONE = 0,
    /// `IBV_EVENT_PORT_ERR`.
    RW_REASON_PORT_ERR = 1,
    /// A port query read a state other than ACTIVE.
    RW_REASON_PORT_NOT_ACTIVE = 2,
    /// `IBV_EVENT_DEVICE_FATAL`.
    RW_REASON_DEVICE_FATAL = 3,
    /// The device went away.
    RW_REASON_DEVICE_REMOVED = 4,
    /// The device was never opened, or was closed.
    RW_REASON_NOT_OPENED = 5,
    /// Flap damping holds the rail.
    RW_REASON_DAMPED = 6,
    /// Waiting out the settle delay.
    RW_REASON_SETTLING = 7,
    /// The data-path breaker is open: transfers failed against the local
    /// path through enough peers; half-open after a backoff.
    RW_REASON_DATA_PATH = 8,
    /// The port is ACTIVE without the address `require_address` asks for.
    RW_REASON_NO_ADDRESS = 9,
    /// The data-path breaker's backoff is over and the port reads ACTIVE:
    /// ordinary work is refused, one probe is granted (`rw_gate_probe`).
    /// (Before 0.2 this code was `probation`, on an active word.)
    RW_REASON_HALF_OPEN = 10,
    /// A probe was granted; its outcome is awaited
    /// (`rw_machine_report_probe`). Everything is refused, probes too.
    RW_REASON_PROBING = 11,
    /// The port reads ACTIVE but its netdev has no carrier
    /// (the setting `port_witness`).
    RW_REASON_NO_CARRIER = 12,
}

/// A rail read as an engine's four-value device status
/// (`rw_word_engine_status`), for engines that keep one (Mooncake TENT's
/// `RdmaContext::DeviceStatus`): a shallow start. What it drops, and when
/// that matters, is in crates/ffi/README.md ("Engines with a status
/// enum").
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rw_engine_status {
    /// Never attached: the device was never opened (inert, `NOT_OPENED`,
    /// no port state ever read).
    RW_ENGINE_UNINITIALISED = 0,
    /// The device is not usable: closed, fatal, gone (inert for any other
    /// reason). Its work is lost; resources built on it are stale.
    RW_ENGINE_DISABLED = 1,
    /// The gate admits: the rail is active.
    RW_ENGINE_ENABLED = 2,
    /// The device is usable, the rail is not, for now (paused, any
    /// reason: a port error, settling, damping, the data-path breaker).
    RW_ENGINE_PAUSED = 3,
}

const _: () = {
    assert!(rw_rail_state::RW_RAIL_ACTIVE as u32 == RailState::Active.code());
    assert!(rw_rail_state::RW_RAIL_PAUSED as u32 == RailState::Paused.code());
    assert!(rw_rail_state::RW_RAIL_INERT as u32 == RailState::Inert.code());
    assert!(rw_pause_reason::RW_REASON_NONE as u32 == PauseReason::None.code());
    assert!(rw_pause_reason::RW_REASON_PORT_ERR as u32 == PauseReason::PortErr.code());
    assert!(rw_pause_reason::RW_REASON_PORT_NOT_ACTIVE as u32 == PauseReason::PortNotActive.code());
    assert!(rw_pause_reason::RW_REASON_DEVICE_FATAL as u32 == PauseReason::DeviceFatal.code());
    assert!(rw_pause_reason::RW_REASON_DEVICE_REMOVED as u32 == PauseReason::DeviceRemoved.code());
    assert!(rw_pause_reason::RW_REASON_NOT_OPENED as u32 == PauseReason::NotOpened.code());
    assert!(rw_pause_reason::RW_REASON_DAMPED as u32 == PauseReason::Damped.code());
    assert!(rw_pause_reason::RW_REASON_SETTLING as u32 == PauseReason::Settling.code());
    assert!(rw_pause_reason::RW_REASON_DATA_PATH as u32 == PauseReason::DataPath.code());
    assert!(rw_pause_reason::RW_REASON_NO_ADDRESS as u32 == PauseReason::NoAddress.code());
    assert!(rw_pause_reason::RW_REASON_HALF_OPEN as u32 == PauseReason::HalfOpen.code());
    assert!(rw_pause_reason::RW_REASON_PROBING as u32 == PauseReason::Probing.code());
    assert!(rw_pause_reason::RW_REASON_NO_CARRIER as u32 == PauseReason::NoCarrier.code());
};

pub(crate) fn state_of(s: RailState) -> rw_rail_state {
    match s {
        RailState::Active => rw_rail_state::RW_RAIL_ACTIVE,
        RailState::Paused => rw_rail_state::RW_RAIL_PAUSED,
        RailState::Inert => rw_rail_state::RW_RAIL_INERT,
    }
}

pub(crate) fn reason_of(r: PauseReason) -> rw_pause_reason {
    match r {
        PauseReason::None => rw_pause_reason::RW_REASON_NONE,
        PauseReason::PortErr => rw_pause_reason::RW_REASON_PORT_ERR,
        PauseReason::PortNotActive => rw_pause_reason::RW_REASON_PORT_NOT_ACTIVE,
        PauseReason::DeviceFatal => rw_pause_reason::RW_REASON_DEVICE_FATAL,
        PauseReason::DeviceRemoved => rw_pause_reason::RW_REASON_DEVICE_REMOVED,
        PauseReason::NotOpened => rw_pause_reason::RW_REASON_NOT_OPENED,
        PauseReason::Damped => rw_pause_reason::RW_REASON_DAMPED,
        PauseReason::Settling => rw_pause_reason::RW_REASON_SETTLING,
        PauseReason::DataPath => rw_pause_reason::RW_REASON_DATA_PATH,
        PauseReason::NoAddress => rw_pause_reason::RW_REASON_NO_ADDRESS,
        PauseReason::HalfOpen => rw_pause_reason::RW_REASON_HALF_OPEN,
        PauseReason::Probing => rw_pause_reason::RW_REASON_PROBING,
        PauseReason::NoCarrier => rw_pause_reason::RW_REASON_NO_CARRIER,
    }
}

/// A port state code as the word keeps it (`RW_WORD_PORT_NONE`: never
/// read).
pub(crate) fn port_code(p: Option<PortState>) -> u32 {
    p.map_or(RW_WORD_PORT_NONE as u32, PortState::code)
}

/// One rail's gate: keeps its state word alive. Made by `rw_machine_gate`
/// or `rw_monitor_gate`, destroyed by [`rw_gate_free`]; it may outlive the
/// machine or monitor it came from (the word then no longer changes).
/// Any thread may use it.
pub struct rw_gate {
    gate: Gate,
}

impl rw_gate {
    pub(crate) fn boxed(gate: Gate) -> *mut rw_gate {
        Box::into_raw(Box::new(rw_gate { gate }))
    }
}

/// What the gate said: whether it admits, and the word decoded.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rw_ticket {
    /// The rail is active: go ahead.
    pub admitted: bool,
    /// `rw_rail_state`.
    pub state: u32,
    /// `rw_pause_reason`.
    pub reason: u32,
    /// The last port state read (`ibv_port_state`; `RW_WORD_PORT_NONE`
    /// never read).
    pub port_state: u32,
    /// The generation: endpoints built under an older one are stale.
    pub generation: u64,
}

/// The address of the gate's 64-bit state word, for the header's inline
/// checks (`rw_gate_check_inline`); valid until [`rw_gate_free`]. NULL for
/// a NULL gate. Read it only with an acquire load; never write it.
#[unsafe(no_mangle)]
pub extern "C" fn rw_gate_word(gate: *const rw_gate) -> *const u64 {
    let mut word = std::ptr::null();
    guard(|| {
        // SAFETY: a live gate or NULL, by the API's contract.
        word = unsafe { handle(gate, "gate") }?.gate.word_ptr();
        Ok(())
    });
    word
}

/// The gate check as a call (the header's inline one needs no call):
/// writes the decoded word to `*ticket`.
#[unsafe(no_mangle)]
pub extern "C" fn rw_gate_check(gate: *const rw_gate, ticket: *mut rw_ticket) -> rw_status {
    guard(|| {
        // SAFETY: a live gate or NULL, by the API's contract.
        let g = unsafe { handle(gate, "gate") }?;
        let t = ticket_of(g.gate.word());
        // SAFETY: the caller passes a writable ticket or NULL.
        unsafe { put(ticket, t, "ticket") }
    })
}

/// Asks for the half-open data-path breaker's one probe: `*granted` true
/// (and `*ticket` the word after the grant, its generation the one the
/// probe's endpoint must have) when this call took it, a compare-and-swap
/// only a half-open rail allows; false, with the word as it stands, when
/// the rail is not half-open or another probe is out. Send one transfer
/// under it and report the outcome (`rw_machine_report_probe`); one not
/// reported within `probe_timeout_ms` counts as failed. Any thread.
#[unsafe(no_mangle)]
pub extern "C" fn rw_gate_probe(gate: *const rw_gate, granted: *mut bool, ticket: *mut rw_ticket) -> rw_status {
    guard(|| {
        // SAFETY: a live gate or NULL, by the API's contract.
        let g = unsafe { handle(gate, "gate") }?;
        // Checked before the probe is taken: a call that cannot say it won
        // must not use up the one probe.
        if granted.is_null() {
            return Err(crate::status::null("granted"));
        }
        if ticket.is_null() {
            return Err(crate::status::null("ticket"));
        }
        let won = g.gate.probe().is_ok();
        let t = ticket_of(g.gate.word());
        // SAFETY: the caller passes writable pointers or NULL.
        unsafe { put(granted, won, "granted") }?;
        // SAFETY: as above.
        unsafe { put(ticket, t, "ticket") }
    })
}

fn ticket_of(w: RailWord) -> rw_ticket {
    rw_ticket {
        admitted: w.state == RailState::Active,
        state: state_of(w.state) as u32,
        reason: reason_of(w.reason) as u32,
        port_state: port_code(w.last_port_state),
        generation: w.generation,
    }
}

/// Destroys the gate at `*gate` and sets `*gate` to NULL; NULL (either)
/// is ignored. Its word (`rw_gate_word`) is not valid after it.
#[unsafe(no_mangle)]
pub extern "C" fn rw_gate_free(gate: *mut *mut rw_gate) {
    // SAFETY: NULL or the address of a handle, by the API's contract.
    let Some(gate) = (unsafe { take(gate) }) else { return };
    guard_void(|| {
        // SAFETY: made by `rw_gate::boxed`, destroyed once, by the API's
        // contract.
        drop(unsafe { Box::from_raw(gate) });
    });
}

/// The word layout version this library was built with
/// (`RW_WORD_LAYOUT_VERSION` of its header).
#[unsafe(no_mangle)]
pub extern "C" fn rw_word_layout_version() -> u32 {
    layout::VERSION
}

/// Encodes a word as the library does: `state` (`rw_rail_state`),
/// `reason` (`rw_pause_reason`), `port_state` (`RW_WORD_PORT_NONE`: never
/// read) and `generation`. For tests that check the header's inline
/// decoding against the library; out-of-range values are clamped as the
/// library clamps them.
#[unsafe(no_mangle)]
pub extern "C" fn rw_word_encode(state: u32, reason: u32, port_state: u32, generation: u64) -> u64 {
    let state = match state {
        0 => RailState::Active,
        1 => RailState::Paused,
        _ => RailState::Inert,
    };
    let reason = PauseReason::ALL.get(reason as usize).copied().unwrap_or(PauseReason::None);
    let last_port_state = (u64::from(port_state) != RW_WORD_PORT_NONE).then(|| PortState::from_code(port_state));
    RailWord { state, reason, last_port_state, generation }.to_raw()
}

/// Decodes a word as the library does (the reference for the header's
/// inline decoding).
#[unsafe(no_mangle)]
pub extern "C" fn rw_word_decode(word: u64, ticket: *mut rw_ticket) -> rw_status {
    crate::status::quiet_panics();
    guard(|| {
        // SAFETY: the caller passes a writable ticket or NULL.
        unsafe { put(ticket, ticket_of(RailWord::from_raw(word)), "ticket") }
    })
}
