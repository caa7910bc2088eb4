//! A simulated device opened by an engine that keeps its own loop: what
//! the engine would get from `ibv_open_device`, answering as libibverbs
//! answers (0 or an errno), so the engine's loop, its epoll set and its
//! drain run unchanged in a test. The fd is the device's real pipe:
//! readiness, edge-triggering and `EAGAIN` are the kernel's.

use std::ffi::c_char;
use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use railwatch_core::{Element, LinkLayer, VerbsPort};
use railwatch_sim_backend::{SimDevice, SimHandle};

use super::{EngineCounts, rw_sim};
use crate::args::{handle, handle_mut, put, take, text};
use crate::evidence::RW_COUNTER_NONE;
use crate::machine::{rw_carrier, rw_gid, rw_port_address};
use crate::status::{Error, Result, errno_because, guard_errno, guard_void, rw_status};

/// An open simulated device, the twin of an `ibv_context`. Made by
/// [`rw_sim_open`], destroyed by [`rw_sim_close`]; one thread at a time.
pub struct rw_sim_context {
    device: SimDevice,
    handle: SimHandle,
    engine: Arc<EngineCounts>,
    /// Events read and not acknowledged yet.
    unacked: u64,
    /// Where the last `rw_sim_query_address` put its GIDs.
    gids: Vec<rw_gid>,
}

/// A port as `rw_sim_query_port` reads it (the fields of `ibv_port_attr`
/// the machine asks about).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct rw_sim_port_attr {
    /// `ibv_port_state`.
    pub state: u32,
    /// The speed code (`active_speed`, or `active_speed_ex` when above
    /// 255).
    pub active_speed: u32,
    /// `active_width`.
    pub active_width: u8,
    /// `link_layer`: 2, Ethernet (the simulator's ports are RoCE).
    pub link_layer: u8,
}

/// A port's flap counters as `rw_sim_query_counters` reads them
/// (`RW_COUNTER_NONE` for one the device does not have).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rw_sim_port_counters {
    /// `link_downed`.
    pub link_downed: u64,
    /// The netdev's `carrier_changes`.
    pub carrier_changes: u64,
    /// The netdev's `carrier_down_count`.
    pub carrier_down: u64,
}

/// `Err` for a context function's errno.
fn errno_of(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

/// A context call's failure `e` about `what` (`"port 9 of mlx5_0"`): its
/// errno, with the last error naming it.
fn failed(what: impl std::fmt::Display, e: &io::Error) -> i32 {
    errno_because(errno_of(e), what)
}

fn port8(port: u32) -> Result<u8> {
    u8::try_from(port)
        .ok()
        .filter(|&p| p != 0)
        .ok_or_else(|| Error::new(rw_status::RW_ERR_RANGE, format!("port {port} (need 1..=255)")))
}

/// Opens the simulated device called `name` (a name `rw_sim_device_list`
/// gives), as `ibv_open_device` would, into `*context`. Returns 0, or the
/// errno of an open that failed: `ENODEV` when there is no such device,
/// the host does not list it (unplugged) or it hung up (`rw_sim_hang_up`,
/// until `rw_sim_restore`), whether or not a context of it is still open;
/// `EBUSY` while a monitor or another context has it open (one opener at
/// a time: the simulator keeps one event queue per device). `EINVAL` for a
/// NULL argument. Every failure sets `rw_last_error()`, naming the device.
///
/// Like the real async fd, the context's fd (`rw_sim_context_fd`) is
/// blocking until the engine makes it `O_NONBLOCK` (`fcntl`), which it
/// must before its first drain.
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_open(sim: *const rw_sim, name: *const c_char, context: *mut *mut rw_sim_context) -> i32 {
    crate::status::quiet_panics();
    guard_errno(|| {
        // SAFETY: a live sim or NULL, and a NUL-terminated name, by the
        // API's contract.
        let (sim, name) = unsafe { (handle(sim, "sim")?, text(name, "name")?) };
        if context.is_null() {
            return Err(crate::status::null("context"));
        }
        let Some((handle, engine)) = sim.named(name) else {
            return Ok(errno_because(libc::ENODEV, format_args!("no simulated device {name}")));
        };
        // Gone (unplugged, or hung up until rw_sim_restore) is ENODEV,
        // whether or not the context it had is still open.
        if !handle.is_listed() || handle.is_removed() {
            let why = if handle.is_removed() { "hung up (until rw_sim_restore)" } else { "unplugged" };
            return Ok(errno_because(libc::ENODEV, format_args!("{name} is {why}")));
        }
        if handle.is_open() {
            return Ok(errno_because(
                libc::EBUSY,
                format_args!("{name} is open (a monitor or another context has it)"),
            ));
        }
        let device = match handle.open() {
            Ok(device) => device,
            Err(e) => return Ok(failed(format_args!("opening {name}"), &e)),
        };
        set_blocking(device.async_fd())?;
        let boxed = Box::new(rw_sim_context { device, handle, engine, unacked: 0, gids: Vec::new() });
        // SAFETY: checked non-null; the caller passes a writable pointer.
        unsafe { put(context, Box::into_raw(boxed), "context") }?;
        Ok(0)
    })
}

/// Clears `O_NONBLOCK` on the pipe's read end: the real async fd starts
/// blocking.
fn set_blocking(fd: RawFd) -> Result<()> {
    // SAFETY: fcntl on an open descriptor the device owns; F_GETFL takes no
    // argument.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above; F_SETFL takes the flags as an int.
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error().into());
    }
    Ok(())
}

fn is_nonblocking(fd: RawFd) -> bool {
    // SAFETY: fcntl on an open descriptor the device owns.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    flags >= 0 && flags & libc::O_NONBLOCK != 0
}

/// Closes the context at `*context` (the device can be opened again) and
/// sets `*context` to NULL; NULL (either) is ignored. Events still queued
/// are dropped; events read and not acknowledged stay counted
/// (`rw_sim_counters.unacked`).
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_close(context: *mut *mut rw_sim_context) {
    // SAFETY: NULL or the address of a handle, by the API's contract.
    let Some(context) = (unsafe { take(context) }) else { return };
    guard_void(|| {
        // SAFETY: made by `rw_sim_open`, destroyed once, by the API's
        // contract; dropping the device closes it.
        drop(unsafe { Box::from_raw(context) });
    });
}

/// The context's async fd, for the engine's epoll set (edge-triggered:
/// drain it to `EAGAIN` after every wake-up); -1 for NULL, and once a
/// monitor opened the device anew (one opener at a time). Valid until
/// `rw_sim_close`.
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_context_fd(context: *const rw_sim_context) -> i32 {
    // SAFETY: a live context or NULL, by the API's contract.
    unsafe { context.as_ref() }.filter(|c| !c.device.is_stale()).map_or(-1, |c| c.device.async_fd())
}

/// With the context, answering an errno.
fn with_context(context: *mut rw_sim_context, body: impl FnOnce(&mut rw_sim_context) -> Result<i32>) -> i32 {
    guard_errno(|| {
        // SAFETY: a live context or NULL, used by one thread at a time.
        body(unsafe { handle_mut(context, "context") }?)
    })
}

/// The number of ports into `*phys_port_cnt` (`ibv_query_device`'s
/// field): the device's ports are 1..=that. 0, or `ENODEV` once it hung
/// up.
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_query_device(context: *mut rw_sim_context, phys_port_cnt: *mut u32) -> i32 {
    with_context(context, |c| {
        if c.handle.is_removed() {
            return Ok(errno_because(libc::ENODEV, format_args!("{} hung up", c.handle.name())));
        }
        let n = u32::try_from(c.device.ports().len()).unwrap_or(u32::MAX);
        // SAFETY: the caller passes a writable u32 or NULL.
        unsafe { put(phys_port_cnt, n, "phys_port_cnt") }?;
        Ok(0)
    })
}

/// The next event, as `ibv_get_async_event` gives it: 0 and its code and
/// element (the port number for port events, the object's pointer value
/// for QP/CQ/SRQ/WQ events, 0 for the rest) in `*code` and `*element`, or
/// the errno of the read: `EAGAIN` when the queue is empty, `EINTR` (to
/// retry), `EIO` once the device hung up, `EBADF` once a monitor opened
/// the device anew (one opener at a time). The event stays unacknowledged
/// until `rw_sim_ack_event`. Where the real call would block for ever (an
/// empty queue on a fd the engine did not make `O_NONBLOCK`), it answers
/// `EDEADLK` and counts it (`rw_sim_counters.blocking_gets`).
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_get_event(context: *mut rw_sim_context, code: *mut u32, element: *mut u64) -> i32 {
    with_context(context, |c| {
        if code.is_null() || element.is_null() {
            return Err(crate::status::null(if code.is_null() { "code" } else { "element" }));
        }
        if c.device.is_stale() {
            // A monitor opened the device anew: its events are not ours.
            let why = format_args!("{}'s context: a monitor opened the device anew", c.handle.name());
            return Ok(errno_because(libc::EBADF, why));
        }
        let live = c.handle.is_open() && !c.handle.is_removed();
        if live && c.handle.pending() == 0 && !is_nonblocking(c.device.async_fd()) {
            c.engine.blocking_gets.fetch_add(1, Ordering::Relaxed);
            let why = format_args!("{}: the queue is empty and the fd blocks (make it O_NONBLOCK)", c.handle.name());
            return Ok(errno_because(libc::EDEADLK, why));
        }
        let event = match c.device.get_event() {
            Ok(event) => event,
            // An empty queue and an interrupted read are no failures: no
            // message (the drain's every turn ends so).
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => {
                return Ok(errno_of(&e));
            }
            Err(e) => return Ok(failed(format_args!("reading {}'s events", c.handle.name()), &e)),
        };
        let value = match event.element {
            Element::Port(p) => u64::from(p),
            Element::Object(h) => h.0,
            Element::None => 0,
        };
        c.unacked += 1;
        c.engine.read.fetch_add(1, Ordering::Relaxed);
        // SAFETY: both checked non-null; the caller passes writable ones.
        unsafe {
            put(code, event.code, "code")?;
            put(element, value, "element")?;
        }
        Ok(0)
    })
}

/// Acknowledges the oldest event `rw_sim_get_event` gave and nobody
/// acknowledged (`ibv_ack_async_event`): 0, or `EINVAL` when none is left
/// (counted: `rw_sim_counters.bad_acks`).
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_ack_event(context: *mut rw_sim_context) -> i32 {
    with_context(context, |c| {
        if c.unacked == 0 {
            c.engine.bad_acks.fetch_add(1, Ordering::Relaxed);
            let why = format_args!("{}: no event read and not acknowledged", c.handle.name());
            return Ok(errno_because(libc::EINVAL, why));
        }
        c.unacked -= 1;
        c.engine.acked.fetch_add(1, Ordering::Relaxed);
        Ok(0)
    })
}

/// `rw_sim_get_event` and, when it gave an event, `rw_sim_ack_event`:
/// a reader for `rw_machine_drain` (`user` is the `rw_sim_context *`).
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_next_event(context: *mut std::ffi::c_void, code: *mut u32, element: *mut u64) -> i32 {
    let context = context.cast::<rw_sim_context>();
    match rw_sim_get_event(context, code, element) {
        0 => rw_sim_ack_event(context),
        errno => errno,
    }
}

/// `port`'s state and link into `*attr`, as `ibv_query_port` reads them
/// (a port query and a link read in the counters): 0, `EINVAL` for a port
/// the device lacks, `ENODEV` once it hung up.
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_query_port(context: *mut rw_sim_context, port: u32, attr: *mut rw_sim_port_attr) -> i32 {
    with_context(context, |c| {
        if attr.is_null() {
            return Err(crate::status::null("attr"));
        }
        let p = port8(port)?;
        let (state, link) = match c.device.port_state(p).and_then(|s| Ok((s, c.device.link(p)?))) {
            Ok(answer) => answer,
            Err(e) => return Ok(failed(format_args!("port {port} of {}", c.handle.name()), &e)),
        };
        let out = rw_sim_port_attr {
            state: state.code(),
            active_speed: link.speed_code(),
            active_width: link.active_width,
            link_layer: 2,
        };
        // SAFETY: checked non-null; the caller passes a writable attr.
        unsafe { put(attr, out, "attr") }?;
        Ok(0)
    })
}

/// `port`'s address into `*address`, ready for
/// `rw_machine_handle_address`: 0, `EOPNOTSUPP` while no GID was ever set
/// on the device (`rw_sim_set_gid`), `ENODEV` once it hung up. Its `gids`
/// point into the context, valid until its next `rw_sim_query_address` or
/// `rw_sim_close`.
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_query_address(context: *mut rw_sim_context, port: u32, address: *mut rw_port_address) -> i32 {
    with_context(context, |c| {
        if address.is_null() {
            return Err(crate::status::null("address"));
        }
        let read = match c.device.address(port8(port)?) {
            Ok(read) => read,
            Err(e) if e.kind() == io::ErrorKind::Unsupported => {
                let why = format_args!("the address of port {port} of {}: no GID was set", c.handle.name());
                return Ok(errno_because(libc::EOPNOTSUPP, why));
            }
            Err(e) => return Ok(failed(format_args!("the address of port {port} of {}", c.handle.name()), &e)),
        };
        c.gids = read.gids.iter().map(|g| rw_gid { index: g.index, raw: g.raw, gid_type: 1 }).collect();
        let out = rw_port_address {
            link_layer: link_layer_code(read.link_layer),
            lid: read.lid,
            gids: c.gids.as_ptr(),
            ngids: c.gids.len(),
            netdev: std::ptr::null(),
        };
        // SAFETY: checked non-null; the caller passes a writable address.
        unsafe { put(address, out, "address") }?;
        Ok(0)
    })
}

fn link_layer_code(l: Option<LinkLayer>) -> u8 {
    match l {
        None | Some(LinkLayer::Unspecified) => 0,
        Some(LinkLayer::InfiniBand) => 1,
        Some(LinkLayer::Ethernet) => 2,
        Some(LinkLayer::Unknown(code)) => code,
    }
}

/// `port`'s flap counters into `*counters`, ready for
/// `rw_machine_handle_counters`: 0, `ENOENT` while none was ever set on
/// the port (`rw_sim_set_flap_counters`: a driver without them), `ENODEV`
/// once it hung up.
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_query_counters(
    context: *mut rw_sim_context,
    port: u32,
    counters: *mut rw_sim_port_counters,
) -> i32 {
    with_context(context, |c| {
        if counters.is_null() {
            return Err(crate::status::null("counters"));
        }
        let read = match c.device.flap_counters(port8(port)?) {
            Ok(read) => read,
            Err(e) if e.kind() == io::ErrorKind::Unsupported => {
                let why = format_args!("the flap counters of port {port} of {}: none was set", c.handle.name());
                return Ok(errno_because(libc::ENOENT, why));
            }
            Err(e) => return Ok(failed(format_args!("the flap counters of port {port} of {}", c.handle.name()), &e)),
        };
        let none = |v: Option<u64>| v.unwrap_or(RW_COUNTER_NONE);
        let out = rw_sim_port_counters {
            link_downed: none(read.link_downed),
            carrier_changes: none(read.carrier_changes),
            carrier_down: none(read.carrier_down),
        };
        // SAFETY: checked non-null; the caller passes writable counters.
        unsafe { put(counters, out, "counters") }?;
        Ok(0)
    })
}

/// The carrier of `port`'s netdev into `*carrier`, ready for
/// `rw_machine_handle_port_reading`: 0; `ENOENT` while none was ever set
/// on the port (no netdev: `*carrier` is `RW_CARRIER_UNKNOWN`); `ENODEV`
/// once it hung up, `EINVAL` for a port it does not have (`*carrier`
/// untouched, as `rw_sim_query_port` leaves its answer).
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_query_carrier(context: *mut rw_sim_context, port: u32, carrier: *mut rw_carrier) -> i32 {
    with_context(context, |c| {
        if carrier.is_null() {
            return Err(crate::status::null("carrier"));
        }
        let (read, errno) = match c.device.carrier(port8(port)?) {
            Ok(read) => (Some(read), 0),
            Err(e) if e.kind() == io::ErrorKind::Unsupported => {
                let why = format_args!("the carrier of port {port} of {}: none was set (no netdev)", c.handle.name());
                (None, errno_because(libc::ENOENT, why))
            }
            Err(e) => return Ok(failed(format_args!("the carrier of port {port} of {}", c.handle.name()), &e)),
        };
        // SAFETY: checked non-null; the caller passes a writable rw_carrier.
        unsafe { put(carrier, rw_carrier::of(read), "carrier") }?;
        Ok(errno)
    })
}
