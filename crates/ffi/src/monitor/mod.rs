//! Embedding 2: railwatch owns a thread. A monitor over libibverbs devices
//! (or simulated ones) drains every device, runs the policy, calls the
//! engine's selector and subscribers on its thread, and publishes a
//! snapshot and gates that any thread reads without waiting for it.

mod published;
mod reports;
mod selector;
mod subscribers;

use std::ffi::c_char;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use railwatch_core::{DeviceSource, RailId, TransferReport, VerbsPort};
use railwatch_runtime::{Monitor, MonitorHandle, NewMonitorError, SystemClock};
use railwatch_sim_backend::SimHost;

use crate::args::{handle, put, take, text};
use crate::config::{read, rw_config};
use crate::sim::rw_sim;
use crate::status::{Error, Result, guard, rw_status};

pub use published::*;
pub use reports::*;
pub use selector::rw_selector;
pub use subscribers::*;

use published::Shared;
use selector::CSelector;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic on another thread while holding it leaves plain data behind.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The running monitor, whatever its devices.
trait Running: Send {
    /// Asks the thread to stop after what it is doing; does not wait.
    fn request_stop(&self);
    /// Stops and joins the thread.
    fn stop(self: Box<Self>);
    /// Hands the thread transfer outcomes on `rail`; does not wait.
    fn report_transfers(&self, rail: RailId, reports: &[TransferReport]) -> std::io::Result<()>;
    /// Hands the thread a granted probe's outcome; does not wait.
    fn report_probe(&self, rail: RailId, succeeded: bool) -> std::io::Result<()>;
}

impl<P: VerbsPort + Send + 'static> Running for MonitorHandle<P, CSelector, SystemClock> {
    fn request_stop(&self) {
        MonitorHandle::request_stop(self);
    }

    fn report_transfers(&self, rail: RailId, reports: &[TransferReport]) -> std::io::Result<()> {
        MonitorHandle::report_transfers(self, rail, reports)
    }

    fn report_probe(&self, rail: RailId, succeeded: bool) -> std::io::Result<()> {
        MonitorHandle::report_probe(self, rail, succeeded)
    }

    fn stop(self: Box<Self>) {
        drop(self);
    }
}

/// A monitor running on its own thread. Made by `rw_monitor_start_verbs`
/// or `rw_monitor_start_sim`, destroyed by [`rw_monitor_free`]. Any thread
/// may use it, including the monitor thread from inside a callback.
pub struct rw_monitor {
    /// Taken by `rw_monitor_free`, through a shared reference: a callback
    /// on the monitor thread may be using the handle meanwhile.
    running: Mutex<Option<Box<dyn Running>>>,
    /// This monitor's number, which its thread keeps in [`MONITOR_THREAD`].
    id: u64,
    shared: Arc<Shared>,
    /// The selector's: set by `rw_monitor_free`, it makes no call after.
    selector_stopped: Arc<AtomicBool>,
}

/// Numbers monitors, so that a thread can tell which one it runs.
static NEXT_MONITOR: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// On a monitor thread, its monitor's number (0 elsewhere). A plain
    /// cell: `std::thread::current()` would give a thread the host made a
    /// handle that is never freed (valgrind: 48 bytes "possibly lost").
    static MONITOR_THREAD: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

impl rw_monitor {
    fn on_monitor_thread(&self) -> bool {
        MONITOR_THREAD.with(|t| t.get()) == self.id
    }
}

/// Builds, starts and boxes a monitor over `source`'s devices.
fn start<P: VerbsPort + Send + 'static>(
    config: *const rw_config,
    selector: *const rw_selector,
    source: Box<dyn DeviceSource<Device = P>>,
    rescan_every: Duration,
    out: *mut *mut rw_monitor,
) -> Result<()> {
    if out.is_null() {
        return Err(crate::status::null("out"));
    }
    // SAFETY: NULL or a config, by the API's contract.
    let config = unsafe { read(config) }?.runtime()?;
    // SAFETY: NULL or a selector, by the API's contract.
    let selector = unsafe { selector.as_ref() }.copied().unwrap_or(rw_selector {
        user: std::ptr::null_mut(),
        set_available: None,
        reseed: None,
    });
    let selector_stopped = Arc::new(AtomicBool::new(false));
    let selector = CSelector::holding(selector, selector_stopped.clone());
    let mut monitor = Monitor::new(config, selector, SystemClock::new()).map_err(|e| match e {
        NewMonitorError::Config(e) => Error::new(rw_status::RW_ERR_INVALID, format!("rw_config: {e}")),
        NewMonitorError::Io(e) => e.into(),
    })?;
    let notes = monitor.subscribe_unbounded();
    // The attach runs here; the selector holds its calls for the thread.
    monitor.watch_devices(source, rescan_every)?;
    let shared = Arc::new(Shared::default());
    shared.publish(&monitor);
    // Subscriptions hear what happens from when they are made: nobody
    // could subscribe to the attach, and its outcome is in the snapshot.
    notes.try_iter().for_each(drop);
    let publisher = shared.clone();
    let id = NEXT_MONITOR.fetch_add(1, Ordering::Relaxed);
    let latch = Arc::new(Latch::default());
    let opened = latch.clone();
    // Opened when this function ends, however it ends (a panic included:
    // the handle's drop joins the thread, which must not wait for ever).
    let handed_out = OpenOnDrop(latch);
    let mut first = true;
    let handle = monitor.spawn_with(move |m| {
        if std::mem::take(&mut first) {
            MONITOR_THREAD.with(|t| t.set(id));
            // Not before the caller has the handle, so that a callback can
            // call back in (and one that takes a lock the caller holds
            // around start waits for it, on this thread).
            opened.wait();
            m.selector().release();
        }
        publisher.after_wake(m, &notes)
    })?;
    let running = Mutex::new(Some(Box::new(handle) as Box<dyn Running>));
    let boxed = Box::into_raw(Box::new(rw_monitor { running, id, shared, selector_stopped }));
    // SAFETY: checked non-null; the caller passes a writable pointer.
    let written = unsafe { put(out, boxed, "out") };
    drop(handed_out);
    written
}

/// Opens its latch when dropped.
struct OpenOnDrop(Arc<Latch>);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.open();
    }
}

/// A one-way gate between two threads: a mutex and a condition variable,
/// so that the host's thread opening it makes no thread handle (a
/// channel's send would: valgrind, 48 bytes "possibly lost").
#[derive(Default)]
struct Latch {
    open: Mutex<bool>,
    opened: std::sync::Condvar,
}

impl Latch {
    fn open(&self) {
        *lock(&self.open) = true;
        self.opened.notify_all();
    }

    fn wait(&self) {
        let mut open = lock(&self.open);
        while !*open {
            open = self.opened.wait(open).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// Starts a monitor over the host's libibverbs devices (every device, or
/// only the one called `only_device` when not NULL), following devices as
/// they appear and leave (the kernel's uevents; a rescan every 5 s where
/// there are none). `config` and `selector` may be NULL (the defaults; no
/// selector). `RW_ERR_INVALID` for an `only_device` that cannot be a
/// device's name (empty, over 63 bytes, with a `/`, whitespace or a
/// control character). `RW_ERR_UNSUPPORTED` when built without the
/// `verbs` feature.
#[unsafe(no_mangle)]
pub extern "C" fn rw_monitor_start_verbs(
    config: *const rw_config,
    selector: *const rw_selector,
    only_device: *const c_char,
    out: *mut *mut rw_monitor,
) -> rw_status {
    crate::status::quiet_panics();
    guard(|| {
        // SAFETY: NULL or a NUL-terminated name, by the API's contract.
        let only = if only_device.is_null() { None } else { Some(unsafe { text(only_device, "only_device") }?) };
        if let Some(name) = only {
            crate::args::device_name(name, "only_device")?;
        }
        start_verbs(config, selector, only, out)
    })
}

#[cfg(feature = "verbs")]
fn start_verbs(
    config: *const rw_config,
    selector: *const rw_selector,
    only: Option<&str>,
    out: *mut *mut rw_monitor,
) -> Result<()> {
    let (source, no_uevents) = railwatch_verbs_backend::HostDevices::new(only.map(str::to_owned));
    if let Some(e) = no_uevents {
        log::warn!("no device uevents ({e}); re-reading the device list every 5 s");
    }
    start(config, selector, Box::new(source), Duration::from_secs(5), out)
}

#[cfg(not(feature = "verbs"))]
fn start_verbs(
    _config: *const rw_config,
    _selector: *const rw_selector,
    _only: Option<&str>,
    _out: *mut *mut rw_monitor,
) -> Result<()> {
    Err(Error::new(rw_status::RW_ERR_UNSUPPORTED, "railwatch was built without the `verbs` feature"))
}

/// Starts a monitor over the devices of the simulated host `sim` (add them
/// all first). The host stays the caller's, to script while the monitor
/// runs; the monitor holds what it reads, so either may be freed first.
#[unsafe(no_mangle)]
pub extern "C" fn rw_monitor_start_sim(
    config: *const rw_config,
    selector: *const rw_selector,
    sim: *const rw_sim,
    out: *mut *mut rw_monitor,
) -> rw_status {
    crate::status::quiet_panics();
    guard(|| {
        // SAFETY: a live sim or NULL, by the API's contract.
        let sim = unsafe { handle(sim, "sim") }?;
        let host = SimHost::new(sim.handles())?;
        start(config, selector, Box::new(host), Duration::from_secs(3600), out)
    })
}

/// Stops the monitor at `*monitor`, joins its thread, destroys it and sets
/// `*monitor` to NULL (first: a second call through the same pointer, or
/// one from a callback meanwhile, finds NULL); NULL (either) is ignored
/// (`RW_OK`). The handle is gone after this call, whatever it returns. From another
/// thread: subscriber calls in flight finish first, the thread is joined,
/// and no callback (selector or subscriber) runs after it returns. From
/// the monitor thread itself (inside a callback), where it cannot join its
/// own thread: it stops the monitor there and then (no selector or
/// subscriber call happens after it returns, except the rest of the
/// calling callback), and a short-lived thread joins the monitor thread
/// once that callback returns.
#[unsafe(no_mangle)]
pub extern "C" fn rw_monitor_free(monitor: *mut *mut rw_monitor) -> rw_status {
    // SAFETY: NULL or the address of a handle, by the API's contract.
    let Some(monitor) = (unsafe { take(monitor) }) else { return rw_status::RW_OK };
    let status = guard(|| {
        // SAFETY: a live monitor, by the API's contract; only a shared
        // reference until the end, since a callback on the monitor thread
        // may hold one too.
        let m = unsafe { handle(monitor, "monitor") }?;
        let on_thread = m.on_monitor_thread();
        // No selector call is made from now on: from inside one, not the
        // rest of the wake-up's calls (the other rails of the attach, or
        // of a device taken out together) either.
        m.selector_stopped.store(true, Ordering::Release);
        // No subscriber is called from now on. The list is taken out
        // before waiting, so a callback that (un)subscribes meanwhile does
        // not wait for this thread.
        let subscribers = std::mem::take(&mut *lock(&m.shared.subscribers));
        for s in &subscribers {
            s.active.store(false, Ordering::Release);
        }
        if !on_thread {
            for s in &subscribers {
                drop(lock(&s.in_call));
            }
        }
        let running = lock(&m.running).take();
        if let Some(running) = running {
            if on_thread {
                // Stopped now: after this callback the thread exits
                // instead of reading events again. It cannot join itself;
                // a helper thread does.
                running.request_stop();
                let slot = Arc::new(Mutex::new(Some(running)));
                let joiner = slot.clone();
                let spawned = std::thread::Builder::new().name("railwatch-stop".into()).spawn(move || {
                    if let Some(r) = lock(&joiner).take() {
                        r.stop();
                    }
                });
                if spawned.is_err() {
                    // No thread to join it: it stops by itself, detached
                    // (dropping the handle here would join this thread).
                    if let Some(r) = lock(&slot).take() {
                        std::mem::forget(r);
                    }
                }
            } else {
                running.stop();
            }
        }
        Ok(())
    });
    // SAFETY: made by `start`, destroyed once, by the API's contract; the
    // thread is stopped (or stopping, when called from it), so nothing
    // else of ours uses it.
    crate::status::guard_void(|| drop(unsafe { Box::from_raw(monitor) }));
    status
}
