//! Simulated devices for tests of embedding 2 (`rw_monitor_start_sim`):
//! real non-blocking fds the monitor waits on, scripted from C.

use std::ffi::c_char;

use railwatch_core::PortState;
use railwatch_sim_backend::{PortSpec, SimDevice, SimHandle};

use crate::args::{handle, put, take, text};
use crate::limits::RW_SIM_MAX_REPEAT;
use crate::status::{Error, Result, guard, guard_void, rw_status};

/// A simulated host: devices whose async fds are real pipes. Made by
/// [`rw_sim_new`], destroyed by [`rw_sim_free`], before or after the
/// monitors started over it (they hold what they read). Any thread may
/// script it.
pub struct rw_sim {
    /// Behind a lock: devices may be added while other threads script.
    handles: std::sync::Mutex<Vec<SimHandle>>,
}

impl rw_sim {
    /// The devices so far (handles share their device).
    pub(crate) fn handles(&self) -> Vec<SimHandle> {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<SimHandle>> {
        self.handles.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// What happened to one simulated device so far.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct rw_sim_counters {
    /// Events queued (every repeat counted).
    pub queued: u64,
    /// Events read by the monitor.
    pub read: u64,
    /// Events acknowledged (right after each read, as libibverbs users
    /// must).
    pub acked: u64,
    /// Reads, including failed ones (EAGAIN included).
    pub gets: u64,
    /// Port queries.
    pub port_queries: u64,
    /// Link reads.
    pub link_queries: u64,
    /// A monitor holds the device open (false once the monitor closed it,
    /// or was freed).
    pub open: bool,
    /// Events never read: pushed while the device was not open (refused
    /// with `RW_ERR_STATE`, or the events of `rw_sim_port_down` /
    /// `rw_sim_port_up` then), or still queued when it was closed.
    pub dropped: u64,
}

/// Makes an empty simulated host into `*out`.
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_new(out: *mut *mut rw_sim) -> rw_status {
    crate::status::quiet_panics();
    guard(|| {
        if out.is_null() {
            return Err(crate::status::null("out"));
        }
        // SAFETY: checked non-null; the caller passes a writable pointer.
        unsafe { put(out, Box::into_raw(Box::new(rw_sim { handles: Default::default() })), "out") }
    })
}

/// Destroys the simulated host at `*sim` and sets `*sim` to NULL; NULL
/// (either) is ignored. Monitors started over it keep running (they hold
/// its devices' fds, not the host).
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_free(sim: *mut *mut rw_sim) {
    // SAFETY: NULL or the address of a handle, by the API's contract.
    let Some(sim) = (unsafe { take(sim) }) else { return };
    guard_void(|| {
        // SAFETY: made by `rw_sim_new`, destroyed once, by the API's
        // contract.
        drop(unsafe { Box::from_raw(sim) });
    });
}

/// Adds a device called `name` with ports 1..=`nports`, each ACTIVE at
/// NDR 4x (400 Gb/s); its index (0, 1, ... in the order added) into
/// `*device`. Add every device before starting a monitor over the host:
/// one added later is not seen by it.
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_add_device(
    sim: *const rw_sim,
    name: *const c_char,
    nports: u32,
    device: *mut u32,
) -> rw_status {
    guard(|| {
        // SAFETY: a live sim or NULL, by the API's contract.
        let sim = unsafe { handle(sim, "sim") }?;
        // SAFETY: a NUL-terminated name, by the API's contract.
        let name = unsafe { text(name, "name") }?;
        if device.is_null() {
            return Err(crate::status::null("device"));
        }
        if !(1..=255).contains(&nports) {
            return Err(Error::new(rw_status::RW_ERR_INVALID, format!("nports {nports} (need 1..=255)")));
        }
        let mut handles = sim.lock();
        if name.is_empty() || name.contains('/') || handles.iter().any(|h| h.name() == name) {
            return Err(Error::new(
                rw_status::RW_ERR_INVALID,
                format!("device name {name:?}: empty, has a '/', or taken"),
            ));
        }
        let ports: Vec<PortSpec> = (1..=nports as u8).map(PortSpec::active).collect();
        let dev = SimDevice::new(name, &ports)?;
        handles.push(dev.handle());
        let index = u32::try_from(handles.len() - 1).unwrap_or(u32::MAX);
        drop(handles);
        // SAFETY: checked non-null; the caller passes a writable u32.
        unsafe { put(device, index, "device") }
    })
}

/// With device `device` of the host.
fn with_device(sim: *const rw_sim, device: u32, body: impl FnOnce(&SimHandle) -> Result<()>) -> rw_status {
    guard(|| {
        // SAFETY: a live sim or NULL, by the API's contract.
        let sim = unsafe { handle(sim, "sim") }?;
        let h = sim
            .lock()
            .get(device as usize)
            .cloned()
            .ok_or_else(|| Error::new(rw_status::RW_ERR_RANGE, format!("the sim has no device {device}")))?;
        body(&h)
    })
}

/// With device `device` of the host and one of its ports.
fn with_port(sim: *const rw_sim, device: u32, port: u32, body: impl FnOnce(&SimHandle, u8) -> Result<()>) -> rw_status {
    with_device(sim, device, |h| {
        let port8 = u8::try_from(port).ok().filter(|p| h.ports().contains(p));
        let port8 =
            port8.ok_or_else(|| Error::new(rw_status::RW_ERR_RANGE, format!("{} has no port {port}", h.name())))?;
        body(h, port8)
    })
}

/// Queues `repeat` copies of the event (`code`, `element`: the port number
/// for port events, an object's pointer value for QP/CQ/SRQ/WQ events) on
/// the device's async fd. `repeat` is at most `RW_SIM_MAX_REPEAT`
/// (`RW_ERR_RANGE` above). Only an open device queues events, as the
/// kernel only queues them on an open context: before a monitor (or
/// `rw_sim_open`) opened it, or once it was closed, the call returns
/// `RW_ERR_STATE` and the events are counted as dropped
/// (`rw_sim_counters.dropped`).
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_push_event(
    sim: *const rw_sim,
    device: u32,
    code: u32,
    element: u64,
    repeat: u64,
) -> rw_status {
    with_device(sim, device, |h| {
        check_repeat(repeat, "repeat")?;
        let event = crate::machine::checked_event(code, element)?;
        if h.queue(event, repeat) == 0 && repeat > 0 {
            return Err(Error::new(
                rw_status::RW_ERR_STATE,
                format!("{} is not open (nobody opened it yet, or it was closed): {repeat} event(s) dropped", h.name()),
            ));
        }
        Ok(())
    })
}

/// `RW_ERR_RANGE` for a count above `RW_SIM_MAX_REPEAT`.
fn check_repeat(n: u64, arg: &str) -> Result<()> {
    if n > RW_SIM_MAX_REPEAT {
        return Err(Error::new(
            rw_status::RW_ERR_RANGE,
            format!("{arg}: {n} is more than RW_SIM_MAX_REPEAT ({RW_SIM_MAX_REPEAT})"),
        ));
    }
    Ok(())
}

/// Sets what a query of `port` returns (`ibv_port_state`), without any
/// event: a port that comes back silently.
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_set_port_state(sim: *const rw_sim, device: u32, port: u32, state: u32) -> rw_status {
    with_port(sim, device, port, |h, p| {
        h.set_port_state(p, PortState::from_code(state));
        Ok(())
    })
}

/// `port` goes DOWN and `PORT_ERR` is queued for it (dropped, and
/// counted so, while the device is not open: the state changes either
/// way).
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_port_down(sim: *const rw_sim, device: u32, port: u32) -> rw_status {
    with_port(sim, device, port, |h, p| {
        h.port_down(p);
        Ok(())
    })
}

/// `port` goes ACTIVE and `PORT_ACTIVE` is queued for it (dropped, and
/// counted so, while the device is not open).
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_port_up(sim: *const rw_sim, device: u32, port: u32) -> rw_status {
    with_port(sim, device, port, |h, p| {
        h.port_up(p);
        Ok(())
    })
}

/// The next `n` reads of the device's fd fail with EINTR (`n` at most
/// `RW_SIM_MAX_REPEAT`).
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_eintr(sim: *const rw_sim, device: u32, n: u64) -> rw_status {
    with_device(sim, device, |h| {
        check_repeat(n, "n")?;
        h.eintr(n);
        Ok(())
    })
}

/// From now on reads of the device's fd fail with EIO (port queries still
/// answer).
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_eio(sim: *const rw_sim, device: u32) -> rw_status {
    with_device(sim, device, |h| {
        h.eio();
        Ok(())
    })
}

/// The device leaves the host silently (as Soft-RoCE does: only the device
/// list and a uevent change).
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_unplug(sim: *const rw_sim, device: u32) -> rw_status {
    with_device(sim, device, |h| {
        h.unplug();
        Ok(())
    })
}

/// The device comes back (a new device of the same name).
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_plug(sim: *const rw_sim, device: u32) -> rw_status {
    with_device(sim, device, |h| {
        h.plug();
        Ok(())
    })
}

/// The device's counters into `*counters`. (Not `rw_sim_counters`: C
/// keeps typedef and function names in one namespace, and that is the
/// struct's.)
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_get_counters(sim: *const rw_sim, device: u32, counters: *mut rw_sim_counters) -> rw_status {
    with_device(sim, device, |h| {
        let c = h.counters();
        let out = rw_sim_counters {
            queued: c.queued,
            read: c.read,
            acked: c.acked,
            gets: c.gets,
            port_queries: c.port_queries,
            link_queries: c.link_queries,
            open: h.is_open(),
            dropped: c.dropped,
        };
        // SAFETY: the caller passes writable counters or NULL.
        unsafe { put(counters, out, "counters") }
    })
}
