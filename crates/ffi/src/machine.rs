//! Embedding 1: the engine keeps its loop. It reads `ibv_get_async_event`
//! itself (or through [`rw_machine_drain`]), feeds what it read and the
//! answers to the machine's questions, with the time, and carries out the
//! actions it polls. The machine holds every policy; it does no I/O.

use std::cell::{Cell, RefCell};
use std::ffi::{CString, c_char, c_void};
use std::io;

use railwatch_core::{
    Action, AsyncEvent, Carrier, Element, Errno, Gid, GidType, LinkAttrs, LinkLayer, Machine, Millis, ObjectHandle,
    PortAddress, PortState, RailId, Scope,
};

use railwatch_runtime::{DEFAULT_DRAIN_BUDGET, DrainEnd, drain_with};

use crate::action::{rw_action, rw_action_kind, write_action, write_header};
use crate::args::{handle, put, put_new, slice, take, text};
use crate::config::{read, rw_config};
use crate::gate::rw_gate;
use crate::limits::{GIDS, PORTS, RW_MAX_DEVICES, RW_MAX_GIDS};
use crate::status::{Error, Result, guard, rw_status};

/// The rail machine of one engine: every device, rail and policy. Made by
/// [`rw_machine_new`], destroyed by [`rw_machine_free`]. Not thread-safe:
/// call it from one thread at a time (the engine's monitor thread); only
/// its gates are for other threads.
pub struct rw_machine {
    /// Borrowed for the length of each call. A call from inside one of
    /// the machine's callbacks (a drain's `get`, its log callback) finds
    /// it borrowed and is refused with `RW_ERR_STATE`.
    held: RefCell<Held>,
    /// The latest `now_ms` an input gave, fed to the machine or not (a
    /// drain that read no event, a report of no line): an earlier one
    /// counts as this.
    latest: Cell<u64>,
}

/// What a machine handle holds for the length of a call.
struct Held {
    machine: Machine,
    /// The words of the log requests handed out by the last poll
    /// (`rw_log.text` points into them until the next).
    log_texts: Vec<CString>,
    /// Where log requests go instead of the action queue, if set.
    logger: Option<Logger>,
}

/// A machine's own log callback (`rw_machine_set_log_callback`).
struct Logger {
    callback: extern "C" fn(*mut c_void, u32, *const c_char, *const c_char),
    user: *mut c_void,
    max_level: u32,
}

impl Held {
    /// Writes the next action into `*out` and takes it off the queue (log
    /// requests go to the logger instead when there is one); false when
    /// there is none. The action is read where the machine queued it, not
    /// copied out first (a fresh copy costs a store-forwarding stall per
    /// action, most of what the C API added to an event's cost).
    ///
    /// # Safety
    /// `out` is valid for writes of an `rw_action`.
    unsafe fn write_next(&mut self, out: *mut rw_action) -> bool {
        loop {
            let Some(a) = self.machine.peek_action() else { return false };
            let words = match (a, &self.logger) {
                (Action::Log(l), Some(logger)) => {
                    let (level, text) = words(&self.machine, l);
                    if level <= logger.max_level {
                        (logger.callback)(logger.user, level, c"railwatch".as_ptr(), text.as_ptr());
                    }
                    self.machine.poll_action();
                    continue;
                }
                (Action::Log(l), None) => {
                    let (level, text) = words(&self.machine, l);
                    let ptr = text.as_ptr();
                    self.log_texts.push(text);
                    Some((level, ptr))
                }
                _ => None,
            };
            // SAFETY: the caller's promise.
            unsafe { write_action(a, words, out) };
            self.machine.poll_action();
            return true;
        }
    }
}

/// A log request's level and words, as railwatch's monitor logs it (a
/// NUL inside, which a device name cannot hold, is cut).
fn words(m: &Machine, l: &railwatch_core::Log) -> (u32, CString) {
    let (level, text) = railwatch_runtime::log_text(m, l);
    (crate::log_sink::level_code(level), CString::new(text.replace('\0', "")).unwrap_or_default())
}

/// `Ok` for 0, else the errno.
fn answer<T>(error: i32, value: impl FnOnce() -> T) -> std::result::Result<T, Errno> {
    if error == 0 { Ok(value()) } else { Err(Errno(error)) }
}

pub(crate) fn device_in(m: &Machine, device: u32) -> Result<()> {
    slot_in(m, device)?;
    match m.device(device).is_some_and(|d| d.name.is_empty()) {
        true => Err(Error::new(rw_status::RW_ERR_RANGE, format!("slot {device} is empty (no device was added there)"))),
        false => Ok(()),
    }
}

/// `device` is a slot of the machine's, an empty one included.
pub(crate) fn slot_in(m: &Machine, device: u32) -> Result<()> {
    match (device as usize) < m.devices().len() {
        true => Ok(()),
        false => Err(Error::new(
            rw_status::RW_ERR_RANGE,
            format!("device {device} does not exist (the machine has {})", m.devices().len()),
        )),
    }
}

pub(crate) fn port_in(m: &Machine, device: u32, port: u32) -> Result<u8> {
    device_in(m, device)?;
    u8::try_from(port)
        .ok()
        .filter(|&p| m.has_rail(RailId { device, port: p }))
        .ok_or_else(|| Error::new(rw_status::RW_ERR_RANGE, format!("device {device} has no port {port}")))
}

/// With the machine behind `m`.
pub(crate) fn with(m: *mut rw_machine, body: impl FnOnce(&mut Machine) -> Result<()>) -> rw_status {
    with_held(m, |h, _| body(&mut h.machine))
}

/// With what the handle behind `m` holds, borrowed for the call, and the
/// handle itself (its clock).
fn with_held(m: *const rw_machine, body: impl FnOnce(&mut Held, &rw_machine) -> Result<()>) -> rw_status {
    guard(|| {
        // SAFETY: a live machine or NULL, used by one thread at a time, by
        // the API's contract.
        let m = unsafe { handle(m, "machine") }?;
        body(&mut *borrow(m)?, m)
    })
}

/// The machine's state for one call; `RW_ERR_STATE` from inside one of
/// its callbacks, which run while a call holds it.
fn borrow(m: &rw_machine) -> Result<std::cell::RefMut<'_, Held>> {
    m.held.try_borrow_mut().map_err(|_| {
        Error::new(
            rw_status::RW_ERR_STATE,
            "called from inside a callback of the same machine (a rw_machine_drain's get, its log \
             callback): refused; call it after that returns",
        )
    })
}

/// With the machine behind `m` and an input's time: `now_ms`, or the
/// latest time an input gave when that is later (time never goes back,
/// also after inputs that fed the machine nothing). Kept as the latest
/// when `body` succeeds.
pub(crate) fn with_at(
    m: *mut rw_machine,
    now_ms: u64,
    body: impl FnOnce(&mut Machine, Millis) -> Result<()>,
) -> rw_status {
    with_held(m, |h, m| {
        let now = m.now(now_ms);
        body(&mut h.machine, now)?;
        m.latest.set(now.0);
        Ok(())
    })
}

impl rw_machine {
    /// An input's time: `now_ms`, or the latest given when that is later.
    fn now(&self, now_ms: u64) -> Millis {
        Millis(now_ms.max(self.latest.get()))
    }
}

/// Makes a machine with `config` (NULL: the defaults) into `*out`.
/// `RW_ERR_INVALID` names a setting it refuses.
///
/// Time: every `now_ms` is milliseconds on one monotonic clock of the
/// engine's (`CLOCK_MONOTONIC` in ms is right). The machine never goes
/// back in time: a `now_ms` earlier than one already given (by any call
/// that succeeded, a drain that read nothing and a report of no line
/// included) counts as that one. Deadlines are `now + delay`, saturating: a clock near `UINT64_MAX`
/// leaves no room for them, so start it near 0.
#[unsafe(no_mangle)]
pub extern "C" fn rw_machine_new(config: *const rw_config, out: *mut *mut rw_machine) -> rw_status {
    crate::status::quiet_panics();
    guard(|| {
        let make = || {
            // SAFETY: NULL or a config, by the API's contract.
            let config = unsafe { read(config) }?.machine()?;
            let machine = Machine::new(config).map_err(|e| Error::new(rw_status::RW_ERR_INVALID, e.to_string()))?;
            let held = Held { machine, log_texts: Vec::new(), logger: None };
            Ok(rw_machine { held: RefCell::new(held), latest: Cell::new(0) })
        };
        // SAFETY: the caller passes a writable pointer or NULL.
        unsafe { put_new(out, make) }
    })
}

/// Destroys the machine at `*machine` and sets `*machine` to NULL; NULL
/// (either) is ignored, so a second destroy through the same pointer is
/// safe. Its gates stay valid (their words no longer change). Called from
/// the `get` callback of a `rw_machine_drain` on this machine it is
/// refused: nothing is freed, `*machine` is left as it was and
/// `rw_last_error` says so (free it after the drain returns).
#[unsafe(no_mangle)]
pub extern "C" fn rw_machine_free(machine: *mut *mut rw_machine) {
    // A refusal is recorded as the last error; there is no status to give.
    let _ = guard(|| {
        // SAFETY: NULL or the address of a handle, by the API's contract;
        // a live machine or NULL behind it.
        if let Some(m) = unsafe { machine.as_ref().and_then(|m| m.as_ref()) } {
            drop(borrow(m)?);
        }
        // SAFETY: as above.
        if let Some(machine) = unsafe { take(machine) } {
            // SAFETY: made by `rw_machine_new`, destroyed once, no call
            // on it running (checked above), by the API's contract.
            drop(unsafe { Box::from_raw(machine) });
        }
        Ok(())
    });
}

/// Sends this machine's log requests to `callback` instead of the action
/// queue: from now on `rw_machine_poll_action(s)` hands out no
/// `RW_ACTION_LOG`; each request at `max_level` or under (`rw_log_level`)
/// is written as `callback(user, level, "railwatch", text)` during the
/// poll, on the polling thread, with the words `rw_log.text` would hold
/// (valid for the call only); the rest are dropped. The callback must not
/// call this machine (refused with `RW_ERR_STATE`). NULL `callback` goes
/// back to log actions; a level above `RW_LOG_LEVEL_TRACE` is
/// `RW_ERR_INVALID`, the callback unchanged. Each machine has its own, unlike
/// `rw_set_log_callback` (the process's: railwatch's own threads).
#[unsafe(no_mangle)]
pub extern "C" fn rw_machine_set_log_callback(
    machine: *mut rw_machine,
    callback: crate::log_sink::rw_log_callback_fn,
    user: *mut c_void,
    max_level: u32,
) -> rw_status {
    with_held(machine, |h, _| {
        crate::logging::level_filter(max_level)?;
        h.logger = callback.map(|callback| Logger { callback, user, max_level });
        Ok(())
    })
}

/// Adds a device called `name` with the `nports` port numbers at `ports`
/// (1..=255, none twice; `nports` at most `RW_MAX_PORTS`), writing its
/// index to `*device` (indices count from 0 in the order added). A name
/// that cannot be a device's (empty, over 63 bytes, with a `/`, whitespace
/// or a control character) is `RW_ERR_INVALID`, as the device list skips
/// it. Its rails start inert; the machine then asks to start reading
/// the device and to query each port (the attach). A `name` that was
/// removed comes back under its old index, as a new device (new
/// generation, rate re-seeded), whatever its ports now: a port it had
/// keeps its rail (gates taken before follow it, its generation goes on
/// from the last); a port it no longer has keeps an inert rail, listed
/// and read inert through the gates taken before, but no longer the
/// device's: calls naming that port are `RW_ERR_RANGE` (no gate, no
/// answer taken), as for a port the device never had, while an event
/// naming it (or any port number) is taken and only notified, as every
/// event for a port without a rail is. A new name when the machine holds
/// `RW_MAX_DEVICES` devices (removed ones and empty slots included) is
/// `RW_ERR_RANGE`.
#[unsafe(no_mangle)]
pub extern "C" fn rw_machine_add_device(
    machine: *mut rw_machine,
    name: *const c_char,
    ports: *const u8,
    nports: usize,
    now_ms: u64,
    device: *mut u32,
) -> rw_status {
    with_at(machine, now_ms, |m, now| {
        // SAFETY: as `new_device` needs, by the API's contract.
        let (name, ports) = unsafe { new_device(m, name, ports, nports) }?;
        if device.is_null() {
            return Err(crate::status::null("device"));
        }
        let index = m.add_device(name, ports, now).ok_or_else(|| {
            Error::new(rw_status::RW_ERR_RANGE, format!("{name}: {}", railwatch_core::SlotError::Full))
        })?;
        // SAFETY: checked non-null; the caller passes a writable u32.
        unsafe { put(device, index, "device") }
    })
}

/// Adds a device as `rw_machine_add_device` does, at the index `slot` the
/// engine chose (its own slot for the NIC; below `RW_MAX_DEVICES`): the
/// slots below it that no device took are left empty (no name, no rails,
/// never asked about: `rw_machine_device_name` says `RW_ERR_NOT_FOUND`)
/// until a device is added there. A slot another device holds, or a name
/// that left the host from another slot, is `RW_ERR_INVALID`; a device
/// that left comes back at its own slot, whatever its ports now. Calls
/// that name a device refuse an empty slot (`RW_ERR_RANGE`).
#[unsafe(no_mangle)]
pub extern "C" fn rw_machine_add_device_at(
    machine: *mut rw_machine,
    slot: u32,
    name: *const c_char,
    ports: *const u8,
    nports: usize,
    now_ms: u64,
) -> rw_status {
    with_at(machine, now_ms, |m, now| {
        if slot as usize >= RW_MAX_DEVICES {
            return Err(Error::new(rw_status::RW_ERR_RANGE, format!("slot {slot} (need under RW_MAX_DEVICES)")));
        }
        // SAFETY: as `new_device` needs, by the API's contract.
        let (name, ports) = unsafe { new_device(m, name, ports, nports) }?;
        m.add_device_at(slot, name, ports, now).map(drop).map_err(|e| {
            let status = match e {
                railwatch_core::SlotError::Full => rw_status::RW_ERR_RANGE,
                _ => rw_status::RW_ERR_INVALID,
            };
            Error::new(status, format!("slot {slot} for {name}: {e}"))
        })
    })
}

/// A new device's name and ports, checked: a name a device can have and
/// no device present has, 1..=`RW_MAX_PORTS` distinct port numbers.
///
/// # Safety
/// `name` is NULL or NUL-terminated; `ports` holds `nports` bytes (read
/// only once `nports` is within bounds).
unsafe fn new_device<'a>(
    m: &Machine,
    name: *const c_char,
    ports: *const u8,
    nports: usize,
) -> Result<(&'a str, &'a [u8])> {
    // SAFETY: by this function's contract (`slice` checks the bound before
    // any read).
    let (name, ports) = unsafe { (text(name, "name")?, slice(ports, nports, PORTS, "nports", "ports")?) };
    crate::args::device_name(name, "device name")?;
    if ports.is_empty() || ports.contains(&0) {
        return Err(Error::new(rw_status::RW_ERR_INVALID, format!("ports of {name}: {ports:?} (need 1..=255)")));
    }
    let mut sorted = ports.to_vec();
    sorted.sort_unstable();
    if sorted.windows(2).any(|w| w[0] == w[1]) {
        return Err(Error::new(rw_status::RW_ERR_INVALID, format!("ports of {name}: {ports:?} has a duplicate")));
    }
    if m.devices().any(|d| d.name == name && !matches!(d.mode, railwatch_core::DeviceMode::Removed)) {
        return Err(Error::new(rw_status::RW_ERR_INVALID, format!("device {name} is already there")));
    }
    Ok((name, ports))
}

/// The event from `ibv_async_event`, with its element: the port number
/// for port events, the object's pointer value for QP/CQ/SRQ/WQ events.
/// A port event's element that is no port number is kept as port
/// `u32::MAX`, which no rail has (stray input): the drain's reading.
pub(crate) fn event(code: u32, element: u64) -> AsyncEvent {
    event_in(code, railwatch_core::EventKind::from_code(code).scope(), element)
}

fn event_in(code: u32, scope: Scope, element: u64) -> AsyncEvent {
    let element = match scope {
        Scope::Port => Element::Port(u32::try_from(element).unwrap_or(u32::MAX)),
        Scope::Cq | Scope::Qp | Scope::Srq | Scope::Wq => Element::Object(ObjectHandle(element)),
        Scope::Device | Scope::Unknown => Element::None,
    };
    AsyncEvent::new(code, element)
}

/// [`event`], refusing a port event whose element is no port number
/// (1..=255): the union of `ibv_async_event` read through the wrong
/// member (`qp` for a `LID_CHANGE`) looks like that, and would be
/// silently ignored.
#[inline]
pub(crate) fn checked_event(code: u32, element: u64) -> Result<AsyncEvent> {
    let scope = railwatch_core::EventKind::from_code(code).scope();
    if scope == Scope::Port && !(1..=255).contains(&element) {
        return Err(not_a_port(code, element));
    }
    Ok(event_in(code, scope, element))
}

#[cold]
#[inline(never)]
fn not_a_port(code: u32, element: u64) -> Error {
    Error::new(
        rw_status::RW_ERR_RANGE,
        format!(
            "element {element} ({element:#x}) of event {code} ({}) is not a port number (1..=255): pass \
             ev.element.port_num (railwatch_verbs.h's rw_verbs_event_input does)",
            railwatch_core::EventKind::from_code(code).ibv_str()
        ),
    )
}

/// One event read (and already acknowledged) from `device`'s async fd:
/// `code` is `event_type`, `element` the port number for port events
/// (`PORT_ACTIVE`, `PORT_ERR`, `LID_CHANGE`, `PKEY_CHANGE`, `SM_CHANGE`,
/// `CLIENT_REREGISTER`, `GID_CHANGE`: 1..=255, else `RW_ERR_RANGE`) or the
/// object's pointer value for QP/CQ/SRQ/WQ events (anything for the
/// rest). `rw_verbs_event_input` (railwatch_verbs.h) makes both from a
/// `struct ibv_async_event`. Unknown codes are counted and logged once,
/// never an error.
#[unsafe(no_mangle)]
pub extern "C" fn rw_machine_handle_event(
    machine: *mut rw_machine,
    device: u32,
    code: u32,
    element: u64,
    now_ms: u64,
) -> rw_status {
    with_at(machine, now_ms, |m, now| {
        device_in(m, device)?;
        m.handle_event(device, checked_event(code, element)?, now);
        Ok(())
    })
}

/// Reading `device`'s fd failed with `error` (an errno other than EAGAIN
/// and EINTR; -1 unknown): it is no longer read, its ports are polled.
#[unsafe(no_mangle)]
pub extern "C" fn rw_machine_handle_read_error(
    machine: *mut rw_machine,
    device: u32,
    error: i32,
    now_ms: u64,
) -> rw_status {
    with_at(machine, now_ms, |m, now| {
        device_in(m, device)?;
        m.handle_read_error(device, Errno(error), now);
        Ok(())
    })
}

/// `device`'s fd hung up (EPOLLHUP/EPOLLERR): the context is gone.
#[unsafe(no_mangle)]
pub extern "C" fn rw_machine_handle_hangup(machine: *mut rw_machine, device: u32, now_ms: u64) -> rw_status {
    with_at(machine, now_ms, |m, now| {
        device_in(m, device)?;
        m.handle_hangup(device, now);
        Ok(())
    })
}

/// The answer to `RW_ACTION_QUERY_PORT`: `error` 0 and the port's
/// `ibv_port_state` in `state`, or the errno of the failed query.
#[unsafe(no_mangle)]
pub extern "C" fn rw_machine_handle_port_state(
    machine: *mut rw_machine,
    device: u32,
    port: u32,
    error: i32,
    state: u32,
    now_ms: u64,
) -> rw_status {
    rw_machine_handle_port_reading(machine, device, port, error, state, rw_carrier::RW_CARRIER_UNKNOWN as u32, now_ms)
}

/// A netdev's carrier as C passes it (`rw_machine_handle_port_reading`,
/// `rw_machine_handle_carrier`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rw_carrier {
    /// Not read (the port has no netdev, or the read failed): the carrier
    /// last known stands.
    RW_CARRIER_UNKNOWN = 0,
    /// No carrier (or the netdev is administratively down).
    RW_CARRIER_DOWN = 1,
    /// The link layer has a carrier.
    RW_CARRIER_UP = 2,
}

impl rw_carrier {
    /// The code of a carrier read (`RW_CARRIER_UNKNOWN` for none).
    pub(crate) fn of(carrier: Option<Carrier>) -> rw_carrier {
        match carrier {
            None => rw_carrier::RW_CARRIER_UNKNOWN,
            Some(Carrier::Down) => rw_carrier::RW_CARRIER_DOWN,
            Some(Carrier::Up) => rw_carrier::RW_CARRIER_UP,
        }
    }
}

/// The carrier code `code`: `Ok(None)` for `RW_CARRIER_UNKNOWN`.
pub(crate) fn carrier_of(code: u32) -> Result<Option<Carrier>> {
    match code {
        0 => Ok(None),
        1 => Ok(Some(Carrier::Down)),
        2 => Ok(Some(Carrier::Up)),
        other => Err(Error::new(rw_status::RW_ERR_RANGE, format!("carrier {other} is not an rw_carrier"))),
    }
}

/// `rw_machine_handle_port_state` with the netdev's carrier read beside
/// the port (`rw_carrier`; `RW_CARRIER_UNKNOWN` where there is none).
#[unsafe(no_mangle)]
pub extern "C" fn rw_machine_handle_port_reading(
    machine: *mut rw_machine,
    device: u32,
    port: u32,
    error: i32,
    state: u32,
    carrier: u32,
    now_ms: u64,
) -> rw_status {
    with_at(machine, now_ms, |m, now| {
        let port = port_in(m, device, port)?;
        let carrier = carrier_of(carrier)?;
        m.handle_port_reading(device, port, answer(error, || PortState::from_code(state)), carrier, now);
        Ok(())
    })
}

/// The netdev of `device`'s `port` says its carrier changed (an rtnetlink
/// link message): `RW_CARRIER_DOWN` or `RW_CARRIER_UP`.
#[unsafe(no_mangle)]
pub extern "C" fn rw_machine_handle_carrier(
    machine: *mut rw_machine,
    device: u32,
    port: u32,
    carrier: u32,
    now_ms: u64,
) -> rw_status {
    with_at(machine, now_ms, |m, now| {
        let port = port_in(m, device, port)?;
        let Some(carrier) = carrier_of(carrier)? else {
            return Err(Error::new(rw_status::RW_ERR_RANGE, "carrier RW_CARRIER_UNKNOWN is no change".to_owned()));
        };
        m.handle_carrier(device, port, carrier, now);
        Ok(())
    })
}

/// The answer to `RW_ACTION_READ_LINK`: `error` 0 with `ibv_port_attr`'s
/// `active_speed` (or `active_speed_ex` when non-zero) and `active_width`
/// codes, and `effective_100mbps` (`ibv_query_port_speed`, 0 if not
/// known); or the errno of the failed read.
#[unsafe(no_mangle)]
pub extern "C" fn rw_machine_handle_link(
    machine: *mut rw_machine,
    device: u32,
    port: u32,
    error: i32,
    speed: u32,
    width: u8,
    effective_100mbps: u64,
    now_ms: u64,
) -> rw_status {
    with_at(machine, now_ms, |m, now| {
        let port = port_in(m, device, port)?;
        let link = answer(error, || LinkAttrs {
            effective_100mbps: (effective_100mbps != 0).then_some(effective_100mbps),
            ..LinkAttrs::new(speed, width)
        });
        m.handle_link(device, port, link, now);
        Ok(())
    })
}

/// One GID table entry.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rw_gid {
    /// Its index in the port's table (below `RW_MAX_GIDS`).
    pub index: u32,
    /// The GID, network byte order.
    pub raw: [u8; 16],
    /// 0 IB/RoCE v1, 1 RoCE v2, anything else unknown.
    pub gid_type: u32,
}

/// A port's address, for `rw_machine_handle_address`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rw_port_address {
    /// `ibv_port_attr.link_layer` (0 unspecified, 1 InfiniBand, 2
    /// Ethernet).
    pub link_layer: u8,
    /// The LID (0 on RoCE).
    pub lid: u16,
    /// The non-empty GID entries (may be NULL when `ngids` is 0).
    pub gids: *const rw_gid,
    /// How many (at most `RW_MAX_GIDS`).
    pub ngids: usize,
    /// The netdev under a RoCE port, or NULL.
    pub netdev: *const c_char,
}

/// One GID entry from C, its index within a table.
fn gid((i, g): (usize, &rw_gid)) -> Result<Gid> {
    if g.index as usize >= RW_MAX_GIDS {
        return Err(Error::new(
            rw_status::RW_ERR_RANGE,
            format!("address.gids[{i}].index {}: a GID table has at most RW_MAX_GIDS ({RW_MAX_GIDS}) entries", g.index),
        ));
    }
    let kind = match g.gid_type {
        0 => GidType::IbRoceV1,
        1 => GidType::RoceV2,
        _ => GidType::Unknown,
    };
    Ok(Gid { index: g.index, raw: g.raw, kind })
}

/// The answer to `RW_ACTION_READ_ADDRESS`: `error` 0 and the address, or
/// the errno (`EOPNOTSUPP` if the engine does not read addresses; the
/// machine then stops asking).
#[unsafe(no_mangle)]
pub extern "C" fn rw_machine_handle_address(
    machine: *mut rw_machine,
    device: u32,
    port: u32,
    error: i32,
    address: *const rw_port_address,
    now_ms: u64,
) -> rw_status {
    with_at(machine, now_ms, |m, now| {
        let port = port_in(m, device, port)?;
        if error != 0 {
            m.handle_address(device, port, Err(Errno(error)), now);
            return Ok(());
        }
        // SAFETY: a valid address or NULL, by the API's contract.
        let a = unsafe { handle(address, "address") }?;
        // SAFETY: `ngids` entries at `gids`, and NULL or a NUL-terminated
        // netdev, by the API's contract (`slice` checks the bound first).
        let (gids, netdev) = unsafe {
            (
                slice(a.gids, a.ngids, GIDS, "address.ngids", "address.gids")?,
                (!a.netdev.is_null()).then(|| text(a.netdev, "address.netdev")),
            )
        };
        let address = PortAddress {
            link_layer: Some(LinkLayer::from_code(a.link_layer)),
            lid: a.lid,
            gids: gids.iter().enumerate().map(gid).collect::<Result<_>>()?,
            netdev: netdev.transpose()?.map(str::to_owned),
        };
        m.handle_address(device, port, Ok(&address), now);
        Ok(())
    })
}

/// The answer to `RW_ACTION_REOPEN`: 0 when the device opened again, else
/// the errno (retried with backoff).
#[unsafe(no_mangle)]
pub extern "C" fn rw_machine_handle_reopen(
    machine: *mut rw_machine,
    device: u32,
    error: i32,
    now_ms: u64,
) -> rw_status {
    with_at(machine, now_ms, |m, now| {
        device_in(m, device)?;
        m.handle_reopen(device, answer(error, || ()), now);
        Ok(())
    })
}

/// `device` left the host (a uevent, or the device list): closed, its
/// rails inert, not re-opened. Adding its name again brings it back.
#[unsafe(no_mangle)]
pub extern "C" fn rw_machine_handle_removed(machine: *mut rw_machine, device: u32, now_ms: u64) -> rw_status {
    with_at(machine, now_ms, |m, now| {
        device_in(m, device)?;
        m.handle_removed(device, now);
        Ok(())
    })
}

/// Time passed: call when `rw_machine_poll_timeout`'s deadline is reached
/// (calling early or late is harmless).
#[unsafe(no_mangle)]
pub extern "C" fn rw_machine_handle_timeout(machine: *mut rw_machine, now_ms: u64) -> rw_status {
    with_at(machine, now_ms, |m, now| {
        m.handle_timeout(now);
        Ok(())
    })
}

/// The next action into `*action`; `kind` is `RW_ACTION_NONE` when there
/// is none. Poll until NONE after every input.
#[unsafe(no_mangle)]
pub extern "C" fn rw_machine_poll_action(machine: *mut rw_machine, action_out: *mut rw_action) -> rw_status {
    with_held(machine, |m, _| {
        if action_out.is_null() {
            return Err(crate::status::null("action"));
        }
        m.log_texts.clear();
        // SAFETY: non-null, and writable by the API's contract.
        if !unsafe { m.write_next(action_out) } {
            // SAFETY: as above.
            unsafe { write_header(action_out, rw_action_kind::RW_ACTION_NONE, 0, 0) };
        }
        Ok(())
    })
}

/// Up to `capacity` actions into `actions[0..]`, in order, and how many
/// into `*count`. One call for what `rw_machine_poll_action` gives one by
/// one; answering them after the batch (before the next input) keeps the
/// documented order. Poll again after answering: answers cause further
/// actions. The machine adds actions only in response to an input (a
/// `rw_machine_add_device` or `rw_machine_handle_*` call), so a batch
/// shorter than `capacity` with no input since means the queue is empty.
///
/// The buffer idiom (as `rw_monitor_snapshot`'s): `capacity` 0 (`actions`
/// may then be NULL) asks how many are pending: `*count` is that number,
/// and the status `RW_OK` when it is 0, `RW_ERR_BUFFER` otherwise (none
/// taken).
#[unsafe(no_mangle)]
pub extern "C" fn rw_machine_poll_actions(
    machine: *mut rw_machine,
    actions: *mut rw_action,
    capacity: usize,
    count: *mut usize,
) -> rw_status {
    with_held(machine, |m, _| {
        if count.is_null() {
            return Err(crate::status::null("count"));
        }
        if capacity == 0 {
            let pending = m.machine.pending_actions();
            // SAFETY: checked non-null; the caller passes a writable count.
            unsafe { put(count, pending, "count") }?;
            if pending > 0 {
                return Err(Error::new(rw_status::RW_ERR_BUFFER, format!("{pending} actions pending, room for 0")));
            }
            return Ok(());
        }
        if actions.is_null() {
            return Err(crate::status::null("actions"));
        }
        let mut n = 0;
        m.log_texts.clear();
        while n < capacity {
            // SAFETY: `n < capacity` elements of `actions` are writable, by
            // the API's contract.
            if !unsafe { m.write_next(actions.add(n)) } {
                break;
            }
            n += 1;
        }
        // SAFETY: checked non-null; the caller passes a writable count.
        unsafe { put(count, n, "count") }
    })
}

/// When the machine next needs `rw_machine_handle_timeout` (ms, the
/// caller's clock) into `*deadline_ms`; `RW_NO_DEADLINE` when nothing is
/// pending (a healthy host: sleep until an fd is readable).
#[unsafe(no_mangle)]
pub extern "C" fn rw_machine_poll_timeout(machine: *mut rw_machine, deadline_ms: *mut u64) -> rw_status {
    with(machine, |m| {
        let d = m.poll_timeout().map_or(RW_NO_DEADLINE, |t| t.0);
        // SAFETY: the caller passes a writable u64 or NULL.
        unsafe { put(deadline_ms, d, "deadline_ms") }
    })
}

/// How long the engine's `epoll_wait` / `poll` may sleep at `now_ms`
/// before the machine needs `rw_machine_handle_timeout`, as their `int`
/// timeout, into `*timeout_ms`: 0 when the deadline has passed, at most
/// `cap_ms`; with no deadline `cap_ms` itself (a negative `cap_ms`: no cap,
/// and -1, wait for ever, when there is no deadline). The subtraction and
/// the sentinel of `rw_machine_poll_timeout`, done once: `now_ms` follows
/// the machine's clock rule (an earlier one than an input gave counts as
/// that one; asking is no input, so it moves nothing), and a deadline
/// `rw_machine_poll_timeout` reports as `RW_NO_DEADLINE` (saturated) is
/// none here too.
#[unsafe(no_mangle)]
pub extern "C" fn rw_machine_poll_wait(
    machine: *mut rw_machine,
    now_ms: u64,
    cap_ms: i32,
    timeout_ms: *mut i32,
) -> rw_status {
    with_held(machine, |h, handle| {
        let now_ms = handle.now(now_ms).0;
        let cap = u64::try_from(cap_ms).ok();
        let deadline = h.machine.poll_timeout().filter(|d| d.0 != RW_NO_DEADLINE);
        let wait = match (deadline, cap) {
            (None, None) => -1,
            (None, Some(_)) => cap_ms,
            (Some(d), cap) => {
                let left = d.0.saturating_sub(now_ms).min(cap.unwrap_or(u64::MAX)).min(i32::MAX as u64);
                i32::try_from(left).unwrap_or(i32::MAX)
            }
        };
        // SAFETY: the caller passes a writable int or NULL.
        unsafe { put(timeout_ms, wait, "timeout_ms") }
    })
}

/// `rw_machine_poll_timeout`'s "no deadline".
pub const RW_NO_DEADLINE: u64 = u64::MAX;

/// A gate for the rail (`device`, `port`) into `*gate`, for worker threads
/// (see `rw_gate_check_inline`). Destroy it with `rw_gate_free`.
#[unsafe(no_mangle)]
pub extern "C" fn rw_machine_gate(
    machine: *mut rw_machine,
    device: u32,
    port: u32,
    gate: *mut *mut rw_gate,
) -> rw_status {
    with(machine, |m| {
        let port = port_in(m, device, port)?;
        if gate.is_null() {
            return Err(crate::status::null("gate"));
        }
        let g = m
            .gate(RailId { device, port })
            .ok_or_else(|| Error::new(rw_status::RW_ERR_NOT_FOUND, format!("no rail {device}/{port}")))?;
        // SAFETY: checked non-null; the caller passes a writable pointer.
        unsafe { put(gate, rw_gate::boxed(g), "gate") }
    })
}

/// How `rw_machine_drain` reads one event: `get` reads (and acknowledges,
/// with `ibv_ack_async_event`, before returning) the next event of the
/// device, writing its `event_type` to `*code` and its element (port
/// number, or object pointer value) to `*element`, and returns 0; or
/// returns the errno of the failed read: EAGAIN when the queue is empty,
/// EINTR to be retried, anything else stops the drain.
pub type rw_get_event_fn = Option<extern "C" fn(user: *mut c_void, code: *mut u32, element: *mut u64) -> i32>;

/// What one drain did.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct rw_drain_report {
    /// Events read (each fed to the machine, but for a port event whose
    /// element is no port number).
    pub events: u64,
    /// `get` calls, including the failed ones.
    pub gets: u64,
    /// EINTRs retried.
    pub interrupted: u64,
    /// 0: the queue was emptied; -1: the budget ran out first (drain again
    /// before the next blocking wait); else the errno that stopped it.
    pub end: i32,
}

/// The edge-triggered drain, done right: calls `get` until the queue is
/// empty (EAGAIN), retrying EINTR, feeding each event to the machine as
/// read; a real error stops it and is fed as a read error (the device is
/// then polled). At most `budget` calls (0: 256, the monitor's default).
/// Every event is acknowledged by `get` before the machine sees it, so
/// nothing the engine does in response (destroying a QP) waits on an
/// unacknowledged event. `get` runs on the calling thread and must not
/// call this machine: any `rw_machine_*` call on it from `get`
/// (`rw_machine_drain` and `rw_machine_free` included) is refused with
/// `RW_ERR_STATE` and does nothing (its gates, other machines and the rest
/// of the API are fine). What the drain did goes to `*report`, which may
/// be NULL; drain again while its `end` is -1 (the budget ran out first).
/// The report is written on every return: a drain refused before any read
/// (a NULL machine, no such device, a call from inside a callback) reports
/// `end` `EINVAL`, so a `while (r.end == -1)` loop stops.
/// Drain a device once right after its `RW_ACTION_START_READING` too:
/// events may predate the epoll add.
/// A port event whose element is no port number (1..=255: the union read
/// through the wrong member) does not stop the drain, which reads and
/// feeds the rest; that event is not fed to the machine (no notification,
/// nothing counted by the machine: it is counted in the report's
/// `events`), and the drain returns `RW_ERR_RANGE` naming the first such
/// one (the report is still written), as `rw_machine_handle_event`
/// refuses it.
#[unsafe(no_mangle)]
pub extern "C" fn rw_machine_drain(
    machine: *mut rw_machine,
    device: u32,
    get: rw_get_event_fn,
    user: *mut c_void,
    budget: u32,
    now_ms: u64,
    report: *mut rw_drain_report,
) -> rw_status {
    if !report.is_null() {
        let refused = rw_drain_report { end: libc::EINVAL, ..Default::default() };
        // SAFETY: non-null, and writable by the API's contract; written
        // first so that a refusal never leaves a stale `end` of -1.
        unsafe { report.write(refused) };
    }
    with_held(machine, |h, m| {
        device_in(&h.machine, device)?;
        let get = get.ok_or_else(|| crate::status::null("get"))?;
        let budget = if budget == 0 { DEFAULT_DRAIN_BUDGET } else { budget as usize };
        // The drain's time is an input's even when it reads no event.
        let now = m.now(now_ms);
        m.latest.set(now.0);
        // The machine stays borrowed while `get` runs: a call on it from
        // there is refused.
        let (r, misread) = drain_loop(&mut h.machine, device, get, user, budget, now);
        if !report.is_null() {
            // SAFETY: checked non-null; the caller passes a writable report.
            unsafe { put(report, r, "report") }?;
        }
        match misread {
            Some((code, element)) => Err(not_a_port(code, element)),
            None => Ok(()),
        }
    })
}

/// The drain itself is the runtime's ([`drain_with`]), reading through
/// `get`: until EAGAIN, an error or the budget. `get` cannot reach the
/// machine (every entry refuses while `draining`), so the drain holds it
/// throughout. Also the first port event whose element was no port
/// number, if any (read and acknowledged, never fed to the machine).
fn drain_loop(
    m: &mut Machine,
    device: u32,
    get: extern "C" fn(*mut c_void, *mut u32, *mut u64) -> i32,
    user: *mut c_void,
    budget: usize,
    now: Millis,
) -> (rw_drain_report, Option<(u32, u64)>) {
    let mut misread = None;
    // The last event read was a misread port event: not fed, as
    // `rw_machine_handle_event` refuses it.
    let skip = std::cell::Cell::new(false);
    let read = || {
        let (mut code, mut element) = (0u32, 0u64);
        match get(user, &mut code, &mut element) {
            0 => {
                let checked = checked_event(code, element);
                skip.set(checked.is_err());
                if checked.is_err() && misread.is_none() {
                    misread = Some((code, element));
                }
                Ok(checked.unwrap_or_else(|_| event(code, element)))
            }
            errno => Err(io::Error::from_raw_os_error(errno)),
        }
    };
    let report = drain_with(read, budget, |ev| {
        if !skip.get() {
            m.handle_event(device, ev, now);
        }
    });
    let mut r = rw_drain_report {
        events: report.events as u64,
        gets: report.gets as u64,
        interrupted: report.interrupted as u64,
        end: -1,
    };
    match report.end {
        DrainEnd::Empty => r.end = 0,
        DrainEnd::Budget => {}
        DrainEnd::Failed(e) => {
            let errno = e.raw_os_error().unwrap_or(libc::EIO);
            r.end = errno;
            m.handle_read_error(device, Errno(errno), now);
        }
    }
    (r, misread)
}
