//! The embedding API an engine sees: explicit subscriptions, the running
//! monitor's handle (snapshots, gates, subscriptions; dropping it stops and
//! joins the thread), configs compared without their seed, and bad configs
//! refused before anything starts.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use railwatch_runtime::{
    BandwidthSelector, Config, DampingConfig, Happening, LinkRate, MachineConfig, Monitor, NewMonitorError, RailId,
    RailState, Selector, SystemClock,
};
use railwatch_sim_backend::{PortSpec, SimClock, SimDevice};

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn nobody_subscribed_means_nothing_queued_and_nothing_dropped() {
    let config = Config { notify_capacity: 1, ..Config::default() };
    let mut monitor = Monitor::new(config, Arc::new(BandwidthSelector::new()), SimClock::new()).unwrap();
    let dev = SimDevice::new("mlx5_0", &[PortSpec::active(1)]).unwrap();
    let h = dev.handle();
    monitor.add_device(dev);
    for _ in 0..10 {
        h.port_down(1);
        h.port_up(1);
        monitor.poll_once(Some(Duration::ZERO)).unwrap();
    }
    assert_eq!(monitor.snapshot().notifications_dropped, 0, "no hidden receiver fills up");
}

#[test]
fn a_late_subscriber_sees_only_what_happens_after_it_subscribed() {
    let mut monitor = Monitor::new(Config::default(), Arc::new(BandwidthSelector::new()), SimClock::new()).unwrap();
    let early = monitor.subscribe();
    let dev = SimDevice::new("mlx5_0", &[PortSpec::active(1)]).unwrap();
    let h = dev.handle();
    monitor.add_device(dev);
    let late = monitor.subscribe();
    h.port_down(1);
    monitor.poll_once(Some(Duration::ZERO)).unwrap();
    let early: Vec<_> = early.try_iter().map(|n| n.what).collect();
    let late: Vec<_> = late.try_iter().map(|n| n.what).collect();
    assert!(
        early.iter().any(|w| matches!(w, Happening::Transition { from: RailState::Inert, .. })),
        "the early subscriber saw the attach: {early:?}"
    );
    assert!(
        !late.iter().any(|w| matches!(w, Happening::Transition { from: RailState::Inert, .. })),
        "no stale history: {late:?}"
    );
    assert!(late.iter().any(|w| matches!(w, Happening::Transition { to: RailState::Paused, .. })), "{late:?}");
    // A full subscriber loses (and counts) its own overflow only.
    let mut monitor = Monitor::new(
        Config { notify_capacity: 1, ..Config::default() },
        Arc::new(BandwidthSelector::new()),
        SimClock::new(),
    )
    .unwrap();
    let small = monitor.subscribe();
    monitor.add_device(SimDevice::new("mlx5_1", &[PortSpec::active(1)]).unwrap());
    assert_eq!(small.len(), 1);
    assert!(monitor.snapshot().notifications_dropped > 0);
    // A dropped receiver unsubscribes: nothing more is counted for it.
    drop(small);
    let before = monitor.snapshot().notifications_dropped;
    monitor.add_device(SimDevice::new("mlx5_2", &[PortSpec::active(1)]).unwrap());
    assert_eq!(monitor.snapshot().notifications_dropped, before);
}

/// A selector that counts calls from the monitor thread.
#[derive(Default)]
struct Counting(AtomicUsize);

impl Selector for Counting {
    fn set_available(&self, _rail: RailId, _available: bool) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
    fn reseed(&self, _rail: RailId, _rate: LinkRate) {}
}

#[test]
fn the_handle_gives_snapshots_gates_and_subscriptions_and_drop_joins() -> io::Result<()> {
    let selector = Arc::new(Counting::default());
    let config = Config::from(MachineConfig { tick_ms: 20, ..MachineConfig::default() });
    let mut monitor = Monitor::new(config, selector.clone(), SystemClock::new())?;
    let dev = SimDevice::new("mlx5_0", &[PortSpec::active(1), PortSpec::active(2)])?;
    let h = dev.handle();
    monitor.add_device(dev);
    let handle = monitor.spawn()?;

    let snap = handle.snapshot()?;
    assert_eq!(snap.rails.len(), 2);
    assert!(snap.rails.iter().all(|r| r.state == RailState::Active && r.available));
    let gate = handle.gate("mlx5_0/1")?.expect("a rail the monitor has");
    assert!(handle.gate("mlx5_9/1")?.is_none());
    let notes = handle.subscribe()?;

    h.port_down(1);
    wait_for("the pause", || gate.check().is_err());
    let note = notes.recv_timeout(Duration::from_secs(5)).expect("a notification after subscribing");
    assert!(matches!(note.what, Happening::Event { .. } | Happening::Transition { .. }), "{note:?}");
    // The PORT_ACTIVE is lost; the tick (20 ms) finds the port ACTIVE.
    h.set_port_state(1, railwatch_runtime::PortState::Active);
    wait_for("the recovery by the tick", || gate.check().is_ok());
    assert!(handle.snapshot()?.ticks >= 1);

    // Dropping the handle stops and joins the thread: the monitor (and its
    // selector clone) is gone, and nothing calls the selector any more.
    drop(handle);
    assert_eq!(Arc::strong_count(&selector), 1, "the monitor thread was joined and dropped");
    let calls = selector.0.load(Ordering::Relaxed);
    h.port_down(2);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(selector.0.load(Ordering::Relaxed), calls);
    Ok(())
}

#[test]
fn config_equality_does_not_depend_on_a_random_seed() {
    assert_eq!(Config::default(), Config::default());
    assert_ne!(Config::default(), Config::from(MachineConfig { seed: Some(3), ..MachineConfig::default() }));
}

#[test]
fn bad_configs_are_refused_before_anything_starts() {
    let refuse = |config: Config, key: &str| {
        let err = Monitor::<SimDevice, _, _>::new(config, Arc::new(BandwidthSelector::new()), SimClock::new())
            .err()
            .expect("refused");
        // A typed error that names the key.
        let NewMonitorError::Config(e) = err else { panic!("{err} is not a config error") };
        assert_eq!(e.key, key, "{e}");
    };
    refuse(Config::from(MachineConfig { tick_ms: 0, ..MachineConfig::default() }), "tick_ms");
    refuse(Config { drain_budget: 0, ..Config::default() }, "drain_budget");
    // The damping hold that would overflow (defect 1): refused with its key.
    let damping = DampingConfig { half_life_ms: u64::MAX, ..DampingConfig::default() };
    refuse(Config::from(MachineConfig { damping: Some(damping), ..MachineConfig::default() }), "damping.half_life_ms");
    let damping = DampingConfig { reuse: 1e-300, half_life_ms: 3_600_000, ..DampingConfig::default() };
    refuse(Config::from(MachineConfig { damping: Some(damping), ..MachineConfig::default() }), "damping.half_life_ms");
    // The monitor opens its own devices: no engine owns them.
    let owner = railwatch_runtime::DeviceOwner::Engine;
    refuse(Config::from(MachineConfig { device_owner: owner, ..MachineConfig::default() }), "device_owner");
}

/// A monitor on its own thread takes the engine's transfer reports and its
/// probe's outcome through the handle: failures through two peers trip the
/// breaker, the probe the half-open gate grants is reported, and its
/// success brings the rail back (without the report it could only time
/// out).
#[test]
fn the_handle_takes_transfer_reports_and_the_probes_outcome() -> io::Result<()> {
    use railwatch_runtime::{DataPathConfig, PauseReason, TransferReport};
    let data_path = DataPathConfig { failures: 2, backoff_initial_ms: 20, backoff_max_ms: 40, ..Default::default() };
    let config = Config::from(MachineConfig { tick_ms: 10, data_path: Some(data_path), ..MachineConfig::default() });
    let mut monitor = Monitor::new(config, Arc::new(BandwidthSelector::new()), SystemClock::new())?;
    monitor.add_device(SimDevice::new("mlx5_0", &[PortSpec::active(1)])?);
    let handle = monitor.spawn()?;
    let rail = RailId { device: 0, port: 1 };
    let gate = handle.gate("mlx5_0/1")?.expect("a rail");
    let retry_exceeded = |peer| TransferReport { peer, wc_status: 12, count: 1 };
    handle.report_transfers(rail, &[retry_exceeded(1), retry_exceeded(2)])?;
    wait_for("the breaker to trip", || gate.check().is_err());
    wait_for("half-open", || gate.word().reason == PauseReason::HalfOpen);
    gate.probe().expect("the half-open gate grants one probe");
    handle.report_probe(rail, true)?;
    wait_for("the probe's success to close the breaker", || gate.check().is_ok());
    Ok(())
}
