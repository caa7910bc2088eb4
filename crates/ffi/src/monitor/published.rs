//! What the monitor thread publishes for every other thread (the latest
//! snapshot, every rail's gate) and what is read from it: a gate by name,
//! the snapshot as structs or JSON.

use std::collections::HashMap;
use std::ffi::{CString, c_char};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use railwatch_core::{Gate, Notification, RailId, Selector, VerbsPort};
use railwatch_runtime::{Monitor, Snapshot, SystemClock};

use crate::args::{handle, put, take, text};
use crate::gate::{port_code, reason_of, rw_gate, state_of};
use crate::notify::{by_code, mbps, notification};
use crate::status::{Error, Result, guard, rw_status};

use super::subscribers::Subscriber;
use super::{lock, rw_monitor};

/// Every rail's id and gate by its name.
type RailsByName = HashMap<String, (RailId, Gate)>;

/// What the monitor thread publishes for every other thread.
#[derive(Default)]
pub(super) struct Shared {
    snapshot: Mutex<Option<Snapshot>>,
    /// Every rail's id and gate by name (a name that came back with other
    /// ports maps to its latest rail), and how many rails it was built
    /// from.
    gates: Mutex<(usize, RailsByName)>,
    pub(super) subscribers: Mutex<Vec<Arc<Subscriber>>>,
    pub(super) next_id: AtomicU64,
}

impl Shared {
    /// The monitor's snapshot and gates, for every thread: by `start`
    /// before the thread runs, then on the thread after a wake-up that
    /// notified something.
    pub(super) fn publish<P: VerbsPort, S: Selector>(&self, monitor: &Monitor<P, S, SystemClock>) {
        *lock(&self.snapshot) = Some(monitor.snapshot());
        let rails = monitor.rails();
        let mut gates = lock(&self.gates);
        if gates.0 != rails.len() {
            gates.0 = rails.len();
            // In the order added: a later rail of the same name wins.
            for (id, name) in rails {
                if let Some(g) = monitor.gate(id) {
                    gates.1.insert(name, (id, g));
                }
            }
        }
    }

    /// The rail called `name`: its id and gate; `RW_ERR_NOT_FOUND` when
    /// there is none (yet).
    pub(super) fn rail(&self, name: &str) -> Result<(RailId, Gate)> {
        lock(&self.gates).1.get(name).cloned().ok_or_else(|| {
            Error::new(rw_status::RW_ERR_NOT_FOUND, format!("no rail {}", railwatch_core::shown_name(name)))
        })
    }

    /// On the monitor thread after every wake-up: publish, then dispatch.
    pub(super) fn after_wake<P: VerbsPort, S: Selector>(
        &self,
        monitor: &mut Monitor<P, S, SystemClock>,
        notes: &crossbeam_channel::Receiver<Notification>,
    ) {
        let batch: Vec<Notification> = notes.try_iter().collect();
        if batch.is_empty() {
            return;
        }
        self.publish(monitor);
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

/// A gate for the rail called `rail` (`"mlx5_0/1"`) into `*gate`.
/// `RW_ERR_NOT_FOUND` when there is no such rail (yet): the rails of the
/// devices that opened at start are there when `rw_monitor_start_*`
/// returns; those of devices that appear later once the monitor thread
/// attached them (a notification says so).
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
        let (_, g) = m.shared.rail(rail)?;
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
/// needed; `capacity` 0 (`rails` may then be NULL) is the size query.
/// Never waits for the monitor thread: the snapshot is the one it
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
        if count.is_null() {
            return Err(crate::status::null("count"));
        }
        if rails.is_null() && capacity > 0 {
            return Err(crate::status::null("rails"));
        }
        let snap = published(m)?;
        // SAFETY: checked non-null; the caller passes a writable count.
        unsafe { put(count, snap.rails.len(), "count") }?;
        if snap.rails.len() > capacity {
            return Err(Error::new(
                rw_status::RW_ERR_BUFFER,
                format!("{} rails, room for {capacity}", snap.rails.len()),
            ));
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

/// Releases the string at `*s` (one this library returned) and sets `*s`
/// to NULL; NULL (either) is ignored.
#[unsafe(no_mangle)]
pub extern "C" fn rw_string_free(s: *mut *mut c_char) {
    // SAFETY: NULL or the address of a string, by the API's contract.
    let Some(s) = (unsafe { take(s) }) else { return };
    crate::status::guard_void(|| {
        // SAFETY: made by `CString::into_raw` here, released once, by the
        // API's contract.
        drop(unsafe { CString::from_raw(s) });
    });
}
