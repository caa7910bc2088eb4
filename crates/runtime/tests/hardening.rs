//! Hardening against a flapping fabric: device re-open with backoff and
//! jitter, the settle delay, and flap damping — the runtime monitor over
//! simulated devices, in virtual time.

use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::Receiver;
use railwatch_core::{DampingConfig, LinkRate, Millis, PauseReason, PortState, RailId, RailState};
use railwatch_runtime::{
    BandwidthSelector, Cause, Config, DeviceMode, Happening, MachineConfig, Monitor, Notification, RailSnapshot,
    RecoveredBy,
};
use railwatch_sim_backend::{PortSpec, SimClock, SimDevice, SimHandle};

struct Rig {
    monitor: Monitor<SimDevice, Arc<BandwidthSelector>, SimClock>,
    clock: SimClock,
    handle: SimHandle,
    rx: Receiver<Notification>,
    notes: Vec<Notification>,
}

const RAIL: RailId = RailId { device: 0, port: 1 };

impl Rig {
    fn new(config: Config) -> Rig {
        let clock = SimClock::new();
        let mut config = Config { notify_capacity: 1 << 16, ..config };
        config.machine.seed = Some(7);
        let mut monitor = Monitor::new(config, Arc::new(BandwidthSelector::new()), clock.clone()).unwrap();
        let rx = monitor.subscribe();
        let dev = SimDevice::new("mlx5_0", &[PortSpec::active(1)]).unwrap();
        let handle = dev.handle();
        monitor.add_device(dev);
        let mut rig = Rig { monitor, clock, handle, rx, notes: Vec::new() };
        rig.at(0);
        rig
    }

    /// Moves virtual time to `t` (stopping at every deadline on the way,
    /// as the simulator's driver does) and lets the monitor settle.
    fn at(&mut self, t: u64) {
        loop {
            let now = railwatch_runtime::Clock::now(&self.clock).0;
            let next = self.monitor.next_deadline().map_or(t, |d| d.0.clamp(now, t));
            self.clock.set(Millis(next));
            loop {
                self.monitor.poll_once(Some(Duration::ZERO)).unwrap();
                if !self.monitor.has_pending() {
                    break;
                }
            }
            self.notes.extend(self.rx.try_iter());
            if next >= t {
                return;
            }
        }
    }

    fn rail(&self) -> RailSnapshot {
        self.monitor.snapshot().rails[0].clone()
    }

    fn transitions(&self) -> Vec<(u64, RailState, RailState, Cause)> {
        self.notes
            .iter()
            .filter_map(|n| match n.what {
                Happening::Transition { from, to, cause, .. } => Some((n.t.0, from, to, cause)),
                _ => None,
            })
            .collect()
    }

    fn flap(&mut self, down_at: u64, up_at: u64) {
        self.at(down_at);
        self.handle.port_down(1);
        self.at(down_at);
        self.at(up_at);
        self.handle.port_up(1);
        self.at(up_at);
    }
}

// ---- settle delay -------------------------------------------------------

#[test]
fn settle_delay_activates_after_the_wait_with_a_fresh_port_read() {
    let mut rig = Rig::new(Config::from(MachineConfig { settle_ms: 3000, ..MachineConfig::default() }));
    rig.flap(100, 1000);
    let r = rig.rail();
    assert_eq!((r.state, r.reason, r.available), (RailState::Paused, PauseReason::Settling, false));
    let gate = rig.monitor.gate(RAIL).unwrap();
    assert_eq!(gate.check().unwrap_err().reason, PauseReason::Settling);
    rig.at(3999);
    assert_eq!(rig.rail().state, RailState::Paused, "still settling one ms before the end");
    let queries = rig.handle.counters().port_queries;
    rig.at(4000);
    let r = rig.rail();
    assert_eq!((r.state, r.available, r.recovered_by), (RailState::Active, true, Some(RecoveredBy::Event)));
    assert!(rig.handle.counters().port_queries > queries, "the port is re-read before activating");
    assert!(gate.check().is_ok());
}

#[test]
fn a_port_err_during_the_settle_cancels_it() {
    let mut rig = Rig::new(Config::from(MachineConfig { settle_ms: 3000, ..MachineConfig::default() }));
    rig.flap(100, 1000);
    rig.at(2000);
    rig.handle.port_down(1);
    rig.at(2000);
    assert_eq!(rig.rail().reason, PauseReason::PortErr);
    rig.at(4500);
    assert_eq!(rig.rail().state, RailState::Paused, "the cancelled settle never fires");
    let activations: Vec<u64> =
        rig.transitions().iter().filter(|(_, _, to, _)| *to == RailState::Active).map(|(t, ..)| *t).collect();
    assert_eq!(activations, vec![0], "only the attach; the cancelled settle (due at 4000) never activated");
    rig.handle.port_up(1);
    rig.at(4500);
    rig.at(7500);
    assert_eq!(rig.rail().state, RailState::Active);
}

#[test]
fn a_port_not_active_after_the_settle_waits_for_the_tick() {
    let mut rig = Rig::new(Config::from(MachineConfig { settle_ms: 500, ..MachineConfig::default() }));
    rig.flap(100, 1000);
    // Silently down again before the settle ends: no PORT_ERR.
    rig.handle.set_port_state(1, PortState::Init);
    rig.at(1500);
    let r = rig.rail();
    assert_eq!((r.state, r.reason), (RailState::Paused, PauseReason::PortNotActive));
    rig.handle.set_port_state(1, PortState::Active);
    // The tick finds it ACTIVE, then the settle runs again.
    rig.at(3200);
    let r = rig.rail();
    assert_eq!((r.state, r.recovered_by), (RailState::Active, Some(RecoveredBy::Poll)));
}

#[test]
fn no_settle_by_default() {
    let mut rig = Rig::new(Config::default());
    rig.flap(100, 1000);
    assert_eq!(rig.rail().state, RailState::Active);
}

// ---- flap damping -------------------------------------------------------

fn damped() -> Config {
    Config::from(MachineConfig { damping: Some(DampingConfig::default()), ..MachineConfig::default() })
}

#[test]
fn three_quick_flaps_are_damped_until_the_penalty_decays() {
    let mut rig = Rig::new(damped());
    rig.flap(100, 200);
    rig.flap(1100, 1200);
    assert_eq!(rig.rail().state, RailState::Active, "two flaps stay below the suppress threshold");
    rig.flap(2100, 2200);
    let r = rig.rail();
    assert_eq!((r.state, r.reason, r.available), (RailState::Paused, PauseReason::Damped, false));
    assert_eq!(rig.monitor.gate(RAIL).unwrap().check().unwrap_err().reason, PauseReason::Damped);
    // Released when 2866.56 decays to 750: 29 017 ms after the third flap.
    rig.at(2100 + 29_016);
    assert_eq!(rig.rail().state, RailState::Paused);
    rig.at(2100 + 29_017);
    let r = rig.rail();
    assert_eq!((r.state, r.available, r.recovered_by), (RailState::Active, true, Some(RecoveredBy::Poll)));
    let damped_at =
        rig.transitions().iter().find(|(_, _, _, c)| *c == Cause::Reason(PauseReason::Damped)).map(|(t, ..)| *t);
    assert_eq!(damped_at, Some(2200), "the notification says why the rail stays paused");
}

#[test]
fn a_damped_rail_whose_port_is_down_at_release_keeps_waiting() {
    let mut rig = Rig::new(damped());
    rig.flap(100, 200);
    rig.flap(1100, 1200);
    rig.flap(2100, 2200);
    rig.handle.set_port_state(1, PortState::Down);
    rig.at(2100 + 29_017);
    let r = rig.rail();
    assert_eq!((r.state, r.reason), (RailState::Paused, PauseReason::PortNotActive));
    // The port going down while held was a flap too (the tick saw it):
    // RFC 2439 keeps charging a suppressed route, so the hold is longer.
    rig.handle.set_port_state(1, PortState::Active);
    rig.at(2100 + 29_017 + 1000);
    let r = rig.rail();
    assert_eq!((r.state, r.reason), (RailState::Paused, PauseReason::Damped));
    rig.at(2100 + 29_017 + 60_000);
    assert_eq!(rig.rail().state, RailState::Active);
}

#[test]
fn flaps_far_apart_are_never_damped_and_damping_is_off_by_default() {
    let mut rig = Rig::new(damped());
    for i in 0..10 {
        rig.flap(100 + i * 60_000, 200 + i * 60_000);
        assert_eq!(rig.rail().state, RailState::Active, "flap {i}");
    }
    let mut rig = Rig::new(Config::default());
    for i in 0..10 {
        rig.flap(100 + i * 300, 200 + i * 300);
        assert_eq!(rig.rail().state, RailState::Active, "flap {i}");
    }
}

// ---- device re-open -----------------------------------------------------

fn reopen_attempts(rig: &Rig) -> u64 {
    rig.monitor.snapshot().devices[0].counters.reopen_attempts
}

#[test]
fn a_removed_device_is_reopened_with_exponential_backoff_and_jitter() {
    let config =
        Config::from(MachineConfig { reopen_initial_ms: 1000, reopen_max_ms: 16_000, ..MachineConfig::default() });
    let mut rig = Rig::new(config);
    rig.at(100);
    rig.handle.remove();
    rig.at(100);
    assert_eq!(rig.rail().state, RailState::Inert);
    // Record when each attempt happens over ten virtual minutes.
    let mut attempts = Vec::new();
    let mut last = 0;
    let mut t = 100;
    while t < 600_100 {
        t += 50;
        rig.at(t);
        let n = reopen_attempts(&rig);
        if n != last {
            assert_eq!(n, last + 1, "one attempt at a time");
            attempts.push(t);
            last = n;
        }
    }
    let gaps: Vec<u64> = attempts.windows(2).map(|w| w[1] - w[0]).collect();
    // Nominal gaps 2, 4, 8, 16, 16, … s, each lengthened by 0–20 % jitter
    // (and rounded up to the 50 ms step of this loop).
    let nominal = [2000u64, 4000, 8000, 16_000];
    for (i, gap) in gaps.iter().enumerate() {
        let n = nominal[i.min(3)];
        assert!(*gap >= n && *gap <= n + n / 5 + 50, "gap {i}: {gap} ms, nominal {n}");
    }
    assert!(attempts[0] >= 1100 && attempts[0] <= 1100 + 200 + 50, "first attempt {}", attempts[0]);
    assert!((36..=42).contains(&attempts.len()), "{} attempts in 10 min, not a spin", attempts.len());
    assert!(gaps.iter().collect::<std::collections::HashSet<_>>().len() > 3, "jitter varies the gaps: {gaps:?}");
    assert_eq!(rig.rail().state, RailState::Inert, "never re-attached while gone");
    assert_eq!(rig.monitor.snapshot().devices[0].counters.reopens, 0);
}

#[test]
fn a_restored_device_is_reattached_with_a_new_generation_and_seeded_bandwidth() {
    let mut rig = Rig::new(Config::default());
    let gate = rig.monitor.gate(RAIL).unwrap();
    let g0 = gate.check().unwrap().generation;
    rig.at(100);
    rig.handle.remove();
    rig.at(100);
    assert!(gate.check().is_err());
    rig.handle.set_link(1, railwatch_core::LinkAttrs::new(64, 2));
    rig.handle.restore();
    rig.at(5000);
    let snap = rig.monitor.snapshot();
    assert!(matches!(snap.devices[0].mode, DeviceMode::Events), "{:?}", snap.devices[0].mode);
    assert_eq!(snap.devices[0].counters.reopens, 1);
    let r = rig.rail();
    assert_eq!((r.state, r.available, r.recovered_by), (RailState::Active, true, Some(RecoveredBy::Attach)));
    assert_eq!(r.rate, Some(LinkRate::gbps(200)));
    assert!(gate.check().unwrap().generation > g0, "endpoints from before the removal are stale");
    let reseeds: Vec<_> = rig
        .notes
        .iter()
        .filter_map(|n| match n.what {
            Happening::Reseed { from, to, .. } => Some((from, to)),
            _ => None,
        })
        .collect();
    // Seeded again on re-attach, from the rate the selector had.
    assert_eq!(reseeds, vec![(None, LinkRate::gbps(400)), (Some(LinkRate::gbps(400)), LinkRate::gbps(200))]);
    // Its events flow again through the new fd.
    rig.handle.port_down(1);
    rig.at(5000);
    assert_eq!(rig.rail().state, RailState::Paused);
}

#[test]
fn device_fatal_closes_the_device_and_reopen_restores_it() {
    let mut rig = Rig::new(Config::default());
    rig.at(100);
    rig.handle.queue(railwatch_core::AsyncEvent::new(8, railwatch_core::Element::Port(0)), 1);
    rig.at(100);
    let r = rig.rail();
    assert_eq!((r.state, r.reason), (RailState::Inert, PauseReason::DeviceFatal));
    assert!(!rig.handle.is_open(), "the device was closed");
    rig.at(2000);
    assert_eq!(rig.rail().state, RailState::Active, "re-opened after about a second");
}
