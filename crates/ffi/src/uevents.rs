//! Device uevents as an fd for an engine's own epoll set: the kernel's (a
//! netlink socket), or a simulated host's twin of them, so an engine's
//! code that follows devices appearing and leaving runs unchanged in a
//! test.

use railwatch_sim_backend::SimHost;

use crate::args::{handle, handle_mut, put, take};
use crate::sim::rw_sim;
use crate::status::{Error, Result, guard, guard_void, rw_status};

/// The device uevents of the host (`rw_uevents_open`) or of a simulated
/// one (`rw_sim_uevents_open`): readable when devices may have appeared or
/// left. Destroyed by [`rw_uevents_free`]; one thread at a time.
pub struct rw_uevents {
    source: Source,
}

enum Source {
    #[cfg(feature = "verbs")]
    Kernel(railwatch_verbs_backend::UeventSocket),
    Sim(SimHost),
}

/// Opens the kernel's uevent socket into `*out` (no privilege is needed).
/// `RW_ERR_UNSUPPORTED` when built without the `verbs` feature; `RW_ERR_IO`
/// when the kernel refuses the socket (a container may): rescan the device
/// list on a timer instead.
#[unsafe(no_mangle)]
pub extern "C" fn rw_uevents_open(out: *mut *mut rw_uevents) -> rw_status {
    crate::status::quiet_panics();
    guard(|| {
        if out.is_null() {
            return Err(crate::status::null("out"));
        }
        let boxed = Box::into_raw(Box::new(rw_uevents { source: kernel()? }));
        // SAFETY: checked non-null; the caller passes a writable pointer.
        unsafe { put(out, boxed, "out") }
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
        if out.is_null() {
            return Err(crate::status::null("out"));
        }
        let boxed = Box::into_raw(Box::new(rw_uevents { source: Source::Sim(SimHost::new(sim.handles())?) }));
        // SAFETY: checked non-null; the caller passes a writable pointer.
        unsafe { put(out, boxed, "out") }
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
        None => -1,
    }
}

/// Reads every pending uevent (to EAGAIN) and writes to `*changed` whether
/// the device list may have changed (an `infiniband` or
/// `infiniband_verbs` uevent, uevents lost, or a simulated plug or
/// unplug): then list the devices and hand the list to
/// `rw_machine_handle_device_list`.
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
