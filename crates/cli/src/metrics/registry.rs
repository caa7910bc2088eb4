//! The registry: every metric `watch` exports (docs/METRICS.md), updated by
//! the watch loop from the monitor's notifications and snapshots. Labels
//! `device` and `port` are node_exporter's, so series join with
//! `node_infiniband_*`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Registry, Unit};
use railwatch_core::{Evidence, LinkRate, Millis, RailId, RailState, RecoveredBy, WC_STATUSES, WcClass};
use railwatch_runtime::lines::Names;
use railwatch_runtime::{Cause, Happening, Notification, Snapshot};

use super::export::{Batches, Exporter};
use super::host::HostFamilies;

/// Upper bounds of `railwatch_rail_unavailable_seconds`'s buckets: 1 ms to
/// 1 h (and `+Inf`).
pub const UNAVAILABLE_BUCKETS: [f64; 16] =
    [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0];

/// A rail: node_exporter's labels for an InfiniBand port.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RailLabels {
    device: String,
    port: String,
}

/// A device.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DeviceLabels {
    device: String,
}

/// An async event read from a device, by name.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EventLabels {
    device: String,
    event: String,
}

/// Transfers on a rail with one completion status.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TransferLabels {
    device: String,
    port: String,
    status: String,
    class: String,
}

/// A transition of a rail: the state it went to and why.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TransitionLabels {
    device: String,
    port: String,
    to: String,
    cause: String,
}

/// The `version` label of `railwatch_build_info`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: String,
}

fn unavailable_histogram() -> Histogram {
    Histogram::new(UNAVAILABLE_BUCKETS)
}

/// update them (rails' unavailable times, devices' last counter totals).
/// Owned by the watch loop; the serving threads hold an [`Exporter`].
pub struct Metrics {
    registry: Arc<Registry>,
    /// Its batches of updates, counted for the encoders.
    batches: Arc<Batches>,
    /// Devices no longer watched (excluded on reload): no series of theirs
    /// is set until they are watched again.
    unwatched: HashSet<String>,
    rail_available: Family<RailLabels, Gauge>,
    rail_state: Family<RailLabels, Gauge>,
    port_state: Family<RailLabels, Gauge>,
    rail_generation: Family<RailLabels, Gauge>,
    link_rate: Family<RailLabels, Gauge>,
    async_events: Family<EventLabels, Counter>,
    transitions: Family<TransitionLabels, Counter>,
    recoveries_by_poll: Family<RailLabels, Counter>,
    pauses: Family<RailLabels, Counter>,
    read_errors: Family<DeviceLabels, Counter>,
    reopen_attempts: Family<DeviceLabels, Counter>,
    unavailable: Family<RailLabels, Histogram, fn() -> Histogram>,
    probation: Family<RailLabels, Gauge>,
    silent_flaps: Family<RailLabels, Counter>,
    breaker_trips: Family<RailLabels, Counter>,
    peer_failing: Family<RailLabels, Counter>,
    transfers: Family<TransferLabels, Counter>,
    /// The host's condition, device presence, each rail's info series.
    host: HostFamilies,
    /// Each rail's evidence at the last snapshot, to add only what is new.
    last_evidence: HashMap<RailId, Evidence>,
    /// Since when each rail has been unavailable (monitor clock).
    down_since: HashMap<RailId, Millis>,
    /// The last totals read from each device's counters
    /// (`read_errors`, `reopen_attempts`, `comm_est`), to add only what is
    /// new.
    last_totals: HashMap<String, (u64, u64, u64)>,
    /// Lines `watch` dropped because stdout or stderr was not read, and
    /// the totals last added.
    output_dropped: Family<StreamLabels, Counter>,
    output_dropped_seen: [u64; 2],
}

/// An output stream of the agent: `stdout` or `stderr`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StreamLabels {
    stream: &'static str,
}

/// The code `railwatch_rail_state` gives a rail state.
pub fn rail_state_code(state: RailState) -> i64 {
    match state {
        RailState::Active => 0,
        RailState::Paused => 1,
        RailState::Inert => 2,
    }
}

/// A generation as a gauge value (saturating; a generation never gets
/// near `i64::MAX` in practice).
fn generation_value(generation: u64) -> i64 {
    i64::try_from(generation).unwrap_or(i64::MAX)
}

/// A link rate in bytes per second (node_exporter's
/// `node_infiniband_rate_bytes_per_second` unit), if known.
pub fn bytes_per_second(rate: LinkRate) -> Option<i64> {
    match rate {
        LinkRate::Known { mbps } => i64::try_from(mbps.saturating_mul(125_000)).ok(),
        LinkRate::Unknown => None,
    }
}

/// What a counter grew by from `before` to `now` (a counter that went back
/// started again: all of it is new).
fn grown(now: u64, before: u64) -> u64 {
    if now >= before { now - before } else { now }
}

/// The metrics of evidence beyond the port state.
struct EvidenceFamilies {
    probation: Family<RailLabels, Gauge>,
    silent_flaps: Family<RailLabels, Counter>,
    breaker_trips: Family<RailLabels, Counter>,
    peer_failing: Family<RailLabels, Counter>,
    transfers: Family<TransferLabels, Counter>,
}

impl EvidenceFamilies {
    fn register(registry: &mut Registry) -> EvidenceFamilies {
        let f = EvidenceFamilies {
            probation: Family::default(),
            silent_flaps: Family::default(),
            breaker_trips: Family::default(),
            peer_failing: Family::default(),
            transfers: Family::default(),
        };
        registry.register(
            "railwatch_rail_probation",
            "Whether the rail is on probation: re-admitted by trial after the data-path breaker, until a transfer succeeds",
            f.probation.clone(),
        );
        registry.register(
            "railwatch_silent_flaps",
            "Flaps no event said: a flap counter (link_downed, carrier_changes) rose with no PORT_ERR",
            f.silent_flaps.clone(),
        );
        registry.register(
            "railwatch_breaker_trips",
            "Times the data-path breaker took the rail out (local-path transfer failures through several peers)",
            f.breaker_trips.clone(),
        );
        registry.register(
            "railwatch_peer_failing",
            "Times transfers through one peer failed against the local path through no other peer (the rail stayed)",
            f.peer_failing.clone(),
        );
        registry.register(
            "railwatch_transfers",
            "Transfers the engine reported on the rail, by completion status and what it says (success, local_path, peer_or_app, consequence, unknown)",
            f.transfers.clone(),
        );
        f
    }
}

impl Metrics {
    /// A registry with every metric, `railwatch_build_info` set for
    /// `version`, no rail yet.
    pub fn new(version: &str) -> Metrics {
        let mut registry = Registry::default();
        let rail_available = Family::<RailLabels, Gauge>::default();
        let rail_state = Family::<RailLabels, Gauge>::default();
        let port_state = Family::<RailLabels, Gauge>::default();
        let rail_generation = Family::<RailLabels, Gauge>::default();
        let link_rate = Family::<RailLabels, Gauge>::default();
        let async_events = Family::<EventLabels, Counter>::default();
        let transitions = Family::<TransitionLabels, Counter>::default();
        let recoveries_by_poll = Family::<RailLabels, Counter>::default();
        let pauses = Family::<RailLabels, Counter>::default();
        let read_errors = Family::<DeviceLabels, Counter>::default();
        let reopen_attempts = Family::<DeviceLabels, Counter>::default();
        let unavailable: Family<RailLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(unavailable_histogram);
        let evidence = EvidenceFamilies::register(&mut registry);
        let host = HostFamilies::register(&mut registry);
        let output_dropped = Family::<StreamLabels, Counter>::default();
        registry.register(
            "railwatch_output_lines_dropped",
            "Lines of watch's output dropped because stdout or stderr was not read fast enough (its queue was full)",
            output_dropped.clone(),
        );

        registry.register(
            "railwatch_rail_available",
            "Whether the selector may pick the rail: 1 available, 0 not",
            rail_available.clone(),
        );
        registry.register(
            "railwatch_rail_state",
            "The rail's state: 0 active, 1 paused, 2 inert (no usable device)",
            rail_state.clone(),
        );
        registry.register(
            "railwatch_port_state",
            "The port state last read (ibv_port_state, as node_infiniband_state_id: 1 down, 2 init, 3 armed, 4 active, 5 active_defer)",
            port_state.clone(),
        );
        registry.register(
            "railwatch_rail_generation",
            "The rail's generation: bumped by every re-activation, re-attach and address change",
            rail_generation.clone(),
        );
        registry.register_with_unit(
            "railwatch_link_rate",
            "The link rate seeded into the selector",
            Unit::Other("bytes_per_second".to_owned()),
            link_rate.clone(),
        );
        registry.register(
            "railwatch_async_events",
            "Async events read from the device (each acknowledged once), by event name",
            async_events.clone(),
        );
        registry.register(
            "railwatch_transitions",
            "Rail transitions, by the state entered and the cause (the pause reason or the recovery path)",
            transitions.clone(),
        );
        registry.register(
            "railwatch_recoveries_by_poll",
            "Rails brought back by the recovery tick: each one a lost PORT_ACTIVE",
            recoveries_by_poll.clone(),
        );
        registry.register(
            "railwatch_rail_pauses",
            "Times the rail was paused, whatever the cause (railwatch_transitions_total{to=\"paused\"} summed, there from the rail's attach)",
            pauses.clone(),
        );
        registry.register(
            "railwatch_read_errors",
            "Drains of the device's async-event fd that stopped on a real read error",
            read_errors.clone(),
        );
        registry.register(
            "railwatch_reopen_attempts",
            "Attempts to re-open the device after it went away",
            reopen_attempts.clone(),
        );
        registry.register_with_unit(
            "railwatch_rail_unavailable",
            "How long a rail stayed unavailable, observed when it comes back",
            Unit::Seconds,
            unavailable.clone(),
        );
        registry.register(
            "railwatch_build",
            "railwatch's version; the value is always 1",
            Info::new(BuildLabels { version: version.to_owned() }),
        );
        Metrics {
            registry: Arc::new(registry),
            batches: Arc::new(Batches::default()),
            unwatched: HashSet::new(),
            rail_available,
            rail_state,
            port_state,
            rail_generation,
            link_rate,
            async_events,
            transitions,
            recoveries_by_poll,
            pauses,
            read_errors,
            reopen_attempts,
            unavailable,
            probation: evidence.probation,
            silent_flaps: evidence.silent_flaps,
            breaker_trips: evidence.breaker_trips,
            peer_failing: evidence.peer_failing,
            transfers: evidence.transfers,
            host,
            last_evidence: HashMap::new(),
            down_since: HashMap::new(),
            last_totals: HashMap::new(),
            output_dropped,
            output_dropped_seen: [0; 2],
        }
    }

    /// The totals of lines dropped on the way to stdout and stderr
    /// ([`crate::lineout`]); what is new since the last call is counted.
    pub fn output_dropped(&mut self, stdout: u64, stderr: u64) {
        for (i, (stream, total)) in [("stdout", stdout), ("stderr", stderr)].into_iter().enumerate() {
            let new = total.saturating_sub(self.output_dropped_seen[i]);
            if new > 0 || total == 0 {
                self.output_dropped.get_or_create(&StreamLabels { stream }).inc_by(new);
            }
            self.output_dropped_seen[i] = self.output_dropped_seen[i].max(total);
        }
    }

    /// A handle for a serving thread.
    pub fn exporter(&self) -> Exporter {
        Exporter::new(Arc::clone(&self.registry), Arc::clone(&self.batches))
    }

    /// `device` is no longer watched (excluded on reload): its rails'
    /// gauges (`rails`) are removed, so no alert reads a rail the operator
    /// took out as down, and nothing of it is counted until
    /// [`rewatch`](Self::rewatch). Its counters keep what they counted.
    pub fn unwatch(&mut self, device: &str, rails: &[RailId]) {
        self.unwatched.insert(device.to_owned());
        self.host.unwatch(device);
        for rail in rails {
            self.down_since.remove(rail);
            let labels = RailLabels { device: device.to_owned(), port: rail.port.to_string() };
            self.rail_available.remove(&labels);
            self.rail_state.remove(&labels);
            self.port_state.remove(&labels);
            self.rail_generation.remove(&labels);
            self.link_rate.remove(&labels);
            self.probation.remove(&labels);
            self.last_evidence.remove(rail);
        }
    }

    /// The devices for which `watched` says yes are watched again
    /// (included on reload): their series come back with their attach.
    pub fn rewatch(&mut self, watched: impl Fn(&str) -> bool) {
        self.unwatched.retain(|d| !watched(d));
    }

    /// Runs `update` (notes and a snapshot fed together) as one batch: an
    /// encoding that overlaps it is made again (see [`Exporter::encode`]).
    pub fn batch<T>(&mut self, update: impl FnOnce(&mut Metrics) -> T) -> T {
        self.batches.begin();
        let result = update(self);
        self.batches.end();
        result
    }

    /// Counts one notification: events by name, transitions by cause,
    /// recoveries by the poll, and how long a rail was unavailable when it
    /// comes back.
    pub fn note(&mut self, names: &Names, note: &Notification) {
        let device = match note.what {
            Happening::Event { device, .. }
            | Happening::Drain { device, .. }
            | Happening::ObjectError { device, .. } => device,
            Happening::Transition { rail, .. }
            | Happening::Available { rail, .. }
            | Happening::AddressChanged { rail, .. }
            | Happening::Reseed { rail, .. }
            | Happening::PeerFailing { rail, .. }
            | Happening::Probation { rail, .. }
            | Happening::GidIndex { rail, .. } => rail.device,
        };
        if self.unwatched.contains(names.device(device)) {
            return;
        }
        let rail_labels =
            |rail: RailId| RailLabels { device: names.device(rail.device).to_owned(), port: rail.port.to_string() };
        match note.what {
            Happening::Event { device, kind, .. } => {
                let labels = EventLabels { device: names.device(device).to_owned(), event: kind.name().to_owned() };
                self.async_events.get_or_create(&labels).inc();
            }
            Happening::Transition { rail, to, cause, generation, .. } => {
                // The gauges follow at once, not at the next snapshot: a
                // scrape in between must not read the rail available
                // beside its old state and generation.
                self.rail_state.get_or_create(&rail_labels(rail)).set(rail_state_code(to));
                self.rail_generation.get_or_create(&rail_labels(rail)).set(generation_value(generation));
                let RailLabels { device, port } = rail_labels(rail);
                let labels = RailLabels { device: device.clone(), port: port.clone() };
                if cause == Cause::By(RecoveredBy::Poll) {
                    self.recoveries_by_poll.get_or_create(&labels).inc();
                }
                if to == RailState::Paused {
                    self.pauses.get_or_create(&labels).inc();
                }
                let labels =
                    TransitionLabels { device, port, to: to.name().to_owned(), cause: cause.name().to_owned() };
                self.transitions.get_or_create(&labels).inc();
            }
            Happening::Available { rail, available: false } => {
                self.down_since.entry(rail).or_insert(note.t);
                self.rail_available.get_or_create(&rail_labels(rail)).set(0);
            }
            Happening::Available { rail, available: true } => {
                if let Some(since) = self.down_since.remove(&rail) {
                    let seconds = note.t.0.saturating_sub(since.0) as f64 / 1000.0;
                    self.unavailable.get_or_create(&rail_labels(rail)).observe(seconds);
                }
                self.rail_available.get_or_create(&rail_labels(rail)).set(1);
            }
            Happening::AddressChanged { rail, generation } => {
                self.rail_generation.get_or_create(&rail_labels(rail)).set(generation_value(generation));
            }
            Happening::Reseed { rail, to, .. } => match bytes_per_second(to) {
                Some(rate) => {
                    self.link_rate.get_or_create(&rail_labels(rail)).set(rate);
                }
                None => {
                    self.link_rate.remove(&rail_labels(rail));
                }
            },
            Happening::Probation { rail, on } => {
                self.probation.get_or_create(&rail_labels(rail)).set(i64::from(on));
            }
            Happening::PeerFailing { rail, .. } => {
                self.peer_failing.get_or_create(&rail_labels(rail)).inc();
            }
            Happening::Drain { .. } | Happening::ObjectError { .. } | Happening::GidIndex { .. } => {}
        }
    }

    /// Adds what a rail's evidence counted since the last snapshot, and
    /// sets its probation gauge.
    fn update_evidence(&mut self, labels: &RailLabels, r: &railwatch_runtime::RailSnapshot) {
        self.probation.get_or_create(labels).set(i64::from(r.probation()));
        let now = r.evidence;
        let before = self.last_evidence.insert(r.id, now).unwrap_or_default();
        self.silent_flaps.get_or_create(labels).inc_by(grown(now.silent_flaps, before.silent_flaps));
        self.breaker_trips.get_or_create(labels).inc_by(grown(now.breaker_trips, before.breaker_trips));
        let count = |status: &str, class: WcClass, now: u64, before: u64| {
            let n = grown(now, before);
            if n > 0 {
                let labels = TransferLabels {
                    device: labels.device.clone(),
                    port: labels.port.clone(),
                    status: status.to_owned(),
                    class: class.name().to_owned(),
                };
                self.transfers.get_or_create(&labels).inc_by(n);
            }
        };
        count("success", WcClass::Success, now.transfers_ok, before.transfers_ok);
        for s in WC_STATUSES.iter().skip(1) {
            let i = s.code as usize;
            count(s.name, s.class, now.failed_by_status[i], before.failed_by_status[i]);
        }
        count("unknown", WcClass::Unknown, now.failed_unknown, before.failed_unknown);
    }

    /// Sets every rail's gauges and every device's counters from a snapshot.
    pub fn update(&mut self, snapshot: &Snapshot) {
        self.host.update(snapshot, &self.unwatched);
        for r in &snapshot.rails {
            let device = r.name.rsplit_once('/').map_or(r.name.as_str(), |(d, _)| d);
            if self.unwatched.contains(device) {
                continue;
            }
            let labels = RailLabels { device: device.to_owned(), port: r.id.port.to_string() };
            self.rail_available.get_or_create(&labels).set(i64::from(r.available));
            self.rail_state.get_or_create(&labels).set(rail_state_code(r.state));
            self.rail_generation.get_or_create(&labels).set(generation_value(r.generation));
            // There from the rail's attach, at 0: an alert on their
            // increase sees the first one too.
            self.recoveries_by_poll.get_or_create(&labels).inc_by(0);
            self.pauses.get_or_create(&labels).inc_by(0);
            match r.last_port_state {
                Some(state) => {
                    self.port_state.get_or_create(&labels).set(i64::from(state.code()));
                }
                None => {
                    self.port_state.remove(&labels);
                }
            }
            match r.rate.and_then(bytes_per_second) {
                Some(rate) => {
                    self.link_rate.get_or_create(&labels).set(rate);
                }
                None => {
                    self.link_rate.remove(&labels);
                }
            }
            self.update_evidence(&labels, r);
        }
        for d in snapshot.devices.iter().filter(|d| !self.unwatched.contains(&d.name)) {
            let now = (d.counters.read_errors, d.counters.reopen_attempts, d.counters.comm_est);
            let before = self.last_totals.insert(d.name.clone(), now).unwrap_or((0, 0, 0));
            // A device attached anew starts its counters again: what it
            // counted since is all new.
            let new = |now: u64, before: u64| if now >= before { now - before } else { now };
            let labels = DeviceLabels { device: d.name.clone() };
            let read_errors = new(now.0, before.0);
            let reopen_attempts = new(now.1, before.1);
            // Created even at zero, so the series exist from the start.
            self.read_errors.get_or_create(&labels).inc_by(read_errors);
            self.reopen_attempts.get_or_create(&labels).inc_by(reopen_attempts);
            // COMM_EST is counted by the monitor, not notified (a burst
            // would flood the channel): it is counted here, from the
            // device's counter.
            let comm_est = new(now.2, before.2);
            if comm_est > 0 {
                let labels = EventLabels { device: d.name.clone(), event: "comm_est".to_owned() };
                self.async_events.get_or_create(&labels).inc_by(comm_est);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;
    use std::thread;
    use std::time::Duration;

    use railwatch_core::{EventKind, PauseReason, PortState};
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

    /// A scrape between a notification and the next snapshot: the rail's
    /// state, generation and rate already agree with its availability.
    #[test]
    fn notifications_alone_keep_the_rail_gauges_consistent() {
        let mut m = Metrics::new("1.2.3");
        let rail = RailId { device: 0, port: 1 };
        let names = names();
        m.update(&snapshot(false, 1, 0));
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
        m.note(&names, &note(10, Happening::Reseed { rail, from: None, to: LinkRate::gbps(100) }));
        m.note(&names, &note(10, Happening::Available { rail, available: true }));
        let text = m.exporter().encode(Format::Prometheus);
        let rail_labels = r#"{device="mlx5_0",port="1"}"#;
        let value = |name: &str| series(&text, &format!("{name}{rail_labels}"));
        assert_eq!(value("railwatch_rail_available"), Some("1"), "{text}");
        assert_eq!(value("railwatch_rail_state"), Some("0"), "{text}");
        assert_eq!(value("railwatch_rail_generation"), Some("2"), "{text}");
        assert_eq!(value("railwatch_link_rate_bytes_per_second"), Some("12500000000"), "{text}");

        m.note(&names, &note(20, Happening::AddressChanged { rail, generation: 3 }));
        let text = m.exporter().encode(Format::Prometheus);
        assert_eq!(series(&text, &format!("railwatch_rail_generation{rail_labels}")), Some("3"), "{text}");
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

    /// A scrape never sees half a batch: while the watch loop flips a rail
    /// between active-and-available and paused-and-not in batches, every
    /// encoding has its state and availability agree.
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
                    let state = series(&text, &format!("railwatch_rail_state{labels}")).map(str::to_owned);
                    let available = series(&text, &format!("railwatch_rail_available{labels}")).map(str::to_owned);
                    match (state.as_deref(), available.as_deref()) {
                        (Some("0"), Some("1")) | (Some("1"), Some("0")) | (None, _) | (_, None) => {}
                        other => torn.push(format!("{other:?}")),
                    }
                    scrapes += 1;
                }
                (scrapes, torn)
            })
        };
        for i in 0..20_000u64 {
            let (from, to, available) = if i % 2 == 0 {
                (RailState::Paused, RailState::Active, true)
            } else {
                (RailState::Active, RailState::Paused, false)
            };
            let cause = if available { Cause::By(RecoveredBy::Event) } else { Cause::Reason(PauseReason::PortErr) };
            m.batch(|m| {
                m.note(&names, &note(i, Happening::Transition { rail, from, to, cause, generation: i + 1 }));
                m.note(&names, &note(i, Happening::Available { rail, available }));
            });
            if i % 16 == 0 {
                thread::sleep(Duration::from_micros(50));
            }
        }
        done.store(true, Ordering::Release);
        let (scrapes, torn) = reader.join().unwrap();
        assert!(scrapes > 0);
        assert!(torn.is_empty(), "{} of {scrapes} scrapes torn: {torn:?}", torn.len());
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
        assert_eq!(available(&m).as_deref(), Some("1"));
        // The time it was out is not an outage.
        let text = m.exporter().encode(Format::Prometheus);
        assert!(!text.contains("railwatch_rail_unavailable_seconds_count"), "{text}");
    }
}
