//! The monitor's record of one device: the backend, how its events reach
//! us (its mode) and its counters.

use std::collections::HashSet;

use railwatch_core::{Millis, VerbsPort};

/// How the monitor learns about a device's ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceMode {
    /// Its async fd is in the poll set; events are drained on wake-up.
    Events,
    /// Its fd failed but port queries work: the tick polls every rail of
    /// the device, active ones too, so a `PORT_ERR` is still seen.
    PollOnly,
    /// Gone (DEVICE_FATAL, or a read error confirmed by a failing port
    /// query): closed, its rails inert; re-opened with backoff (its own timer, not the tick).
    Gone {
        /// When the next re-open is attempted.
        next_reopen: Millis,
        /// The delay that led to `next_reopen`, doubled after a failure.
        backoff_ms: u64,
    },
}

impl DeviceMode {
    /// Lower-case name (`"poll_only"`).
    pub fn name(&self) -> &'static str {
        match self {
            DeviceMode::Events => "events",
            DeviceMode::PollOnly => "poll_only",
            DeviceMode::Gone { .. } => "gone",
        }
    }
}

/// Counters of one device.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceCounters {
    /// Events read (each acknowledged once by the backend).
    pub events: u64,
    /// `COMM_EST` events among them.
    pub comm_est: u64,
    /// Events with a code the decision table does not act on (unknown
    /// codes included).
    pub unhandled: u64,
    /// `get_event` calls.
    pub gets: u64,
    /// `EINTR`s retried.
    pub interrupted: u64,
    /// Drains that stopped on a real read error.
    pub read_errors: u64,
    /// Drains that hit the per-wake-up budget.
    pub budget_hits: u64,
    /// Port queries made by the recovery tick and the activation path.
    pub port_queries: u64,
    /// Re-open attempts, and how many succeeded.
    pub reopen_attempts: u64,
    /// Successful re-opens.
    pub reopens: u64,
}

/// One device under the monitor.
pub(crate) struct DeviceSlot<P> {
    pub(crate) port: P,
    pub(crate) name: String,
    pub(crate) mode: DeviceMode,
    /// Indices into the monitor's rail list.
    pub(crate) rails: Vec<usize>,
    pub(crate) counters: DeviceCounters,
    /// Codes already warned about (once per device and code).
    pub(crate) warned_codes: HashSet<u32>,
    /// Readiness said error or hang-up: confirm the device with a port query.
    pub(crate) suspect: bool,
    /// The budget ran out: service again before the next blocking wait.
    pub(crate) pending: bool,
    /// Events read so far by a drain that hit its budget.
    pub(crate) drained_in_progress: u64,
}

impl<P: VerbsPort> DeviceSlot<P> {
    pub(crate) fn new(port: P) -> DeviceSlot<P> {
        DeviceSlot {
            name: port.name().to_string(),
            port,
            mode: DeviceMode::Events,
            rails: Vec::new(),
            counters: DeviceCounters::default(),
            warned_codes: HashSet::new(),
            suspect: false,
            pending: false,
            drained_in_progress: 0,
        }
    }
}
