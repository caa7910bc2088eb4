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
//! - [`SimClock`] is a virtual clock for the monitor
//!   ([`Clock`](railwatch_runtime::Clock)).
//! - [`Scenario`] parses and validates scenario files (docs/SCENARIOS.md),
//!   builds their devices and applies their steps.
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
//! A scenario file, parsed, with its devices built and its first step
//! applied:
//!
//! ```
//! use railwatch_core::{EventKind, VerbsPort};
//! use railwatch_sim_backend::Scenario;
//!
//! let text = r#"
//! duration_ms = 2000
//!
//! [[device]]
//! name = "mlx5_0"
//! ports = [ { port = 1, state = "active", speed = "ndr", width = "4x" } ]
//!
//! [[step]]
//! at_ms = 100
//! device = "mlx5_0"
//! event = "comm_est"
//! object = 7
//! repeat = 5
//! "#;
//! let scenario = Scenario::parse(text, "burst.toml").unwrap();
//! assert_eq!(scenario.name, "burst");
//! let (mut devices, handles) = scenario.build_devices().unwrap();
//! assert_eq!(scenario.apply_step(&scenario.steps[0], &handles), 5);
//! assert_eq!(devices[0].get_event().unwrap().kind(), EventKind::CommEst);
//! ```

#![cfg_attr(not(test), deny(missing_docs))]

mod clock;
mod device;
pub mod driver;
#[allow(unsafe_code)]
mod fd;
pub mod scenario;

/// The simulator's wire format: one 16-byte record per event in a
/// non-blocking pipe. Public for benchmarks and tools that need the same
/// fd without the simulator around it (the floor of a drain benchmark).
pub mod record {
    pub use crate::fd::{RECORD_LEN, REQUESTED_PIPE_BYTES, decode, encode, record_pipe};
}

pub use clock::SimClock;
pub use device::{PortSpec, SimCounters, SimDevice, SimHandle};
pub use scenario::{Scenario, ScenarioError};
