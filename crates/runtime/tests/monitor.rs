//! The runtime monitor against simulated devices whose async fds are real
//! non-blocking pipes: the drain rules, the recovery poll, the fidelity of
//! the edge-triggered behaviour, port filtering, re-seeding and the drain
//! budget. Everything runs in virtual time (`SimClock`) with zero poll
//! timeouts, so nothing here depends on the wall clock.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::Receiver;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use railwatch_core::{
    AsyncEvent, Element, EventKind, LinkAttrs, LinkRate, PauseReason, PortState, RailId, RailState, VerbsPort,
    WorkScope,
};
use railwatch_runtime::{
    BandwidthSelector, Cause, Clock, Config, DeviceMode, DrainEnd, Happening, MachineConfig, Monitor, Notification,
    RailSnapshot, RecoveredBy, Snapshot, drain,
};
use railwatch_sim_backend::{PortSpec, SimClock, SimDevice, SimHandle};

const HDR: u32 = 64;

fn comm_est() -> AsyncEvent {
    AsyncEvent::new(EventKind::CommEst.code(), Element::None)
}

fn device(name: &str, ports: &[PortSpec]) -> (SimDevice, SimHandle) {
    let dev = SimDevice::new(name, ports).unwrap();
    let h = dev.handle();
    (dev, h)
}

/// A monitor over some devices, in virtual time, with every notification
/// collected.
struct Bench<P: VerbsPort = SimDevice> {
    monitor: Monitor<P, Arc<BandwidthSelector>, SimClock>,
    clock: SimClock,
    selector: Arc<BandwidthSelector>,
    handles: Vec<SimHandle>,
    rx: Receiver<Notification>,
    /// Every notification so far, in order.
    notes: Vec<Notification>,
}

/// Re-open jitter from a fixed seed, as the scenario driver does: every run
/// is the same run.
fn config() -> Config {
    Config {
        machine: MachineConfig { tick_ms: 1000, seed: Some(1), ..MachineConfig::default() },
        notify_capacity: 1 << 16,
        ..Config::default()
    }
}

impl Bench<SimDevice> {
    fn new(devices: &[(&str, &[PortSpec])]) -> Bench {
        Bench::with_config(config(), devices)
    }

    fn with_config(config: Config, devices: &[(&str, &[PortSpec])]) -> Bench {
        let (devs, handles) = devices.iter().map(|(name, ports)| device(name, ports)).unzip();
        Bench::over(config, devs, handles)
    }
}

impl<P: VerbsPort> Bench<P> {
    fn over(config: Config, devices: Vec<P>, handles: Vec<SimHandle>) -> Bench<P> {
        let clock = SimClock::new();
        let selector = Arc::new(BandwidthSelector::new());
        let mut monitor = Monitor::new(config, selector.clone(), clock.clone()).unwrap();
        let rx = monitor.subscribe();
        for dev in devices {
            monitor.add_device(dev);
        }
        let mut bench = Bench { monitor, clock, selector, handles, rx, notes: Vec::new() };
        bench.collect();
        bench
    }

    fn collect(&mut self) {
        self.notes.extend(self.rx.try_iter());
    }

    /// One wake-up with a zero timeout.
    fn poll(&mut self) {
        self.monitor.poll_once(Some(Duration::ZERO)).unwrap();
        self.collect();
    }

    /// Polls (zero timeout) until no device is pending; returns how many
    /// wake-ups that took.
    fn settle(&mut self) -> usize {
        for passes in 1..=100_000 {
            self.poll();
            if !self.monitor.has_pending() {
                return passes;
            }
        }
        panic!("the monitor never settled");
    }

    /// Moves virtual time to the next recovery tick (or one tick period on,
    /// when none is armed) and settles, so the tick runs.
    fn tick(&mut self) {
        let t = self.monitor.next_tick().unwrap_or_else(|| self.clock.now().plus(1000));
        self.clock.set(t);
        self.settle();
    }

    fn id(&self, name: &str) -> RailId {
        self.monitor.rail_id(name).unwrap_or_else(|| panic!("no rail {name}"))
    }

    fn snap(&self) -> Snapshot {
        let snap = self.monitor.snapshot();
        assert_eq!(snap.notifications_dropped, 0);
        snap
    }

    fn rail(&self, name: &str) -> RailSnapshot {
        self.snap().rail(name).unwrap().clone()
    }

    /// Notifications about `rail` (transitions, re-seeds, availability)
    /// from index `from` on.
    fn rail_notes(&self, rail: RailId, from: usize) -> Vec<Happening> {
        self.notes[from..]
            .iter()
            .map(|n| n.what)
            .filter(|w| match w {
                Happening::Transition { rail: r, .. }
                | Happening::Reseed { rail: r, .. }
                | Happening::Available { rail: r, .. } => *r == rail,
                _ => false,
            })
            .collect()
    }
}

/// The sim's counters as (queued, read, acked, gets).
fn qrag(h: &SimHandle) -> (u64, u64, u64, u64) {
    let c = h.counters();
    (c.queued, c.read, c.acked, c.gets)
}

// ---- the drain rules, through `railwatch_runtime::drain` on the sim's fd --

#[test]
fn drain_fn_a_burst_of_five_drains_with_six_gets_and_five_acks() {
    let (mut dev, h) = device("mlx5_0", &[PortSpec::active(1)]);
    h.queue(comm_est(), 5);
    let mut handed = 0;
    let report = drain(&mut dev, 1000, |_| handed += 1);
    assert!(matches!(report.end, DrainEnd::Empty));
    assert_eq!((report.gets, report.events, handed), (6, 5, 5));
    assert_eq!(qrag(&h), (5, 5, 5, 6));
}

#[test]
fn drain_fn_a_port_active_behind_comm_ests_is_handed_over_and_every_event_acked_once() {
    let (mut dev, h) = device("mlx5_0", &[PortSpec::active(1)]);
    h.queue(comm_est(), 7);
    h.port_up(1);
    let mut seen = Vec::new();
    let report = drain(&mut dev, 1000, |ev| seen.push(ev));
    assert!(matches!(report.end, DrainEnd::Empty));
    assert_eq!(seen.len(), 8);
    assert_eq!(seen.last(), Some(&AsyncEvent::port(EventKind::PortActive, 1)));
    assert_eq!(qrag(&h), (8, 8, 8, 9));
    assert_eq!(h.pending(), 0);
}

#[test]
fn drain_fn_an_empty_queue_is_not_an_error() {
    let (mut dev, h) = device("mlx5_0", &[PortSpec::active(1)]);
    let report = drain(&mut dev, 1000, |_| panic!("nothing is queued"));
    assert!(matches!(report.end, DrainEnd::Empty));
    assert_eq!(qrag(&h), (0, 0, 0, 1));
}

#[test]
fn drain_fn_one_eintr_is_retried() {
    let (mut dev, h) = device("mlx5_0", &[PortSpec::active(1)]);
    h.eintr(1);
    h.queue(comm_est(), 1);
    let report = drain(&mut dev, 1000, |_| {});
    assert!(matches!(report.end, DrainEnd::Empty));
    assert_eq!((report.gets, report.interrupted, report.events), (3, 1, 1));
    assert_eq!(qrag(&h), (1, 1, 1, 3));
}

#[test]
fn drain_fn_eio_after_one_event_stops_the_drain_with_an_error() {
    let (mut dev, h) = device("mlx5_0", &[PortSpec::active(1)]);
    h.queue(comm_est(), 2);
    // The fault strikes right after the first event is read.
    let script = h.clone();
    let report = drain(&mut dev, 1000, |_| script.eio());
    match report.end {
        DrainEnd::Failed(e) => assert_eq!(e.raw_os_error(), Some(libc::EIO)),
        other => panic!("expected a read error, got {other:?}"),
    }
    assert_eq!((report.gets, report.events), (2, 1));
    assert_eq!(qrag(&h), (2, 1, 1, 2));
    assert_eq!(h.pending(), 1, "nothing is read past the error");
}

// ---- the drain rules, through the monitor ---------------------------------

#[test]
fn monitor_drains_a_burst_of_five_with_six_gets_and_five_acks() {
    let mut b = Bench::new(&[("mlx5_0", &[PortSpec::active(1)])]);
    b.poll();
    assert_eq!(qrag(&b.handles[0]), (0, 0, 0, 0), "no readiness, no read");
    b.handles[0].queue(comm_est(), 5);
    assert_eq!(b.settle(), 1, "one wake-up drains the whole burst");
    assert_eq!(qrag(&b.handles[0]), (5, 5, 5, 6));
    let snap = b.snap();
    let c = &snap.devices[0].counters;
    assert_eq!((c.gets, c.events, c.comm_est, c.read_errors), (6, 5, 5, 0));
    assert_eq!(snap.devices[0].mode, DeviceMode::Events);
    assert!(b.notes.iter().any(|n| n.what == Happening::Drain { device: 0, events: 5, errno: None }));
}

#[test]
fn monitor_handles_a_port_active_queued_behind_comm_ests() {
    let mut b = Bench::new(&[("mlx5_0", &[PortSpec::active(1)])]);
    let id = b.id("mlx5_0/1");
    b.handles[0].port_down(1);
    b.settle();
    let paused = b.rail("mlx5_0/1");
    assert_eq!((paused.state, paused.reason, paused.available), (RailState::Paused, PauseReason::PortErr, false));

    let mark = b.notes.len();
    let h = &b.handles[0];
    h.queue(comm_est(), 50);
    h.port_up(1);
    // One wake-up, no tick: the event itself is handled.
    b.poll();
    assert!(!b.monitor.has_pending());
    let rail = b.rail("mlx5_0/1");
    assert_eq!((rail.state, rail.available), (RailState::Active, true));
    assert_eq!(rail.recovered_by, Some(RecoveredBy::Event));
    assert_eq!(rail.generation, paused.generation + 1);
    assert!(b.selector.is_available(id));
    // Every event read once and acknowledged once.
    let (queued, read, acked, gets) = qrag(&b.handles[0]);
    assert_eq!((queued, read, acked), (52, 52, 52));
    assert_eq!(gets, 52 + 2, "one WouldBlock per drain");
    assert_eq!(b.handles[0].pending(), 0);
    assert_eq!(b.snap().devices[0].counters.events, read);
    assert!(b.rail_notes(id, mark).contains(&Happening::Transition {
        rail: id,
        from: RailState::Paused,
        to: RailState::Active,
        cause: Cause::By(RecoveredBy::Event),
        generation: paused.generation + 1,
    }));
}

#[test]
fn monitor_an_empty_queue_is_not_an_error() {
    // With a budget equal to the burst, the drain stops on the budget and
    // the re-service before the next wait finds the queue empty: 1 get,
    // 0 acks, no error.
    let mut b = Bench::with_config(Config { drain_budget: 5, ..config() }, &[("mlx5_0", &[PortSpec::active(1)])]);
    b.handles[0].queue(comm_est(), 5);
    b.poll();
    assert!(!b.monitor.has_pending());
    assert_eq!(qrag(&b.handles[0]), (5, 5, 5, 6));
    let snap = b.snap();
    let c = &snap.devices[0].counters;
    assert_eq!((c.budget_hits, c.read_errors, c.gets), (1, 0, 6));
    assert_eq!(snap.devices[0].mode, DeviceMode::Events);
    // The two passes are reported as one drain.
    let drains: Vec<_> = b.notes.iter().filter(|n| matches!(n.what, Happening::Drain { .. })).collect();
    assert_eq!(drains.len(), 1);
    assert_eq!(drains[0].what, Happening::Drain { device: 0, events: 5, errno: None });

    // Nothing queued: wake-ups read nothing at all.
    for _ in 0..10 {
        b.poll();
    }
    assert_eq!(qrag(&b.handles[0]), (5, 5, 5, 6));
}

#[test]
fn monitor_retries_one_eintr() {
    let mut b = Bench::new(&[("mlx5_0", &[PortSpec::active(1)])]);
    b.handles[0].eintr(1);
    b.handles[0].queue(comm_est(), 1);
    b.settle();
    assert_eq!(qrag(&b.handles[0]), (1, 1, 1, 3));
    let snap = b.snap();
    let c = &snap.devices[0].counters;
    assert_eq!((c.interrupted, c.read_errors, c.events), (1, 0, 1));
    assert_eq!(snap.devices[0].mode, DeviceMode::Events);
}

/// A simulated device whose reads start failing with EIO right after the
/// `after`-th event is read, in the middle of a drain.
struct EioAfter {
    dev: SimDevice,
    script: SimHandle,
    after: u64,
}

impl VerbsPort for EioAfter {
    fn name(&self) -> &str {
        self.dev.name()
    }
    fn ports(&self) -> Vec<u8> {
        self.dev.ports()
    }
    fn async_fd(&self) -> std::os::fd::RawFd {
        self.dev.async_fd()
    }
    fn get_event(&mut self) -> io::Result<AsyncEvent> {
        let ev = self.dev.get_event()?;
        if self.script.counters().read == self.after {
            self.script.eio();
        }
        Ok(ev)
    }
    fn port_state(&mut self, port: u8) -> io::Result<PortState> {
        self.dev.port_state(port)
    }
    fn link(&mut self, port: u8) -> io::Result<LinkAttrs> {
        self.dev.link(port)
    }
    fn close(&mut self) {
        self.dev.close()
    }
    fn reopen(&mut self) -> io::Result<()> {
        self.dev.reopen()
    }
}

#[test]
fn monitor_eio_after_one_event_stops_the_drain_and_further_wakeups_read_nothing() {
    let (dev, h) = device("mlx5_0", &[PortSpec::active(1)]);
    let port = EioAfter { dev, script: h.clone(), after: 1 };
    let mut b = Bench::over(config(), vec![port], vec![h.clone()]);
    h.queue(comm_est(), 2);
    b.settle();
    assert_eq!(qrag(&h), (2, 1, 1, 2), "2 gets, 1 ack");
    assert_eq!(h.pending(), 1);
    let snap = b.snap();
    assert_eq!(snap.devices[0].mode, DeviceMode::PollOnly, "port queries work: the device stays, poll-only");
    assert_eq!(snap.devices[0].counters.read_errors, 1);
    assert!(b.notes.iter().any(|n| n.what == Happening::Drain { device: 0, events: 1, errno: Some(libc::EIO) }));
    let queries_before = h.counters().port_queries;
    let ticks_before = snap.ticks;

    // 100 more wake-ups, half of them with an event queued, and the ticks
    // that fall in between: the failed fd is never read again. The poll
    // took over, active rails included: a silent drop is still seen.
    for i in 0..100u64 {
        if i % 2 == 0 {
            h.queue(comm_est(), 1);
        }
        match i {
            40 => h.set_port_state(1, PortState::Down),
            70 => h.set_port_state(1, PortState::Active),
            _ => {}
        }
        b.clock.advance(500);
        b.settle();
        if i == 45 {
            let r = b.rail("mlx5_0/1");
            assert_eq!((r.state, r.reason, r.available), (RailState::Paused, PauseReason::PortNotActive, false));
        }
    }
    assert_eq!(h.counters().gets, 2, "no read after the error");
    assert_eq!(h.pending(), 51);
    let snap = b.snap();
    let c = &snap.devices[0].counters;
    assert_eq!((c.gets, c.read_errors, c.events), (2, 1, 1));
    assert!(snap.ticks - ticks_before >= 49, "the tick kept running: {} ticks", snap.ticks - ticks_before);
    let queries = h.counters().port_queries - queries_before;
    assert!((49..=60).contains(&queries), "about one port query per tick, got {queries}");
    let r = b.rail("mlx5_0/1");
    assert_eq!((r.state, r.available, r.recovered_by), (RailState::Active, true, Some(RecoveredBy::Poll)));
}

// ---- recovery --------------------------------------------------------------

#[test]
fn the_poll_leaves_inert_rails_alone_and_never_hands_them_to_the_selector() {
    let down = PortSpec::active(1).with_state(PortState::Down);
    let mut b = Bench::new(&[("mlx5_0", &[down]), ("mlx5_1", &[PortSpec::active(1), PortSpec::active(2)])]);
    // mlx5_0/1 stays paused (its port is DOWN), so the tick runs for it.
    assert_eq!(b.rail("mlx5_0/1").state, RailState::Paused);
    let ids = [b.id("mlx5_1/1"), b.id("mlx5_1/2")];
    let gates: Vec<_> = ids.iter().map(|&id| b.monitor.gate(id).unwrap()).collect();
    assert!(gates.iter().all(|g| g.check().is_ok()));

    b.handles[1].remove();
    b.settle();
    for (name, gate) in ["mlx5_1/1", "mlx5_1/2"].iter().zip(&gates) {
        let r = b.rail(name);
        assert_eq!((r.state, r.reason, r.available), (RailState::Inert, PauseReason::DeviceRemoved, false));
        assert_eq!(gate.check().unwrap_err().state, RailState::Inert);
    }
    assert!(matches!(b.snap().devices[1].mode, DeviceMode::Gone { .. }));
    let mark = b.notes.len();
    let gone = b.handles[1].counters();
    let gone_monitor = b.snap().devices[1].counters.clone();
    let live_queries = b.handles[0].counters().port_queries;

    for _ in 0..200 {
        b.tick();
        for (&id, gate) in ids.iter().zip(&gates) {
            assert!(!b.selector.is_available(id));
            assert!(gate.check().is_err());
        }
    }
    for name in ["mlx5_1/1", "mlx5_1/2"] {
        let r = b.rail(name);
        assert_eq!((r.state, r.available), (RailState::Inert, false));
    }
    // A port query on an inert rail would be refused (ENODEV): the monitor
    // never issues one. Only re-opens are attempted, with backoff.
    let now = b.handles[1].counters();
    assert_eq!((now.port_queries, now.link_queries, now.reopens), (gone.port_queries, gone.link_queries, 0));
    let c = b.snap().devices[1].counters.clone();
    assert_eq!(c.port_queries, gone_monitor.port_queries);
    assert!(c.reopen_attempts > gone_monitor.reopen_attempts);
    assert!(c.reopen_attempts < 20, "backoff: {} attempts in 200 s", c.reopen_attempts);
    assert!(b.handles[0].counters().port_queries >= live_queries + 200, "the poll ran for the paused rail");
    for &id in &ids {
        assert_eq!(b.rail_notes(id, mark), vec![], "nothing handed to the selector for an inert rail");
    }

    // Only an attach after a re-open brings them back.
    b.handles[1].restore();
    // The next attempt is at most the longest backoff (60 s, plus jitter)
    // away.
    for _ in 0..100 {
        if b.handles[1].counters().reopens > 0 {
            break;
        }
        b.tick();
    }
    for &id in &ids {
        let notes = b.rail_notes(id, mark);
        assert!(
            matches!(
                notes.first(),
                Some(Happening::Transition {
                    from: RailState::Inert,
                    to: RailState::Active,
                    cause: Cause::By(RecoveredBy::Attach),
                    ..
                })
            ),
            "{notes:?}"
        );
        assert!(b.selector.is_available(id));
    }
    assert_eq!(b.handles[1].counters().reopens, 1);
}

#[test]
fn the_poll_activates_a_paused_rail_whose_port_reads_active() {
    let mut b = Bench::new(&[("mlx5_0", &[PortSpec::active(1)])]);
    let id = b.id("mlx5_0/1");
    b.handles[0].port_down(1);
    b.settle();
    let paused = b.rail("mlx5_0/1");
    assert_eq!(paused.state, RailState::Paused);
    assert!(b.monitor.next_tick().is_some(), "a paused rail arms the tick");

    // The port comes back without an event (the PORT_ACTIVE was lost).
    b.handles[0].set_port_state(1, PortState::Active);
    b.settle();
    assert_eq!(b.rail("mlx5_0/1").state, RailState::Paused, "no event, no tick yet");
    let mark = b.notes.len();
    b.tick();
    let r = b.rail("mlx5_0/1");
    assert_eq!((r.state, r.available, r.recovered_by), (RailState::Active, true, Some(RecoveredBy::Poll)));
    assert_eq!(r.generation, paused.generation + 1);
    assert_eq!(b.monitor.gate(id).unwrap().check().unwrap().generation, r.generation);
    assert_eq!(
        b.rail_notes(id, mark),
        vec![
            Happening::Transition {
                rail: id,
                from: RailState::Paused,
                to: RailState::Active,
                cause: Cause::By(RecoveredBy::Poll),
                generation: r.generation,
            },
            Happening::Available { rail: id, available: true },
        ],
        "same rate: no re-seed"
    );
    // Nothing needs the tick any more: a healthy host has no idle wake-ups.
    assert_eq!(b.monitor.next_tick(), None);
}

#[test]
fn init_armed_and_active_defer_wait() {
    for waiting in [PortState::Init, PortState::Armed, PortState::ActiveDefer] {
        let mut b = Bench::new(&[("mlx5_0", &[PortSpec::active(1)])]);
        let gate = b.monitor.gate(b.id("mlx5_0/1")).unwrap();
        b.handles[0].port_down(1);
        b.settle();
        b.handles[0].set_port_state(1, waiting);
        for _ in 0..5 {
            b.tick();
            let r = b.rail("mlx5_0/1");
            assert_eq!((r.state, r.reason, r.available), (RailState::Paused, PauseReason::PortErr, false), "{waiting}");
            let refusal = gate.check().unwrap_err();
            assert_eq!((refusal.state, refusal.last_port_state), (RailState::Paused, Some(waiting)));
        }
        b.handles[0].set_port_state(1, PortState::Active);
        b.tick();
        let r = b.rail("mlx5_0/1");
        assert_eq!((r.state, r.recovered_by), (RailState::Active, Some(RecoveredBy::Poll)), "{waiting}");
    }
}

#[test]
fn a_rail_attached_with_its_port_not_active_starts_paused_and_recovers_by_the_poll() {
    let init = PortSpec::active(1).with_state(PortState::Init);
    let mut b = Bench::new(&[("mlx5_0", &[init])]);
    let id = b.id("mlx5_0/1");
    let r = b.rail("mlx5_0/1");
    assert_eq!((r.state, r.reason, r.available), (RailState::Paused, PauseReason::PortNotActive, false));
    assert_eq!(b.selector.rate(id), Some(LinkRate::gbps(400)), "bandwidth seeded while paused");
    b.tick();
    assert_eq!(b.rail("mlx5_0/1").state, RailState::Paused);
    b.handles[0].set_port_state(1, PortState::Active);
    b.tick();
    let r = b.rail("mlx5_0/1");
    assert_eq!((r.state, r.available, r.recovered_by), (RailState::Active, true, Some(RecoveredBy::Poll)));
}

// ---- fidelity: the bug railwatch exists for ----------------------------------

/// A burst of COMM_EST (one per connection being set up) with the port's
/// PORT_ACTIVE queued behind it.
fn the_script(h: &SimHandle, burst: u64) {
    h.queue(comm_est(), burst);
    h.port_up(1);
}

#[test]
fn a_naive_one_event_per_wakeup_loop_strands_port_active_and_the_monitor_does_not() {
    const BURST: u64 = 8;

    // The naive engine: mio registers edge-triggered; each wake-up reads
    // exactly one event.
    let (mut dev, h) = device("mlx5_0", &[PortSpec::active(1)]);
    let mut poll = Poll::new().unwrap();
    poll.registry().register(&mut SourceFd(&dev.async_fd()), Token(0), Interest::READABLE).unwrap();
    let mut events = Events::with_capacity(8);
    let mut naive_active = true;
    let mut naive_step = |poll: &mut Poll, dev: &mut SimDevice, active: &mut bool| -> bool {
        poll.poll(&mut events, Some(Duration::ZERO)).unwrap();
        if events.is_empty() {
            return false;
        }
        match dev.get_event().unwrap().kind() {
            EventKind::PortErr => *active = false,
            EventKind::PortActive => *active = true,
            _ => {}
        }
        true
    };
    h.port_down(1);
    assert!(naive_step(&mut poll, &mut dev, &mut naive_active));
    assert!(!naive_active);
    the_script(&h, BURST);
    assert!(naive_step(&mut poll, &mut dev, &mut naive_active), "the burst is one edge");
    for _ in 0..100 {
        assert!(!naive_step(&mut poll, &mut dev, &mut naive_active), "no new edge: the rest is stranded");
    }
    assert!(!naive_active, "the PORT_ACTIVE was never read: paused for the life of the process");
    assert_eq!(h.pending(), BURST, "BURST-1 COMM_EST and the PORT_ACTIVE still queued");
    assert_eq!(h.counters().read, 2);

    // The monitor, same script, same kind of fd.
    let mut b = Bench::new(&[("mlx5_0", &[PortSpec::active(1)])]);
    let h = b.handles[0].clone();
    h.port_down(1);
    b.poll();
    assert_eq!(b.rail("mlx5_0/1").state, RailState::Paused);
    the_script(&h, BURST);
    b.poll();
    let r = b.rail("mlx5_0/1");
    assert_eq!((r.state, r.recovered_by), (RailState::Active, Some(RecoveredBy::Event)));
    assert_eq!(h.pending(), 0);
    let (queued, read, acked, _) = qrag(&h);
    assert_eq!((queued, read, acked), (BURST + 2, BURST + 2, BURST + 2));
}

// ---- port filtering ----------------------------------------------------------

#[test]
fn a_flap_on_port_2_never_touches_rail_1() {
    let mut b = Bench::new(&[("mlx5_0", &[PortSpec::active(1), PortSpec::active(2)])]);
    let (one, two) = (b.id("mlx5_0/1"), b.id("mlx5_0/2"));
    let gate1 = b.monitor.gate(one).unwrap();
    let before = b.rail("mlx5_0/1");
    let ticket = gate1.check().unwrap();
    let mark = b.notes.len();
    let h = b.handles[0].clone();

    for round in 0..10 {
        h.port_down(2);
        h.queue(AsyncEvent::port(EventKind::ClientReregister, 2), 1);
        b.settle();
        assert_eq!(b.rail("mlx5_0/2").state, RailState::Paused);
        if round % 2 == 0 {
            h.port_up(2);
        } else {
            h.set_port_state(2, PortState::Active);
            b.tick();
        }
        h.queue(AsyncEvent::port(EventKind::LidChange, 2), 1);
        b.settle();
        assert_eq!(b.rail("mlx5_0/2").state, RailState::Active);
        assert_eq!(gate1.check(), Ok(ticket), "round {round}");
        assert!(b.selector.is_available(one));
    }
    let after = b.rail("mlx5_0/1");
    assert_eq!(after, before);
    assert_eq!(b.rail_notes(one, mark), vec![], "no notification for rail /1");
    assert!(b.rail_notes(two, mark).len() >= 40);
    assert!(b.rail("mlx5_0/2").generation >= 21, "resumes and LID changes bump /2");
}

// ---- renegotiation -----------------------------------------------------------

#[test]
fn port_active_after_a_downgrade_reseeds_and_at_an_unchanged_rate_does_not() {
    let mut b = Bench::new(&[("mlx5_0", &[PortSpec::active(1)])]);
    let id = b.id("mlx5_0/1");
    assert_eq!(b.selector.rate(id), Some(LinkRate::gbps(400)));
    let h = b.handles[0].clone();

    // NDR 4x → HDR 4x while the port is down.
    h.port_down(1);
    b.settle();
    h.set_link(1, LinkAttrs::new(HDR, PortSpec::WIDTH_4X));
    assert_eq!(b.selector.rate(id), Some(LinkRate::gbps(400)), "reading the port state does not touch the rate");
    let mark = b.notes.len();
    h.port_up(1);
    b.settle();
    let notes = b.rail_notes(id, mark);
    let reseed = Happening::Reseed { rail: id, from: Some(LinkRate::gbps(400)), to: LinkRate::gbps(200) };
    let available = Happening::Available { rail: id, available: true };
    let at = |n: &Happening| notes.iter().position(|x| x == n).unwrap_or_else(|| panic!("no {n:?} in {notes:?}"));
    assert!(at(&reseed) < at(&available), "re-seeded before it is available: {notes:?}");
    assert_eq!(b.selector.rate(id), Some(LinkRate::gbps(200)));
    assert_eq!(b.rail("mlx5_0/1").rate, Some(LinkRate::gbps(200)));
    assert_eq!(b.selector.aggregate_gbps(), Some(200.0));

    // Another bounce at the same rate: resumed, generation bumped, no re-seed.
    let gen_before = b.rail("mlx5_0/1").generation;
    h.port_down(1);
    b.settle();
    let mark = b.notes.len();
    h.port_up(1);
    b.settle();
    let notes = b.rail_notes(id, mark);
    assert!(!notes.iter().any(|n| matches!(n, Happening::Reseed { .. })), "{notes:?}");
    assert!(notes.contains(&available));
    assert_eq!(b.rail("mlx5_0/1").generation, gen_before + 1);
    assert_eq!(b.selector.rate(id), Some(LinkRate::gbps(200)));

    // A duplicate PORT_ACTIVE is a no-op: no bump, no re-seed.
    let mark = b.notes.len();
    h.port_up(1);
    b.settle();
    assert_eq!(b.rail_notes(id, mark), vec![]);
    assert_eq!(b.rail("mlx5_0/1").generation, gen_before + 1);
}

// ---- the drain budget ---------------------------------------------------------

#[test]
fn a_noisy_device_does_not_starve_a_quiet_one() {
    let mut b = Bench::new(&[("noisy", &[PortSpec::active(1)]), ("quiet", &[PortSpec::active(1)])]);
    let budget = config().drain_budget as u64;
    b.handles[0].queue(comm_est(), 10_000);
    b.handles[0].port_down(1);
    b.handles[1].port_down(1);

    b.poll();
    assert!(b.monitor.has_pending(), "the noisy device exceeded its budget");
    assert_eq!(b.rail("quiet/1").state, RailState::Paused, "the quiet device was served in the first wake-up");
    assert_eq!(b.rail("noisy/1").state, RailState::Active, "its PORT_ERR is still behind the burst");
    assert!(b.handles[0].counters().read <= 2 * budget);

    let mut passes = 1;
    while b.monitor.has_pending() {
        b.poll();
        passes += 1;
        assert!(passes < 100);
    }
    assert_eq!(b.rail("noisy/1").state, RailState::Paused);
    // Each wake-up reads at most a budget per pass over the device (two
    // passes when a pipe top-up also made it ready again): bounded work per
    // wake-up, and no blocking wait until it is all read.
    let gets = 10_002u64;
    assert!((gets.div_ceil(2 * budget)..=gets.div_ceil(budget)).contains(&passes), "{passes} wake-ups");
    for h in &b.handles {
        let (queued, read, acked, gets) = qrag(h);
        assert_eq!((read, acked), (queued, queued), "{}", h.name());
        assert!(gets > read && gets <= read + 2, "{}: {gets} gets for {read} events", h.name());
        assert_eq!(h.pending(), 0);
    }
    let snap = b.snap();
    assert!(snap.devices[0].counters.budget_hits >= 10_001 / budget);
    assert_eq!(snap.devices[1].counters.budget_hits, 0);
    assert!(b.notes.iter().any(|n| n.what == Happening::Drain { device: 0, events: 10_001, errno: None }));
}

#[test]
fn a_drain_notification_counts_only_its_own_drain_across_a_device_fatal() {
    let mut b = Bench::with_config(Config { drain_budget: 4, ..config() }, &[("mlx5_0", &[PortSpec::active(1)])]);
    let h = b.handles[0].clone();
    // The first pass stops on the budget after 4 events; the second reads
    // the DEVICE_FATAL, which closes the device mid-drain.
    h.queue(comm_est(), 6);
    h.queue(AsyncEvent::new(EventKind::DeviceFatal.code(), Element::None), 1);
    b.settle();
    assert_eq!(b.rail("mlx5_0/1").state, RailState::Inert);
    // Re-opened (the device itself is fine), then one more event.
    for _ in 0..10 {
        if h.counters().reopens > 0 {
            break;
        }
        b.tick();
    }
    assert_eq!(b.rail("mlx5_0/1").state, RailState::Active);
    let mark = b.notes.len();
    h.queue(comm_est(), 1);
    b.settle();
    let drains: Vec<_> = b.notes[mark..].iter().filter(|n| matches!(n.what, Happening::Drain { .. })).collect();
    assert_eq!(drains.len(), 1);
    assert_eq!(drains[0].what, Happening::Drain { device: 0, events: 1, errno: None });
}

#[test]
fn monitor_tells_lost_work_first_in_its_wake_up() {
    // Two devices ready in one wake-up: a port flap on the first, then a
    // QP_FATAL behind a PORT_ERR on the second, then DEVICE_FATAL on it.
    let mut b = Bench::new(&[("mlx5_0", &[PortSpec::active(1)]), ("mlx5_1", &[PortSpec::active(1)])]);
    let mark = b.notes.len();
    b.handles[0].port_down(1);
    b.handles[1].port_down(1);
    b.handles[1].queue(AsyncEvent::new(EventKind::QpFatal.code(), Element::Object(railwatch_core::ObjectHandle(7))), 1);
    b.handles[1].queue(AsyncEvent::new(EventKind::DeviceFatal.code(), Element::None), 1);
    b.poll();
    let notes: Vec<Happening> = b.notes[mark..].iter().map(|n| n.what).collect();
    let qp = WorkScope::Qp { kind: EventKind::QpFatal, handle: Some(railwatch_core::ObjectHandle(7)) };
    assert_eq!(
        notes[..2],
        [
            Happening::WorkLost { device: 1, scope: qp },
            Happening::WorkLost { device: 1, scope: WorkScope::Device(PauseReason::DeviceFatal) },
        ],
        "{notes:#?}"
    );
    assert!(notes[2..].iter().all(|n| !matches!(n, Happening::WorkLost { .. })), "{notes:#?}");
    assert!(notes.iter().any(|n| matches!(n, Happening::Event { device: 0, .. })), "the rest is told too");
}
