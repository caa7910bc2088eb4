//! The metrics of the host as a whole and of what names a rail: whether
//! every device is gone at once (a driver reload is one condition of the
//! host, not a failure of each port), which devices the host lists, and
//! an info series per rail with its node GUID, port GUID, PCI address and
//! netdev, to join on `device` and `port` (docs/METRICS.md).

use std::collections::{HashMap, HashSet};

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use railwatch_core::{DeviceMode, guid_text};
use railwatch_runtime::{HostCondition, RailSnapshot, Snapshot};

/// Labels as (name, value) pairs, only those known (an unknown GUID is no
/// label, not an empty one).
type Labels = Vec<(String, String)>;

/// The host's and the rails' naming metrics.
pub(super) struct HostFamilies {
    degraded: Gauge,
    device_present: Family<Labels, Gauge>,
    rail_info: Family<Labels, Gauge>,
    /// Each rail's info labels as last set, to drop a series that changed.
    last_info: HashMap<(String, u8), Labels>,
}

/// `device` and `port`, the labels every rail series has.
fn rail_labels(device: &str, port: u8) -> Labels {
    vec![("device".to_owned(), device.to_owned()), ("port".to_owned(), port.to_string())]
}

/// A rail's info labels: `device`, `port`, then what is known of
/// `node_guid`, `port_guid`, `pci_address`, `netdev`.
fn info_labels(device: &str, r: &RailSnapshot) -> Labels {
    let mut labels = rail_labels(device, r.id.port);
    let identity = r.identity.as_ref();
    let mut add = |name: &str, value: Option<String>| {
        if let Some(v) = value.filter(|v| !v.is_empty()) {
            labels.push((name.to_owned(), v));
        }
    };
    add("node_guid", identity.and_then(|i| i.node_guid).map(guid_text));
    add("port_guid", identity.and_then(|i| i.port_guid).map(guid_text));
    add("pci_address", identity.and_then(|i| i.pci_address.clone()));
    add("netdev", r.address.as_ref().and_then(|a| a.netdev.clone()));
    labels
}

impl HostFamilies {
    pub(super) fn register(registry: &mut Registry) -> HostFamilies {
        let f = HostFamilies {
            degraded: Gauge::default(),
            device_present: Family::default(),
            rail_info: Family::default(),
            last_info: HashMap::new(),
        };
        registry.register(
            "railwatch_host_degraded",
            "1 when no device is usable: every device left the host or closed at once (a driver reload), one condition of the host, not a failure of each port",
            f.degraded.clone(),
        );
        registry.register(
            "railwatch_device_present",
            "Whether the host lists the device: 1 present, 0 left the host (its rails are inert)",
            f.device_present.clone(),
        );
        registry.register(
            "railwatch_rail_info",
            "What names the rail across boots, as labels (node_guid, port_guid, pci_address, netdev, where known); the value is always 1",
            f.rail_info.clone(),
        );
        f
    }

    /// Sets them from a snapshot, leaving out the devices in `unwatched`.
    pub(super) fn update(&mut self, snapshot: &Snapshot, unwatched: &HashSet<String>) {
        let watched = || snapshot.devices.iter().filter(|d| !unwatched.contains(&d.name));
        let usable = watched().filter(|d| matches!(d.mode, DeviceMode::Events | DeviceMode::PollOnly)).count();
        self.degraded.set(i64::from(HostCondition::of(usable) == HostCondition::AllDevicesGone));
        for d in watched() {
            let labels = vec![("device".to_owned(), d.name.clone())];
            self.device_present.get_or_create(&labels).set(i64::from(d.mode != DeviceMode::Removed));
        }
        for r in &snapshot.rails {
            let device = r.name.rsplit_once('/').map_or(r.name.as_str(), |(d, _)| d);
            if unwatched.contains(device) {
                continue;
            }
            let labels = info_labels(device, r);
            if let Some(old) = self.last_info.insert((device.to_owned(), r.id.port), labels.clone()) {
                if old != labels {
                    self.rail_info.remove(&old);
                }
            }
            self.rail_info.get_or_create(&labels).set(1);
        }
    }

    /// `device` is no longer watched: its series leave.
    pub(super) fn unwatch(&mut self, device: &str) {
        self.device_present.remove(&vec![("device".to_owned(), device.to_owned())]);
        let gone: Vec<_> = self.last_info.keys().filter(|(d, _)| d == device).cloned().collect();
        for key in gone {
            if let Some(labels) = self.last_info.remove(&key) {
                self.rail_info.remove(&labels);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use railwatch_core::{LinkRate, Millis, PauseReason, PortAddress, PortState, RailId, RailIdentity, RailState};
    use railwatch_runtime::{DeviceCounters, DeviceSnapshot};

    use crate::metrics::{Format, Metrics};

    use super::*;

    fn rail(device: u32, name: &str, identity: Option<RailIdentity>, netdev: Option<&str>) -> RailSnapshot {
        RailSnapshot {
            id: RailId { device, port: 1 },
            name: name.to_owned(),
            state: RailState::Active,
            reason: PauseReason::None,
            since: Millis(0),
            last_port_state: Some(PortState::Active),
            generation: 1,
            available: true,
            rate: Some(LinkRate::gbps(400)),
            recovered_by: None,
            address: netdev.map(|n| PortAddress { netdev: Some(n.to_owned()), ..PortAddress::default() }),
            identity,
            breaker_until: None,
            gid_index: None,
            counters: None,
            evidence: Default::default(),
        }
    }

    fn snapshot(modes: [DeviceMode; 2], identity: Option<RailIdentity>) -> Snapshot {
        let device =
            |name: &str, mode| DeviceSnapshot { name: name.to_owned(), mode, counters: DeviceCounters::default() };
        Snapshot {
            t: Millis(0),
            rails: vec![rail(0, "mlx5_0/1", identity, None), rail(1, "rxe0/1", None, Some("veth0"))],
            devices: vec![device("mlx5_0", modes[0]), device("rxe0", modes[1])],
            wakeups: 0,
            ticks: 0,
            notifications_dropped: 0,
        }
    }

    fn lines(m: &Metrics, prefix: &str) -> Vec<String> {
        let text = m.exporter().encode(Format::Prometheus);
        let mut found: Vec<String> = text.lines().filter(|l| l.starts_with(prefix)).map(str::to_owned).collect();
        found.sort();
        found
    }

    #[test]
    fn the_host_is_degraded_when_every_device_is_gone_and_rails_are_named() {
        let mut m = Metrics::new("0");
        let id = RailIdentity {
            node_guid: Some(0x0002_c903_00f1_c2a0),
            port_guid: Some(0x0002_c903_00f1_c2a1),
            pci_address: Some("0000:3b:00.0".to_owned()),
        };
        m.update(&snapshot([DeviceMode::Events, DeviceMode::PollOnly], Some(id.clone())));
        assert_eq!(lines(&m, "railwatch_host_degraded "), ["railwatch_host_degraded 0"]);
        assert_eq!(
            lines(&m, "railwatch_rail_info{"),
            [
                r#"railwatch_rail_info{device="mlx5_0",port="1",node_guid="0002:c903:00f1:c2a0",port_guid="0002:c903:00f1:c2a1",pci_address="0000:3b:00.0"} 1"#,
                r#"railwatch_rail_info{device="rxe0",port="1",netdev="veth0"} 1"#,
            ]
        );
        // One device left, the other closed: the host's condition.
        let gone = DeviceMode::Gone { next_reopen: Millis(1000), backoff_ms: 1000 };
        m.update(&snapshot([DeviceMode::Removed, gone], Some(id.clone())));
        assert_eq!(lines(&m, "railwatch_host_degraded "), ["railwatch_host_degraded 1"]);
        assert_eq!(
            lines(&m, "railwatch_device_present{"),
            [r#"railwatch_device_present{device="mlx5_0"} 0"#, r#"railwatch_device_present{device="rxe0"} 1"#]
        );
        // Back with other hardware under the same name: one info series, the new one.
        let other = RailIdentity { node_guid: Some(0x0002_c903_0000_0001), ..RailIdentity::default() };
        m.update(&snapshot([DeviceMode::Events, DeviceMode::Events], Some(other)));
        assert_eq!(lines(&m, "railwatch_host_degraded "), ["railwatch_host_degraded 0"]);
        let info = lines(&m, "railwatch_rail_info{device=\"mlx5_0\"");
        assert_eq!(info, [r#"railwatch_rail_info{device="mlx5_0",port="1",node_guid="0002:c903:0000:0001"} 1"#]);
        // Unwatched: its series leave.
        m.unwatch("mlx5_0", &[RailId { device: 0, port: 1 }]);
        assert!(lines(&m, "railwatch_rail_info{device=\"mlx5_0\"").is_empty());
        assert!(lines(&m, "railwatch_device_present{device=\"mlx5_0\"").is_empty());
    }
}
