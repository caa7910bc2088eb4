//! Devices that appear and leave while the monitor runs.
//!
//! A [`DeviceSource`] lists the host's devices, opens them, and (where the
//! kernel offers it) gives an fd that becomes readable when the list may
//! have changed: the netlink socket of the kernel's device uevents. The
//! monitor waits on that fd with the devices' own, so a healthy host still
//! has zero idle wake-ups; where there is no such fd it rescans the list on
//! a timer instead. Either way a change is found by comparing the list with
//! the devices the monitor has: a name that left is removed (its handle
//! closed at once: a driver that cannot disassociate its users, such as
//! Soft-RoCE, waits for it), a name that appeared is opened and added.

pub use railwatch_core::DeviceSource;

/// What a rescan found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Rescan {
    /// Devices that appeared and were added.
    pub added: Vec<String>,
    /// Devices that left and were removed.
    pub removed: Vec<String>,
    /// Devices that appeared but could not be opened (retried at the next
    /// rescan).
    pub failed: Vec<String>,
}
