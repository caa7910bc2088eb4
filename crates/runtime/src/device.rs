//! The driver's record of one device: the backend, whether its fd is in the
//! poll set, and the I/O counters only the driver sees.

use railwatch_core::DeviceStats;

/// Counters of one device: what the machine counted and what the driver's
/// reads did.
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
    /// Port-state queries made.
    pub port_queries: u64,
    /// Link reads made.
    pub link_reads: u64,
    /// Re-open attempts.
    pub reopen_attempts: u64,
    /// Re-opens that ended with every rail attached.
    pub reopens: u64,
}

/// What the driver's reads did.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct IoCounters {
    pub(crate) gets: u64,
    pub(crate) interrupted: u64,
    pub(crate) budget_hits: u64,
}

impl DeviceCounters {
    pub(crate) fn new(m: DeviceStats, io: IoCounters) -> DeviceCounters {
        DeviceCounters {
            events: m.events,
            comm_est: m.comm_est,
            unhandled: m.unhandled,
            gets: io.gets,
            interrupted: io.interrupted,
            read_errors: m.read_errors,
            budget_hits: io.budget_hits,
            port_queries: m.port_queries,
            link_reads: m.link_reads,
            reopen_attempts: m.reopen_attempts,
            reopens: m.reopens,
        }
    }
}

/// One device under the monitor.
pub(crate) struct DeviceSlot<P> {
    /// Its backend; `None` for a device the device list named that has not
    /// opened (yet).
    pub(crate) port: Option<P>,
    /// Its fd is in the poll set.
    pub(crate) reading: bool,
    pub(crate) io: IoCounters,
    /// Readiness said error or hang-up: the machine is told after the drain.
    pub(crate) hung_up: bool,
    /// The budget ran out: service again before the next blocking wait.
    pub(crate) pending: bool,
    /// Events read so far by a drain that hit its budget.
    pub(crate) drained_in_progress: u64,
}

impl<P> DeviceSlot<P> {
    pub(crate) fn new(port: P) -> DeviceSlot<P> {
        DeviceSlot { port: Some(port), ..DeviceSlot::empty() }
    }

    /// A slot for a device that has no backend yet.
    pub(crate) fn empty() -> DeviceSlot<P> {
        DeviceSlot {
            port: None,
            reading: false,
            io: IoCounters::default(),
            hung_up: false,
            pending: false,
            drained_in_progress: 0,
        }
    }
}
