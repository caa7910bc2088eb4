//! Embedding 2: railwatch owns a thread. A monitor over libibverbs devices
//! (or simulated ones) drains every device, runs the policy, calls the
//! engine's selector and subscribers on its thread, and publishes a
//! snapshot and gates that any thread reads without waiting for it.

use std::collections::HashMap;
use std::ffi::{CString, c_char, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use railwatch_core::{DeviceSource, Gate, LinkRate, Notification, RailId, Selector, VerbsPort};
use railwatch_runtime::{Monitor, MonitorHandle, NewMonitorError, Snapshot, SystemClock};
use railwatch_sim_backend::SimHost;

use crate::args::{handle, put, text};
use crate::config::{read, rw_config};
use crate::gate::{port_code, reason_of, rw_gate, state_of};
use crate::notify::{by_code, mbps, notification, rw_notification};
use crate::sim::rw_sim;
use crate::status::{Error, Result, guard, rw_status};

/// The engine's rail selector, called on the monitor thread: `user` is
/// passed back as is. Either function may be NULL.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rw_selector {
    /// Passed to both functions.
    pub user: *mut c_void,
    /// The rail (`device`, `port`) may (or may no longer) be picked.
    pub set_available: Option<extern "C" fn(user: *mut c_void, device: u32, port: u32, available: bool)>,
    /// The rail's rate, Mb/s (0: unknown); always before it is made
    /// available.
    pub reseed: Option<extern "C" fn(user: *mut c_void, device: u32, port: u32, rate_mbps: u64)>,
}

/// The C selector as the monitor's [`Selector`].
struct CSelector(rw_selector);

// SAFETY: the selector's functions and `user` are only used on the monitor
// thread; the API documents that they are called there, so the engine
// makes `user` safe to use from that thread.
unsafe impl Send for CSelector {}

impl Selector for CSelector {
    fn set_available(&self, rail: RailId, available: bool) {
        if let Some(f) = self.0.set_available {
            f(self.0.user, rail.device, u32::from(rail.port), available);
        }
    }

    fn reseed(&self, rail: RailId, rate: LinkRate) {
        if let Some(f) = self.0.reseed {
            f(self.0.user, rail.device, u32::from(rail.port), mbps(Some(rate)));
        }
    }
}

/// A notification callback: runs on the monitor thread, with `user` as
/// given to `rw_monitor_subscribe`; the notification lives for the call.
pub type rw_notify_fn = Option<extern "C" fn(user: *mut c_void, notification: *const rw_notification)>;

/// One subscriber.
struct Subscriber {
    id: u64,
    callback: extern "C" fn(*mut c_void, *const rw_notification),
    user: *mut c_void,
    active: AtomicBool,
    /// Held while the callback runs: unsubscribing from another thread
    /// waits on it.
    in_call: Mutex<()>,
}

// SAFETY: `user` is only passed to the callback, on the monitor thread;
// the engine made it safe to use there by subscribing it.
unsafe impl Send for Subscriber {}
// SAFETY: as above; the other fields are atomics and a mutex.
unsafe impl Sync for Subscriber {}

/// What the monitor thread publishes for every other thread.
#[derive(Default)]
struct Shared {
    snapshot: Mutex<Option<Snapshot>>,
    /// Every rail's gate by name (a name that came back with other ports
    /// maps to its latest rail), and how many rails it was built from.
    gates: Mutex<(usize, HashMap<String, Gate>)>,
    subscribers: Mutex<Vec<Arc<Subscriber>>>,
    next_id: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic on another thread while holding it leaves plain data behind.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    /// On the monitor thread after every wake-up: publish, then dispatch.
    fn after_wake<P: VerbsPort, S: Selector>(
        &self,
        monitor: &mut Monitor<P, S, SystemClock>,
        notes: &crossbeam_channel::Receiver<Notification>,
        first: &mut bool,
    ) {
        let batch: Vec<Notification> = notes.try_iter().collect();
        if !batch.is_empty() || std::mem::take(first) {
            *lock(&self.snapshot) = Some(monitor.snapshot());
            let rails = monitor.rails();
            let mut gates = lock(&self.gates);
            if gates.0 != rails.len() {
                gates.0 = rails.len();
                // In the order added: a later rail of the same name wins.
                for (id, name) in rails {
                    if let Some(g) = monitor.gate(id) {
                        gates.1.insert(name, g);
                    }
                }
            }
        }
        if batch.is_empty() {
            return;
        }
        let subscribers = lock(&self.subscribers).clone();
        for n in &batch {
            let c = notification(n);
            for s in &subscribers {
                let _in_call = lock(&s.in_call);
                if s.active.load(Ordering::Acquire) {
                    (s.callback)(s.user, &c);
                }
            }
        }
    }
}

/// The running monitor, whatever its devices.
trait Running: Send {
    /// Asks the thread to stop after what it is doing; does not wait.
    fn request_stop(&self);
    /// Stops and joins the thread.
    fn stop(self: Box<Self>);
}

impl<P: VerbsPort + Send + 'static> Running for MonitorHandle<P, CSelector, SystemClock> {
    fn request_stop(&self) {
        MonitorHandle::request_stop(self);
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
    let mut monitor = Monitor::new(config, CSelector(selector), SystemClock::new()).map_err(|e| match e {
        NewMonitorError::Config(e) => Error::new(rw_status::RW_ERR_INVALID, format!("rw_config: {e}")),
        NewMonitorError::Io(e) => e.into(),
    })?;
    let notes = monitor.subscribe_unbounded();
    monitor.watch_devices(source, rescan_every)?;
    let shared = Arc::new(Shared::default());
    let publisher = shared.clone();
    let mut first = true;
    let id = NEXT_MONITOR.fetch_add(1, Ordering::Relaxed);
    let handle = monitor.spawn_with(move |m| {
        if first {
            MONITOR_THREAD.with(|t| t.set(id));
        }
        publisher.after_wake(m, &notes, &mut first)
    })?;
    let boxed = Box::into_raw(Box::new(rw_monitor { running: Mutex::new(Some(Box::new(handle))), id, shared }));
    // SAFETY: checked non-null; the caller passes a writable pointer.
    unsafe { put(out, boxed, "out") }
}

/// Starts a monitor over the host's libibverbs devices (every device, or
/// only the one called `only_device` when not NULL), following devices as
/// they appear and leave (the kernel's uevents; a rescan every 5 s where
/// there are none). `config` and `selector` may be NULL (the defaults; no
/// selector). `RW_ERR_UNSUPPORTED` when built without the `verbs` feature.
#[unsafe(no_mangle)]
pub extern "C" fn rw_monitor_start_verbs(
    config: *const rw_config,
    selector: *const rw_selector,
    only_device: *const c_char,
    out: *mut *mut rw_monitor,
) -> rw_status {
    guard(|| {
        // SAFETY: NULL or a NUL-terminated name, by the API's contract.
        let only = if only_device.is_null() { None } else { Some(unsafe { text(only_device, "only_device") }?) };
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
        log_warn(&format!("no device uevents ({e}); re-reading the device list every 5 s"));
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

#[cfg(feature = "verbs")]
fn log_warn(text: &str) {
    eprintln!("railwatch: {text}");
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
    guard(|| {
        // SAFETY: a live sim or NULL, by the API's contract.
        let sim = unsafe { handle(sim, "sim") }?;
        let host = SimHost::new(sim.handles())?;
        start(config, selector, Box::new(host), Duration::from_secs(3600), out)
    })
}

/// Stops the monitor, joins its thread and destroys it; NULL is ignored.
/// The handle is gone after this call, whatever it returns. From another
/// thread: subscriber calls in flight finish first, the thread is joined,
/// and no callback (selector or subscriber) runs after it returns. From
/// the monitor thread itself (inside a callback), where it cannot join its
/// own thread: it stops the monitor there and then (no selector or
/// subscriber call happens after it returns, except the rest of the
/// calling callback), and a short-lived thread joins the monitor thread
/// once that callback returns.
#[unsafe(no_mangle)]
pub extern "C" fn rw_monitor_free(monitor: *mut rw_monitor) -> rw_status {
    if monitor.is_null() {
        return rw_status::RW_OK;
    }
    let status = guard(|| {
        // SAFETY: a live monitor, by the API's contract; only a shared
        // reference until the end, since a callback on the monitor thread
        // may hold one too.
        let m = unsafe { handle(monitor, "monitor") }?;
        let on_thread = m.on_monitor_thread();
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

/// Calls `callback(user, notification)` on the monitor thread for every
/// notification from now on; its id into `*id` (may be NULL). A callback
/// may call any `rw_*` function, `rw_monitor_free` of its own monitor
/// included.
#[unsafe(no_mangle)]
pub extern "C" fn rw_monitor_subscribe(
    monitor: *const rw_monitor,
    callback: rw_notify_fn,
    user: *mut c_void,
    id: *mut u64,
) -> rw_status {
    guard(|| {
        // SAFETY: a live monitor or NULL, by the API's contract.
        let m = unsafe { handle(monitor, "monitor") }?;
        let callback = callback.ok_or_else(|| crate::status::null("callback"))?;
        let sid = m.shared.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let sub = Subscriber { id: sid, callback, user, active: AtomicBool::new(true), in_call: Mutex::new(()) };
        lock(&m.shared.subscribers).push(Arc::new(sub));
        if !id.is_null() {
            // SAFETY: checked non-null; the caller passes a writable u64.
            unsafe { put(id, sid, "id") }?;
        }
        Ok(())
    })
}

/// Ends subscription `id`. From another thread it waits for a call in
/// flight, so after it returns the callback never runs again and its
/// `user` may be freed; from inside a callback (the monitor thread) it
/// returns at once and no further call is made.
#[unsafe(no_mangle)]
pub extern "C" fn rw_monitor_unsubscribe(monitor: *const rw_monitor, id: u64) -> rw_status {
    guard(|| {
        // SAFETY: a live monitor or NULL, by the API's contract.
        let m = unsafe { handle(monitor, "monitor") }?;
        let sub = {
            let mut subs = lock(&m.shared.subscribers);
            let at = subs
                .iter()
                .position(|s| s.id == id)
                .ok_or_else(|| Error::new(rw_status::RW_ERR_NOT_FOUND, format!("no subscription {id}")))?;
            subs.remove(at)
        };
        sub.active.store(false, Ordering::Release);
        if !m.on_monitor_thread() {
            drop(lock(&sub.in_call));
        }
        Ok(())
    })
}

/// A gate for the rail called `rail` (`"mlx5_0/1"`) into `*gate`.
/// `RW_ERR_NOT_FOUND` when there is no such rail (yet: devices attach on
/// the monitor thread).
#[unsafe(no_mangle)]
pub extern "C" fn rw_monitor_gate(
    monitor: *const rw_monitor,
    rail: *const c_char,
    gate: *mut *mut rw_gate,
) -> rw_status {
    guard(|| {
        // SAFETY: a live monitor or NULL, and a NUL-terminated name, by the
        // API's contract.
        let (m, rail) = unsafe { (handle(monitor, "monitor")?, text(rail, "rail")?) };
        if gate.is_null() {
            return Err(crate::status::null("gate"));
        }
        let g = lock(&m.shared.gates)
            .1
            .get(rail)
            .cloned()
            .ok_or_else(|| Error::new(rw_status::RW_ERR_NOT_FOUND, format!("no rail {rail:?}")))?;
        // SAFETY: checked non-null; the caller passes a writable pointer.
        unsafe { put(gate, rw_gate::boxed(g), "gate") }
    })
}

/// The longest rail name `rw_rail_info.name` holds, NUL included.
pub const RW_RAIL_NAME_MAX: usize = 80;

/// One rail in a snapshot.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rw_rail_info {
    /// `"mlx5_0/1"`, NUL-terminated (truncated to fit).
    pub name: [c_char; RW_RAIL_NAME_MAX],
    /// Device index.
    pub device: u32,
    /// Port number.
    pub port: u32,
    /// `rw_rail_state`.
    pub state: u32,
    /// `rw_pause_reason`.
    pub reason: u32,
    /// The last port state read (`RW_WORD_PORT_NONE`: never).
    pub port_state: u32,
    /// `rw_recovered_by` of its last activation, or -1 if none.
    pub recovered_by: i32,
    /// Its generation.
    pub generation: u64,
    /// Whether the selector may pick it.
    pub available: bool,
    /// The rate seeded into the selector, Mb/s (0: none or unknown).
    pub rate_mbps: u64,
    /// Since when (ms since the monitor started).
    pub since_ms: u64,
}

fn published(m: &rw_monitor) -> Result<Snapshot> {
    lock(&m.shared.snapshot)
        .clone()
        .ok_or_else(|| Error::new(rw_status::RW_ERR_STATE, "the monitor has not published a snapshot yet"))
}

/// Copies the latest snapshot's rails into `rails` (room for `capacity`)
/// and their number into `*count`. When there are more than `capacity`, it
/// copies none and returns `RW_ERR_BUFFER` with `*count` the number
/// needed. Never waits for the monitor thread: the snapshot is the one it
/// published after its last wake-up.
#[unsafe(no_mangle)]
pub extern "C" fn rw_monitor_snapshot(
    monitor: *const rw_monitor,
    rails: *mut rw_rail_info,
    capacity: usize,
    count: *mut usize,
) -> rw_status {
    guard(|| {
        // SAFETY: a live monitor or NULL, by the API's contract.
        let m = unsafe { handle(monitor, "monitor") }?;
        let snap = published(m)?;
        // SAFETY: the caller passes a writable count or NULL.
        unsafe { put(count, snap.rails.len(), "count") }?;
        if snap.rails.len() > capacity {
            return Err(Error::new(
                rw_status::RW_ERR_BUFFER,
                format!("{} rails, room for {capacity}", snap.rails.len()),
            ));
        }
        if snap.rails.is_empty() {
            return Ok(());
        }
        if rails.is_null() {
            return Err(crate::status::null("rails"));
        }
        for (i, r) in snap.rails.iter().enumerate() {
            let mut name = [0 as c_char; RW_RAIL_NAME_MAX];
            for (d, &b) in name.iter_mut().zip(r.name.as_bytes().iter().take(RW_RAIL_NAME_MAX - 1)) {
                *d = b as c_char;
            }
            let info = rw_rail_info {
                name,
                device: r.id.device,
                port: u32::from(r.id.port),
                state: state_of(r.state) as u32,
                reason: reason_of(r.reason) as u32,
                port_state: port_code(r.last_port_state),
                recovered_by: r.recovered_by.map_or(-1, |b| by_code(b) as i32),
                generation: r.generation,
                available: r.available,
                rate_mbps: mbps(r.rate),
                since_ms: r.since.0,
            };
            // SAFETY: `i < len <= capacity` elements of `rails`, which the
            // caller made writable.
            unsafe { rails.add(i).write(info) };
        }
        Ok(())
    })
}

/// The latest snapshot as JSON into `*json`, a string to release with
/// `rw_string_free`: one object, its fields documented in docs/JSON.md
/// ("Snapshot"), the same encoding as `railwatch watch`'s summary.
#[unsafe(no_mangle)]
pub extern "C" fn rw_monitor_snapshot_json(monitor: *const rw_monitor, json: *mut *mut c_char) -> rw_status {
    guard(|| {
        // SAFETY: a live monitor or NULL, by the API's contract.
        let m = unsafe { handle(monitor, "monitor") }?;
        if json.is_null() {
            return Err(crate::status::null("json"));
        }
        let snapshot = published(m)?;
        let text = serde_json::to_string(&railwatch_runtime::json::SnapshotJson::of(&snapshot))
            .map_err(|e| Error::new(rw_status::RW_ERR_INVALID, e.to_string()))?;
        let c = CString::new(text).map_err(|e| Error::new(rw_status::RW_ERR_INVALID, e.to_string()))?;
        // SAFETY: checked non-null; the caller passes a writable pointer.
        unsafe { put(json, c.into_raw(), "json") }
    })
}

/// Releases a string this library returned; NULL is ignored.
#[unsafe(no_mangle)]
pub extern "C" fn rw_string_free(s: *mut c_char) {
    if s.is_null() {
        return;
    }
    crate::status::guard_void(|| {
        // SAFETY: made by `CString::into_raw` here, released once, by the
        // API's contract.
        drop(unsafe { CString::from_raw(s) });
    });
}
