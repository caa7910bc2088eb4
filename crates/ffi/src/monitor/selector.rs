//! The engine's selector from C: two callbacks the monitor calls on its
//! thread.

use std::ffi::c_void;

use railwatch_core::{LinkRate, RailId, Selector};

use crate::notify::mbps;

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
pub(super) struct CSelector(pub(super) rw_selector);

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
