//! The output vocabulary every front end speaks (`railwatch simulate` and
//! `railwatch watch`, and what reads them): the table that names the ids
//! in notifications ([`Names`]), one timeline entry ([`Record`]) and the
//! JSON line records of docs/JSON.md ([`Line`]).
//!
//! The lines are serde views, serialized in field order; a rail's or a
//! snapshot's fields come from [`crate::snapshot::json`], so each field has
//! one name everywhere.

use std::collections::BTreeMap;

use railwatch_core::{Cause, EventKind, Happening, Machine, Notification, PortAddress, RailId, Scope, WorkScope};
use serde::Serialize;

use crate::snapshot::json::{AddressJson, RailJson, SnapshotBody, gbps};
use crate::{Clock, Monitor, Snapshot};

/// Names for the ids in notifications: device index → name, rail id →
/// `"mlx5_0/1"`.
#[derive(Debug, Clone, Default)]
pub struct Names {
    devices: Vec<String>,
    rails: BTreeMap<RailId, String>,
}

impl Names {
    /// A table from device names (index = device id) and rail names.
    pub fn new(devices: Vec<String>, rails: impl IntoIterator<Item = (RailId, String)>) -> Names {
        Names { devices, rails: rails.into_iter().collect() }
    }

    /// Every device and rail `monitor` has now.
    pub fn of<P, S, C>(monitor: &Monitor<P, S, C>) -> Names
    where
        P: railwatch_core::VerbsPort,
        S: railwatch_core::Selector,
        C: Clock,
    {
        Names {
            devices: (0..).map_while(|d| monitor.device_name(d)).map(str::to_string).collect(),
            rails: monitor.rails().into_iter().collect(),
        }
    }

    /// Every device and rail `machine` has now, each rail named
    /// `device/port`, updated in place: what a fresh table would say, at
    /// the cost of what changed. The devices new since the last call are
    /// read port by port; anything else (a device renamed, one that came
    /// back with other ports) rebuilds the table. A host attaching
    /// thousands of devices one by one, followed after each, costs their
    /// rails once, not every rail at every device (a replay of 4,096
    /// devices × 16 ports took minutes).
    pub fn follow(&mut self, machine: &Machine) {
        let (devices, rails) = (machine.devices().len(), machine.rails().len());
        if (devices, rails) == (self.devices.len(), self.rails.len()) {
            return;
        }
        let known = self.devices.len();
        let renamed = known > devices || machine.devices().take(known).zip(&self.devices).any(|(d, n)| d.name != n);
        if !renamed {
            self.devices.extend(machine.devices().skip(known).map(|d| d.name.to_owned()));
            for device in known..devices {
                let device = device as u32;
                for port in 0..=u8::MAX {
                    if let Some(r) = machine.rail(RailId { device, port }) {
                        self.rails.insert(r.id, format!("{}/{}", self.devices[device as usize], r.id.port));
                    }
                }
            }
        }
        if renamed || self.rails.len() != rails {
            let devices: Vec<String> = machine.devices().map(|d| d.name.to_owned()).collect();
            let rails = machine.rails().map(|r| (r.id, format!("{}/{}", devices[r.id.device as usize], r.id.port)));
            self.rails = rails.collect();
            self.devices = devices;
        }
    }

    /// How many rails it names.
    pub fn rails_len(&self) -> usize {
        self.rails.len()
    }

    /// The name of device `device`.
    pub fn device(&self, device: u32) -> &str {
        self.devices.get(device as usize).map_or("?", String::as_str)
    }

    /// The name of `rail` (`"mlx5_0/1"`).
    pub fn rail(&self, rail: RailId) -> &str {
        self.rails.get(&rail).map_or("?", String::as_str)
    }

    /// The rail on `port` of `device`, if there is one.
    pub fn rail_of(&self, device: u32, port: u8) -> Option<&str> {
        self.rails.get(&RailId { device, port }).map(String::as_str)
    }

    /// The subject of an `event` line: its rail for a port event (a known
    /// port-scoped code) whose port has one, else `None` (its device). An
    /// unknown code's element is not trusted to be a port.
    pub fn event_rail(&self, device: u32, port: Option<u32>, kind: EventKind) -> Option<&str> {
        if kind.scope() != Scope::Port {
            return None;
        }
        port.and_then(|p| u8::try_from(p).ok()).and_then(|p| self.rail_of(device, p))
    }
}

/// The verdict on one expectation of a scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectResult {
    /// When it was checked.
    pub at_ms: u64,
    /// The rail (`"mlx5_0/1"`).
    pub rail: String,
    /// Whether every field held.
    pub passed: bool,
    /// What was expected and what was found.
    pub detail: String,
}

/// One entry of a run's timeline.
#[derive(Debug, Clone, Copy)]
pub enum Record<'a> {
    /// Something the monitor did or saw.
    Note(&'a Notification),
    /// An expectation was checked.
    Expect(&'a ExpectResult),
    /// The recovery tick ran at this time (it polled the ports of the
    /// rails that were out). Not a line of the JSON contract: the HTML
    /// report draws it as faint marks.
    Tick(u64),
}

/// One JSON line: `t_ms`, `kind`, then the fields of its kind.
#[derive(Debug, Clone, Serialize)]
pub struct Line<'a> {
    t_ms: u64,
    kind: &'static str,
    #[serde(flatten)]
    body: Body<'a>,
}

/// The fields of a line after `t_ms` and `kind`, by kind (docs/JSON.md).
/// Optional fields are left out when `None`.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Body<'a> {
    /// `event`: an async event was read and acknowledged.
    Event {
        /// Its snake_case name.
        event: &'static str,
        /// Its raw code.
        code: u32,
        /// Its rail, for a port event whose port has one.
        #[serde(skip_serializing_if = "Option::is_none")]
        rail: Option<&'a str>,
        /// Its device, otherwise.
        #[serde(skip_serializing_if = "Option::is_none")]
        device: Option<&'a str>,
    },
    /// `transition`: a rail's state word changed.
    Transition {
        /// The rail.
        rail: &'a str,
        /// The state before.
        from: &'static str,
        /// The state after.
        to: &'static str,
        /// The generation after.
        generation: u64,
        /// For pauses, detaches and generation bumps: why.
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<&'static str>,
        /// For activations: how.
        #[serde(skip_serializing_if = "Option::is_none")]
        by: Option<&'static str>,
    },
    /// `reseed`: the selector's bandwidth for a rail was set.
    Reseed {
        /// The rail.
        rail: &'a str,
        /// The previous rate.
        from_gbps: Option<f64>,
        /// The new rate.
        to_gbps: Option<f64>,
    },
    /// `available`: the selector was told a rail may (not) be picked.
    Available {
        /// The rail.
        rail: &'a str,
        /// Its availability now.
        available: bool,
    },
    /// `drain`: a device's event queue was drained.
    Drain {
        /// The device.
        device: &'a str,
        /// Events read by this drain.
        events: usize,
        /// `drained` or `error`.
        result: &'static str,
        /// With `error`: the errno.
        #[serde(skip_serializing_if = "Option::is_none")]
        errno: Option<i32>,
    },
    /// `address`: a rail's address changed.
    Address {
        /// The rail.
        rail: &'a str,
        /// Its generation now.
        generation: u64,
        /// The new address, where the front end reads it (`watch`).
        #[serde(skip_serializing_if = "Option::is_none")]
        address: Option<AddressJson<'a>>,
    },
    /// `peer_failing`: transfers through one peer failed against the local
    /// path often enough to open the breaker, but through no other peer:
    /// the rail stays in service.
    PeerFailing {
        /// The rail.
        rail: &'a str,
        /// The engine's id of the peer.
        peer: u64,
    },
    /// `half_open`: the data-path breaker's backoff is over and the port
    /// reads ACTIVE: the gate grants one probe; the rail stays unavailable.
    HalfOpen {
        /// The rail.
        rail: &'a str,
    },
    /// `work_lost`: work posted to `scope` will never complete: fail it
    /// now. The first line of its wake-up.
    WorkLost {
        /// The device.
        device: &'a str,
        /// `qp`, `wq`, `cq` or `device`.
        scope: &'static str,
        /// The event that said so (QP, WQ and CQ scopes).
        #[serde(skip_serializing_if = "Option::is_none")]
        event: Option<&'static str>,
        /// The object's handle as hex (`"0x7f…"`), when the event had one.
        #[serde(skip_serializing_if = "Option::is_none")]
        handle: Option<String>,
        /// Why the device's context went (device scope): its rails' pause
        /// reason, `device_fatal`, `device_removed` or `not_opened`.
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<&'static str>,
    },
    /// `probe_failed`: the probe failed, or was not reported within
    /// `probe_timeout_ms`: the breaker is open again, with the next backoff.
    ProbeFailed {
        /// The rail.
        rail: &'a str,
        /// No report came in time.
        timed_out: bool,
    },
    /// `gid_index`: the GID index endpoints of the rail are built on
    /// (`require_address`), at an activation or when it moved.
    GidIndex {
        /// The rail.
        rail: &'a str,
        /// The index.
        index: u32,
    },
    /// `output_dropped` (watch only): lines were dropped before this one
    /// because stdout was not read fast enough.
    OutputDropped {
        /// How many.
        lines: u64,
    },
    /// `expect`: an expectation was checked.
    Expect {
        /// When it was checked.
        at_ms: u64,
        /// The rail.
        rail: &'a str,
        /// Whether every field held.
        passed: bool,
        /// What was expected, or what differed.
        detail: &'a str,
    },
    /// `summary` of a scenario run: its rails in brief, the event totals
    /// of its devices and its expectations' verdicts.
    RunSummary {
        /// Every rail, in brief.
        rails: Vec<RailJson<'a>>,
        /// Events the scenario queued.
        events_queued: u64,
        /// Events read.
        events_read: u64,
        /// Events acknowledged.
        events_acked: u64,
        /// How many expectations held and failed.
        expectations: Verdicts,
    },
    /// `summary` of a live run: the final snapshot.
    WatchSummary(SnapshotBody<'a>),
}

/// Expectations that held and failed.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Verdicts {
    /// Held.
    pub passed: usize,
    /// Failed.
    pub failed: usize,
}

impl Body<'_> {
    /// Every `kind` a line can have; [`kind`](Self::kind) gives only these.
    pub const KINDS: [&'static str; 14] = [
        "event",
        "transition",
        "reseed",
        "available",
        "drain",
        "address",
        "peer_failing",
        "half_open",
        "probe_failed",
        "work_lost",
        "gid_index",
        "output_dropped",
        "expect",
        "summary",
    ];

    /// The line's `kind`.
    pub fn kind(&self) -> &'static str {
        Self::KINDS[match self {
            Body::Event { .. } => 0,
            Body::Transition { .. } => 1,
            Body::Reseed { .. } => 2,
            Body::Available { .. } => 3,
            Body::Drain { .. } => 4,
            Body::Address { .. } => 5,
            Body::PeerFailing { .. } => 6,
            Body::HalfOpen { .. } => 7,
            Body::ProbeFailed { .. } => 8,
            Body::WorkLost { .. } => 9,
            Body::GidIndex { .. } => 10,
            Body::OutputDropped { .. } => 11,
            Body::Expect { .. } => 12,
            Body::RunSummary { .. } | Body::WatchSummary(_) => 13,
        }]
    }
}

impl<'a> Line<'a> {
    /// The line at `t_ms` with `body`.
    pub fn new(t_ms: u64, body: Body<'a>) -> Line<'a> {
        Line { t_ms, kind: body.kind(), body }
    }

    /// The line for `record`, or `None` for what the contract does not
    /// carry (ticks).
    pub fn of(names: &'a Names, record: &Record<'a>) -> Option<Line<'a>> {
        match *record {
            Record::Note(note) => Line::of_note(names, note),
            Record::Expect(e) => Some(Line::new(
                e.at_ms,
                Body::Expect { at_ms: e.at_ms, rail: &e.rail, passed: e.passed, detail: &e.detail },
            )),
            Record::Tick(_) => None,
        }
    }

    fn of_note(names: &'a Names, note: &Notification) -> Option<Line<'a>> {
        let body = match note.what {
            Happening::Event { device, port, kind } => {
                let rail = names.event_rail(device, port, kind);
                let device = rail.is_none().then(|| names.device(device));
                Body::Event { event: kind.name(), code: kind.code(), rail, device }
            }
            Happening::Transition { rail, from, to, cause, generation } => {
                let (reason, by) = match cause {
                    Cause::Reason(r) => (Some(r.name()), None),
                    Cause::By(by) => (None, Some(by.name())),
                    Cause::Bump(kind) => (Some(kind.name()), None),
                    Cause::SilentFlap => (Some("silent_flap"), None),
                };
                Body::Transition { rail: names.rail(rail), from: from.name(), to: to.name(), generation, reason, by }
            }
            Happening::Reseed { rail, from, to } => {
                Body::Reseed { rail: names.rail(rail), from_gbps: gbps(from), to_gbps: gbps(Some(to)) }
            }
            Happening::Available { rail, available } => Body::Available { rail: names.rail(rail), available },
            Happening::Drain { device, events, errno } => Body::Drain {
                device: names.device(device),
                events,
                result: if errno.is_some() { "error" } else { "drained" },
                errno,
            },
            Happening::AddressChanged { rail, generation } => {
                Body::Address { rail: names.rail(rail), generation, address: None }
            }
            Happening::PeerFailing { rail, peer } => Body::PeerFailing { rail: names.rail(rail), peer },
            Happening::HalfOpen { rail } => Body::HalfOpen { rail: names.rail(rail) },
            Happening::ProbeFailed { rail, timed_out } => Body::ProbeFailed { rail: names.rail(rail), timed_out },
            Happening::GidIndex { rail, index } => Body::GidIndex { rail: names.rail(rail), index },
            Happening::WorkLost { device, scope } => Body::WorkLost {
                device: names.device(device),
                scope: scope.name(),
                event: match scope {
                    WorkScope::Qp { kind, .. } => Some(kind.name()),
                    WorkScope::Wq(_) => Some(EventKind::WqFatal.name()),
                    WorkScope::Cq(_) => Some(EventKind::CqErr.name()),
                    WorkScope::Device(_) => None,
                },
                handle: scope.handle().map(|h| format!("{:#x}", h.0)),
                reason: match scope {
                    WorkScope::Device(r) => Some(r.name()),
                    _ => None,
                },
            },
        };
        Some(Line::new(note.t.0, body))
    }

    /// An `address` line with the new address added (what `watch` reads);
    /// any other line as it is.
    pub fn with_address(mut self, new: Option<&'a PortAddress>) -> Line<'a> {
        if let Body::Address { address, .. } = &mut self.body {
            *address = new.map(AddressJson::of);
        }
        self
    }

    /// The closing line of a live run: `snapshot`, whole.
    pub fn watch_summary(snapshot: &'a Snapshot) -> Line<'a> {
        Line::new(snapshot.t.0, Body::WatchSummary(SnapshotBody::of(snapshot)))
    }

    /// Its time.
    pub fn t_ms(&self) -> u64 {
        self.t_ms
    }

    /// Its kind.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// Its fields.
    pub fn body(&self) -> &Body<'a> {
        &self.body
    }
}

#[cfg(test)]
mod tests {
    use railwatch_core::{EventKind, Gid, GidType, LinkLayer, LinkRate, Millis, PauseReason, RailState, RecoveredBy};

    use super::*;

    fn names() -> Names {
        Names::new(vec!["mlx5_0".to_owned()], [(RailId { device: 0, port: 1 }, "mlx5_0/1".to_owned())])
    }

    fn line(what: Happening) -> String {
        let names = names();
        let note = Notification { t: Millis(7), what };
        Line::of(&names, &Record::Note(&note)).map_or_else(|| "none".into(), |l| serde_json::to_string(&l).unwrap())
    }

    const RAIL: RailId = RailId { device: 0, port: 1 };

    #[test]
    fn each_kind_has_its_fields_in_the_documented_order() {
        let pause = Happening::Transition {
            rail: RAIL,
            from: RailState::Active,
            to: RailState::Paused,
            cause: Cause::Reason(PauseReason::PortErr),
            generation: 1,
        };
        assert_eq!(
            line(pause),
            r#"{"t_ms":7,"kind":"transition","rail":"mlx5_0/1","from":"active","to":"paused","generation":1,"reason":"port_err"}"#
        );
        let back = Happening::Transition {
            rail: RAIL,
            from: RailState::Paused,
            to: RailState::Active,
            cause: Cause::By(RecoveredBy::Poll),
            generation: 2,
        };
        assert!(line(back).ends_with(r#""generation":2,"by":"poll"}"#), "{}", line(back));
        let port_event = Happening::Event { device: 0, port: Some(1), kind: EventKind::PortErr };
        assert_eq!(line(port_event), r#"{"t_ms":7,"kind":"event","event":"port_err","code":10,"rail":"mlx5_0/1"}"#);
        // A device event, and a port event on a port without a rail, name
        // the device.
        let fatal = Happening::Event { device: 0, port: None, kind: EventKind::DeviceFatal };
        assert!(line(fatal).ends_with(r#""device":"mlx5_0"}"#), "{}", line(fatal));
        let no_rail = Happening::Event { device: 0, port: Some(2), kind: EventKind::PortErr };
        assert!(line(no_rail).ends_with(r#""code":10,"device":"mlx5_0"}"#), "{}", line(no_rail));
        let seed = Happening::Reseed { rail: RAIL, from: None, to: LinkRate::gbps(400) };
        assert_eq!(line(seed), r#"{"t_ms":7,"kind":"reseed","rail":"mlx5_0/1","from_gbps":null,"to_gbps":400.0}"#);
        let failed = Happening::Drain { device: 0, events: 3, errno: Some(5) };
        assert_eq!(
            line(failed),
            r#"{"t_ms":7,"kind":"drain","device":"mlx5_0","events":3,"result":"error","errno":5}"#
        );
        let drained = Happening::Drain { device: 0, events: 3, errno: None };
        assert!(line(drained).ends_with(r#""result":"drained"}"#));
        let qp = WorkScope::Qp { kind: EventKind::QpFatal, handle: Some(railwatch_core::ObjectHandle(0x7f00)) };
        assert_eq!(
            line(Happening::WorkLost { device: 0, scope: qp }),
            r#"{"t_ms":7,"kind":"work_lost","device":"mlx5_0","scope":"qp","event":"qp_fatal","handle":"0x7f00"}"#
        );
        let gone = WorkScope::Device(railwatch_core::PauseReason::DeviceFatal);
        assert_eq!(
            line(Happening::WorkLost { device: 0, scope: gone }),
            r#"{"t_ms":7,"kind":"work_lost","device":"mlx5_0","scope":"device","reason":"device_fatal"}"#
        );
    }

    #[test]
    fn an_address_line_carries_the_address_only_when_given() {
        let names = names();
        let note = Notification { t: Millis(3), what: Happening::AddressChanged { rail: RAIL, generation: 4 } };
        let plain = Line::of(&names, &Record::Note(&note)).unwrap();
        assert_eq!(
            serde_json::to_string(&plain).unwrap(),
            r#"{"t_ms":3,"kind":"address","rail":"mlx5_0/1","generation":4}"#
        );
        let address = PortAddress {
            link_layer: Some(LinkLayer::Ethernet),
            lid: 0,
            gids: vec![Gid {
                index: 1,
                raw: [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
                kind: GidType::RoceV2,
            }],
            netdev: Some("eth0".into()),
        };
        let with = plain.with_address(Some(&address));
        assert_eq!(
            serde_json::to_string(&with).unwrap(),
            r#"{"t_ms":3,"kind":"address","rail":"mlx5_0/1","generation":4,"address":{"link_layer":"ethernet","lid":0,"netdev":"eth0","gids":[{"index":1,"gid":"fe80::1","type":"roce_v2"}]}}"#
        );
    }

    #[test]
    fn following_a_machine_names_what_a_table_made_anew_would() {
        use railwatch_core::{Machine, MachineConfig};
        // The table made anew, as `railwatch replay` made it at each change.
        let anew = |m: &Machine| {
            let devices: Vec<String> = m.devices().map(|d| d.name.to_owned()).collect();
            let rails: Vec<_> =
                m.rails().map(|r| (r.id, format!("{}/{}", devices[r.id.device as usize], r.id.port))).collect();
            format!("{:?}", Names::new(devices, rails))
        };
        let mut m = Machine::new(MachineConfig::default()).unwrap();
        let mut names = Names::default();
        let mut follow = |m: &Machine, after: &str| {
            names.follow(m);
            assert_eq!(format!("{names:?}"), anew(m), "after {after}");
        };
        let t = Millis(1);
        assert!(m.add_device("mlx5_0", &[1, 2], t).is_some() && m.add_device("mlx5_1", &[1], t).is_some());
        follow(&m, "two devices");
        m.handle_removed(0, t);
        follow(&m, "a removal");
        // Back with other ports: port 1 left out, port 3 new.
        assert!(m.add_device("mlx5_0", &[2, 3], t).is_some());
        follow(&m, "a device back with other ports");
        // Empty slots 2 to 4, then one of them taken, then a device with no ports.
        assert!(m.add_device_at(5, "mlx5_5", &[1], t).is_ok());
        follow(&m, "a device past empty slots");
        assert!(m.add_device_at(3, "mlx5_3", &[1, 2], t).is_ok());
        follow(&m, "an empty slot taken");
        assert!(m.add_device("mlx5_6", &[], t).is_some());
        follow(&m, "a device without ports");
        assert_eq!(names.rail(RailId { device: 0, port: 1 }), "mlx5_0/1", "a port left out keeps its name");
        assert_eq!(names.rail(RailId { device: 3, port: 2 }), "mlx5_3/2");
    }

    #[test]
    fn expectations_are_lines_and_ticks_are_not() {
        let names = names();
        let verdict = ExpectResult { at_ms: 9, rail: "mlx5_0/1".into(), passed: false, detail: "state x".into() };
        let expect = Line::of(&names, &Record::Expect(&verdict)).unwrap();
        assert_eq!(
            serde_json::to_string(&expect).unwrap(),
            r#"{"t_ms":9,"kind":"expect","at_ms":9,"rail":"mlx5_0/1","passed":false,"detail":"state x"}"#
        );
        assert!(Line::of(&names, &Record::Tick(9)).is_none());
    }
}
