//! A point-in-time copy of every rail and counter, and (`json`) its one
//! JSON encoding.

pub mod json;
pub mod state;

use railwatch_core::{
    Carrier, DeviceMode, Evidence, LinkRate, Millis, PauseReason, PortAddress, PortCounters, PortState, RailId,
    RailIdentity, RailState, RecoveredBy,
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
    /// The netdev's carrier as last read (`None`: no netdev, or never
    /// read).
    pub carrier: Option<Carrier>,
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
    /// What names it across boots (node GUID, port GUID, PCI address), as
    /// read at its device's last attach (`None` if the backend does not
    /// read it).
    pub identity: Option<RailIdentity>,
    /// Out by the data-path breaker until its backoff ends then.
    pub breaker_until: Option<Millis>,
    /// The GID index `require_address` chose, if it names one.
    pub gid_index: Option<u32>,
    /// The flap counters last read.
    pub counters: Option<PortCounters>,
    /// What transfer reports and counters said.
    pub evidence: Evidence,
}

impl RailSnapshot {
    /// The data-path breaker is half-open (one probe may be granted) or
    /// probing (one is out).
    pub fn half_open(&self) -> bool {
        self.reason.is_probe_stage()
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

    /// The host as a whole, from its devices' modes.
    pub fn host(&self) -> HostSnapshot {
        let present = self.devices.iter().filter(|d| d.mode != DeviceMode::Removed).count();
        let usable =
            self.devices.iter().filter(|d| matches!(d.mode, DeviceMode::Events | DeviceMode::PollOnly)).count();
        HostSnapshot { condition: HostCondition::of(usable), devices: self.devices.len(), present, usable }
    }
}

/// The host-level condition: whether any device is usable at all. Every
/// device gone at once (a driver reload, a firmware reset) is one
/// condition of the host, not a failure of each port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostCondition {
    /// At least one device is open (reading events or polling).
    Ok,
    /// No device is usable: every one the monitor knew left the host or
    /// closed (or there is none at all).
    AllDevicesGone,
}

impl HostCondition {
    /// The condition of a host with `usable` devices open.
    pub fn of(usable: usize) -> HostCondition {
        if usable == 0 { HostCondition::AllDevicesGone } else { HostCondition::Ok }
    }

    /// `ok` or `all_devices_gone`.
    pub fn name(self) -> &'static str {
        match self {
            HostCondition::Ok => "ok",
            HostCondition::AllDevicesGone => "all_devices_gone",
        }
    }
}

/// The host's devices counted, and its condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostSnapshot {
    /// Its condition.
    pub condition: HostCondition,
    /// Devices the monitor knows (removed ones too).
    pub devices: usize,
    /// Devices the host lists now (not removed).
    pub present: usize,
    /// Devices open: reading events or polling.
    pub usable: usize,
}
