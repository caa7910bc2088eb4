//! The engine's selector from C: two callbacks the monitor calls on its
//! thread.

use std::cell::RefCell;
use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use railwatch_core::{LinkRate, RailId, Selector};

use crate::notify::mbps;

/// The engine's rail selector, called on the monitor thread only (the
/// calls for the devices attached at start too, made there after
/// `rw_monitor_start_*` returned, before any event is read): `user` is
/// passed back as is. Either function may be NULL.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rw_selector {
    /// Passed to both functions.
    pub user: *mut c_void,
    /// The rail (`device`, `port`) may (or may no longer) be picked.
    pub set_available: Option<extern "C" fn(user: *mut c_void, device: u32, port: u32, available: bool)>,
    /// The rail's rate, Mb/s (0: unknown): before the rail is made
    /// available when its rate was never told since its device attached,
    /// or changed (not again when it comes back at the rate it had).
    pub reseed: Option<extern "C" fn(user: *mut c_void, device: u32, port: u32, rate_mbps: u64)>,
}

/// The C selector as the monitor's [`Selector`]. While the monitor starts
/// (the attach runs on the caller's thread) it holds the calls; the
/// monitor thread makes them, in order, before it reads any event
/// ([`CSelector::release`]), so every call runs on the monitor thread.
pub(super) struct CSelector {
    c: rw_selector,
    /// `Some` until released: the calls held meanwhile.
    held: RefCell<Option<Vec<Call>>>,
    /// Set by `rw_monitor_free`: no call is made from then on, not even
    /// the rest of the wake-up that freed it from inside a call.
    stopped: Arc<AtomicBool>,
}

/// A selector call held while the monitor starts.
#[derive(Debug, Clone, Copy)]
enum Call {
    Available(RailId, bool),
    Reseed(RailId, LinkRate),
}

// SAFETY: the selector's functions and `user` are only used on the monitor
// thread (calls made while it starts are held, not made); the API documents
// that they are called there, so the engine makes `user` safe to use from
// that thread. The held calls are plain data.
unsafe impl Send for CSelector {}

impl CSelector {
    /// A selector that holds its calls until [`release`](Self::release),
    /// and makes none once `stopped` is set.
    pub(super) fn holding(c: rw_selector, stopped: Arc<AtomicBool>) -> CSelector {
        CSelector { c, held: RefCell::new(Some(Vec::new())), stopped }
    }

    /// On the monitor thread: makes the calls held so far, in order; from
    /// now on every call is made at once.
    pub(super) fn release(&self) {
        let held = self.held.borrow_mut().take().unwrap_or_default();
        for call in held {
            self.make(call);
        }
    }

    /// Holds `call` while starting, else makes it.
    fn call(&self, call: Call) {
        if let Some(held) = self.held.borrow_mut().as_mut() {
            held.push(call);
            return;
        }
        self.make(call);
    }

    fn make(&self, call: Call) {
        // Set on this thread by a free from inside a call, or on another
        // one by a free that then joins this thread.
        if self.stopped.load(Ordering::Acquire) {
            return;
        }
        match call {
            Call::Available(rail, available) => {
                if let Some(f) = self.c.set_available {
                    f(self.c.user, rail.device, u32::from(rail.port), available);
                }
            }
            Call::Reseed(rail, rate) => {
                if let Some(f) = self.c.reseed {
                    f(self.c.user, rail.device, u32::from(rail.port), mbps(Some(rate)));
                }
            }
        }
    }
}

impl Selector for CSelector {
    fn set_available(&self, rail: RailId, available: bool) {
        self.call(Call::Available(rail, available));
    }

    fn reseed(&self, rail: RailId, rate: LinkRate) {
        self.call(Call::Reseed(rail, rate));
    }
}
