//! The machine's output as C reads it: an action's kind, the device and
//! port it is about, and a payload tagged by the kind, written field by
//! field from where the machine queued it.

use std::ffi::c_char;

use railwatch_core::Action;

use crate::notify::{log, rw_log, rw_notification};

/// What the machine asks of the engine (`rw_action.kind`). Answer each
/// `QUERY_PORT`, `READ_LINK`, `READ_ADDRESS` and `REOPEN` with its
/// `rw_machine_handle_*` call, at once for the documented order; one never
/// answered is asked again by the next tick.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rw_action_kind {
    /// Nothing to do: the queue is empty.
    RW_ACTION_NONE = 0,
    /// Add `device`'s async fd to the poll set (edge-triggered) and drain
    /// it after every wake-up. A failure is a read error.
    RW_ACTION_START_READING = 1,
    /// Take `device`'s fd out of the poll set.
    RW_ACTION_STOP_READING = 2,
    /// Close `device` (`ibv_close_device`).
    RW_ACTION_CLOSE = 3,
    /// Open `device` again; answer with `rw_machine_handle_reopen`.
    RW_ACTION_REOPEN = 4,
    /// Query `port` of `device` (`ibv_query_port`); answer with
    /// `rw_machine_handle_port_state`.
    RW_ACTION_QUERY_PORT = 5,
    /// Read `port`'s link attributes; answer with `rw_machine_handle_link`.
    RW_ACTION_READ_LINK = 6,
    /// Read `port`'s address (GID table, LID, netdev); answer with
    /// `rw_machine_handle_address`.
    RW_ACTION_READ_ADDRESS = 7,
    /// Tell the engine's rail selector that (`device`, `port`) may (or may
    /// no longer) be picked: `available`.
    RW_ACTION_SET_AVAILABLE = 8,
    /// Tell the selector the rail's rate, `rate_mbps` (0: unknown): before
    /// the rail is made available when its rate was never told since its
    /// device attached, or changed (not again when it comes back at the
    /// rate it had).
    RW_ACTION_RESEED = 9,
    /// Hand `notification` to whoever in the engine listens.
    RW_ACTION_NOTIFY = 10,
    /// Write `log` to the engine's log.
    RW_ACTION_LOG = 11,
    /// Open `device`, which the device list named (its name:
    /// `rw_machine_device_name`); answer with `rw_machine_handle_opened`.
    RW_ACTION_OPEN = 12,
    /// Read `port`'s flap counters (`link_downed`, the netdev's carrier
    /// counters); answer with `rw_machine_handle_counters`.
    RW_ACTION_READ_COUNTERS = 13,
    /// (`device_owner` `"engine"`, in place of CLOSE and REOPEN.) `device`
    /// was taken out of use (its rails are inert, its work lost) and is
    /// never closed while it is on the host: make its context usable again
    /// (after `RW_REASON_DEVICE_FATAL`, re-initialise it; otherwise check
    /// that it answers) and answer with `rw_machine_handle_reopen`: 0
    /// re-reads its ports and re-attaches its rails, an errno asks again
    /// after a longer backoff.
    RW_ACTION_REVALIDATE = 14,
}

/// What an action carries besides its device and port, by `kind` (the
/// tag): `available` for `RW_ACTION_SET_AVAILABLE`, `rate_mbps` for
/// `RW_ACTION_RESEED`, `notification` for `RW_ACTION_NOTIFY`, `log` for
/// `RW_ACTION_LOG`, `reason` for `RW_ACTION_REVALIDATE`; nothing for the
/// other kinds. In C an anonymous union
/// (`a.notification`, as before 0.2).
///
/// cbindgen:ignore
#[repr(C)]
#[derive(Clone, Copy)]
pub union rw_action_payload {
    /// For `RW_ACTION_SET_AVAILABLE`.
    pub available: bool,
    /// For `RW_ACTION_RESEED` (Mb/s; 0 unknown).
    pub rate_mbps: u64,
    /// For `RW_ACTION_NOTIFY`.
    pub notification: rw_notification,
    /// For `RW_ACTION_LOG`.
    pub log: rw_log,
    /// For `RW_ACTION_REVALIDATE`: why the device was taken out of use
    /// (`rw_pause_reason`; `RW_REASON_DEVICE_FATAL` asks for a
    /// re-initialisation, any other for a check that it answers).
    pub reason: u32,
}

/// One action: its kind, the device and port it is about (for every kind:
/// a notification's or log request's own, port 0 when it is about the
/// whole device; device 0 is the first device, so device 0 port 0 is not
/// only `RW_ACTION_NONE`: tell that by its kind), and a payload tagged by
/// the kind. Defined by hand in railwatch.h's trailer (cbindgen cannot write
/// an anonymous union); `tests/header.rs` checks the two layouts agree.
///
/// cbindgen:ignore
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rw_action {
    /// `rw_action_kind`.
    pub kind: u32,
    /// Device index.
    pub device: u32,
    /// Port number (0: not about a port).
    pub port: u32,
    /// Tagged by `kind`.
    pub payload: rw_action_payload,
}

/// The device and port an action is about, and what it carries.
fn action_fields(a: &Action) -> (rw_action_kind, u32, u32) {
    use rw_action_kind::*;
    let device_action = |kind, device| (kind, device, 0);
    let port_action = |kind, device, port: u8| (kind, device, u32::from(port));
    match *a {
        Action::StartReading { device } => device_action(RW_ACTION_START_READING, device),
        Action::StopReading { device } => device_action(RW_ACTION_STOP_READING, device),
        Action::Close { device } => device_action(RW_ACTION_CLOSE, device),
        Action::Reopen { device } => device_action(RW_ACTION_REOPEN, device),
        Action::Open { device } => device_action(RW_ACTION_OPEN, device),
        Action::Revalidate { device, .. } => device_action(RW_ACTION_REVALIDATE, device),
        Action::QueryPort { device, port } => port_action(RW_ACTION_QUERY_PORT, device, port),
        Action::ReadLink { device, port } => port_action(RW_ACTION_READ_LINK, device, port),
        Action::ReadAddress { device, port } => port_action(RW_ACTION_READ_ADDRESS, device, port),
        Action::ReadCounters { device, port } => port_action(RW_ACTION_READ_COUNTERS, device, port),
        Action::SetAvailable { rail, .. } => port_action(RW_ACTION_SET_AVAILABLE, rail.device, rail.port),
        Action::Reseed { rail, .. } => port_action(RW_ACTION_RESEED, rail.device, rail.port),
        // Filled in from the payload by `write_action`.
        Action::Notify(_) => (RW_ACTION_NOTIFY, 0, 0),
        Action::Log(_) => (RW_ACTION_LOG, 0, 0),
    }
}

/// Writes `a` into `*out`: kind, device and port always, the payload the
/// kind carries (the rest of the union is left as it was: a notification
/// is large, and this is the event path).
///
/// # Safety
/// `out` is valid for writes of an `rw_action`. Fields are written one by
/// one through raw pointers, never read, so whatever C left in the rest
/// (an uninitialised `bool` included) is never looked at.
pub(crate) unsafe fn write_action(a: &Action, words: Option<(u32, *const c_char)>, out: *mut rw_action) {
    let (kind, mut device, mut port) = action_fields(a);
    // SAFETY: `out` is writable (the caller's promise); each write is of
    // one plain field of the payload (raw pointers to a union's fields).
    unsafe {
        match a {
            Action::SetAvailable { available, .. } => (&raw mut (*out).payload.available).write(*available),
            Action::Revalidate { reason, .. } => {
                (&raw mut (*out).payload.reason).write(crate::gate::reason_of(*reason) as u32);
            }
            Action::Reseed { rate, .. } => {
                (&raw mut (*out).payload.rate_mbps).write(crate::notify::mbps(Some(*rate)));
            }
            Action::Notify(n) => {
                let at = &raw mut (*out).payload.notification;
                crate::notify::write_notification(n, at);
                (device, port) = ((*at).device, (*at).port);
            }
            Action::Log(l) => {
                let (level, text) = words.unwrap_or((0, c"".as_ptr()));
                let log = rw_log { level, text, ..log(l) };
                (device, port) = (log.device, log.port);
                (&raw mut (*out).payload.log).write(log);
            }
            _ => {}
        }
        write_header(out, kind, device, port);
    }
}

/// Writes an action's kind, device and port.
///
/// # Safety
/// `out` is valid for writes of an `rw_action`.
pub(crate) unsafe fn write_header(out: *mut rw_action, kind: rw_action_kind, device: u32, port: u32) {
    // SAFETY: each write is of one plain field (the caller's promise).
    unsafe {
        (&raw mut (*out).kind).write(kind as u32);
        (&raw mut (*out).device).write(device);
        (&raw mut (*out).port).write(port);
    }
}

/// `sizeof(rw_action)` in the library: railwatch.h checks its own
/// definition against it when it is compiled.
pub const RW_ACTION_SIZE: usize = 136;
const _: () = assert!(size_of::<rw_action>() == RW_ACTION_SIZE && std::mem::offset_of!(rw_action, payload) == 16);
