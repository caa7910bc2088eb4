//! Notifications and log requests as flat C structs: one struct per kind
//! of thing, its fields filled as the kind says (the rest zero).

use std::ffi::c_char;

use railwatch_core::{Cause, EventKind, Happening, LinkRate, Log, Notification, RecoveredBy, WorkScope};

use crate::gate::{port_code, reason_of, state_of};

/// What happened (`rw_notification.kind`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rw_happening {
    /// An async event was read and acknowledged (every one but
    /// `COMM_EST`, which is only counted): `device`, `port` (0 for
    /// non-port events), `event_code`.
    RW_HAPPENING_EVENT = 0,
    /// A rail's state word changed: `device`, `port`, `from_state`,
    /// `to_state`, `cause`, `cause_code`, `generation`. The generation
    /// moves at every activation, on `CQ_ERR` (every rail of the device),
    /// on `LID_CHANGE`/`GID_CHANGE` when the address changed, and on a
    /// silent flap; never on a pause.
    RW_HAPPENING_TRANSITION = 1,
    /// The selector's rate for a rail was (re)seeded: `device`, `port`,
    /// `rate_from_mbps` (0: never seeded or unknown), `rate_to_mbps` (0:
    /// unknown).
    RW_HAPPENING_RESEED = 2,
    /// The selector was told a rail is (un)available: `device`, `port`,
    /// `available`.
    RW_HAPPENING_AVAILABLE = 3,
    /// A rail's address changed; endpoints built on the old one are stale:
    /// `device`, `port`, `generation`.
    RW_HAPPENING_ADDRESS_CHANGED = 4,
    /// Work posted to `work_scope` will never complete: fail it now
    /// (docs: "Uncompletable work" in the ffi README). `device`,
    /// `work_scope` (`rw_work_scope`), `event_code` (the QP, WQ or CQ
    /// event; 0 for the device scope), `object_handle` (the QP, WQ or CQ
    /// pointer value; 0 if none or the device scope), and for the device
    /// scope `cause` `RW_CAUSE_REASON` with `cause_code` the
    /// `rw_pause_reason` (`DEVICE_FATAL`, `DEVICE_REMOVED`, `NOT_OPENED`).
    /// Delivered ahead of everything else of the input batch that learnt
    /// it. (Before 0.2 this code was `OBJECT_ERROR`, QP and WQ errors only.)
    RW_HAPPENING_WORK_LOST = 5,
    /// A drain of a device's events finished (monitor only): `device`,
    /// `events`, `error` (0: the queue was emptied; else the errno, -1
    /// unknown).
    RW_HAPPENING_DRAIN = 6,
    /// Transfers through one peer failed against the local path, through
    /// no other peer: the rail stays in service: `device`, `port`, `peer`.
    RW_HAPPENING_PEER_FAILING = 7,
    /// The data-path breaker is half-open: one probe may be taken
    /// (`rw_gate_probe`): `device`, `port`. (Before 0.2 this code was
    /// `probation`.)
    RW_HAPPENING_HALF_OPEN = 8,
    /// The GID index endpoints of the rail are built on
    /// (`require_address`): `device`, `port`, `gid_index`.
    RW_HAPPENING_GID_INDEX = 9,
    /// The probe failed, or was not reported within `probe_timeout_ms`
    /// (`timed_out`): the breaker is open again: `device`, `port`,
    /// `timed_out`.
    RW_HAPPENING_PROBE_FAILED = 10,
}

/// Why a transition happened (`rw_notification.cause`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rw_cause {
    /// Not a transition.
    RW_CAUSE_NONE = 0,
    /// A pause or detach: `cause_code` is the `rw_pause_reason`.
    RW_CAUSE_REASON = 1,
    /// An activation: `cause_code` is the `rw_recovered_by`.
    RW_CAUSE_BY = 2,
    /// A generation bump without a state change: `cause_code` is the event
    /// code (`IBV_EVENT_CQ_ERR`, `_LID_CHANGE`, `_GID_CHANGE`, ...).
    RW_CAUSE_BUMP = 3,
    /// A generation bump for a silent flap (a flap counter rose with no
    /// PORT_ERR seen); `cause_code` 0.
    RW_CAUSE_SILENT_FLAP = 4,
}

/// Whose posted work is lost (`rw_notification.work_scope`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rw_work_scope {
    /// Not a `RW_HAPPENING_WORK_LOST`.
    RW_WORK_NONE = 0,
    /// One QP's work requests (`QP_FATAL`, `QP_REQ_ERR`, `QP_ACCESS_ERR`).
    RW_WORK_QP = 1,
    /// One WQ's (`WQ_FATAL`).
    RW_WORK_WQ = 2,
    /// Work completing to one CQ (`CQ_ERR`).
    RW_WORK_CQ = 3,
    /// Everything posted on the device context.
    RW_WORK_DEVICE = 4,
}

/// How a rail came back.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rw_recovered_by {
    /// An async event.
    RW_BY_EVENT = 0,
    /// The recovery poll read the port ACTIVE: the `PORT_ACTIVE` was lost.
    RW_BY_POLL = 1,
    /// The device was (re)opened with the port ACTIVE.
    RW_BY_ATTACH = 2,
    /// The data-path breaker's probe succeeded. (Before 0.2 this code was
    /// `trial`.)
    RW_BY_PROBE = 3,
}

/// One thing that happened, for the engine. Which fields mean something
/// depends on `kind` (see `rw_happening`); the others are zero.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rw_notification {
    /// The caller's clock (ms) at the input that caused it.
    pub t_ms: u64,
    /// `rw_happening`.
    pub kind: u32,
    /// Device index.
    pub device: u32,
    /// Port (0: none).
    pub port: u32,
    /// The raw `ibv_event_type`.
    pub event_code: u32,
    /// `rw_rail_state` before.
    pub from_state: u32,
    /// `rw_rail_state` after.
    pub to_state: u32,
    /// `rw_cause`.
    pub cause: u32,
    /// See `rw_cause`.
    pub cause_code: u32,
    /// The rail's generation after.
    pub generation: u64,
    /// Available, for `RW_HAPPENING_AVAILABLE`.
    pub available: bool,
    /// Rate before, Mb/s (0: none or unknown).
    pub rate_from_mbps: u64,
    /// Rate after, Mb/s (0: unknown).
    pub rate_to_mbps: u64,
    /// The object's pointer value, as an opaque key.
    pub object_handle: u64,
    /// Events read by a drain.
    pub events: u64,
    /// errno of a failed read (0: none; -1: unknown).
    pub error: i32,
    /// The engine's peer id, for `RW_HAPPENING_PEER_FAILING`.
    pub peer: u64,
    /// The GID index, for `RW_HAPPENING_GID_INDEX`.
    pub gid_index: u32,
    /// No report came in time, for `RW_HAPPENING_PROBE_FAILED`.
    pub timed_out: bool,
    /// `rw_work_scope`, for `RW_HAPPENING_WORK_LOST`.
    pub work_scope: u32,
}

pub(crate) fn mbps(rate: Option<LinkRate>) -> u64 {
    match rate {
        Some(LinkRate::Known { mbps }) => mbps,
        _ => 0,
    }
}

pub(crate) fn by_code(by: RecoveredBy) -> u32 {
    (match by {
        RecoveredBy::Event => rw_recovered_by::RW_BY_EVENT,
        RecoveredBy::Poll => rw_recovered_by::RW_BY_POLL,
        RecoveredBy::Attach => rw_recovered_by::RW_BY_ATTACH,
        RecoveredBy::Probe => rw_recovered_by::RW_BY_PROBE,
    }) as u32
}

impl rw_notification {
    /// Every field zero.
    pub(crate) const ZERO: rw_notification = rw_notification {
        t_ms: 0,
        kind: 0,
        device: 0,
        port: 0,
        event_code: 0,
        from_state: 0,
        to_state: 0,
        cause: rw_cause::RW_CAUSE_NONE as u32,
        cause_code: 0,
        generation: 0,
        available: false,
        rate_from_mbps: 0,
        rate_to_mbps: 0,
        object_handle: 0,
        events: 0,
        error: 0,
        peer: 0,
        gid_index: 0,
        timed_out: false,
        work_scope: rw_work_scope::RW_WORK_NONE as u32,
    };
}

/// The C form of a notification.
pub(crate) fn notification(n: &Notification) -> rw_notification {
    let mut c = rw_notification::ZERO;
    fill_notification(n, &mut c);
    c
}

/// Writes the C form of `n` into `out`, in place (the action batch's
/// element: no copy through the stack on the event path).
///
/// # Safety
/// `out` is valid for writes of an `rw_notification`.
pub(crate) unsafe fn write_notification(n: &Notification, out: *mut rw_notification) {
    // SAFETY: writable by the caller's promise; fully initialised by the
    // write, so the reference after it is to a valid value.
    unsafe {
        out.write(rw_notification::ZERO);
        fill_notification(n, &mut *out);
    }
}

/// Sets `c`'s fields from `n` (`c` zeroed before).
fn fill_notification(n: &Notification, c: &mut rw_notification) {
    c.t_ms = n.t.0;
    let kind = match n.what {
        Happening::Event { device, port, kind } => {
            (c.device, c.port, c.event_code) = (device, port.unwrap_or(0), kind.code());
            rw_happening::RW_HAPPENING_EVENT
        }
        Happening::Transition { rail, from, to, cause, generation } => {
            (c.device, c.port, c.generation) = (rail.device, u32::from(rail.port), generation);
            (c.from_state, c.to_state) = (state_of(from) as u32, state_of(to) as u32);
            (c.cause, c.cause_code) = match cause {
                Cause::Reason(r) => (rw_cause::RW_CAUSE_REASON as u32, reason_of(r) as u32),
                Cause::By(by) => (rw_cause::RW_CAUSE_BY as u32, by_code(by)),
                Cause::Bump(kind) => (rw_cause::RW_CAUSE_BUMP as u32, kind.code()),
                Cause::SilentFlap => (rw_cause::RW_CAUSE_SILENT_FLAP as u32, 0),
            };
            rw_happening::RW_HAPPENING_TRANSITION
        }
        Happening::Reseed { rail, from, to } => {
            (c.device, c.port) = (rail.device, u32::from(rail.port));
            (c.rate_from_mbps, c.rate_to_mbps) = (mbps(from), mbps(Some(to)));
            rw_happening::RW_HAPPENING_RESEED
        }
        Happening::Available { rail, available } => {
            (c.device, c.port, c.available) = (rail.device, u32::from(rail.port), available);
            rw_happening::RW_HAPPENING_AVAILABLE
        }
        Happening::AddressChanged { rail, generation } => {
            (c.device, c.port, c.generation) = (rail.device, u32::from(rail.port), generation);
            rw_happening::RW_HAPPENING_ADDRESS_CHANGED
        }
        Happening::WorkLost { device, scope } => {
            c.device = device;
            c.object_handle = scope.handle().map_or(0, |h| h.0);
            let (work, code) = match scope {
                WorkScope::Qp { kind, .. } => (rw_work_scope::RW_WORK_QP, kind.code()),
                WorkScope::Wq(_) => (rw_work_scope::RW_WORK_WQ, EventKind::WqFatal.code()),
                WorkScope::Cq(_) => (rw_work_scope::RW_WORK_CQ, EventKind::CqErr.code()),
                WorkScope::Device(reason) => {
                    (c.cause, c.cause_code) = (rw_cause::RW_CAUSE_REASON as u32, reason_of(reason) as u32);
                    (rw_work_scope::RW_WORK_DEVICE, 0)
                }
            };
            (c.work_scope, c.event_code) = (work as u32, code);
            rw_happening::RW_HAPPENING_WORK_LOST
        }
        Happening::Drain { device, events, errno } => {
            (c.device, c.events, c.error) = (device, events as u64, errno.unwrap_or(0));
            rw_happening::RW_HAPPENING_DRAIN
        }
        Happening::PeerFailing { rail, peer } => {
            (c.device, c.port, c.peer) = (rail.device, u32::from(rail.port), peer);
            rw_happening::RW_HAPPENING_PEER_FAILING
        }
        Happening::HalfOpen { rail } => {
            (c.device, c.port) = (rail.device, u32::from(rail.port));
            rw_happening::RW_HAPPENING_HALF_OPEN
        }
        Happening::ProbeFailed { rail, timed_out } => {
            (c.device, c.port, c.timed_out) = (rail.device, u32::from(rail.port), timed_out);
            rw_happening::RW_HAPPENING_PROBE_FAILED
        }
        Happening::GidIndex { rail, index } => {
            (c.device, c.port, c.gid_index) = (rail.device, u32::from(rail.port), index);
            rw_happening::RW_HAPPENING_GID_INDEX
        }
    };
    c.kind = kind as u32;
}

/// What a log request is about (`rw_log.kind`); the machine decided that
/// and when it is said, the engine words it.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rw_log_kind {
    /// An event code not acted on, first seen on `device`: `code`,
    /// `capped` (no more new codes will be warned about).
    RW_LOG_UNHANDLED = 0,
    /// A rail is still paused: `device`, `port`, `reason`, `since_ms`,
    /// `port_state`.
    RW_LOG_STILL_PAUSED = 1,
    /// The port reads ACTIVE but damping holds the rail: `device`, `port`,
    /// `penalty`, `until_ms`.
    RW_LOG_DAMPED = 2,
    /// Waiting out the settle delay: `device`, `port`, `until_ms`.
    RW_LOG_SETTLING = 3,
    /// The port went down during the settle delay: `device`, `port`.
    RW_LOG_SETTLE_CANCELLED = 4,
    /// Reading the event fd failed, the device's ports are polled instead:
    /// `device`, `error`.
    RW_LOG_READ_FAILED = 5,
    /// The event fd hung up: `device`.
    RW_LOG_HUNG_UP = 6,
    /// A port query failed: `device`, `port`, `error`.
    RW_LOG_QUERY_FAILED = 7,
    /// A link read failed, the cached rate is kept: `device`, `port`,
    /// `error`.
    RW_LOG_LINK_UNREADABLE = 8,
    /// The device is closed and will be re-opened: `device`, `reason`,
    /// `until_ms` (the next attempt).
    RW_LOG_DEVICE_GONE = 9,
    /// A re-open failed: `device`, `error` (0: the ports could not be
    /// queried), `until_ms` (the next attempt).
    RW_LOG_REOPEN_FAILED = 10,
    /// A device left the host: `device`.
    RW_LOG_REMOVED = 11,
    /// A device was (re)opened and its rails attached: `device`.
    RW_LOG_ATTACHED = 12,
    /// A device the device list named would not open: `device`, `error`,
    /// `until_ms` (the next attempt).
    RW_LOG_OPEN_FAILED = 13,
    /// The port's flap counters cannot be read; silent flaps are not
    /// looked for on it: `device`, `port`, `error`.
    RW_LOG_COUNTERS_UNAVAILABLE = 14,
    /// A flap counter rose with no PORT_ERR seen (the generation moved):
    /// `device`, `port`.
    RW_LOG_SILENT_FLAP = 15,
    /// The data-path breaker opened (again, after a failed probe):
    /// `device`, `port`, `code` (failed probes so far), `until_ms` (the
    /// backoff's end: half-open from then).
    RW_LOG_BREAKER_OPEN = 16,
    /// The port is ACTIVE without the address `require_address` asks for:
    /// `device`, `port`.
    RW_LOG_NO_ADDRESS = 17,
    /// The device closed while the breaker held the rail: the breaker is
    /// reset, a re-attach re-admits the rail without a probe: `device`,
    /// `port`.
    RW_LOG_BREAKER_RESET = 18,
    /// A flap counter reads its width's maximum (255, 65535, 2^32−1 or
    /// 2^64−1) and counts no more flaps (said once): `device`, `port`,
    /// `code` (0 `link_downed`, 1 `carrier_changes`, 2 `carrier_down`),
    /// `until_ms` (its value), `capped` (no counter of the port is left).
    RW_LOG_COUNTER_STUCK = 19,
}

/// A log request. Which fields mean something depends on `kind`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rw_log {
    /// `rw_log_kind`.
    pub kind: u32,
    /// Device index.
    pub device: u32,
    /// Port (0: none).
    pub port: u32,
    /// The raw event code.
    pub code: u32,
    /// `rw_pause_reason`.
    pub reason: u32,
    /// The last port state read (`RW_WORD_PORT_NONE`: never).
    pub port_state: u32,
    /// errno (-1: unknown).
    pub error: i32,
    /// The set of warned codes is full.
    pub capped: bool,
    /// Since when, ms.
    pub since_ms: u64,
    /// Until when, ms.
    pub until_ms: u64,
    /// The damping penalty.
    pub penalty: f64,
    /// `rw_log_level`: how much it matters.
    pub level: u32,
    /// The line in words, as railwatch's own monitor logs it
    /// (`"mlx5_0/1: port query failed (ENODEV)"`): NUL-terminated, owned
    /// by the machine, valid until its next `rw_machine_poll_action(s)` or
    /// `rw_machine_free`. Write it to the engine's
    /// log as it is; the fields above are for an engine that words it
    /// itself.
    pub text: *const c_char,
}

impl rw_log {
    /// Every field zero (the port state "never read").
    pub(crate) const ZERO: rw_log = rw_log {
        kind: 0,
        device: 0,
        port: 0,
        code: 0,
        reason: 0,
        port_state: crate::gate::RW_WORD_PORT_NONE as u32,
        error: 0,
        capped: false,
        since_ms: 0,
        until_ms: 0,
        penalty: 0.0,
        level: 0,
        text: std::ptr::null(),
    };
}

/// The C form of a log request.
pub(crate) fn log(l: &Log) -> rw_log {
    use rw_log_kind::*;
    let mut c = rw_log::ZERO;
    let kind = match *l {
        Log::Unhandled { device, code, capped } => {
            (c.device, c.code, c.capped) = (device, code, capped);
            RW_LOG_UNHANDLED
        }
        Log::StillPaused { rail, reason, since, port } => {
            (c.device, c.port, c.reason) = (rail.device, u32::from(rail.port), reason_of(reason) as u32);
            (c.since_ms, c.port_state) = (since.0, port_code(port));
            RW_LOG_STILL_PAUSED
        }
        Log::Damped { rail, penalty, until } => {
            (c.device, c.port, c.penalty, c.until_ms) = (rail.device, u32::from(rail.port), penalty, until.0);
            RW_LOG_DAMPED
        }
        Log::Settling { rail, until } => {
            (c.device, c.port, c.until_ms) = (rail.device, u32::from(rail.port), until.0);
            RW_LOG_SETTLING
        }
        Log::SettleCancelled { rail } => {
            (c.device, c.port) = (rail.device, u32::from(rail.port));
            RW_LOG_SETTLE_CANCELLED
        }
        Log::ReadFailed { device, errno } => {
            (c.device, c.error) = (device, errno.0);
            RW_LOG_READ_FAILED
        }
        Log::HungUp { device } => {
            c.device = device;
            RW_LOG_HUNG_UP
        }
        Log::QueryFailed { rail, errno } => {
            (c.device, c.port, c.error) = (rail.device, u32::from(rail.port), errno.0);
            RW_LOG_QUERY_FAILED
        }
        Log::LinkUnreadable { rail, errno } => {
            (c.device, c.port, c.error) = (rail.device, u32::from(rail.port), errno.0);
            RW_LOG_LINK_UNREADABLE
        }
        Log::DeviceGone { device, reason, retry_at } => {
            (c.device, c.reason, c.until_ms) = (device, reason_of(reason) as u32, retry_at.0);
            RW_LOG_DEVICE_GONE
        }
        Log::ReopenFailed { device, errno, retry_at } => {
            (c.device, c.error, c.until_ms) = (device, errno.map_or(0, |e| e.0), retry_at.0);
            RW_LOG_REOPEN_FAILED
        }
        Log::Removed { device } => {
            c.device = device;
            RW_LOG_REMOVED
        }
        Log::Attached { device } => {
            c.device = device;
            RW_LOG_ATTACHED
        }
        Log::CountersUnavailable { rail, errno } => {
            (c.device, c.port, c.error) = (rail.device, u32::from(rail.port), errno.0);
            RW_LOG_COUNTERS_UNAVAILABLE
        }
        Log::SilentFlap { rail } => {
            (c.device, c.port) = (rail.device, u32::from(rail.port));
            RW_LOG_SILENT_FLAP
        }
        Log::BreakerOpen { rail, trials, until } => {
            (c.device, c.port, c.code, c.until_ms) = (rail.device, u32::from(rail.port), trials, until.0);
            RW_LOG_BREAKER_OPEN
        }
        Log::NoAddress { rail } => {
            (c.device, c.port) = (rail.device, u32::from(rail.port));
            RW_LOG_NO_ADDRESS
        }
        Log::OpenFailed { device, errno, retry_at } => {
            (c.device, c.error, c.until_ms) = (device, errno.0, retry_at.0);
            RW_LOG_OPEN_FAILED
        }
        Log::CounterStuck { rail, counter, value, blind } => {
            (c.device, c.port, c.code, c.capped) = (rail.device, u32::from(rail.port), counter as u32, blind);
            c.until_ms = value;
            RW_LOG_COUNTER_STUCK
        }
        Log::BreakerReset { rail } => {
            (c.device, c.port) = (rail.device, u32::from(rail.port));
            RW_LOG_BREAKER_RESET
        }
    };
    c.kind = kind as u32;
    c
}
