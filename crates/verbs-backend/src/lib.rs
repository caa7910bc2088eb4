//! # railwatch-verbs-backend
//!
//! railwatch's [`VerbsPort`](railwatch_core::VerbsPort) over libibverbs
//! (through `rdma-sys`): the only railwatch crate that links rdma-core.
//!
//! - [`list_devices`] names the RDMA devices present. A kernel without RDMA
//!   support makes `ibv_get_device_list` fail with ENOSYS: that is an empty
//!   list, not an error.
//! - [`VerbsDevice::open`] opens one by name and sets its async-event fd
//!   `O_NONBLOCK`, ready to be registered edge-triggered by the monitor.
//! - [`VerbsDevice`] implements `VerbsPort`:
//!   - `get_event` reads one event, copies its raw `u32` code and its element
//!     (port number, or the cq/qp/srq/wq pointer as an opaque
//!     [`ObjectHandle`](railwatch_core::ObjectHandle)), acknowledges it
//!     exactly once, and returns the owned copy. EAGAIN is
//!     [`WouldBlock`](std::io::ErrorKind::WouldBlock), EINTR
//!     [`Interrupted`](std::io::ErrorKind::Interrupted); any other failure
//!     names the device and the call. A code the headers do not know (20 on
//!     rdma-core 44, 99 anywhere) is a value, never undefined behaviour.
//!   - `port_state` and `link` query the port into a zeroed struct; `link`
//!     adds `active_speed_ex` when built against rdma-core 49+
//!     ([`HAS_ACTIVE_SPEED_EX`]) and the effective speed from
//!     `ibv_query_port_speed` when the loaded libibverbs has it
//!     ([`has_effective_speed`], looked up at run time, never linked).
//!   - `close` and `reopen`.
//! - [`UeventSocket`] is the kernel's device uevents: a device that leaves
//!   (Soft-RoCE says nothing on its fd) or appears, so a monitor rescans
//!   [`list_devices`] without polling.
//! - [`event_name`] is what `ibv_event_type_str` says about a raw code.
//!
//! Errors are [`VerbsError`]s (device, call, errno); where the trait
//! demands `io::Result` they become [`std::io::Error`]s that keep the
//! message, and [`errno_of`] recovers the errno.
//!
//! ```no_run
//! use std::io::ErrorKind;
//! use railwatch_core::VerbsPort;
//! use railwatch_verbs_backend::{VerbsDevice, list_devices};
//!
//! for name in list_devices()? {
//!     let mut dev = VerbsDevice::open(&name)?;
//!     for port in dev.ports() {
//!         let state = dev.port_state(port)?;
//!         let rate = dev.link(port)?.rate();
//!         println!("{name}/{port}: {state}, {rate:?}");
//!     }
//!     // Drain: read until WouldBlock, retry Interrupted, stop on errors.
//!     loop {
//!         match dev.get_event() {
//!             Ok(ev) => println!("{name}: {} {:?}", ev.kind(), ev.element),
//!             Err(e) if e.kind() == ErrorKind::WouldBlock => break,
//!             Err(e) if e.kind() == ErrorKind::Interrupted => continue,
//!             Err(e) => return Err(e.into()),
//!         }
//!     }
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Testing without hardware
//!
//! build.rs compiles a fake `libibverbs.so.1` (fake/fake_ibverbs.c) into
//! `OUT_DIR`. The hidden `testing` module (test support, not API) locates
//! it and re-runs a test binary under it with `LD_LIBRARY_PATH`, so tests
//! go through the real FFI path: rdma-sys, this crate's raw reads, the
//! dynamic linker's symbol versions. tests/monitor.rs runs the runtime's monitor over fake devices
//! end to end (pause, recovery by event and by the poll, the five drain
//! cases, EIO fallback, removal and re-open); the `railwatch` CLI's
//! tests/verbs_e2e.rs runs the binary under the fake with
//! `testing::command_under_fake` and `FAKE_IBVERBS_*` variables.

// Every unsafe block is an FFI call or a raw read and carries a `// SAFETY:`
// comment (clippy::undocumented_unsafe_blocks is denied workspace-wide).
#![allow(unsafe_code)]
#![cfg_attr(not(test), deny(missing_docs))]

mod counters;
mod device;
mod error;
mod ffi;
mod host;
mod link_socket;
mod netdev;
mod reads;
// Test support for this workspace's tests, not API: hidden from the docs.
#[doc(hidden)]
pub mod testing;
mod uevent;

pub use counters::read_flap_counters;
pub use device::{VerbsDevice, list_devices};
pub use error::{VerbsError, errno_of};
pub use host::HostDevices;
pub use link_socket::LinkSocket;
pub use netdev::read_carrier;
pub use reads::{PortReads, RawContext, context_device_name};
pub use uevent::{UeventSocket, is_rdma_uevent};

/// Whether this build reads `active_speed_ex` (the installed `verbs.h` is
/// rdma-core 49 or later). Without it, XDR links report an unknown rate
/// unless the effective speed is available.
pub const HAS_ACTIVE_SPEED_EX: bool = cfg!(rdma_core_active_speed_ex);

/// What `ibv_event_type_str()` of the loaded libibverbs says about a raw
/// event code (`"port active"`, …; `"unknown"` for codes it does not know).
pub fn event_name(code: u32) -> &'static str {
    ffi::event_name(code)
}

/// Whether the loaded libibverbs exports `ibv_query_port_speed` (rdma-core
/// 62+), so [`link`](railwatch_core::VerbsPort::link) reports the effective,
/// LAG-aware speed.
pub fn has_effective_speed() -> bool {
    ffi::query_port_speed_fn().is_some()
}
