//! A simulated host, scripted from C, for tests of both embeddings: its
//! devices' async fds are real pipes, so readiness, edge-triggering and
//! `EAGAIN` are the kernel's. A monitor runs over it
//! (`rw_monitor_start_sim`), or an engine's own loop opens its devices
//! (`rw_sim_open`, [`context`]) as it would open libibverbs devices, and
//! follows its device list (`rw_sim_device_list`, `rw_sim_uevents_open`).

mod context;
mod script;

use std::ffi::{CString, c_char};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use railwatch_sim_backend::{PortSpec, SimDevice, SimHandle};

use crate::args::{handle, put, put_new, take, text};
use crate::limits::RW_MAX_DEVICES;
use crate::status::{Error, Result, guard, guard_void, rw_status};

pub use context::*;
pub use script::*;

/// A simulated host: devices whose async fds are real pipes. Made by
/// [`rw_sim_new`], destroyed by [`rw_sim_free`], before or after the
/// monitors started over it and the contexts opened on it (they hold what
/// they read). Any thread may script it.
pub struct rw_sim {
    /// Behind a lock: devices may be added while other threads script.
    devices: Mutex<Vec<Device>>,
}

/// One simulated device: the script's handle, its name for C, and what an
/// engine's contexts did with its events.
struct Device {
    handle: SimHandle,
    name: CString,
    engine: Arc<EngineCounts>,
}

/// What contexts (`rw_sim_open`) did with a device's events: the backend
/// acknowledges each as it reads it (as the monitor does), an engine's own
/// loop acknowledges later, or not, or twice.
#[derive(Debug, Default)]
pub(crate) struct EngineCounts {
    /// Events a context read.
    pub(crate) read: AtomicU64,
    /// Of them, acknowledged (`rw_sim_ack_event`).
    pub(crate) acked: AtomicU64,
    /// Acknowledgements with no event left to acknowledge.
    pub(crate) bad_acks: AtomicU64,
    /// Reads of an empty queue on a blocking fd (the real call would block
    /// for ever).
    pub(crate) blocking_gets: AtomicU64,
}

impl rw_sim {
    /// The devices so far (handles share their device).
    pub(crate) fn handles(&self) -> Vec<SimHandle> {
        self.lock().iter().map(|d| d.handle.clone()).collect()
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Device>> {
        self.devices.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The device called `name`: its handle and its engine's counts.
    fn named(&self, name: &str) -> Option<(SimHandle, Arc<EngineCounts>)> {
        self.lock().iter().find(|d| d.handle.name() == name).map(|d| (d.handle.clone(), d.engine.clone()))
    }
}

/// What happened to one simulated device so far.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct rw_sim_counters {
    /// Events queued (every repeat counted).
    pub queued: u64,
    /// Events read (by a monitor or a context).
    pub read: u64,
    /// Events acknowledged: a monitor acknowledges each right after
    /// reading it, as libibverbs users must; through a context, what the
    /// engine acknowledged (`rw_sim_ack_event`).
    pub acked: u64,
    /// Reads, including failed ones (EAGAIN included).
    pub gets: u64,
    /// Port queries.
    pub port_queries: u64,
    /// Link reads.
    pub link_queries: u64,
    /// A monitor or a context holds the device open (false once it closed
    /// it, or was freed).
    pub open: bool,
    /// Events never read: pushed while the device was not open (refused
    /// with `RW_ERR_STATE`, or the events of `rw_sim_port_down` /
    /// `rw_sim_port_up` then), or still queued when it was closed.
    pub dropped: u64,
    /// Events read through a context and not acknowledged (yet).
    pub unacked: u64,
    /// `rw_sim_ack_event` calls with nothing left to acknowledge.
    pub bad_acks: u64,
    /// Reads through a context of an empty queue while its fd was still
    /// blocking: the real `ibv_get_async_event` would have blocked for ever
    /// there (the engine forgot `O_NONBLOCK`). Answered `EDEADLK`.
    pub blocking_gets: u64,
}

/// Makes an empty simulated host into `*out`.
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_new(out: *mut *mut rw_sim) -> rw_status {
    crate::status::quiet_panics();
    guard(|| {
        // SAFETY: the caller passes a writable pointer or NULL.
        unsafe { put_new(out, || Ok(rw_sim { devices: Default::default() })) }
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
/// one added later is not seen by it. A name a device cannot have (empty,
/// over 63 bytes, with a `/`, whitespace or a control character, as the
/// kernel's device list refuses) or one already taken is `RW_ERR_INVALID`;
/// `nports` outside 1..=255 too; more than `RW_MAX_DEVICES` devices is
/// `RW_ERR_RANGE`.
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
        crate::args::device_name(name, "device name")?;
        let mut devices = sim.lock();
        if devices.iter().any(|d| d.handle.name() == name) {
            return Err(Error::new(rw_status::RW_ERR_INVALID, format!("device name {name:?} is taken")));
        }
        if devices.len() >= RW_MAX_DEVICES {
            return Err(Error::new(
                rw_status::RW_ERR_RANGE,
                format!("the sim has RW_MAX_DEVICES ({RW_MAX_DEVICES}) devices already"),
            ));
        }
        let ports: Vec<PortSpec> = (1..=nports as u8).map(PortSpec::active).collect();
        // Made open, dropped at once: closed until a monitor or a context
        // opens it.
        let handle = SimDevice::new(name, &ports)?.handle();
        let name = CString::new(name).map_err(|e| Error::new(rw_status::RW_ERR_INVALID, e.to_string()))?;
        devices.push(Device { handle, name, engine: Arc::default() });
        let index = u32::try_from(devices.len() - 1).unwrap_or(u32::MAX);
        drop(devices);
        // SAFETY: checked non-null; the caller passes a writable u32.
        unsafe { put(device, index, "device") }
    })
}

/// With device `device` of the host.
fn with_device(sim: *const rw_sim, device: u32, body: impl FnOnce(&SimHandle) -> Result<()>) -> rw_status {
    with_counted(sim, device, |h, _| body(h))
}

/// With device `device` of the host and its engine's counts.
fn with_counted(
    sim: *const rw_sim,
    device: u32,
    body: impl FnOnce(&SimHandle, &EngineCounts) -> Result<()>,
) -> rw_status {
    guard(|| {
        // SAFETY: a live sim or NULL, by the API's contract.
        let sim = unsafe { handle(sim, "sim") }?;
        let (h, engine) = sim
            .lock()
            .get(device as usize)
            .map(|d| (d.handle.clone(), d.engine.clone()))
            .ok_or_else(|| Error::new(rw_status::RW_ERR_RANGE, format!("the sim has no device {device}")))?;
        body(&h, &engine)
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

/// The device's counters into `*counters`. (Not `rw_sim_counters`: C
/// keeps typedef and function names in one namespace, and that is the
/// struct's.)
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_get_counters(sim: *const rw_sim, device: u32, counters: *mut rw_sim_counters) -> rw_status {
    with_counted(sim, device, |h, engine| {
        let c = h.counters();
        let load = |n: &AtomicU64| n.load(Ordering::Relaxed);
        // The backend acknowledged what contexts read as it read them;
        // count the engine's own acknowledgements instead.
        let (read, acked) = (load(&engine.read), load(&engine.acked));
        let out = rw_sim_counters {
            queued: c.queued,
            read: c.read,
            acked: c.acked.saturating_sub(read) + acked,
            gets: c.gets,
            port_queries: c.port_queries,
            link_queries: c.link_queries,
            open: h.is_open(),
            dropped: c.dropped,
            unacked: read.saturating_sub(acked),
            bad_acks: load(&engine.bad_acks),
            blocking_gets: load(&engine.blocking_gets),
        };
        // SAFETY: the caller passes writable counters or NULL.
        unsafe { put(counters, out, "counters") }
    })
}

/// The names of the devices the host lists now (not unplugged), as
/// `ibv_get_device_list` would give them, for an engine's own
/// `rw_machine_handle_device_list`: `*count` of them into `names` (room
/// for `capacity`), each valid until `rw_sim_free`. The buffer idiom:
/// `RW_ERR_BUFFER` (nothing written) when they do not fit, `*count` then
/// says how many; `capacity` 0 (`names` may be NULL) is the size query.
#[unsafe(no_mangle)]
pub extern "C" fn rw_sim_device_list(
    sim: *const rw_sim,
    names: *mut *const c_char,
    capacity: usize,
    count: *mut usize,
) -> rw_status {
    guard(|| {
        // SAFETY: a live sim or NULL, by the API's contract.
        let sim = unsafe { handle(sim, "sim") }?;
        let devices = sim.lock();
        let listed: Vec<*const c_char> =
            devices.iter().filter(|d| d.handle.is_listed()).map(|d| d.name.as_ptr()).collect();
        // SAFETY: the caller passes a writable count or NULL.
        unsafe { put(count, listed.len(), "count") }?;
        if listed.len() > capacity {
            return Err(Error::new(
                rw_status::RW_ERR_BUFFER,
                format!("{} devices listed, room for {capacity}", listed.len()),
            ));
        }
        if listed.is_empty() {
            return Ok(());
        }
        if names.is_null() {
            return Err(crate::status::null("names"));
        }
        // SAFETY: `listed.len() <= capacity` pointers at `names` are
        // writable, by the API's contract; each points into a CString the
        // sim keeps until it is freed.
        unsafe { std::ptr::copy_nonoverlapping(listed.as_ptr(), names, listed.len()) };
        Ok(())
    })
}
