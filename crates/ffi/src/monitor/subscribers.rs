//! Subscriptions: C callbacks the monitor thread calls with every
//! notification, and ending them without racing a call in flight.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::args::{handle, put};
use crate::notify::rw_notification;
use crate::status::{Error, guard, rw_status};

use super::{lock, rw_monitor};

/// A notification callback: runs on the monitor thread, with `user` as
/// given to `rw_monitor_subscribe`; the notification lives for the call.
pub type rw_notify_fn = Option<extern "C" fn(user: *mut c_void, notification: *const rw_notification)>;

/// One subscriber.
pub(super) struct Subscriber {
    pub(super) id: u64,
    pub(super) callback: extern "C" fn(*mut c_void, *const rw_notification),
    pub(super) user: *mut c_void,
    pub(super) active: AtomicBool,
    /// Held while the callback runs: unsubscribing from another thread
    /// waits on it.
    pub(super) in_call: Mutex<()>,
}

// SAFETY: `user` is only passed to the callback, on the monitor thread;
// the engine made it safe to use there by subscribing it.
unsafe impl Send for Subscriber {}
// SAFETY: as above; the other fields are atomics and a mutex.
unsafe impl Sync for Subscriber {}

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
