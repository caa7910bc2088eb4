//! Feeding the metrics: the watch loop's notifications and snapshots made
//! into the next `Values` and published whole at the end of each turn
//! ([`Metrics::update`]), for the serving threads' [`Exporter`] to encode.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use railwatch_core::{Millis, RailId, RailState, RecoveredBy};
use railwatch_runtime::lines::Names;
use railwatch_runtime::{Cause, Happening, Notification, Snapshot};

use super::export::{Exporter, Published};
use super::values::{DeviceTotals, RailGauges, RailKey, Values, degraded, device_of};

/// The metrics as the watch loop keeps them: the record it is building,
/// what it needs to build it (since when each rail has been unavailable,
/// which devices are not watched), and where it publishes. Owned by the
/// watch loop; the serving threads hold an [`Exporter`].
pub struct Metrics {
    next: Values,
    published: Arc<Published>,
    /// Devices no longer watched (excluded on reload): no series of theirs
    /// is set until they are watched again.
    unwatched: HashSet<String>,
    /// Since when each rail has been unavailable (monitor clock).
    down_since: HashMap<RailId, Millis>,
}

impl Metrics {
    /// Every metric, `railwatch_build_info` set for `version`, no rail
    /// yet.
    pub fn new(version: &str) -> Metrics {
        let next = Values { build: version.to_owned(), ..Values::default() };
        let published = Arc::new(Published::new(next.clone()));
        Metrics { next, published, unwatched: HashSet::new(), down_since: HashMap::new() }
    }

    /// A handle for a serving thread.
    pub fn exporter(&self) -> Exporter {
        Exporter::new(Arc::clone(&self.published))
    }

    /// The totals of lines dropped on the way to stdout and stderr
    /// ([`crate::lineout`]), published at once when they changed.
    pub fn output_dropped(&mut self, stdout: u64, stderr: u64) {
        let totals = Some([stdout, stderr]);
        if self.next.output_dropped != totals {
            self.next.output_dropped = totals;
            self.publish();
        }
    }

    /// `device` is no longer watched (excluded on reload): its rails'
    /// gauges (`rails`) are removed at once, so no alert reads a rail the
    /// operator took out as down, and nothing of it is counted until
    /// [`rewatch`](Self::rewatch). Its counters keep what they counted.
    pub fn unwatch(&mut self, device: &str, rails: &[RailId]) {
        self.unwatched.insert(device.to_owned());
        for rail in rails {
            self.down_since.remove(rail);
        }
        self.next.rails.retain(|(d, _), _| d != device);
        self.next.present.remove(device);
        self.publish();
    }

    /// The devices for which `watched` says yes are watched again
    /// (included on reload): their series come back with their attach.
    pub fn rewatch(&mut self, watched: impl Fn(&str) -> bool) {
        self.unwatched.retain(|d| !watched(d));
    }

    /// Counts one notification: events by name, transitions by cause,
    /// pauses, recoveries by the poll, probes by outcome, peers failing,
    /// and how long a rail
    /// was unavailable when it comes back. Shown from the next
    /// [`update`](Self::update), with the snapshot that follows it.
    pub fn note(&mut self, names: &Names, note: &Notification) {
        let device = names.device(note.what.device()).to_owned();
        if self.unwatched.contains(&device) {
            return;
        }
        let key = |rail: RailId| -> RailKey { (device.clone(), rail.port) };
        let v = &mut self.next;
        match note.what {
            Happening::Event { kind, .. } => *v.events.entry((device.clone(), kind.name())).or_default() += 1,
            Happening::Transition { rail, from, to, cause, .. } => {
                match cause {
                    Cause::By(RecoveredBy::Poll) => *v.recoveries_by_poll.entry(key(rail)).or_default() += 1,
                    // Only a probe's success closes the breaker this way.
                    Cause::By(RecoveredBy::Probe) => *v.probes_ok.entry(key(rail)).or_default() += 1,
                    _ => {}
                }
                // A pause, not a change of reason while paused (settling,
                // then held for an address: one pause).
                if to == RailState::Paused && from != RailState::Paused {
                    *v.pauses.entry(key(rail)).or_default() += 1;
                }
                *v.transitions.entry((key(rail), to.name(), cause.name())).or_default() += 1;
            }
            Happening::Available { rail, available: false } => {
                self.down_since.entry(rail).or_insert(note.t);
            }
            Happening::Available { rail, available: true } => {
                if let Some(since) = self.down_since.remove(&rail) {
                    let seconds = note.t.0.saturating_sub(since.0) as f64 / 1000.0;
                    v.unavailable.entry(key(rail)).or_default().observe(seconds);
                }
            }
            Happening::PeerFailing { rail, .. } => *v.peer_failing.entry(key(rail)).or_default() += 1,
            Happening::ProbeFailed { rail, timed_out } => {
                *v.probes_failed.entry((key(rail), timed_out)).or_default() += 1;
            }
            _ => {}
        }
    }

    /// The turn is over at `snapshot`: every rail's gauges and totals and
    /// every device's are taken from it, and the record, with the turn's
    /// notes, is published whole (a scrape sees all of it or none of it).
    pub fn update(&mut self, snapshot: &Snapshot) {
        let unwatched = &self.unwatched;
        let v = &mut self.next;
        let watched = || snapshot.devices.iter().filter(|d| !unwatched.contains(&d.name));
        v.host_degraded = degraded(watched());
        v.present = watched().map(|d| (d.name.clone(), d.mode != railwatch_core::DeviceMode::Removed)).collect();
        for d in watched() {
            v.devices.insert(d.name.clone(), DeviceTotals::of(d));
        }
        v.rails.clear();
        for r in snapshot.rails.iter().filter(|r| !unwatched.contains(device_of(r))) {
            let key: RailKey = (device_of(r).to_owned(), r.id.port);
            // There from the rail's attach, at 0: an alert on their
            // increase sees the first one too.
            v.recoveries_by_poll.entry(key.clone()).or_default();
            v.pauses.entry(key.clone()).or_default();
            v.probes_ok.entry(key.clone()).or_default();
            for timed_out in [false, true] {
                v.probes_failed.entry((key.clone(), timed_out)).or_default();
            }
            v.evidence.insert(key.clone(), r.evidence);
            v.rails.insert(key, RailGauges::of(r));
        }
        self.publish();
    }

    /// Makes the record as it stands what scrapes read.
    fn publish(&mut self) {
        self.next.version += 1;
        self.published.replace(self.next.clone());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;
    use std::thread;
    use std::time::Duration;

    use railwatch_core::{
        DeviceMode, EventKind, Evidence, LinkRate, PauseReason, PortAddress, PortState, RailIdentity,
    };
    use railwatch_runtime::{DeviceCounters, DeviceSnapshot, RailSnapshot};

    use super::*;
    use crate::metrics::Format;

    fn names() -> Names {
        Names::new(vec!["mlx5_0".to_owned()], [(RailId { device: 0, port: 1 }, "mlx5_0/1".to_owned())])
    }

    fn note(t: u64, what: Happening) -> Notification {
        Notification { t: Millis(t), what }
    }

    fn snapshot(available: bool, generation: u64, read_errors: u64) -> Snapshot {
        Snapshot {
            t: Millis(0),
            rails: vec![RailSnapshot {
                id: RailId { device: 0, port: 1 },
                name: "mlx5_0/1".to_owned(),
                state: if available { RailState::Active } else { RailState::Paused },
                reason: PauseReason::None,
                since: Millis(0),
                last_port_state: Some(PortState::Active),
                carrier: None,
                generation,
                available,
                rate: Some(LinkRate::gbps(400)),
                recovered_by: None,
                address: None,
                identity: None,
                breaker_until: None,
                gid_index: None,
                counters: None,
                evidence: Default::default(),
            }],
            devices: vec![DeviceSnapshot {
                name: "mlx5_0".to_owned(),
                mode: railwatch_core::DeviceMode::Events,
                counters: DeviceCounters { read_errors, ..DeviceCounters::default() },
            }],
            wakeups: 0,
            ticks: 0,
            notifications_dropped: 0,
        }
    }

    fn series<'t>(text: &'t str, name_and_labels: &str) -> Option<&'t str> {
        text.lines().find_map(|l| l.strip_prefix(name_and_labels).and_then(|rest| rest.strip_prefix(' ')))
    }

    #[test]
    fn notifications_and_snapshots_encode_as_both_formats() {
        let mut m = Metrics::new("1.2.3");
        let rail = RailId { device: 0, port: 1 };
        let names = names();
        m.note(&names, &note(0, Happening::Event { device: 0, port: Some(1), kind: EventKind::PortErr }));
        m.note(
            &names,
            &note(
                0,
                Happening::Transition {
                    rail,
                    from: RailState::Active,
                    to: RailState::Paused,
                    cause: Cause::Reason(PauseReason::PortErr),
                    generation: 1,
                },
            ),
        );
        m.note(&names, &note(0, Happening::Available { rail, available: false }));
        m.note(
            &names,
            &note(
                1500,
                Happening::Transition {
                    rail,
                    from: RailState::Paused,
                    to: RailState::Active,
                    cause: Cause::By(RecoveredBy::Poll),
                    generation: 2,
                },
            ),
        );
        m.note(&names, &note(1500, Happening::Available { rail, available: true }));
        m.update(&snapshot(true, 2, 3));
        m.update(&snapshot(true, 2, 4));

        let text = m.exporter().encode(Format::Prometheus);
        let rail = r#"{device="mlx5_0",port="1"}"#;
        assert_eq!(series(&text, &format!("railwatch_rail_available{rail}")), Some("1"), "{text}");
        assert_eq!(series(&text, &format!("railwatch_rail_state{rail}")), Some("0"));
        assert_eq!(series(&text, &format!("railwatch_port_state{rail}")), Some("4"));
        assert_eq!(series(&text, &format!("railwatch_rail_generation{rail}")), Some("2"));
        assert_eq!(series(&text, &format!("railwatch_link_rate_bytes_per_second{rail}")), Some("50000000000"));
        assert_eq!(
            series(&text, r#"railwatch_async_events_total{device="mlx5_0",event="port_err"}"#),
            Some("1"),
            "{text}"
        );
        assert_eq!(
            series(&text, r#"railwatch_transitions_total{device="mlx5_0",port="1",to="paused",cause="port_err"}"#),
            Some("1"),
            "{text}"
        );
        assert_eq!(
            series(&text, r#"railwatch_transitions_total{device="mlx5_0",port="1",to="active",cause="poll"}"#),
            Some("1")
        );
        assert_eq!(series(&text, &format!("railwatch_recoveries_by_poll_total{rail}")), Some("1"));
        assert_eq!(series(&text, r#"railwatch_read_errors_total{device="mlx5_0"}"#), Some("4"), "{text}");
        assert_eq!(series(&text, r#"railwatch_reopen_attempts_total{device="mlx5_0"}"#), Some("0"));
        // 1.5 s unavailable: in the 2.5 s bucket, not the 1 s one.
        let bucket =
            |le: &str| format!(r#"railwatch_rail_unavailable_seconds_bucket{{device="mlx5_0",port="1",le="{le}"}}"#);
        assert_eq!(series(&text, &bucket("1")), Some("0"), "{text}");
        assert_eq!(series(&text, &bucket("2.5")), Some("1"));
        assert_eq!(series(&text, &bucket("+Inf")), Some("1"));
        assert_eq!(series(&text, &format!("railwatch_rail_unavailable_seconds_sum{rail}")), Some("1.5"));
        assert_eq!(series(&text, r#"railwatch_build_info{version="1.2.3"}"#), Some("1"));
        for help in ["railwatch_rail_available ", "railwatch_async_events_total ", "railwatch_build_info "] {
            assert!(text.contains(&format!("# HELP {help}")), "{help}: {text}");
        }
        assert!(text.contains("# TYPE railwatch_async_events_total counter\n"), "{text}");
        assert!(!text.contains("# EOF"), "{text}");

        let open = m.exporter().encode(Format::OpenMetrics);
        assert!(open.ends_with("# EOF\n"), "{open}");
        assert!(open.contains("# TYPE railwatch_build info\n"), "{open}");
        assert!(open.contains("# UNIT railwatch_rail_unavailable_seconds seconds\n"), "{open}");
    }

    /// Notes alone change nothing a scrape reads: what a turn noted shows
    /// with the snapshot that ends it, and a rail's gauges are the
    /// snapshot's.
    #[test]
    fn a_turn_shows_with_its_snapshot() {
        let mut m = Metrics::new("1.2.3");
        let rail = RailId { device: 0, port: 1 };
        let names = names();
        m.update(&snapshot(false, 1, 0));
        let before = m.exporter().encode(Format::Prometheus);
        m.note(&names, &note(10, Happening::Event { device: 0, port: Some(1), kind: EventKind::PortActive }));
        m.note(
            &names,
            &note(
                10,
                Happening::Transition {
                    rail,
                    from: RailState::Paused,
                    to: RailState::Active,
                    cause: Cause::By(RecoveredBy::Event),
                    generation: 2,
                },
            ),
        );
        m.note(&names, &note(10, Happening::Available { rail, available: true }));
        assert_eq!(m.exporter().encode(Format::Prometheus), before, "nothing shows before the snapshot");
        m.update(&snapshot(true, 2, 0));
        let text = m.exporter().encode(Format::Prometheus);
        let rail_labels = r#"{device="mlx5_0",port="1"}"#;
        let value = |name: &str| series(&text, &format!("{name}{rail_labels}"));
        assert_eq!(value("railwatch_rail_available"), Some("1"), "{text}");
        assert_eq!(value("railwatch_rail_state"), Some("0"), "{text}");
        assert_eq!(value("railwatch_rail_generation"), Some("2"), "{text}");
        assert_eq!(
            series(&text, r#"railwatch_async_events_total{device="mlx5_0",event="port_active"}"#),
            Some("1"),
            "{text}"
        );
    }

    /// A pause is counted once, whatever reasons it goes through (settling,
    /// held for an address): the flapping alert counts pauses.
    #[test]
    fn a_change_of_reason_while_paused_is_not_another_pause() {
        let mut m = Metrics::new("1.2.3");
        let rail = RailId { device: 0, port: 1 };
        let names = names();
        let to_paused = |from, reason| Happening::Transition {
            rail,
            from,
            to: RailState::Paused,
            cause: Cause::Reason(reason),
            generation: 1,
        };
        m.note(&names, &note(1, to_paused(RailState::Active, PauseReason::PortErr)));
        m.note(&names, &note(2, to_paused(RailState::Paused, PauseReason::Settling)));
        m.note(&names, &note(3, to_paused(RailState::Paused, PauseReason::NoAddress)));
        m.update(&snapshot(false, 1, 0));
        let text = m.exporter().encode(Format::Prometheus);
        assert_eq!(series(&text, r#"railwatch_rail_pauses_total{device="mlx5_0",port="1"}"#), Some("1"), "{text}");
    }

    /// A probe's outcome is counted per rail: a recovery by probe is one
    /// that succeeded, a `probe_failed` one that failed (by whether it
    /// timed out). Both are there at 0 from the rail's attach.
    #[test]
    fn probes_are_counted_by_outcome_from_the_attach() {
        let mut m = Metrics::new("1.2.3");
        let rail = RailId { device: 0, port: 1 };
        let names = names();
        let value = |m: &Metrics, series: &str| {
            let text = m.exporter().encode(Format::Prometheus);
            self::series(&text, series).map(str::to_owned)
        };
        let ok = r#"railwatch_probes_ok_total{device="mlx5_0",port="1"}"#;
        let failed = |timed_out: &str| {
            format!(r#"railwatch_probes_failed_total{{device="mlx5_0",port="1",timed_out="{timed_out}"}}"#)
        };
        m.update(&snapshot(true, 1, 0));
        for series in [ok.to_owned(), failed("false"), failed("true")] {
            assert_eq!(value(&m, &series).as_deref(), Some("0"), "{series}");
        }
        m.note(&names, &note(10, Happening::HalfOpen { rail }));
        m.note(&names, &note(20, Happening::ProbeFailed { rail, timed_out: false }));
        m.note(&names, &note(30, Happening::HalfOpen { rail }));
        m.note(&names, &note(40, Happening::ProbeFailed { rail, timed_out: true }));
        m.note(&names, &note(50, Happening::ProbeFailed { rail, timed_out: true }));
        m.note(
            &names,
            &note(
                60,
                Happening::Transition {
                    rail,
                    from: RailState::Paused,
                    to: RailState::Active,
                    cause: Cause::By(RecoveredBy::Probe),
                    generation: 2,
                },
            ),
        );
        m.update(&snapshot(true, 2, 0));
        assert_eq!(value(&m, ok).as_deref(), Some("1"));
        assert_eq!(value(&m, &failed("false")).as_deref(), Some("1"));
        assert_eq!(value(&m, &failed("true")).as_deref(), Some("2"));
    }

    /// COMM_EST is counted, not notified: the snapshot's counter feeds
    /// `railwatch_async_events_total{event="comm_est"}`, only what is new.
    #[test]
    fn comm_est_is_counted_from_the_device_counter() {
        let mut m = Metrics::new("1.2.3");
        let with_comm_est = |n: u64| {
            let mut s = snapshot(true, 1, 0);
            s.devices[0].counters.comm_est = n;
            s
        };
        let counted = |m: &Metrics| {
            let text = m.exporter().encode(Format::Prometheus);
            series(&text, r#"railwatch_async_events_total{device="mlx5_0",event="comm_est"}"#).map(str::to_owned)
        };
        m.update(&with_comm_est(0));
        assert_eq!(counted(&m), None, "no series before the first one");
        m.update(&with_comm_est(20));
        m.update(&with_comm_est(20));
        assert_eq!(counted(&m).as_deref(), Some("20"));
        m.update(&with_comm_est(25));
        assert_eq!(counted(&m).as_deref(), Some("25"));
    }

    /// A scrape never sees half a turn: while the watch loop flips a rail
    /// between active-and-available and paused-and-not, turn after turn
    /// (notes, then the snapshot), every encoding has its state,
    /// availability, generation and transition counts agree.
    #[test]
    fn a_scrape_sees_a_batch_whole() {
        let mut m = Metrics::new("1.2.3");
        let names = names();
        let rail = RailId { device: 0, port: 1 };
        let exporter = m.exporter();
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let done = Arc::clone(&done);
            thread::spawn(move || {
                let mut torn = Vec::new();
                let mut scrapes = 0;
                while !done.load(Ordering::Acquire) {
                    let text = exporter.encode(Format::Prometheus);
                    let labels = r#"{device="mlx5_0",port="1"}"#;
                    let value = |name: &str| series(&text, &format!("{name}{labels}")).map(str::to_owned);
                    let state = value("railwatch_rail_state");
                    let available = value("railwatch_rail_available");
                    let generation = value("railwatch_rail_generation");
                    let pauses = value("railwatch_rail_pauses_total");
                    // Generation g: g flips so far, the odd ones pauses.
                    let agree = match (state.as_deref(), available.as_deref(), &generation, &pauses) {
                        (None, None, None, None) => true,
                        (Some(s), Some(a), Some(g), Some(p)) => {
                            let g: u64 = g.parse().unwrap();
                            let p: u64 = p.parse().unwrap();
                            let paused = g % 2 == 1;
                            (s, a) == (if paused { ("1", "0") } else { ("0", "1") }) && p == g.div_ceil(2)
                        }
                        _ => false,
                    };
                    if !agree {
                        torn.push(format!("{state:?} {available:?} {generation:?} {pauses:?}"));
                    }
                    scrapes += 1;
                }
                (scrapes, torn)
            })
        };
        for i in 1..=20_000u64 {
            let paused = i % 2 == 1;
            let (from, to) =
                if paused { (RailState::Active, RailState::Paused) } else { (RailState::Paused, RailState::Active) };
            let cause = if paused { Cause::Reason(PauseReason::PortErr) } else { Cause::By(RecoveredBy::Event) };
            m.note(&names, &note(i, Happening::Transition { rail, from, to, cause, generation: i }));
            m.note(&names, &note(i, Happening::Available { rail, available: !paused }));
            m.update(&snapshot(!paused, i, 0));
            if i % 16 == 0 {
                thread::sleep(Duration::from_micros(50));
            }
        }
        done.store(true, Ordering::Release);
        let (scrapes, torn) = reader.join().unwrap();
        assert!(scrapes > 0);
        assert!(torn.is_empty(), "{} of {scrapes} scrapes torn: {torn:?}", torn.len());
    }

    /// A rich feed (two devices, a pause and a recovery, transfers of
    /// several statuses, a reseed, COMM_EST, dropped lines), encoded in
    /// both formats, is what the registry of prometheus-client families
    /// (fed by diffing, before the collector) encoded for it, byte for
    /// byte but for the order of series within a family.
    #[test]
    fn the_exposition_is_unchanged() {
        let mut m = Metrics::new("1.2.3");
        let names = Names::new(
            vec!["mlx5_0".to_owned(), "rxe0".to_owned()],
            [
                (RailId { device: 0, port: 1 }, "mlx5_0/1".to_owned()),
                (RailId { device: 0, port: 2 }, "mlx5_0/2".to_owned()),
                (RailId { device: 1, port: 1 }, "rxe0/1".to_owned()),
            ],
        );
        for (notes, snapshot) in &golden_feed() {
            for n in notes {
                m.note(&names, n);
            }
            m.output_dropped(3, 1);
            m.update(snapshot);
        }
        for (format, golden) in [
            (Format::Prometheus, include_str!("golden/exposition.prom")),
            (Format::OpenMetrics, include_str!("golden/exposition.om")),
        ] {
            let text = m.exporter().encode(format);
            assert_eq!(in_order(&text), in_order(golden), "{format:?}:\n{text}");
        }
    }

    /// An exposition with each family's series sorted: the old registry
    /// listed them in hash order, so only that order may differ.
    fn in_order(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut series: Vec<&str> = Vec::new();
        for line in text.lines() {
            if line.starts_with('#') {
                series.sort_unstable();
                out.extend(series.drain(..).map(str::to_owned));
                out.push(line.to_owned());
            } else {
                series.push(line);
            }
        }
        series.sort_unstable();
        out.extend(series.into_iter().map(str::to_owned));
        out
    }

    /// The turns of [`the_exposition_is_unchanged`]: each turn's notes and
    /// the snapshot after them.
    fn golden_feed() -> Vec<(Vec<Notification>, Snapshot)> {
        let r01 = RailId { device: 0, port: 1 };
        let r02 = RailId { device: 0, port: 2 };
        let r11 = RailId { device: 1, port: 1 };
        let rail = |id: RailId, name: &str, available: bool, generation: u64, evidence: Evidence| RailSnapshot {
            id,
            name: name.to_owned(),
            state: if available { RailState::Active } else { RailState::Paused },
            reason: if available { PauseReason::None } else { PauseReason::PortErr },
            since: Millis(0),
            last_port_state: Some(if available { PortState::Active } else { PortState::Down }),
            carrier: None,
            generation,
            available,
            rate: if id.device == 0 { Some(LinkRate::gbps(400)) } else { Some(LinkRate::Unknown) },
            recovered_by: None,
            address: None,
            identity: (id.device == 0).then(|| railwatch_core::RailIdentity {
                node_guid: Some(0x0002_c903_00f1_c2a0),
                port_guid: Some(0x0002_c903_00f1_c2a0 + u64::from(id.port)),
                pci_address: Some("0000:3b:00.0".to_owned()),
            }),
            breaker_until: None,
            gid_index: None,
            counters: None,
            evidence,
        };
        let device = |name: &str, read_errors: u64, comm_est: u64| DeviceSnapshot {
            name: name.to_owned(),
            mode: railwatch_core::DeviceMode::Events,
            counters: DeviceCounters {
                read_errors,
                comm_est,
                reopen_attempts: read_errors,
                ..DeviceCounters::default()
            },
        };
        let snapshot = |t: u64, rails: Vec<RailSnapshot>, devices: Vec<DeviceSnapshot>| Snapshot {
            t: Millis(t),
            rails,
            devices,
            wakeups: 0,
            ticks: 0,
            notifications_dropped: 0,
        };
        let mut failed =
            Evidence { transfers_ok: 7, failed_unknown: 1, breaker_trips: 1, silent_flaps: 2, ..Evidence::default() };
        failed.failed_by_status[12] = 2;
        failed.failed_by_status[5] = 1;
        let ok = Evidence { transfers_ok: 3, ..Evidence::default() };
        let pause = |t: u64, rail: RailId, generation: u64| {
            vec![
                note(
                    t,
                    Happening::Event {
                        device: rail.device,
                        port: Some(u32::from(rail.port)),
                        kind: EventKind::PortErr,
                    },
                ),
                note(
                    t,
                    Happening::Transition {
                        rail,
                        from: RailState::Active,
                        to: RailState::Paused,
                        cause: Cause::Reason(PauseReason::PortErr),
                        generation,
                    },
                ),
                note(t, Happening::Available { rail, available: false }),
            ]
        };
        let mut back = vec![
            note(2500, Happening::Event { device: 0, port: Some(1), kind: EventKind::PortActive }),
            note(
                2500,
                Happening::Transition {
                    rail: r01,
                    from: RailState::Paused,
                    to: RailState::Active,
                    cause: Cause::By(RecoveredBy::Poll),
                    generation: 2,
                },
            ),
            note(2500, Happening::Available { rail: r01, available: true }),
            note(2500, Happening::Reseed { rail: r01, from: None, to: LinkRate::gbps(400) }),
            note(2500, Happening::PeerFailing { rail: r02, peer: 9 }),
            note(2500, Happening::HalfOpen { rail: r11 }),
            note(2500, Happening::ProbeFailed { rail: r11, timed_out: true }),
            note(2500, Happening::ProbeFailed { rail: r02, timed_out: false }),
        ];
        back.push(note(2500, Happening::AddressChanged { rail: r11, generation: 2 }));
        vec![
            (
                Vec::new(),
                snapshot(
                    0,
                    vec![
                        rail(r01, "mlx5_0/1", true, 1, Evidence::default()),
                        rail(r02, "mlx5_0/2", true, 1, Evidence::default()),
                        rail(r11, "rxe0/1", true, 1, Evidence::default()),
                    ],
                    vec![device("mlx5_0", 0, 0), device("rxe0", 0, 0)],
                ),
            ),
            (
                pause(1000, r01, 1),
                snapshot(
                    1000,
                    vec![
                        rail(r01, "mlx5_0/1", false, 1, Evidence::default()),
                        rail(r02, "mlx5_0/2", true, 1, failed),
                        rail(r11, "rxe0/1", true, 1, ok),
                    ],
                    vec![device("mlx5_0", 1, 4), device("rxe0", 0, 0)],
                ),
            ),
            (
                back,
                snapshot(
                    2500,
                    vec![
                        rail(r01, "mlx5_0/1", true, 2, ok),
                        rail(r02, "mlx5_0/2", true, 1, failed),
                        rail(r11, "rxe0/1", true, 2, ok),
                    ],
                    vec![device("mlx5_0", 2, 9), device("rxe0", 0, 0)],
                ),
            ),
        ]
    }

    /// A device excluded on reload leaves the metrics (no rail of it reads
    /// as down), stays out whatever notes and snapshots say, and comes
    /// back when included again.
    #[test]
    fn an_unwatched_device_has_no_rail_series_until_watched_again() {
        let mut m = Metrics::new("1.2.3");
        let names = names();
        let rail = RailId { device: 0, port: 1 };
        let available = |m: &Metrics| {
            let text = m.exporter().encode(Format::Prometheus);
            series(&text, r#"railwatch_rail_available{device="mlx5_0",port="1"}"#).map(str::to_owned)
        };
        m.update(&snapshot(true, 1, 0));
        assert_eq!(available(&m).as_deref(), Some("1"));
        m.unwatch("mlx5_0", &[rail]);
        assert_eq!(available(&m), None);
        // The removal it causes, and later snapshots, do not bring it back.
        m.note(&names, &note(5, Happening::Available { rail, available: false }));
        m.update(&snapshot(false, 1, 0));
        let text = m.exporter().encode(Format::Prometheus);
        assert!(!text.contains(r#"railwatch_rail_state{device="mlx5_0""#), "{text}");
        assert_eq!(available(&m), None);
        m.rewatch(|d| d == "mlx5_0");
        m.note(&names, &note(9, Happening::Available { rail, available: true }));
        m.update(&snapshot(true, 2, 0));
        assert_eq!(available(&m).as_deref(), Some("1"));
        // The time it was out is not an outage.
        let text = m.exporter().encode(Format::Prometheus);
        assert!(!text.contains("railwatch_rail_unavailable_seconds_count"), "{text}");
    }

    // ---- the host's condition and what names a rail ----

    fn host_rail(device: u32, name: &str, identity: Option<RailIdentity>, netdev: Option<&str>) -> RailSnapshot {
        RailSnapshot {
            id: RailId { device, port: 1 },
            name: name.to_owned(),
            state: RailState::Active,
            reason: PauseReason::None,
            since: Millis(0),
            last_port_state: Some(PortState::Active),
            carrier: None,
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

    fn host_snapshot(modes: [DeviceMode; 2], identity: Option<RailIdentity>) -> Snapshot {
        let device =
            |name: &str, mode| DeviceSnapshot { name: name.to_owned(), mode, counters: DeviceCounters::default() };
        Snapshot {
            t: Millis(0),
            rails: vec![host_rail(0, "mlx5_0/1", identity, None), host_rail(1, "rxe0/1", None, Some("veth0"))],
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
        m.update(&host_snapshot([DeviceMode::Events, DeviceMode::PollOnly], Some(id.clone())));
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
        m.update(&host_snapshot([DeviceMode::Removed, gone], Some(id.clone())));
        assert_eq!(lines(&m, "railwatch_host_degraded "), ["railwatch_host_degraded 1"]);
        assert_eq!(
            lines(&m, "railwatch_device_present{"),
            [r#"railwatch_device_present{device="mlx5_0"} 0"#, r#"railwatch_device_present{device="rxe0"} 1"#]
        );
        // Back with other hardware under the same name: one info series, the new one.
        let other = RailIdentity { node_guid: Some(0x0002_c903_0000_0001), ..RailIdentity::default() };
        m.update(&host_snapshot([DeviceMode::Events, DeviceMode::Events], Some(other)));
        assert_eq!(lines(&m, "railwatch_host_degraded "), ["railwatch_host_degraded 0"]);
        let info = lines(&m, "railwatch_rail_info{device=\"mlx5_0\"");
        assert_eq!(info, [r#"railwatch_rail_info{device="mlx5_0",port="1",node_guid="0002:c903:0000:0001"} 1"#]);
        // Unwatched: its series leave.
        m.unwatch("mlx5_0", &[RailId { device: 0, port: 1 }]);
        assert!(lines(&m, "railwatch_rail_info{device=\"mlx5_0\"").is_empty());
        assert!(lines(&m, "railwatch_device_present{device=\"mlx5_0\"").is_empty());
    }
}
