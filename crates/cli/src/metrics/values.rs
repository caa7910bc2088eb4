//! What a scrape reads: the value of every series at one moment, as one
//! immutable record. The watch loop builds the next one (`Values`) from
//! its snapshot and notifications and publishes it whole
//! ([`crate::metrics::Metrics::update`]); a scrape encodes the one it was
//! handed ([`crate::metrics::collect`]). Nothing is diffed: gauges and
//! totals are copied from the snapshot, and only what the snapshot does
//! not carry (events by name, transitions by cause, pauses, recoveries by
//! the poll, probes by outcome, peers failing, unavailable times) is
//! counted from the notes.

use std::collections::BTreeMap;

use railwatch_core::{DeviceMode, Evidence, LinkRate, RailState, guid_text};
use railwatch_runtime::{DeviceSnapshot, HostCondition, RailSnapshot};

/// Upper bounds of `railwatch_rail_unavailable_seconds`'s buckets: 1 ms to
/// 1 h (and `+Inf`).
pub const UNAVAILABLE_BUCKETS: [f64; 16] =
    [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0];

/// A rail as its series name it: the device's name and the port.
pub(super) type RailKey = (String, u8);

/// Every series' value at one moment.
#[derive(Clone, Debug, Default)]
pub(super) struct Values {
    /// How many records were published before this one: equal numbers,
    /// equal values (an encoding is reused by it).
    pub(super) version: u64,
    /// The `version` label of `railwatch_build_info`.
    pub(super) build: String,
    /// The last snapshot's rails of watched devices.
    pub(super) rails: BTreeMap<RailKey, RailGauges>,
    /// The last snapshot's watched devices: whether each is present.
    pub(super) present: BTreeMap<String, bool>,
    /// No device usable: every one left or closed at once.
    pub(super) host_degraded: bool,
    /// Each rail's evidence as the last snapshot that watched it had it
    /// (an unwatched rail's totals stay what they were).
    pub(super) evidence: BTreeMap<RailKey, Evidence>,
    /// Each device's totals, likewise.
    pub(super) devices: BTreeMap<String, DeviceTotals>,
    /// Async events notified, by device and event name.
    pub(super) events: BTreeMap<(String, &'static str), u64>,
    /// Transitions, by rail, the state entered and the cause.
    pub(super) transitions: BTreeMap<(RailKey, &'static str, &'static str), u64>,
    /// Recoveries by the tick, from each rail's attach (at 0).
    pub(super) recoveries_by_poll: BTreeMap<RailKey, u64>,
    /// Pauses, from each rail's attach (at 0).
    pub(super) pauses: BTreeMap<RailKey, u64>,
    /// Probes that succeeded (recoveries by probe), from each rail's
    /// attach (at 0).
    pub(super) probes_ok: BTreeMap<RailKey, u64>,
    /// Probes that failed, by rail and whether no report came in time,
    /// from each rail's attach (at 0, both ways).
    pub(super) probes_failed: BTreeMap<(RailKey, bool), u64>,
    /// Times one peer failed against the rail.
    pub(super) peer_failing: BTreeMap<RailKey, u64>,
    /// How long each rail stayed unavailable.
    pub(super) unavailable: BTreeMap<RailKey, Unavailable>,
    /// Lines dropped on the way to stdout and stderr, once the agent
    /// reports them (`watch` does; `simulate` writes no such series).
    pub(super) output_dropped: Option<[u64; 2]>,
}

/// A rail's gauges.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct RailGauges {
    pub(super) available: bool,
    pub(super) state: i64,
    /// The port state last read, if any was.
    pub(super) port_state: Option<i64>,
    pub(super) generation: i64,
    /// Bytes per second, if the rate is known.
    pub(super) rate: Option<i64>,
    pub(super) half_open: bool,
    /// `railwatch_rail_info`'s labels after `device` and `port`.
    pub(super) info: Vec<(&'static str, String)>,
}

/// A device's totals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct DeviceTotals {
    pub(super) read_errors: u64,
    pub(super) reopen_attempts: u64,
    pub(super) comm_est: u64,
}

/// The unavailable-time histogram of one rail.
#[derive(Clone, Debug, Default)]
pub(super) struct Unavailable {
    pub(super) sum: f64,
    pub(super) count: u64,
    /// Observations per bucket (not cumulative), `+Inf` last.
    pub(super) buckets: [u64; UNAVAILABLE_BUCKETS.len() + 1],
}

impl Unavailable {
    /// One rail came back after `seconds` unavailable.
    pub(super) fn observe(&mut self, seconds: f64) {
        let bucket = UNAVAILABLE_BUCKETS.iter().position(|&le| seconds <= le).unwrap_or(UNAVAILABLE_BUCKETS.len());
        self.buckets[bucket] += 1;
        self.sum += seconds;
        self.count += 1;
    }

    /// The buckets as the encoder takes them: (upper bound, observations).
    pub(super) fn bounded(&self) -> Vec<(f64, u64)> {
        UNAVAILABLE_BUCKETS.iter().copied().chain([f64::INFINITY]).zip(self.buckets).collect()
    }
}

/// The code `railwatch_rail_state` gives a rail state.
pub fn rail_state_code(state: RailState) -> i64 {
    match state {
        RailState::Active => 0,
        RailState::Paused => 1,
        RailState::Inert => 2,
    }
}

/// A link rate in bytes per second (node_exporter's
/// `node_infiniband_rate_bytes_per_second` unit), if known.
pub fn bytes_per_second(rate: LinkRate) -> Option<i64> {
    match rate {
        LinkRate::Known { mbps } => i64::try_from(mbps.saturating_mul(125_000)).ok(),
        LinkRate::Unknown => None,
    }
}

/// The device a rail's name (`mlx5_0/1`) names.
pub(super) fn device_of(rail: &RailSnapshot) -> &str {
    rail.name.rsplit_once('/').map_or(rail.name.as_str(), |(d, _)| d)
}

impl RailGauges {
    /// A rail's gauges as `r` has them.
    pub(super) fn of(r: &RailSnapshot) -> RailGauges {
        RailGauges {
            available: r.available,
            state: rail_state_code(r.state),
            port_state: r.last_port_state.map(|s| i64::from(s.code())),
            // Saturating; a generation never gets near `i64::MAX`.
            generation: i64::try_from(r.generation).unwrap_or(i64::MAX),
            rate: r.rate.and_then(bytes_per_second),
            half_open: r.half_open(),
            info: info_labels(r),
        }
    }
}

/// What is known of `node_guid`, `port_guid`, `pci_address`, `netdev` (an
/// unknown one is no label, not an empty one).
fn info_labels(r: &RailSnapshot) -> Vec<(&'static str, String)> {
    let identity = r.identity.as_ref();
    let known = [
        ("node_guid", identity.and_then(|i| i.node_guid).map(guid_text)),
        ("port_guid", identity.and_then(|i| i.port_guid).map(guid_text)),
        ("pci_address", identity.and_then(|i| i.pci_address.clone())),
        ("netdev", r.address.as_ref().and_then(|a| a.netdev.clone())),
    ];
    known.into_iter().filter_map(|(name, v)| v.filter(|v| !v.is_empty()).map(|v| (name, v))).collect()
}

impl DeviceTotals {
    /// A device's totals as `d` has them.
    pub(super) fn of(d: &DeviceSnapshot) -> DeviceTotals {
        DeviceTotals {
            read_errors: d.counters.read_errors,
            reopen_attempts: d.counters.reopen_attempts,
            comm_est: d.counters.comm_est,
        }
    }
}

/// Whether no device of `watched` is usable (the host's condition).
pub(super) fn degraded<'d>(watched: impl Iterator<Item = &'d DeviceSnapshot>) -> bool {
    let usable = watched.filter(|d| matches!(d.mode, DeviceMode::Events | DeviceMode::PollOnly)).count();
    HostCondition::of(usable) == HostCondition::AllDevicesGone
}
