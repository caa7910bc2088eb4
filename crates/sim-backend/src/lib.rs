//! # railwatch-sim-backend
//!
//! Scripted RDMA devices for railwatch, behind **real** non-blocking file
//! descriptors, so the monitor under test runs its production epoll and drain
//! code against the kernel's own readiness and `EAGAIN`:
//!
//! - [`SimDevice`] implements [`VerbsPort`](railwatch_core::VerbsPort) over a
//!   pipe (one 16-byte record per event); the monitor owns it.
//! - [`SimHandle`] is the script's side: queue events (a million on one
//!   device without blocking or losing any), change port states and link
//!   attributes silently or with an event, inject faults (`EINTR`, `EIO`,
//!   `EBADF`, removal, restore) and read the [`SimCounters`].
//! - [`SimClock`] is a virtual clock ([`Clock`](railwatch_core::Clock)).
//! - [`SimHost`] is the host's device list and the twin of the kernel's
//!   device uevents: devices unplugged and plugged back by the script.
//!
//! ```
//! use std::io;
//! use railwatch_core::{AsyncEvent, EventKind, PortState, VerbsPort};
//! use railwatch_sim_backend::{PortSpec, SimDevice};
//!
//! let mut dev = SimDevice::new("mlx5_0", &[PortSpec::active(1)])?;
//! let script = dev.handle();
//!
//! // The port drops: its state changes and PORT_ERR is queued in the pipe.
//! script.port_down(1);
//! assert!(dev.async_fd() >= 0);
//! assert_eq!(dev.get_event()?, AsyncEvent::port(EventKind::PortErr, 1));
//! assert_eq!(dev.port_state(1)?, PortState::Down);
//!
//! // Drained: the next read says so, like the kernel (EAGAIN).
//! assert_eq!(dev.get_event().unwrap_err().kind(), io::ErrorKind::WouldBlock);
//! let c = script.counters();
//! assert_eq!((c.queued, c.read, c.acked, c.gets), (1, 1, 1, 2));
//! # Ok::<(), io::Error>(())
//! ```
//!
//! Scenario files and the deterministic driver that steps a monitor over
//! these devices live in `railwatch-scenario`.

#![cfg_attr(not(test), deny(missing_docs))]

mod clock;
mod device;
#[allow(unsafe_code)]
mod fd;
mod host;

/// The simulator's wire format: one 16-byte record per event in a
/// non-blocking pipe. Public for benchmarks and tools that need the same
/// fd without the simulator around it (the floor of a drain benchmark).
pub mod record {
    pub use crate::fd::{RECORD_LEN, REQUESTED_PIPE_BYTES, decode, encode, record_pipe};
}

pub use clock::SimClock;
pub use device::{PortSpec, SimCounters, SimDevice, SimHandle};
pub use host::SimHost;
