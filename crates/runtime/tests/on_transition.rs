//! `Monitor::on_transition`: a rail's transition (or change of
//! availability) handed out within the wake-up that made it, before the
//! reads that follow it, and nothing in a wake-up without one.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use railwatch_core::{Element, EventKind, PauseReason, RailState};
use railwatch_runtime::{Config, MachineConfig, Monitor, NoSelector, Snapshot};
use railwatch_sim_backend::{PortSpec, SimClock, SimDevice};

#[test]
fn each_transition_is_handed_out_in_its_wake_up() {
    let config = Config { machine: MachineConfig { seed: Some(1), ..MachineConfig::default() }, ..Config::default() };
    let mut monitor = Monitor::new(config, NoSelector, SimClock::new()).unwrap();
    let dev = SimDevice::new("mlx5_0", &[PortSpec::active(1)]).unwrap();
    let sim = dev.handle();
    monitor.add_device(dev);
    monitor.poll_once(Some(Duration::ZERO)).unwrap();
    let seen: Arc<Mutex<Vec<Snapshot>>> = Arc::default();
    let kept = Arc::clone(&seen);
    monitor.on_transition(Box::new(move |s| kept.lock().unwrap().push(s.clone())));

    // A wake-up with no transition: nothing.
    sim.queue(railwatch_core::AsyncEvent::new(EventKind::CommEst.code(), Element::None), 3);
    monitor.poll_once(Some(Duration::ZERO)).unwrap();
    assert!(seen.lock().unwrap().is_empty());

    sim.port_down(1);
    monitor.poll_once(Some(Duration::ZERO)).unwrap();
    let after = monitor.snapshot();
    let got: Vec<_> = seen.lock().unwrap().drain(..).collect();
    assert_eq!(got.len(), 1, "once per transition");
    assert_eq!((got[0].rails[0].state, got[0].rails[0].reason), (RailState::Paused, PauseReason::PortErr));
    assert_eq!(got[0].rails[0].generation, after.rails[0].generation);

    sim.port_up(1);
    monitor.poll_once(Some(Duration::ZERO)).unwrap();
    let after = monitor.snapshot();
    let got: Vec<_> = seen.lock().unwrap().drain(..).collect();
    // Active, then (after the link read that reseeds it) available.
    let last = got.last().expect("handed out");
    assert!((1..=2).contains(&got.len()), "{} snapshots", got.len());
    assert_eq!((got[0].rails[0].state, last.rails[0].available), (RailState::Active, true));
    assert_eq!(last.rails[0].generation, after.rails[0].generation);
}
