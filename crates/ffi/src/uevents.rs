//! Device uevents and carrier changes as an fd for an engine's own epoll
//! set: the kernel's (netlink sockets), or a simulated host's twins of
//! them, so an engine's code that follows devices appearing and leaving,
//! and netdev carriers, runs unchanged in a test. One handle type,
//! `rw_uevents`, carries either kind; `rw_carrier_read` reads a port's
//! carrier on the host.

use railwatch_sim_backend::SimHost;

use std::ffi::c_char;

use crate::args::{handle, handle_mut, put, put_new, take, text};
use crate::machine::rw_carrier;
use crate::sim::rw_sim;
use crate::status::{Error, Result, guard, guard_errno, guard_void, rw_status};

/// The device uevents of the host (`rw_uevents_open`) or of a simulated
/// one (`rw_sim_uevents_open`): readable when devices may have appeared or
/// left; or the carrier changes of either (`rw_carrier_events_open`,
/// `rw_sim_carrier_events_open`): readable when a netdev's carrier may
/// have changed. Destroyed by [`rw_uevents_free`]; one thread at a time.
pub struct rw_uevents {
    source: Source,
}

enum Source {
    #[cfg(feature = "verbs")]
    Kernel(railwatch_verbs_backend::UeventSocket),
    Sim(SimHost),
    #[cfg(feature = "verbs")]
    KernelLinks(railwatch_verbs_backend::LinkSocket),
    SimCarriers(SimHost),
}

/// Opens the kernel's uevent socket into `*out` (no privilege is needed).
/// `RW_ERR_UNSUPPORTED` when built without the `verbs` feature; `RW_ERR_IO`
/// when the kernel refuses the socket (a container may): rescan the device
/// list on a timer instead.
#[unsafe(no_mangle)]
pub extern "C" fn rw_uevents_open(out: *mut *mut rw_uevents) -> rw_status {
    crate::status::quiet_panics();
    guard(|| {
        // SAFETY: the caller passes a writable pointer or NULL.
        unsafe { put_new(out, || Ok(rw_uevents { source: kernel()? })) }
    })
}

#[cfg(feature = "verbs")]
fn kernel() -> Result<Source> {
    let socket = railwatch_verbs_backend::UeventSocket::open()
        .map_err(|e| Error::new(rw_status::RW_ERR_IO, format!("the uevent socket: {e}")))?;
    Ok(Source::Kernel(socket))
}

#[cfg(not(feature = "verbs"))]
fn kernel() -> Result<Source> {
    Err(Error::new(rw_status::RW_ERR_UNSUPPORTED, "railwatch was built without the `verbs` feature"))
}

/// Opens the kernel's link-message socket (rtnetlink `RTMGRP_LINK`; no
/// privilege is needed) into `*out`: readable when a netdev's carrier may
/// have changed; after `rw_uevents_drain` says so, read each port's
/// carrier (`rw_carrier_read`) and hand those that changed to
/// `rw_machine_handle_carrier`. At most 64 messages are read per drain.
/// `RW_ERR_UNSUPPORTED` without the `verbs` feature; `RW_ERR_IO` when the
/// kernel refuses the socket: read carriers with port queries only.
#[unsafe(no_mangle)]
pub extern "C" fn rw_carrier_events_open(out: *mut *mut rw_uevents) -> rw_status {
    crate::status::quiet_panics();
    guard(|| {
        // SAFETY: the caller passes a writable pointer or NULL.
        unsafe { put_new(out, || Ok(rw_uevents { source: kernel_links()? })) }
    })
}

#[cfg(feature = "verbs")]
fn kernel_links() -> Result<Source> {
    let socket = railwatch_verbs_backend::LinkSocket::open()
        .map_err(|e| Error::new(rw_status::RW_ERR_IO, format!("the link-message socket: {e}")))?;
    Ok(Source::KernelLinks(socket))
}

#[cfg(not(feature = "verbs"))]
fn kernel_links() -> Result<Source> {
    Err(Error::new(rw_status::RW_ERR_UNSUPPORTED, "railwatch was built without the `verbs` feature"))
}

/// The carrier of the netdev under `device`'s `port` on this host (sysfs:
/// its `operstate`, or its `carrier` flag where that is `unknown`) into
/// `*carrier`, ready for `rw_machine_handle_port_reading`: 0, or `ENOENT`
/// for a port with no netdev (an InfiniBand port; `*carrier` is then
/// `RW_CARRIER_UNKNOWN`); `EINVAL` for a device name that is not one (`.`
/// and `..` included) or a port outside 1..=255, with `rw_last_error`
/// naming it; `ENOSYS` without the `verbs` feature. `*carrier` is written
/// only with 0 and `ENOENT`.
#[unsafe(no_mangle)]
pub extern "C" fn rw_carrier_read(device: *const c_char, port: u32, carrier: *mut rw_carrier) -> i32 {
    guard_errno(|| {
        // SAFETY: NULL or a NUL-terminated string, by the API's contract.
        let name = unsafe { text(device, "device") }?;
        if carrier.is_null() {
            return Err(crate::status::null("carrier"));
        }
        let (read, errno) = match host_carrier(name, port)? {
            Ok(read) => (Some(read), 0),
            Err(libc::ENOENT) => {
                let why = format_args!("the carrier of {name}/{port}: no netdev (or no such device)");
                (None, crate::status::errno_because(libc::ENOENT, why))
            }
            Err(errno) => return Ok(crate::status::errno_because(errno, format_args!("the carrier of {name}/{port}"))),
        };
        // SAFETY: checked non-null; the caller passes a writable rw_carrier.
        unsafe { put(carrier, rw_carrier::of(read), "carrier") }?;
        Ok(errno)
    })
}

/// The carrier of `name`'s `port` read on the host (or the errno of the
/// read); an error for arguments that name no port.
#[cfg(feature = "verbs")]
fn host_carrier(name: &str, port: u32) -> Result<std::result::Result<railwatch_core::Carrier, i32>> {
    let port = u8::try_from(port)
        .ok()
        .filter(|&p| p != 0)
        .ok_or_else(|| Error::new(rw_status::RW_ERR_RANGE, format!("port {port} (need 1..=255)")))?;
    crate::args::device_name(name, "device")?;
    Ok(railwatch_verbs_backend::read_carrier(std::path::Path::new("/sys"), name, port).map_err(|_| libc::ENOENT))
}

#[cfg(not(feature = "verbs"))]
fn host_carrier(_name: &str, _port: u32) -> Result<std::result::Result<railwatch_core::Carrier, i32>> {
    Ok(Err(libc::ENOSYS))
}

/// The carrier changes of the simulated host `sim` into `*out`: readable
/// after every `rw_sim_set_carrier` with `notify` of its devices (those
/// added before this call), drained with `rw_uevents_drain`.
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_carrier_events_open(sim: *const rw_sim, out: *mut *mut rw_uevents) -> rw_status {
    crate::status::quiet_panics();
    guard(|| {
        // SAFETY: a live sim or NULL, by the API's contract.
        let sim = unsafe { handle(sim, "sim") }?;
        // SAFETY: the caller passes a writable pointer or NULL.
        unsafe { put_new(out, || Ok(rw_uevents { source: Source::SimCarriers(SimHost::new(sim.handles())?) })) }
    })
}

/// The uevents of the simulated host `sim` into `*out`: readable after
/// every `rw_sim_unplug` and `rw_sim_plug` of its devices (those added
/// before this call), drained with `rw_uevents_drain`, so that an engine
/// then lists the devices (`rw_sim_device_list`) as it would the host's.
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_uevents_open(sim: *const rw_sim, out: *mut *mut rw_uevents) -> rw_status {
    crate::status::quiet_panics();
    guard(|| {
        // SAFETY: a live sim or NULL, by the API's contract.
        let sim = unsafe { handle(sim, "sim") }?;
        // SAFETY: the caller passes a writable pointer or NULL.
        unsafe { put_new(out, || Ok(rw_uevents { source: Source::Sim(SimHost::new(sim.handles())?) })) }
    })
}

/// The fd (non-blocking), for epoll: add it edge-triggered and call
/// [`rw_uevents_drain`] after every wake-up. -1 for NULL.
#[unsafe(no_mangle)]
pub extern "C" fn rw_uevents_fd(uevents: *const rw_uevents) -> i32 {
    // SAFETY: a live handle or NULL, by the API's contract.
    match unsafe { uevents.as_ref() }.map(|u| &u.source) {
        #[cfg(feature = "verbs")]
        Some(Source::Kernel(socket)) => socket.fd(),
        Some(Source::Sim(host)) => host.fd(),
        #[cfg(feature = "verbs")]
        Some(Source::KernelLinks(socket)) => socket.fd(),
        Some(Source::SimCarriers(host)) => host.carrier_fd(),
        None => -1,
    }
}

/// Reads every pending uevent (to EAGAIN) and writes to `*changed` whether
/// the device list may have changed (an `infiniband` or
/// `infiniband_verbs` uevent, uevents lost, or a simulated plug or
/// unplug): then list the devices and hand the list to
/// `rw_machine_handle_device_list`. On a carrier-events handle: whether a
/// carrier may have changed (a link message, messages lost, a notified
/// `rw_sim_set_carrier`): then read the ports' carriers.
#[unsafe(no_mangle)]
pub extern "C" fn rw_uevents_drain(uevents: *mut rw_uevents, changed: *mut bool) -> rw_status {
    guard(|| {
        // SAFETY: a live handle or NULL, used by one thread at a time.
        let u = unsafe { handle_mut(uevents, "uevents") }?;
        if changed.is_null() {
            return Err(crate::status::null("changed"));
        }
        let may_have_changed = match &mut u.source {
            #[cfg(feature = "verbs")]
            Source::Kernel(socket) => socket.drain(),
            Source::Sim(host) => host.drain(),
            #[cfg(feature = "verbs")]
            Source::KernelLinks(socket) => socket.drain(),
            Source::SimCarriers(host) => host.drain_carriers(),
        }
        .map_err(|e| Error::new(rw_status::RW_ERR_IO, format!("reading uevents: {e}")))?;
        // SAFETY: checked non-null; the caller passes a writable bool.
        unsafe { put(changed, may_have_changed, "changed") }
    })
}

/// Closes the uevents at `*uevents` and sets `*uevents` to NULL; NULL
/// (either) is ignored.
#[unsafe(no_mangle)]
pub extern "C" fn rw_uevents_free(uevents: *mut *mut rw_uevents) {
    // SAFETY: NULL or the address of a handle, by the API's contract.
    let Some(uevents) = (unsafe { take(uevents) }) else { return };
    guard_void(|| {
        // SAFETY: made by `rw_uevents_open` or `rw_sim_uevents_open`,
        // destroyed once, by the API's contract.
        drop(unsafe { Box::from_raw(uevents) });
    });
}
