//! # railwatch-runtime
//!
//! The monitor that keeps rails usable. It owns every device's async-event
//! fd in one mio `Poll` (edge-triggered), drains each to `EAGAIN` on every
//! wake-up, retries `EINTR`, stops reading an fd that fails (falling back to
//! polling its ports) instead of spinning, runs a recovery tick that re-reads
//! the port state of paused rails, and drives one activation path: resume →
//! re-seed bandwidth if changed → mark available.
//!
//! Outputs: the engine's [`Selector`](railwatch_core::Selector), [`Gate`]s
//! for worker threads, a bounded channel of [`Notification`]s, and a
//! [`Snapshot`] of every rail and counter.
//!
//! ```
//! use std::sync::Arc;
//! use railwatch_runtime::{BandwidthSelector, Config, Monitor, SystemClock};
//! # use railwatch_core::{AsyncEvent, LinkAttrs, PortState, VerbsPort};
//! # struct NoDevice;
//! # impl VerbsPort for NoDevice {
//! #     fn name(&self) -> &str { "none" }
//! #     fn ports(&self) -> Vec<u8> { vec![] }
//! #     fn async_fd(&self) -> std::os::fd::RawFd { -1 }
//! #     fn get_event(&mut self) -> std::io::Result<AsyncEvent> { Err(std::io::ErrorKind::WouldBlock.into()) }
//! #     fn port_state(&mut self, _: u8) -> std::io::Result<PortState> { Ok(PortState::Active) }
//! #     fn link(&mut self, _: u8) -> std::io::Result<LinkAttrs> { Ok(LinkAttrs::default()) }
//! #     fn close(&mut self) {}
//! #     fn reopen(&mut self) -> std::io::Result<()> { Ok(()) }
//! # }
//!
//! let selector = Arc::new(BandwidthSelector::new());
//! let mut monitor: Monitor<NoDevice, _, _> =
//!     Monitor::new(Config::default(), selector.clone(), SystemClock::new())?;
//! // monitor.add_device(device) for each opened device (the verbs backend,
//! // or the simulator in tests); then either drive it from your loop…
//! monitor.poll_once(Some(std::time::Duration::ZERO))?;
//! // …or give it a thread.
//! let handle = monitor.spawn()?;
//! let monitor = handle.shutdown()?;
//! assert_eq!(monitor.snapshot().rails.len(), 0);
//! assert_eq!(selector.aggregate_gbps(), None);
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! `crates/runtime/examples/engine.rs` is a complete engine-side example
//! against simulated devices that flap.

mod clock;
mod config;
mod device;
mod drain;
mod monitor;
mod notify;
mod rail;
mod selector;
mod snapshot;
mod spawn;

pub use clock::{Clock, SystemClock};
pub use config::Config;
pub use device::{DeviceCounters, DeviceMode};
pub use drain::{DrainEnd, DrainReport, drain};
pub use monitor::Monitor;
pub use notify::{Cause, Happening, Notification, RecoveredBy};
pub use railwatch_core::Gate;
pub use selector::BandwidthSelector;
pub use snapshot::{DeviceSnapshot, RailSnapshot, Snapshot};
pub use spawn::MonitorHandle;
