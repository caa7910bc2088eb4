//! # railwatch-runtime
//!
//! The monitor that keeps rails usable: the driver of core's
//! [`Machine`]. It owns every device's async-event fd in one mio `Poll`
//! (edge-triggered), drains each to `EAGAIN` on every wake-up, retries
//! `EINTR`, reads the clock, and carries out what the machine decides:
//! port queries, link reads, closing and re-opening devices, the engine's
//! [`Selector`], [`Gate`]s for worker threads, [`Notification`]s to
//! subscribers and a [`Snapshot`] of every rail and counter.
//!
//! Everything an engine needs is re-exported here, so one `use` does.
//!
//! ```
//! use std::sync::Arc;
//! use railwatch_runtime::{BandwidthSelector, Config, Monitor, SystemClock};
//! # use railwatch_runtime::{AsyncEvent, LinkAttrs, PortState, VerbsPort};
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
//! // or the simulator in tests); subscribe if you want notifications;
//! let notes = monitor.subscribe();
//! // then either drive it from your loop…
//! monitor.poll_once(Some(std::time::Duration::ZERO))?;
//! // …or give it a thread, and ask the handle for snapshots and gates.
//! let handle = monitor.spawn()?;
//! assert_eq!(handle.snapshot()?.rails.len(), 0);
//! drop(handle); // stops and joins the thread
//! assert!(notes.try_recv().is_err());
//! assert_eq!(selector.aggregate_gbps(), None);
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! What front ends print is defined here too, once: [`json`] encodes a
//! snapshot, [`lines`] is the JSON lines vocabulary of docs/JSON.md.
//!
//! `crates/runtime/examples/engine.rs` is a complete engine-side example
//! against simulated devices that flap.

mod clock;
mod config;
mod device;
mod drain;
mod hotplug;
pub mod lines;
mod monitor;
mod notify;
mod observe;
mod selector;
mod snapshot;
mod spawn;

pub use clock::SystemClock;
pub use config::{Config, DEFAULT_DRAIN_BUDGET, MAX_DRAIN_BUDGET, MAX_NOTIFY_CAPACITY};
pub use device::DeviceCounters;
pub use drain::{DrainEnd, DrainReport, drain, drain_with};
pub use hotplug::{DeviceSource, Rescan};
pub use monitor::{Monitor, NewMonitorError, OnTransition, errno_of, log_text};
pub use observe::{Observed, Observer};
pub use selector::BandwidthSelector;
pub use snapshot::{DeviceSnapshot, HostCondition, HostSnapshot, RailSnapshot, Snapshot};
pub use snapshot::{json, state};
pub use spawn::MonitorHandle;

// The engine-facing types of core, so an engine needs one `use`.
pub use railwatch_core::{
    AsyncEvent, Cause, Clock, ConfigError, DampingConfig, DataPathConfig, DeviceMode, DeviceOwner, Element, Errno,
    EventKind, Gate, Gid, GidType, Happening, LinkAttrs, LinkLayer, LinkRate, Machine, MachineConfig, Millis,
    NoSelector, Notification, ObjectHandle, PauseReason, PortAddress, PortCounters, PortState, Problem, RailId,
    RailIdentity, RailState, RailWord, RecoveredBy, Rejection, Selector, Setting, SettingKind, SettingValue, Ticket,
    TransferReport, VerbsPort, WcClass,
};
