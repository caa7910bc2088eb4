//! The runtime's monitor driving fake devices end to end: real
//! `VerbsDevice`s over the fake libibverbs (fake/fake_ibverbs.c), a real
//! mio poll set on the fake's pipes, a real `SystemClock` and the reference
//! `BandwidthSelector`. Each test re-runs itself under the fake and reads
//! the fake's counters of gets and acks.
//!
//! Time: a short recovery tick (50 ms) and loops of `poll_once` bounded by a
//! generous deadline. Nothing asserts how long something took; "within one
//! tick" is checked by counting the monitor's ticks.

use std::sync::Arc;
use std::time::{Duration, Instant};

use railwatch_core::{EventKind, LinkRate, PauseReason, PortState, RailId, RailState};
use railwatch_runtime::{
    BandwidthSelector, Cause, Config, DeviceMode, Happening, MachineConfig, Monitor, Notification, RecoveredBy,
    Snapshot, SystemClock,
};
use railwatch_verbs_backend::VerbsDevice;
use railwatch_verbs_backend::fake_test;
use railwatch_verbs_backend::testing::{Fake, FakeLib};

const CQ_ERR: u32 = 0;
const COMM_EST: u32 = 4;
const DEVICE_FATAL: u32 = 8;
const PORT_ACTIVE: u32 = 9;
const PORT_ERR: u32 = 10;
const IBV_PORT_DOWN: u32 = 1;
const IBV_PORT_INIT: u32 = 2;
const IBV_PORT_ACTIVE: u32 = 4;

/// A short recovery tick.
const TICK_MS: u64 = 50;
/// A tick that never comes during a test: only events can move a rail.
const NO_TICK_MS: u64 = 3_600_000;
/// How long any wait may take before the test fails (never reached when
/// the code is right).
const DEADLINE: Duration = Duration::from_secs(10);

const RAIL: RailId = RailId { device: 0, port: 1 };

type VerbsMonitor = Monitor<VerbsDevice, Arc<BandwidthSelector>, SystemClock>;

/// A monitor with the given tick over the fake's devices `names`, opened
/// for real.
fn monitor_with(config: Config, names: &[&str]) -> (VerbsMonitor, Arc<BandwidthSelector>) {
    let selector = Arc::new(BandwidthSelector::new());
    let mut monitor = Monitor::new(config, selector.clone(), SystemClock::new()).expect("a poll set");
    for name in names {
        monitor.add_device(VerbsDevice::open(name).unwrap_or_else(|e| panic!("open {name}: {e}")));
    }
    (monitor, selector)
}

/// One fake device `mlx5_0` with one ACTIVE NDR 4x port, under a monitor.
fn one_device(fake: &Fake, tick_ms: u64) -> (VerbsMonitor, Arc<BandwidthSelector>) {
    fake.set_devices(1);
    monitor_with(Config::from(MachineConfig { tick_ms, ..MachineConfig::default() }), &["mlx5_0"])
}

/// Polls until `done` holds, failing after [`DEADLINE`].
fn poll_until(monitor: &mut VerbsMonitor, what: &str, mut done: impl FnMut(&Snapshot) -> bool) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let snapshot = monitor.snapshot();
        if done(&snapshot) {
            return;
        }
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            panic!("timed out waiting for {what}; the monitor has {snapshot:#?}");
        };
        monitor.poll_once(Some(left)).expect("poll_once");
    }
}

/// Polls for `how_long` of wall time (for "nothing happens" checks).
fn poll_for(monitor: &mut VerbsMonitor, how_long: Duration) {
    let until = Instant::now() + how_long;
    while let Some(left) = until.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()) {
        monitor.poll_once(Some(left)).expect("poll_once");
    }
}

fn state_of(snapshot: &Snapshot, rail: &str) -> RailState {
    snapshot.rail(rail).unwrap_or_else(|| panic!("no rail {rail}")).state
}

fn gets_and_acks(fake: &Fake) -> (i64, i64) {
    let c = fake.counters();
    (c.gets, c.acks)
}

/// Every event the fake handed out was acknowledged once, in order.
fn assert_all_acked_once(fake: &Fake) {
    let c = fake.counters();
    assert_eq!(c.acks, c.gets_ok, "one ack per event read");
    assert_eq!(fake.acked(), fake.got(), "each event acked exactly once, as it was read");
}

/// What the monitor notified since the last call (the receiver's type is
/// crossbeam's, which this crate does not name).
macro_rules! notes {
    ($rx:expr) => {
        $rx.try_iter().map(|n: Notification| n.what).collect::<Vec<Happening>>()
    };
}

// ---- pause and recovery -----------------------------------------------------

fake_test!(attach_seeds_the_selector_and_opens_the_gate, FakeLib::Basic, |fake| {
    fake.set_devices(2);
    fake.set_ports(1, 2);
    fake.set_port(1, 2, IBV_PORT_INIT, 64, 2, 64);
    let (monitor, selector) = monitor_with(Config::default(), &["mlx5_0", "mlx5_1"]);
    let snap = monitor.snapshot();
    let names: Vec<&str> = snap.rails.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["mlx5_0/1", "mlx5_1/1", "mlx5_1/2"]);
    assert_eq!(
        (state_of(&snap, "mlx5_0/1"), state_of(&snap, "mlx5_1/1"), state_of(&snap, "mlx5_1/2")),
        (RailState::Active, RailState::Active, RailState::Paused)
    );
    let init = snap.rail("mlx5_1/2").unwrap();
    assert_eq!((init.reason, init.last_port_state), (PauseReason::PortNotActive, Some(PortState::Init)));
    assert_eq!(init.rate, Some(LinkRate::gbps(200)), "seeded even while paused");

    assert!(monitor.gate(RAIL).unwrap().check().is_ok());
    let refused = monitor.gate(RailId { device: 1, port: 2 }).unwrap().check().unwrap_err();
    assert_eq!((refused.state, refused.reason), (RailState::Paused, PauseReason::PortNotActive));
    assert_eq!(selector.available(), [RAIL, RailId { device: 1, port: 1 }]);
    assert_eq!(selector.aggregate_gbps(), Some(800.0));
    assert!(monitor.next_tick().is_some(), "a paused rail needs the tick");
    assert_eq!(fake.counters().opens, 2);
});

fake_test!(port_err_pauses_the_rail_the_gate_refuses_and_port_active_resumes_it, FakeLib::Basic, |fake| {
    let (mut monitor, selector) = one_device(&fake, NO_TICK_MS);
    let rx = monitor.subscribe();
    let gate = monitor.gate(RAIL).unwrap();
    let before = gate.check().expect("active at attach").generation;
    assert!(selector.is_available(RAIL));
    assert_eq!(monitor.next_tick(), None, "a healthy host needs no tick");
    let _ = notes!(rx);

    fake.set_port_state(0, 1, IBV_PORT_DOWN);
    fake.push_event(0, PORT_ERR, 1);
    poll_until(&mut monitor, "the PORT_ERR", |s| state_of(s, "mlx5_0/1") == RailState::Paused);
    let refused = gate.check().expect_err("the gate refuses a paused rail");
    assert_eq!((refused.state, refused.reason, refused.generation), (RailState::Paused, PauseReason::PortErr, before));
    assert!(!selector.is_available(RAIL), "the selector no longer picks it");
    assert_eq!(selector.rate(RAIL), Some(LinkRate::gbps(400)), "the rate stays seeded");
    assert_eq!(selector.pick(42), None);
    assert_eq!(gets_and_acks(&fake), (2, 1), "one event, then EAGAIN");
    let seen = notes!(rx);
    assert_eq!(
        seen,
        [
            Happening::Event { device: 0, port: Some(1), kind: EventKind::PortErr },
            Happening::Transition {
                rail: RAIL,
                from: RailState::Active,
                to: RailState::Paused,
                cause: Cause::Reason(PauseReason::PortErr),
                generation: before,
            },
            Happening::Available { rail: RAIL, available: false },
            Happening::Drain { device: 0, events: 1, errno: None },
        ]
    );

    // The port comes back and says so.
    fake.set_port_state(0, 1, IBV_PORT_ACTIVE);
    fake.push_event(0, PORT_ACTIVE, 1);
    poll_until(&mut monitor, "the PORT_ACTIVE", |s| state_of(s, "mlx5_0/1") == RailState::Active);
    let ticket = gate.check().expect("admitted again");
    assert_eq!(ticket.generation, before + 1, "resume bumps the generation: endpoints built before are stale");
    assert!(selector.is_available(RAIL));
    let snap = monitor.snapshot();
    assert_eq!(snap.rail("mlx5_0/1").unwrap().recovered_by, Some(RecoveredBy::Event));
    assert_eq!((snap.ticks, snap.devices[0].counters.events), (0, 2), "no tick was needed");
    assert_eq!(gets_and_acks(&fake), (4, 2));
    assert_all_acked_once(&fake);
});

fake_test!(an_event_for_another_port_leaves_the_rail_alone, FakeLib::Basic, |fake| {
    fake.set_devices(1);
    fake.set_ports(0, 2);
    let (mut monitor, selector) =
        monitor_with(Config::from(MachineConfig { tick_ms: NO_TICK_MS, ..MachineConfig::default() }), &["mlx5_0"]);
    fake.set_port_state(0, 2, IBV_PORT_DOWN);
    fake.push_event(0, PORT_ERR, 2);
    poll_until(&mut monitor, "the PORT_ERR on port 2", |s| state_of(s, "mlx5_0/2") == RailState::Paused);
    let snap = monitor.snapshot();
    assert_eq!(state_of(&snap, "mlx5_0/1"), RailState::Active);
    assert_eq!(selector.available(), [RAIL]);
});

fake_test!(
    a_port_that_turns_active_without_an_event_is_recovered_by_the_poll_within_one_tick,
    FakeLib::Basic,
    |fake| {
        let (mut monitor, selector) = one_device(&fake, TICK_MS);
        fake.set_port_state(0, 1, IBV_PORT_DOWN);
        fake.push_event(0, PORT_ERR, 1);
        poll_until(&mut monitor, "the PORT_ERR", |s| state_of(s, "mlx5_0/1") == RailState::Paused);
        assert!(monitor.next_tick().is_some(), "a paused rail arms the tick");

        // Down for a few ticks: the poll reads DOWN and leaves the rail paused.
        let ticks = monitor.snapshot().ticks;
        poll_until(&mut monitor, "three ticks", |s| s.ticks >= ticks + 3);
        let snap = monitor.snapshot();
        let rail = snap.rail("mlx5_0/1").unwrap();
        assert_eq!((rail.state, rail.last_port_state), (RailState::Paused, Some(PortState::Down)));

        // The port comes back; its PORT_ACTIVE is lost (never queued).
        fake.set_port_state(0, 1, IBV_PORT_ACTIVE);
        let ticks = monitor.snapshot().ticks;
        poll_until(&mut monitor, "the poll to recover the rail", |s| state_of(s, "mlx5_0/1") == RailState::Active);
        let snap = monitor.snapshot();
        assert_eq!(snap.ticks, ticks + 1, "recovered by the first tick after the port came back");
        let rail = snap.rail("mlx5_0/1").unwrap();
        assert_eq!((rail.recovered_by, rail.available, rail.generation), (Some(RecoveredBy::Poll), true, 2));
        assert!(monitor.gate(RAIL).unwrap().check().is_ok());
        assert!(selector.is_available(RAIL));
        assert_eq!(monitor.next_tick(), None, "nothing needs the tick any more");
        assert_eq!(gets_and_acks(&fake), (2, 1), "the poll reads port state, never the event queue");
        assert_all_acked_once(&fake);
    }
);

fake_test!(the_poll_leaves_init_armed_and_active_defer_paused, FakeLib::Basic, |fake| {
    let (mut monitor, _selector) = one_device(&fake, TICK_MS);
    fake.set_port_state(0, 1, IBV_PORT_DOWN);
    fake.push_event(0, PORT_ERR, 1);
    poll_until(&mut monitor, "the PORT_ERR", |s| state_of(s, "mlx5_0/1") == RailState::Paused);
    for (code, state) in [(IBV_PORT_INIT, PortState::Init), (3, PortState::Armed), (5, PortState::ActiveDefer)] {
        fake.set_port_state(0, 1, code);
        let ticks = monitor.snapshot().ticks;
        poll_until(&mut monitor, "two ticks", |s| s.ticks >= ticks + 2);
        let snap = monitor.snapshot();
        let rail = snap.rail("mlx5_0/1").unwrap();
        assert_eq!((rail.state, rail.last_port_state), (RailState::Paused, Some(state)), "{state}");
    }
});

fake_test!(a_renegotiated_link_is_reseeded_on_resume, FakeLib::Basic, |fake| {
    let (mut monitor, selector) = one_device(&fake, TICK_MS);
    fake.set_port_state(0, 1, IBV_PORT_DOWN);
    fake.push_event(0, PORT_ERR, 1);
    poll_until(&mut monitor, "the PORT_ERR", |s| state_of(s, "mlx5_0/1") == RailState::Paused);
    // Back at HDR 4x (200 Gb/s) instead of NDR 4x.
    fake.set_port(0, 1, IBV_PORT_ACTIVE, 64, 2, 64);
    fake.push_event(0, PORT_ACTIVE, 1);
    poll_until(&mut monitor, "the PORT_ACTIVE", |s| state_of(s, "mlx5_0/1") == RailState::Active);
    assert_eq!(selector.rate(RAIL), Some(LinkRate::gbps(200)));
    assert_eq!(monitor.snapshot().rail("mlx5_0/1").unwrap().rate, Some(LinkRate::gbps(200)));
    assert_eq!(selector.aggregate_gbps(), Some(200.0));
});

// ---- the five drain cases, through the monitor -------------------------------

fake_test!(a_burst_of_five_drains_with_six_gets_and_five_acks, FakeLib::Basic, |fake| {
    let (mut monitor, _selector) = one_device(&fake, NO_TICK_MS);
    let rx = monitor.subscribe();
    for qp in 1..=5u64 {
        fake.push_event(0, COMM_EST, 0x7f00_0000_1000 * qp);
    }
    poll_until(&mut monitor, "the burst", |s| s.devices[0].counters.events == 5);
    assert_eq!(gets_and_acks(&fake), (6, 5));
    assert_all_acked_once(&fake);
    let snap = monitor.snapshot();
    let c = &snap.devices[0].counters;
    assert_eq!((c.gets, c.comm_est, c.read_errors), (6, 5, 0));
    assert_eq!((state_of(&snap, "mlx5_0/1"), snap.rail("mlx5_0/1").unwrap().generation), (RailState::Active, 1));
    assert!(notes!(rx).contains(&Happening::Drain { device: 0, events: 5, errno: None }), "one drain of 5");
});

fake_test!(a_port_active_behind_unhandled_events_is_handled_and_all_are_acked, FakeLib::Basic, |fake| {
    fake.set_devices(1);
    fake.set_port_state(0, 1, IBV_PORT_DOWN);
    let (mut monitor, selector) =
        monitor_with(Config::from(MachineConfig { tick_ms: NO_TICK_MS, ..MachineConfig::default() }), &["mlx5_0"]);
    assert_eq!(state_of(&monitor.snapshot(), "mlx5_0/1"), RailState::Paused, "down at attach");

    fake.set_port_state(0, 1, IBV_PORT_ACTIVE);
    for qp in 1..=3u64 {
        fake.push_event(0, COMM_EST, 0x5000 + qp);
    }
    fake.push_event(0, 99, 0); // a code no header knows
    fake.push_event(0, PORT_ACTIVE, 1);
    poll_until(&mut monitor, "the drain", |s| s.devices[0].counters.events == 5);
    let snap = monitor.snapshot();
    let rail = snap.rail("mlx5_0/1").unwrap();
    assert_eq!((rail.state, rail.recovered_by), (RailState::Active, Some(RecoveredBy::Event)));
    assert!(selector.is_available(RAIL));
    let c = &snap.devices[0].counters;
    assert_eq!((c.comm_est, c.unhandled), (3, 1));
    assert_eq!(gets_and_acks(&fake), (6, 5));
    assert_all_acked_once(&fake);
});

fake_test!(an_empty_queue_is_one_get_no_ack_and_not_an_error, FakeLib::Basic, |fake| {
    // A budget of exactly the queued events: the first service stops on the
    // budget with the device pending, the next one finds the queue empty.
    fake.set_devices(1);
    let config = Config {
        machine: MachineConfig { tick_ms: NO_TICK_MS, ..MachineConfig::default() },
        drain_budget: 3,
        ..Config::default()
    };
    let (mut monitor, _selector) = monitor_with(config, &["mlx5_0"]);
    let rx = monitor.subscribe();
    for qp in 1..=3u64 {
        fake.push_event(0, COMM_EST, 0x9000 + qp);
    }
    poll_until(&mut monitor, "the budget", |s| s.devices[0].counters.budget_hits == 1);
    // The same poll_once serviced the pending device again before returning:
    // 3 gets and 3 acks on the budget, then 1 get and no ack on the empty
    // queue, which ends the drain without an error.
    assert_eq!(gets_and_acks(&fake), (4, 3), "one get on the empty queue, no ack");
    assert!(!monitor.has_pending());
    let snap = monitor.snapshot();
    let d = &snap.devices[0];
    assert_eq!((d.mode, d.counters.read_errors, d.counters.gets), (DeviceMode::Events, 0, 4));
    assert!(notes!(rx).contains(&Happening::Drain { device: 0, events: 3, errno: None }));
    assert_all_acked_once(&fake);
});

fake_test!(one_eintr_is_retried_within_the_drain, FakeLib::Basic, |fake| {
    let (mut monitor, _selector) = one_device(&fake, NO_TICK_MS);
    fake.set_port_state(0, 1, IBV_PORT_DOWN);
    fake.push_event(0, PORT_ERR, 1);
    fake.set_get_fault(0, libc::EINTR, 0, 1);
    poll_until(&mut monitor, "the PORT_ERR", |s| state_of(s, "mlx5_0/1") == RailState::Paused);
    assert_eq!(gets_and_acks(&fake), (3, 1), "EINTR, the event, EAGAIN");
    let snap = monitor.snapshot();
    let d = &snap.devices[0];
    assert_eq!((d.mode, d.counters.interrupted, d.counters.read_errors), (DeviceMode::Events, 1, 0));
    assert_all_acked_once(&fake);
});

fake_test!(eio_after_one_event_stops_the_drain_and_falls_back_to_bounded_polling, FakeLib::Basic, |fake| {
    let (mut monitor, selector) = one_device(&fake, TICK_MS);
    let rx = monitor.subscribe();
    let _ = notes!(rx);
    fake.set_port_state(0, 1, IBV_PORT_DOWN);
    fake.push_event(0, PORT_ERR, 1);
    fake.push_event(0, PORT_ACTIVE, 1);
    fake.set_get_fault(0, libc::EIO, 1, -1);
    poll_until(&mut monitor, "the read error", |s| s.devices[0].counters.read_errors == 1);
    assert_eq!(gets_and_acks(&fake), (2, 1), "the event, then EIO: the drain stops");
    assert_all_acked_once(&fake);
    let snap = monitor.snapshot();
    // The port query still works: the device stays, in poll-only mode.
    assert_eq!(snap.devices[0].mode, DeviceMode::PollOnly);
    assert_eq!(state_of(&snap, "mlx5_0/1"), RailState::Paused);
    let seen = notes!(rx);
    let drain_errno = seen.iter().find_map(|h| match h {
        Happening::Drain { device: 0, events: 1, errno } => Some(*errno),
        _ => None,
    });
    // The backend's EIO is an io::Error wrapping a VerbsError (device and
    // call), so its errno is one level down the source chain; the monitor
    // finds it there.
    assert_eq!(drain_errno, Some(Some(libc::EIO)), "{seen:#?}");

    // Bounded: the fd is out of the poll set, so it is never read again and
    // the monitor wakes about once per tick, not in a loop.
    let before = monitor.snapshot();
    poll_for(&mut monitor, Duration::from_millis(6 * TICK_MS));
    let after = monitor.snapshot();
    assert_eq!(gets_and_acks(&fake), (2, 1), "no read after the error");
    let (wakeups, ticks) = (after.wakeups - before.wakeups, after.ticks - before.ticks);
    assert!(ticks >= 1, "the tick keeps running for a poll-only device");
    assert!(wakeups <= ticks + 2, "{wakeups} wake-ups for {ticks} ticks: spinning");

    // The poll does the fd's job: the port comes back (its PORT_ACTIVE was
    // stranded behind the error)…
    fake.set_port_state(0, 1, IBV_PORT_ACTIVE);
    poll_until(&mut monitor, "the poll to recover", |s| state_of(s, "mlx5_0/1") == RailState::Active);
    assert_eq!(monitor.snapshot().rail("mlx5_0/1").unwrap().recovered_by, Some(RecoveredBy::Poll));
    assert!(selector.is_available(RAIL));
    // …and a poll-only device's active rails are polled too, so a port that
    // goes down is still seen.
    fake.set_port_state(0, 1, IBV_PORT_DOWN);
    poll_until(&mut monitor, "the poll to pause", |s| state_of(s, "mlx5_0/1") == RailState::Paused);
    assert_eq!(monitor.snapshot().rail("mlx5_0/1").unwrap().reason, PauseReason::PortNotActive);
    assert!(!selector.is_available(RAIL));
    assert_eq!(gets_and_acks(&fake), (2, 1));
    assert!(monitor.next_tick().is_some(), "a poll-only device keeps the tick");
});

// ---- the device going away -------------------------------------------------------

fake_test!(a_removed_device_goes_inert_and_is_reopened_with_backoff, FakeLib::Basic, |fake| {
    let config = Config::from(MachineConfig {
        tick_ms: TICK_MS,
        reopen_initial_ms: 20,
        reopen_max_ms: 100,
        ..MachineConfig::default()
    });
    fake.set_devices(1);
    let (mut monitor, selector) = monitor_with(config, &["mlx5_0"]);
    // Removal: DEVICE_FATAL may or may not make it; the queue hangs up and
    // port queries fail.
    fake.set_query_errno(0, libc::ENODEV);
    fake.close_event_queue(0);
    poll_until(&mut monitor, "the rail to go inert", |s| state_of(s, "mlx5_0/1") == RailState::Inert);
    let snap = monitor.snapshot();
    assert_eq!(snap.rail("mlx5_0/1").unwrap().reason, PauseReason::DeviceRemoved);
    assert!(matches!(snap.devices[0].mode, DeviceMode::Gone { .. }), "{:?}", snap.devices[0].mode);
    assert!(!selector.is_available(RAIL));
    let refused = monitor.gate(RAIL).unwrap().check().unwrap_err();
    assert_eq!((refused.state, refused.reason), (RailState::Inert, PauseReason::DeviceRemoved));
    assert_eq!(fake.counters().closes, 1, "the device is closed");

    // Re-opens fail while the device is gone (ibv_query_device fails)…
    poll_until(&mut monitor, "two failed re-opens", |s| s.devices[0].counters.reopen_attempts >= 2);
    assert_eq!(state_of(&monitor.snapshot(), "mlx5_0/1"), RailState::Inert, "the poll never revives an inert rail");
    // …and succeed once it is back.
    fake.set_query_errno(0, 0);
    poll_until(&mut monitor, "the re-open", |s| s.devices[0].counters.reopens == 1);
    let snap = monitor.snapshot();
    let rail = snap.rail("mlx5_0/1").unwrap();
    assert_eq!((rail.state, rail.recovered_by, rail.available), (RailState::Active, Some(RecoveredBy::Attach), true));
    assert_eq!(snap.devices[0].mode, DeviceMode::Events);
    assert!(selector.is_available(RAIL));

    // The new fd is watched: events flow again.
    fake.set_port_state(0, 1, IBV_PORT_DOWN);
    fake.push_event(0, PORT_ERR, 1);
    poll_until(&mut monitor, "a PORT_ERR on the new fd", |s| state_of(s, "mlx5_0/1") == RailState::Paused);
    assert_all_acked_once(&fake);
});

fake_test!(device_fatal_closes_the_device_and_the_reopen_attaches_its_rails, FakeLib::Basic, |fake| {
    let config = Config::from(MachineConfig { tick_ms: TICK_MS, reopen_initial_ms: 20, ..MachineConfig::default() });
    fake.set_devices(1);
    fake.set_ports(0, 2);
    let (mut monitor, selector) = monitor_with(config, &["mlx5_0"]);
    fake.push_event(0, CQ_ERR, 0xdead_0000);
    fake.push_event(0, DEVICE_FATAL, 0);
    poll_until(&mut monitor, "the DEVICE_FATAL", |s| {
        s.rails.iter().all(|r| r.state == RailState::Inert && r.reason == PauseReason::DeviceFatal)
    });
    assert_eq!(selector.available(), []);
    assert_eq!(gets_and_acks(&fake), (3, 2), "drained to EAGAIN, then the device is closed: nothing unacked");
    assert_all_acked_once(&fake);
    poll_until(&mut monitor, "the re-open", |s| s.devices[0].counters.reopens == 1);
    let snap = monitor.snapshot();
    assert!(snap.rails.iter().all(|r| r.state == RailState::Active));
    let c = fake.counters();
    assert_eq!((c.opens, c.closes), (2, 1));
    assert_eq!(selector.available().len(), 2);
});

fake_test!(a_rails_identity_is_read_at_attach_and_again_at_the_reopen, FakeLib::Basic, |fake| {
    let config = Config::from(MachineConfig { tick_ms: TICK_MS, reopen_initial_ms: 20, ..MachineConfig::default() });
    fake.set_devices(1);
    fake.set_node_guid(0, 0x0002_c903_00f1_c2a0);
    let (mut monitor, _selector) = monitor_with(config, &["mlx5_0"]);
    let rail = RailId { device: 0, port: 1 };
    let identity = |m: &VerbsMonitor| m.snapshot().rails[0].identity.clone().expect("read at attach");
    assert_eq!(identity(&monitor).node_guid, Some(0x0002_c903_00f1_c2a0));
    // The fake's GID 0 is fe80::1 on an InfiniBand port: port GUID 1.
    assert_eq!(identity(&monitor).port_guid, Some(1));
    assert_eq!(monitor.identity(rail), monitor.snapshot().rails[0].identity.as_ref());
    // Other hardware under the same name after a reset: read again.
    fake.set_node_guid(0, 0x0002_c903_0000_0001);
    fake.push_event(0, DEVICE_FATAL, 0);
    poll_until(&mut monitor, "the re-open", |s| s.devices[0].counters.reopens == 1);
    assert_eq!(identity(&monitor).node_guid, Some(0x0002_c903_0000_0001));
});

// ---- hotplug ----------------------------------------------------------------

/// The fake's device list as the monitor's device source, without uevents:
/// the monitor rescans it on its timer.
struct FakeHost;

impl railwatch_runtime::DeviceSource for FakeHost {
    type Device = VerbsDevice;

    fn fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }

    fn drain(&mut self) -> std::io::Result<bool> {
        Ok(true)
    }

    fn list(&mut self) -> std::io::Result<Vec<String>> {
        railwatch_verbs_backend::list_devices().map_err(std::io::Error::other)
    }

    fn open(&mut self, name: &str) -> std::io::Result<VerbsDevice> {
        VerbsDevice::open(name).map_err(std::io::Error::other)
    }
}

fake_test!(a_device_that_leaves_silently_is_closed_and_one_that_comes_back_is_attached, FakeLib::Basic, |fake| {
    fake.set_devices(2);
    let selector = Arc::new(BandwidthSelector::new());
    let mut monitor: VerbsMonitor = Monitor::new(
        Config::from(MachineConfig { tick_ms: NO_TICK_MS, ..MachineConfig::default() }),
        selector.clone(),
        SystemClock::new(),
    )
    .expect("a poll set");
    let found = monitor.watch_devices(Box::new(FakeHost), Duration::from_millis(20)).expect("watch");
    assert_eq!(found.added, ["mlx5_0", "mlx5_1"], "the first scan adds what is there");
    let gate = monitor.gate_of("mlx5_1/1").expect("a rail");
    let before = gate.check().expect("active").generation;
    assert_eq!(fake.counters().closes, 0);

    // Deleted while we hold it (Soft-RoCE): nothing on the fd, port queries
    // still answer, only the list changes. The handle is closed at once.
    fake.set_listed(1, false);
    poll_until(&mut monitor, "the removal", |s| state_of(s, "mlx5_1/1") == RailState::Inert);
    let snap = monitor.snapshot();
    assert_eq!(snap.devices[1].mode, DeviceMode::Removed);
    assert_eq!(snap.rail("mlx5_1/1").unwrap().reason, PauseReason::DeviceRemoved);
    assert_eq!(state_of(&snap, "mlx5_0/1"), RailState::Active, "the other device is untouched");
    assert_eq!(fake.counters().closes, 1, "our handle is closed, so the kernel's removal can finish");
    assert!(!selector.is_available(RailId { device: 1, port: 1 }));

    // `rdma link add` again: a new device of the same name, same rail id.
    fake.set_listed(1, true);
    poll_until(&mut monitor, "the device coming back", |s| state_of(s, "mlx5_1/1") == RailState::Active);
    let after = gate.check().expect("active again").generation;
    assert!(after > before, "a new device: a new generation ({before} → {after})");
    assert_eq!(monitor.snapshot().rail("mlx5_1/1").unwrap().recovered_by, Some(RecoveredBy::Attach));
    assert!(selector.is_available(RailId { device: 1, port: 1 }));
    assert_eq!(fake.counters().opens, 3);
});

// ---- addresses ----------------------------------------------------------------

const GID_CHANGE: u32 = 18;

fake_test!(a_gid_change_that_changes_the_table_bumps_the_generation_and_says_so, FakeLib::Basic, |fake| {
    let (mut monitor, _) = one_device(&fake, NO_TICK_MS);
    let rx = monitor.subscribe();
    let gate = monitor.gate(RAIL).unwrap();
    let before = gate.check().unwrap().generation;
    let address = monitor.address(RAIL).expect("read at attach").clone();
    assert_eq!(address.gids.len(), 1);
    assert_eq!(address.gids[0].to_string(), "fe80::1");
    assert_eq!((address.lid, address.link_layer), (1, Some(railwatch_core::LinkLayer::InfiniBand)));

    // A GID_CHANGE that changes nothing (an address that came and went):
    // no bump, no notification.
    fake.push_event(0, GID_CHANGE, 1);
    poll_until(&mut monitor, "the event", |s| s.devices[0].counters.events == 1);
    assert_eq!(gate.check().unwrap().generation, before);
    assert!(!notes!(rx).iter().any(|h| matches!(h, Happening::AddressChanged { .. })));

    // An IPv4 address added to the netdev: a new GID at index 1.
    let mut raw = [0u8; 16];
    raw[10..].copy_from_slice(&[0xff, 0xff, 10, 1, 1, 1]);
    fake.set_gid(0, 1, 1, raw);
    fake.push_event(0, GID_CHANGE, 1);
    poll_until(&mut monitor, "the second event", |s| s.devices[0].counters.events == 2);
    let after = gate.check().unwrap().generation;
    assert_eq!(after, before + 1, "endpoints built on the old table are stale");
    let notes = notes!(rx);
    assert!(notes.contains(&Happening::AddressChanged { rail: RAIL, generation: after }), "{notes:?}");
    let gids: Vec<String> = monitor
        .snapshot()
        .rail("mlx5_0/1")
        .unwrap()
        .address
        .as_ref()
        .unwrap()
        .gids
        .iter()
        .map(|g| g.to_string())
        .collect();
    assert_eq!(gids, ["fe80::1", "::ffff:10.1.1.1"]);
});
