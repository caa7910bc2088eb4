//! The one JSON encoding of a [`Snapshot`] (docs/JSON.md, "Snapshot"):
//! `rw_monitor_snapshot_json`, `watch`'s summary line and, for its rails'
//! first five fields, `simulate`'s, so a field has one name and one
//! meaning wherever it appears. Also the encoding of a port's address, which
//! `status` and `watch`'s `address` lines share.
//!
//! These are borrowed views that serde serializes (field order is output
//! order); they own nothing and hold no policy.

use railwatch_core::{Evidence, LinkRate, PortAddress, RailIdentity, WC_STATUSES, guid_text};
use serde::Serialize;

use super::{DeviceSnapshot, HostSnapshot, RailSnapshot, Snapshot};

/// A rate in Gb/s: `None` when never seeded or unknown.
pub(crate) fn gbps(rate: Option<LinkRate>) -> Option<f64> {
    rate.and_then(|r| r.as_gbps())
}

/// A snapshot as one JSON object: `t_ms`, then [`SnapshotBody`]'s fields.
#[derive(Debug, Clone, Serialize)]
pub struct SnapshotJson<'a> {
    /// The monitor clock's time of the snapshot.
    pub t_ms: u64,
    /// Everything else.
    #[serde(flatten)]
    pub body: SnapshotBody<'a>,
}

impl<'a> SnapshotJson<'a> {
    /// The encoding of `snapshot`.
    pub fn of(snapshot: &'a Snapshot) -> SnapshotJson<'a> {
        SnapshotJson { t_ms: snapshot.t.0, body: SnapshotBody::of(snapshot) }
    }
}

/// A snapshot's fields after its time (a summary line puts its `kind`
/// between them).
#[derive(Debug, Clone, Serialize)]
pub struct SnapshotBody<'a> {
    /// Every rail, in full.
    pub rails: Vec<RailJson<'a>>,
    /// Events read from every device (the sum of their `events`).
    pub events_read: u64,
    /// Events acknowledged: equal to `events_read`, since a backend
    /// acknowledges each event right after copying it out.
    pub events_acked: u64,
    /// Every device.
    pub devices: Vec<DeviceJson<'a>>,
    /// The host as a whole.
    pub host: HostJson,
    /// Recovery ticks run.
    pub ticks: u64,
    /// Returns from the monitor's blocking wait.
    pub wakeups: u64,
    /// Notifications lost to a full subscriber channel.
    pub notifications_dropped: u64,
}

impl<'a> SnapshotBody<'a> {
    /// The fields of `snapshot`.
    pub fn of(snapshot: &'a Snapshot) -> SnapshotBody<'a> {
        let events_read = snapshot.devices.iter().map(|d| d.counters.events).sum();
        SnapshotBody {
            rails: snapshot.rails.iter().map(RailJson::full).collect(),
            events_read,
            events_acked: events_read,
            devices: snapshot.devices.iter().map(DeviceJson::of).collect(),
            host: HostJson::of(&snapshot.host()),
            ticks: snapshot.ticks,
            wakeups: snapshot.wakeups,
            notifications_dropped: snapshot.notifications_dropped,
        }
    }
}

/// One rail: five fields always (all `simulate`'s summary shows), the
/// rest in full form.
#[derive(Debug, Clone, Serialize)]
pub struct RailJson<'a> {
    /// `"mlx5_0/1"`.
    pub rail: &'a str,
    /// `active`, `paused` or `inert`.
    pub state: &'static str,
    /// Whether the selector may pick it.
    pub available: bool,
    /// The rate last seeded into the selector.
    pub bandwidth_gbps: Option<f64>,
    /// Its generation.
    pub generation: u64,
    /// The rest, in full form.
    #[serde(flatten)]
    pub detail: Option<RailDetail<'a>>,
}

/// The fields of a rail beyond the five of [`RailJson::brief`].
#[derive(Debug, Clone, Serialize)]
pub struct RailDetail<'a> {
    /// Its device's name.
    pub device: &'a str,
    /// Its port.
    pub port: u8,
    /// Why it is not active (`none` when it is).
    pub reason: &'static str,
    /// The port state last read (`null` before the first read).
    pub port_state: Option<&'static str>,
    /// The netdev's carrier as last read, `up` or `down` (`null`: no
    /// netdev, or not read).
    pub carrier: Option<&'static str>,
    /// How its last activation happened (`null` if never).
    pub recovered_by: Option<&'static str>,
    /// Since when it is in its state (monitor clock).
    pub since_ms: u64,
    /// Its address as last read (`null` when not read).
    pub address: Option<AddressJson<'a>>,
    /// The data-path breaker is half-open or probing: one probe at a time.
    pub half_open: bool,
    /// Out by the data-path breaker until its backoff ends then (`null`:
    /// not open).
    pub breaker_until_ms: Option<u64>,
    /// The GID index `require_address` chose (`null`: none).
    pub gid_index: Option<u32>,
    /// The port's `link_downed` as last read (`null`: not read).
    pub link_downed: Option<u64>,
    /// The netdev's `carrier_changes` as last read.
    pub carrier_changes: Option<u64>,
    /// The netdev's `carrier_down_count` as last read.
    pub carrier_down: Option<u64>,
    /// Silent flaps seen.
    pub silent_flaps: u64,
    /// Transfers the engine reported: successes, failures by
    /// `ibv_wc_status` name (only those seen), breaker openings.
    pub transfers: TransfersJson,
    /// The device's node GUID (`0002:c903:00f1:c2a0`; `null`: not read).
    pub node_guid: Option<String>,
    /// The port's GUID (InfiniBand only; `null` otherwise).
    pub port_guid: Option<String>,
    /// The device's PCI address (`null`: not on PCI, or not read).
    pub pci_address: Option<&'a str>,
}

/// The identity fields of a rail: (node GUID, port GUID, PCI address).
pub fn identity_fields(i: Option<&RailIdentity>) -> (Option<String>, Option<String>, Option<&str>) {
    match i {
        Some(i) => (i.node_guid.map(guid_text), i.port_guid.map(guid_text), i.pci_address.as_deref()),
        None => (None, None, None),
    }
}

/// What the engine's transfer reports said about a rail.
#[derive(Debug, Clone, Serialize)]
pub struct TransfersJson {
    /// Successes.
    pub ok: u64,
    /// Failures by status name (`"retry_exc_err"`; `"unknown"` for codes
    /// this build does not know), only those seen.
    pub failed: std::collections::BTreeMap<&'static str, u64>,
    /// Times the data-path breaker opened.
    pub breaker_trips: u64,
}

impl TransfersJson {
    /// The encoding of `e`.
    pub fn of(e: &Evidence) -> TransfersJson {
        let mut failed: std::collections::BTreeMap<&'static str, u64> =
            WC_STATUSES.iter().map(|s| (s.name, e.failed_by_status[s.code as usize])).filter(|&(_, n)| n > 0).collect();
        if e.failed_unknown > 0 {
            failed.insert("unknown", e.failed_unknown);
        }
        TransfersJson { ok: e.transfers_ok, failed, breaker_trips: e.breaker_trips }
    }
}

impl<'a> RailJson<'a> {
    /// The five fields every rail line has.
    pub fn brief(r: &'a RailSnapshot) -> RailJson<'a> {
        RailJson {
            rail: &r.name,
            state: r.state.name(),
            available: r.available,
            bandwidth_gbps: gbps(r.rate),
            generation: r.generation,
            detail: None,
        }
    }

    /// Every field.
    pub fn full(r: &'a RailSnapshot) -> RailJson<'a> {
        // A rail's name is `device/port`; a device name has no `/`.
        let device = r.name.rsplit_once('/').map_or(r.name.as_str(), |(d, _)| d);
        let (node_guid, port_guid, pci_address) = identity_fields(r.identity.as_ref());
        let detail = RailDetail {
            device,
            port: r.id.port,
            reason: r.reason.name(),
            port_state: r.last_port_state.map(|p| p.name()),
            carrier: r.carrier.map(|c| c.name()),
            recovered_by: r.recovered_by.map(|b| b.name()),
            since_ms: r.since.0,
            address: r.address.as_ref().map(AddressJson::of),
            half_open: r.half_open(),
            breaker_until_ms: r.breaker_until.map(|t| t.0),
            gid_index: r.gid_index,
            link_downed: r.counters.and_then(|c| c.link_downed),
            carrier_changes: r.counters.and_then(|c| c.carrier_changes),
            carrier_down: r.counters.and_then(|c| c.carrier_down),
            silent_flaps: r.evidence.silent_flaps,
            transfers: TransfersJson::of(&r.evidence),
            node_guid,
            port_guid,
            pci_address,
        };
        RailJson { detail: Some(detail), ..RailJson::brief(r) }
    }
}

/// One device: its name, how its events reach the monitor, its counters.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceJson<'a> {
    /// Its name.
    pub device: &'a str,
    /// `events`, `poll_only`, `gone` or `removed`.
    pub mode: &'static str,
    /// Events read (each acknowledged once).
    pub events: u64,
    /// `COMM_EST` events among them.
    pub comm_est: u64,
    /// Events the decision table does not act on.
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

impl<'a> DeviceJson<'a> {
    /// The encoding of `d`.
    pub fn of(d: &'a DeviceSnapshot) -> DeviceJson<'a> {
        let c = &d.counters;
        DeviceJson {
            device: &d.name,
            mode: d.mode.name(),
            events: c.events,
            comm_est: c.comm_est,
            unhandled: c.unhandled,
            gets: c.gets,
            interrupted: c.interrupted,
            read_errors: c.read_errors,
            budget_hits: c.budget_hits,
            port_queries: c.port_queries,
            link_reads: c.link_reads,
            reopen_attempts: c.reopen_attempts,
            reopens: c.reopens,
        }
    }
}

/// The host-level condition and its device counts.
#[derive(Debug, Clone, Serialize)]
pub struct HostJson {
    /// `ok`, or `all_devices_gone` when no device is usable.
    pub condition: &'static str,
    /// Devices the monitor knows (removed ones too).
    pub devices: usize,
    /// Devices the host lists now.
    pub present: usize,
    /// Devices open (reading events or polling).
    pub usable: usize,
}

impl HostJson {
    /// The encoding of `h`.
    pub fn of(h: &HostSnapshot) -> HostJson {
        HostJson { condition: h.condition.name(), devices: h.devices, present: h.present, usable: h.usable }
    }
}

/// A port's address.
#[derive(Debug, Clone, Serialize)]
pub struct AddressJson<'a> {
    /// `infiniband`, `ethernet`, `unspecified` or `unknown`; `null` when
    /// the backend could not say.
    pub link_layer: Option<&'static str>,
    /// The LID (0 on RoCE).
    pub lid: u16,
    /// The network device under a RoCE port.
    pub netdev: Option<&'a str>,
    /// The non-empty GID table entries.
    pub gids: Vec<GidJson>,
}

/// One GID table entry.
#[derive(Debug, Clone, Serialize)]
pub struct GidJson {
    /// Its index in the table.
    pub index: u32,
    /// The GID as an IPv6 address.
    pub gid: String,
    /// `roce_v2`, `ib_roce_v1` or `unknown`.
    #[serde(rename = "type")]
    pub kind: &'static str,
}

impl<'a> AddressJson<'a> {
    /// The encoding of `a`.
    pub fn of(a: &'a PortAddress) -> AddressJson<'a> {
        AddressJson {
            link_layer: a.link_layer.map(|l| l.name()),
            lid: a.lid,
            netdev: a.netdev.as_deref(),
            gids: a.gids.iter().map(|g| GidJson { index: g.index, gid: g.to_string(), kind: g.kind.name() }).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use railwatch_core::{Carrier, DeviceMode, Millis, PauseReason, PortState, RailId, RailState, RecoveredBy};

    use super::*;
    use crate::DeviceCounters;

    fn snapshot() -> Snapshot {
        Snapshot {
            t: Millis(42),
            rails: vec![RailSnapshot {
                id: RailId { device: 0, port: 1 },
                name: "mlx5_0/1".into(),
                state: RailState::Paused,
                reason: PauseReason::PortErr,
                since: Millis(40),
                last_port_state: Some(PortState::Down),
                carrier: Some(Carrier::Down),
                generation: 3,
                available: false,
                rate: Some(LinkRate::gbps(200)),
                recovered_by: Some(RecoveredBy::Event),
                address: None,
                identity: Some(RailIdentity {
                    node_guid: Some(0x0002_c903_00f1_c2a0),
                    port_guid: None,
                    pci_address: Some("0000:3b:00.0".into()),
                }),
                breaker_until: None,
                gid_index: None,
                counters: None,
                evidence: Default::default(),
            }],
            devices: vec![DeviceSnapshot {
                name: "mlx5_0".into(),
                mode: DeviceMode::Events,
                counters: DeviceCounters { events: 5, read_errors: 1, ..DeviceCounters::default() },
            }],
            wakeups: 6,
            ticks: 2,
            notifications_dropped: 0,
        }
    }

    #[test]
    fn a_snapshot_encodes_every_field_in_the_documented_order() {
        let s = snapshot();
        assert_eq!(
            serde_json::to_string(&SnapshotJson::of(&s)).unwrap(),
            concat!(
                r#"{"t_ms":42,"rails":[{"rail":"mlx5_0/1","state":"paused","available":false,"bandwidth_gbps":200.0,"generation":3,"#,
                r#""device":"mlx5_0","port":1,"reason":"port_err","port_state":"down","carrier":"down","recovered_by":"event","since_ms":40,"address":null,"#,
                r#""half_open":false,"breaker_until_ms":null,"gid_index":null,"link_downed":null,"carrier_changes":null,"#,
                r#""carrier_down":null,"silent_flaps":0,"transfers":{"ok":0,"failed":{},"breaker_trips":0},"#,
                r#""node_guid":"0002:c903:00f1:c2a0","port_guid":null,"pci_address":"0000:3b:00.0"}],"#,
                r#""events_read":5,"events_acked":5,"devices":[{"device":"mlx5_0","mode":"events","events":5,"comm_est":0,"#,
                r#""unhandled":0,"gets":0,"interrupted":0,"read_errors":1,"budget_hits":0,"port_queries":0,"link_reads":0,"#,
                r#""reopen_attempts":0,"reopens":0}],"host":{"condition":"ok","devices":1,"present":1,"usable":1},"#,
                r#""ticks":2,"wakeups":6,"notifications_dropped":0}"#
            )
        );
    }

    /// Every device removed or closed is the host's condition; one open
    /// device, even polling, is not.
    #[test]
    fn the_host_is_degraded_only_when_no_device_is_usable() {
        let mut s = snapshot();
        let gone = DeviceMode::Gone { next_reopen: Millis(1000), backoff_ms: 1000 };
        let mut second = s.devices[0].clone();
        second.name = "mlx5_1".into();
        s.devices.push(second);
        let condition = |s: &Snapshot| serde_json::to_value(HostJson::of(&s.host())).unwrap();
        assert_eq!(condition(&s), serde_json::json!({"condition": "ok", "devices": 2, "present": 2, "usable": 2}));
        s.devices[0].mode = DeviceMode::Removed;
        s.devices[1].mode = DeviceMode::PollOnly;
        assert_eq!(condition(&s)["condition"], "ok");
        s.devices[1].mode = gone;
        assert_eq!(
            condition(&s),
            serde_json::json!({"condition": "all_devices_gone", "devices": 2, "present": 1, "usable": 0})
        );
        s.devices.clear();
        assert_eq!(condition(&s)["condition"], "all_devices_gone", "no device at all");
    }

    #[test]
    fn a_brief_rail_has_five_fields() {
        let s = snapshot();
        assert_eq!(
            serde_json::to_string(&RailJson::brief(&s.rails[0])).unwrap(),
            r#"{"rail":"mlx5_0/1","state":"paused","available":false,"bandwidth_gbps":200.0,"generation":3}"#
        );
    }
}
