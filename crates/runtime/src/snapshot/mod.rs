//! A point-in-time copy of every rail and counter, and (`json`) its one
//! JSON encoding.

pub mod json;

use railwatch_core::{
    DeviceMode, Evidence, LinkRate, Millis, PauseReason, PortAddress, PortCounters, PortState, RailId, RailState,
    RecoveredBy,
};

use crate::device::DeviceCounters;

/// One rail as it is now.
#[derive(Debug, Clone, PartialEq)]
pub struct RailSnapshot {
    /// Its id.
    pub id: RailId,
    /// `"mlx5_0/1"`.
    pub name: String,
    /// Its state.
    pub state: RailState,
    /// Why it is not active.
    pub reason: PauseReason,
    /// Since when (monitor clock).
    pub since: Millis,
    /// The last port state read.
    pub last_port_state: Option<PortState>,
    /// Its generation.
    pub generation: u64,
    /// Whether the selector may pick it.
    pub available: bool,
    /// The rate seeded into the selector.
    pub rate: Option<LinkRate>,
    /// How its last activation happened.
    pub recovered_by: Option<RecoveredBy>,
    /// Its address as last read (`None` if the backend does not read
    /// addresses, or before the first read).
    pub address: Option<PortAddress>,
    /// Out by the data-path breaker until a trial then.
    pub breaker_until: Option<Millis>,
    /// The GID index `require_address` chose, if it names one.
    pub gid_index: Option<u32>,
    /// The flap counters last read.
    pub counters: Option<PortCounters>,
    /// What transfer reports and counters said.
    pub evidence: Evidence,
}

impl RailSnapshot {
    /// On probation: re-admitted by trial after the data-path breaker, until
    /// a transfer succeeds.
    pub fn probation(&self) -> bool {
        self.state == RailState::Active && self.reason == PauseReason::Probation
    }
}

/// One device as it is now.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceSnapshot {
    /// Device name.
    pub name: String,
    /// How its events reach the monitor.
    pub mode: DeviceMode,
    /// Its counters.
    pub counters: DeviceCounters,
}

/// Everything the monitor knows.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// Monitor clock time of the snapshot.
    pub t: Millis,
    /// Every rail, in the order devices and ports were added.
    pub rails: Vec<RailSnapshot>,
    /// Every device, in the order added.
    pub devices: Vec<DeviceSnapshot>,
    /// Monitor wake-ups (returns from the blocking wait).
    pub wakeups: u64,
    /// Recovery ticks run.
    pub ticks: u64,
    /// Notifications dropped because a subscriber's channel was full.
    pub notifications_dropped: u64,
}

impl Snapshot {
    /// The rail called `name` (`"mlx5_0/1"`).
    pub fn rail(&self, name: &str) -> Option<&RailSnapshot> {
        self.rails.iter().find(|r| r.name == name)
    }
}
