//! The real [`Machine`], not a copy, under arbitrary interleavings of every
//! input: events for any port (and ports that do not exist), port-state,
//! link and address answers given at once, late, never, or unasked for,
//! per-port query failures, read errors, hang-ups, removals and re-adds,
//! re-open results and time steps, over random configs.
//!
//! A small "world" plays the devices and answers the machine's questions.
//! After every input the invariants of docs/STATE-MACHINE.md are checked:
//! no rail active or available on a closed device; available implies
//! active; the selector hears a rate before a rail is first available; the
//! generation never decreases and every re-attach bumps it; the transitions
//! notified replay to the rails' words; every deadline is finite and, once
//! handled, later than the time it was handled at (no spin); the action
//! queue always drains. A reference model checks the two rules everything
//! rests on: a PORT_ERR pauses an active rail at once, and a port that reads
//! ACTIVE on a healthy device is recovered within two ticks whatever events
//! were lost.
//!
//! Then one test per defect the machine ended (issue list in
//! docs/STATE-MACHINE.md's history), and the allocation check of the event
//! path. `PROPTEST_CASES` raises the case count (`cargo xtask props`).

#![cfg(not(loom))]

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use proptest::prelude::*;
use railwatch_core::{
    Action, AsyncEvent, Cause, DampingConfig, DeviceMode, Errno, EventKind, Happening, LinkAttrs, Machine,
    MachineConfig, Millis, PauseReason, PortState, RailId, RailState,
};

// ---- the world ----------------------------------------------------------------

/// How the harness answers the machine's questions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answering {
    AtOnce,
    Late,
    Never,
}

#[derive(Debug, Clone)]
struct Port {
    state: PortState,
    speed: u32,
    query_fails: bool,
}

#[derive(Debug, Clone)]
struct Dev {
    name: String,
    ports: BTreeMap<u8, Port>,
    /// Open as far as the world knows (Close closes, a good Reopen opens).
    open: bool,
    reopen_ok: bool,
    /// In the host's list (a removed device can be re-added).
    listed: bool,
}

/// An answer held back.
#[derive(Debug, Clone, Copy)]
enum Late {
    Port(u32, u8),
    Link(u32, u8),
    Reopen(u32),
}

#[derive(Debug, Clone)]
enum Op {
    Event { dev: usize, port: u8, code: u32 },
    SetPort { dev: usize, port: u8, state: u32 },
    SetLink { dev: usize, port: u8, speed: u32 },
    QueryFails { dev: usize, port: u8, fails: bool },
    ReopenOk { dev: usize, ok: bool },
    ReadError { dev: usize, eio: bool },
    Hangup { dev: usize },
    Remove { dev: usize },
    Readd { dev: usize },
    Advance { ms: u64 },
    Answering(Answering),
    DeliverLate,
    Unsolicited { dev: usize, port: u8, state: u32 },
}

fn op() -> impl Strategy<Value = Op> {
    let dev = 0..3usize;
    let port = prop_oneof![8 => 1..=3u8, 1 => Just(0u8), 1 => Just(200u8)];
    let code = prop_oneof![
        4 => prop::sample::select(vec![9u32, 10, 9, 10, 8, 0, 4, 11, 17, 18, 20]),
        1 => 0..=25u32,
        1 => Just(u32::MAX),
    ];
    let state = prop_oneof![4 => Just(4u32), 3 => Just(1u32), 1 => 0..=6u32];
    prop_oneof![
        6 => (dev.clone(), port.clone(), code).prop_map(|(dev, port, code)| Op::Event { dev, port, code }),
        4 => (dev.clone(), 1..=3u8, state.clone()).prop_map(|(dev, port, state)| Op::SetPort { dev, port, state }),
        1 => (dev.clone(), 1..=3u8, prop::sample::select(vec![64u32, 128, 255]))
            .prop_map(|(dev, port, speed)| Op::SetLink { dev, port, speed }),
        1 => (dev.clone(), 1..=3u8, any::<bool>()).prop_map(|(dev, port, fails)| Op::QueryFails { dev, port, fails }),
        1 => (dev.clone(), any::<bool>()).prop_map(|(dev, ok)| Op::ReopenOk { dev, ok }),
        1 => (dev.clone(), any::<bool>()).prop_map(|(dev, eio)| Op::ReadError { dev, eio }),
        1 => dev.clone().prop_map(|dev| Op::Hangup { dev }),
        1 => dev.clone().prop_map(|dev| Op::Remove { dev }),
        1 => dev.clone().prop_map(|dev| Op::Readd { dev }),
        6 => prop_oneof![8 => 0..3000u64, 1 => Just(60_000u64), 1 => Just(3_600_000u64)]
            .prop_map(|ms| Op::Advance { ms }),
        1 => prop::sample::select(vec![Answering::AtOnce, Answering::AtOnce, Answering::Late, Answering::Never])
            .prop_map(Op::Answering),
        1 => Just(Op::DeliverLate),
        1 => (dev, port, state).prop_map(|(dev, port, state)| Op::Unsolicited { dev, port, state }),
    ]
}

fn config() -> impl Strategy<Value = MachineConfig> {
    let damping = prop_oneof![
        2 => Just(None),
        1 => Just(Some(DampingConfig::default())),
        // Extreme but valid: a hold of almost a week.
        1 => Just(Some(DampingConfig {
            penalty_per_flap: 1e6,
            suppress: 1e6,
            reuse: 1.0,
            max_penalty: 1e6,
            half_life_ms: 30_000_000,
        })),
    ];
    (
        50..3000u64,
        prop_oneof![Just(0u64), 1..2000u64],
        damping,
        prop_oneof![Just(None), (100..10_000u64).prop_map(Some)],
    )
        .prop_map(|(tick_ms, settle_ms, damping, audit_ms)| MachineConfig {
            tick_ms,
            settle_ms,
            damping,
            audit_ms,
            ..MachineConfig::default()
        })
        .prop_filter("a valid config", |c| c.validate().is_ok())
}

/// The harness: the machine, the world, and what the invariants track.
struct Harness {
    m: Machine,
    world: Vec<Dev>,
    now: Millis,
    answering: Answering,
    late: VecDeque<Late>,
    /// Rails the selector heard a rate for.
    seeded: BTreeSet<RailId>,
    /// The generation each rail last had.
    generation: BTreeMap<RailId, u64>,
    /// The generation each rail had when it last went inert.
    detached_at: BTreeMap<RailId, u64>,
    /// The rails' states replayed from the transitions notified.
    replayed: BTreeMap<RailId, (RailState, u64)>,
}

const ACTION_BOUND: usize = 100_000;

impl Harness {
    fn new(config: MachineConfig, ports: &[u8]) -> Harness {
        let m = Machine::new(config).expect("a valid config");
        let mut h = Harness {
            m,
            world: Vec::new(),
            now: Millis(0),
            answering: Answering::AtOnce,
            late: VecDeque::new(),
            seeded: BTreeSet::new(),
            generation: BTreeMap::new(),
            detached_at: BTreeMap::new(),
            replayed: BTreeMap::new(),
        };
        for (i, &n) in ports.iter().enumerate() {
            let dev = Dev {
                name: format!("mlx5_{i}"),
                ports: (1..=n)
                    .map(|p| (p, Port { state: PortState::Active, speed: 128, query_fails: false }))
                    .collect(),
                open: true,
                reopen_ok: true,
                listed: true,
            };
            let list: Vec<u8> = dev.ports.keys().copied().collect();
            h.world.push(dev);
            let idx = h.m.add_device(&h.world[i].name, &list, Millis(0));
            assert_eq!(idx as usize, i);
            for &p in &list {
                h.replayed.insert(RailId { device: idx, port: p }, (RailState::Inert, 0));
            }
            h.serve();
        }
        h.check();
        h
    }

    fn port_answer(&self, dev: u32, port: u8) -> Result<PortState, Errno> {
        let d = &self.world[dev as usize];
        match d.ports.get(&port) {
            Some(p) if d.open && !p.query_fails => Ok(p.state),
            Some(_) => Err(Errno(19)),
            None => Err(Errno(22)),
        }
    }

    fn link_answer(&self, dev: u32, port: u8) -> Result<LinkAttrs, Errno> {
        let d = &self.world[dev as usize];
        match d.ports.get(&port) {
            Some(p) if d.open => Ok(LinkAttrs::new(p.speed, 2)),
            _ => Err(Errno(19)),
        }
    }

    fn answer(&mut self, late: Late) {
        match late {
            Late::Port(d, p) => {
                let a = self.port_answer(d, p);
                self.m.handle_port_state(d, p, a, self.now);
            }
            Late::Link(d, p) => {
                let a = self.link_answer(d, p);
                self.m.handle_link(d, p, a, self.now);
            }
            Late::Reopen(d) => {
                let dev = &mut self.world[d as usize];
                let ok = dev.reopen_ok && dev.listed;
                dev.open = ok;
                self.m.handle_reopen(d, if ok { Ok(()) } else { Err(Errno(19)) }, self.now);
            }
        }
    }

    /// Carries out every action, answering as `answering` says; checks what
    /// each action may only do.
    fn serve(&mut self) {
        let mut n = 0;
        while let Some(action) = self.m.poll_action() {
            n += 1;
            assert!(n < ACTION_BOUND, "the action queue never drains");
            match action {
                Action::QueryPort { device, port } => self.ask(Late::Port(device, port)),
                Action::ReadLink { device, port } => self.ask(Late::Link(device, port)),
                Action::Reopen { device } => self.ask(Late::Reopen(device)),
                Action::ReadAddress { device, port } => {
                    self.m.handle_address(device, port, Err(Errno(95)), self.now);
                }
                Action::Close { device } => self.world[device as usize].open = false,
                Action::StartReading { .. } | Action::StopReading { .. } | Action::Log(_) => {}
                Action::Reseed { rail, .. } => {
                    self.seeded.insert(rail);
                }
                Action::SetAvailable { rail, available } => {
                    if available {
                        assert!(self.seeded.contains(&rail), "{rail} available before its rate was ever seeded");
                        let word = self.m.rail(rail).unwrap().word;
                        assert_eq!(word.state, RailState::Active, "{rail} made available while {:?}", word.state);
                        assert!(self.world[rail.device as usize].open, "{rail} made available on a closed device");
                    }
                }
                Action::Notify(note) => self.noted(note.what),
            }
        }
    }

    fn ask(&mut self, q: Late) {
        match self.answering {
            Answering::AtOnce => self.answer(q),
            Answering::Late => self.late.push_back(q),
            Answering::Never => {
                // A Reopen never answered would leave the device gone for
                // good; that is the driver's contract, tested elsewhere.
                if let Late::Reopen(_) = q {
                    self.answer(q)
                }
            }
        }
    }

    fn noted(&mut self, what: Happening) {
        if let Happening::Transition { rail, from, to, generation, cause } = what {
            let (state, last) = self.replayed.get(&rail).copied().unwrap_or((RailState::Inert, 0));
            assert_eq!(state, from, "{rail}: a transition from {from:?} but it was {state:?}");
            assert!(generation >= last, "{rail}: generation went back {last} → {generation}");
            if from == RailState::Inert && to != RailState::Inert {
                if let Some(&at) = self.detached_at.get(&rail) {
                    assert!(generation > at, "{rail}: a re-attach without a new generation ({at} → {generation})");
                }
            }
            if to == RailState::Inert {
                self.detached_at.insert(rail, generation);
            }
            if let Cause::By(_) = cause {
                assert_eq!(to, RailState::Active);
            }
            self.replayed.insert(rail, (to, generation));
        }
    }

    /// Moves time to `t`, handling every deadline on the way, as a correct
    /// driver does; a deadline that does not move on is a spin.
    fn advance(&mut self, t: Millis) {
        // Each handled deadline is followed by a strictly later one (checked
        // below), so this loop ends: a deadline that stays put is a spin.
        while let Some(d) = self.m.poll_timeout().filter(|d| *d <= t) {
            self.now = self.now.max(d);
            self.m.handle_timeout(self.now);
            self.serve();
            if let Some(next) = self.m.poll_timeout() {
                assert!(next > self.now, "after handling {}, the next deadline {next} is not later", self.now);
                assert!(next.0 < u64::MAX / 2, "a deadline at the end of time: {next}");
            }
            self.check();
        }
        self.now = self.now.max(t);
    }

    fn apply(&mut self, op: &Op) {
        match *op {
            Op::Event { dev, port, code } => {
                let ev = match EventKind::from_code(code).scope() {
                    railwatch_core::Scope::Port => AsyncEvent::port(EventKind::from_code(code), u32::from(port)),
                    _ => AsyncEvent::new(code, railwatch_core::Element::None),
                };
                let before = self.rail_state(dev, port);
                let reading = self.m.device(dev as u32).unwrap().mode == DeviceMode::Events;
                self.m.handle_event(dev as u32, ev, self.now);
                self.serve();
                // The reference rule: PORT_ERR pauses an active rail at once.
                if code == 10 && before == Some(RailState::Active) && reading {
                    assert_eq!(
                        self.rail_state(dev, port),
                        Some(RailState::Paused),
                        "PORT_ERR left {dev}/{port} active"
                    );
                }
            }
            Op::SetPort { dev, port, state } => {
                if let Some(p) = self.world[dev].ports.get_mut(&port) {
                    p.state = PortState::from_code(state);
                }
            }
            Op::SetLink { dev, port, speed } => {
                if let Some(p) = self.world[dev].ports.get_mut(&port) {
                    p.speed = speed;
                }
            }
            Op::QueryFails { dev, port, fails } => {
                if let Some(p) = self.world[dev].ports.get_mut(&port) {
                    p.query_fails = fails;
                }
            }
            Op::ReopenOk { dev, ok } => self.world[dev].reopen_ok = ok,
            Op::ReadError { dev, eio } => {
                let errno = if eio { Errno::EIO } else { Errno(9) };
                self.m.handle_read_error(dev as u32, errno, self.now);
                self.serve();
            }
            Op::Hangup { dev } => {
                self.m.handle_hangup(dev as u32, self.now);
                self.serve();
            }
            Op::Remove { dev } => {
                self.world[dev].listed = false;
                self.m.handle_removed(dev as u32, self.now);
                self.serve();
            }
            Op::Readd { dev } => {
                let removed = self.m.device(dev as u32).unwrap().mode == DeviceMode::Removed;
                if removed {
                    let d = &mut self.world[dev];
                    d.listed = true;
                    d.open = true;
                    let ports: Vec<u8> = d.ports.keys().copied().collect();
                    let name = d.name.clone();
                    let idx = self.m.add_device(&name, &ports, self.now);
                    assert_eq!(idx as usize, dev, "a name that comes back keeps its index");
                    self.serve();
                }
            }
            Op::Advance { ms } => {
                let t = self.now.plus(ms);
                self.advance(t);
            }
            Op::Answering(a) => self.answering = a,
            Op::DeliverLate => {
                while let Some(q) = self.late.pop_front() {
                    self.answer(q);
                    self.serve();
                }
            }
            Op::Unsolicited { dev, port, state } => {
                self.m.handle_port_state(dev as u32, port, Ok(PortState::from_code(state)), self.now);
                self.m.handle_link(dev as u32, port, Ok(LinkAttrs::new(128, 2)), self.now);
                self.serve();
            }
        }
        self.check();
    }

    fn rail_state(&self, dev: usize, port: u8) -> Option<RailState> {
        self.m.rail(RailId { device: dev as u32, port }).map(|r| r.word.state)
    }

    /// The invariants that hold after every input.
    fn check(&mut self) {
        for r in self.m.rails() {
            let dev = self.m.device(r.id.device).unwrap();
            let closed = dev.mode.is_closed() || !self.world[r.id.device as usize].open;
            if closed {
                assert_ne!(r.word.state, RailState::Active, "{} active on a closed device ({:?})", r.name, dev.mode);
                assert!(!r.available, "{} available on a closed device", r.name);
            }
            if r.available {
                assert_eq!(r.word.state, RailState::Active, "{} available but {:?}", r.name, r.word.state);
                assert!(r.damped_until.is_none() && r.settling_until.is_none(), "{} available but held", r.name);
            }
            let last = self.generation.insert(r.id, r.word.generation).unwrap_or(0);
            assert!(r.word.generation >= last, "{}: generation went back {last} → {}", r.name, r.word.generation);
            let replayed = self.replayed[&r.id];
            assert_eq!(replayed, (r.word.state, r.word.generation), "{}: notifications and word disagree", r.name);
        }
    }

    /// The liveness rule of the reference model: heal the world (every port
    /// ACTIVE, queries answered at once, devices open and listed); within
    /// the re-open backoff and two ticks every rail of a device not removed
    /// is active, whatever events were lost on the way.
    fn heal_and_check_recovery(&mut self) {
        self.answering = Answering::AtOnce;
        while let Some(q) = self.late.pop_front() {
            self.answer(q);
            self.serve();
        }
        for d in &mut self.world {
            d.reopen_ok = true;
            for p in d.ports.values_mut() {
                p.state = PortState::Active;
                p.query_fails = false;
            }
        }
        let cfg = self.m.config().clone();
        let hold = cfg.damping.map_or(0, |d| d.longest_hold_ms().ceil() as u64);
        if hold > 60_000 {
            // A week-long hold polled every tick: the invariants were
            // checked all along; waiting it out here would take too long.
            return;
        }
        let horizon = self.now.plus(hold + cfg.settle_ms + 2 * cfg.reopen_max_ms + 3 * cfg.tick_ms + 10);
        self.advance(horizon);
        self.check();
        for r in self.m.rails() {
            let mode = self.m.device(r.id.device).unwrap().mode;
            if mode == DeviceMode::Removed {
                continue;
            }
            assert_eq!(r.word.state, RailState::Active, "{} not recovered ({:?}, device {mode:?})", r.name, r.word);
            assert!(r.available, "{} recovered but not available", r.name);
        }
    }
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(1024)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn any_interleaving_keeps_every_invariant(
        config in config(),
        ports in prop::collection::vec(1..=3u8, 1..=3),
        ops in prop::collection::vec(op(), 0..60),
    ) {
        let mut h = Harness::new(config, &ports);
        for op in &ops {
            let op = match op {
                Op::Event { dev, port, code } => Op::Event { dev: dev % ports.len(), port: *port, code: *code },
                Op::SetPort { dev, port, state } => Op::SetPort { dev: dev % ports.len(), port: *port, state: *state },
                Op::SetLink { dev, port, speed } => Op::SetLink { dev: dev % ports.len(), port: *port, speed: *speed },
                Op::QueryFails { dev, port, fails } => Op::QueryFails { dev: dev % ports.len(), port: *port, fails: *fails },
                Op::ReopenOk { dev, ok } => Op::ReopenOk { dev: dev % ports.len(), ok: *ok },
                Op::ReadError { dev, eio } => Op::ReadError { dev: dev % ports.len(), eio: *eio },
                Op::Hangup { dev } => Op::Hangup { dev: dev % ports.len() },
                Op::Remove { dev } => Op::Remove { dev: dev % ports.len() },
                Op::Readd { dev } => Op::Readd { dev: dev % ports.len() },
                Op::Unsolicited { dev, port, state } => Op::Unsolicited { dev: dev % ports.len(), port: *port, state: *state },
                other => other.clone(),
            };
            h.apply(&op);
        }
        h.heal_and_check_recovery();
    }
}

#[test]
fn invalid_configs_are_refused_with_their_key() {
    let refused = |c: MachineConfig| Machine::new(c).err().expect("refused").key;
    assert_eq!(refused(MachineConfig { tick_ms: 0, ..MachineConfig::default() }), "tick_ms");
    let d = DampingConfig { half_life_ms: u64::MAX, ..DampingConfig::default() };
    assert_eq!(refused(MachineConfig { damping: Some(d), ..MachineConfig::default() }), "half_life_ms");
    assert_eq!(refused(MachineConfig { reopen_jitter_pct: 101, ..MachineConfig::default() }), "reopen_jitter_pct");
}

// ---- the defects the machine ended ----------------------------------------------

fn rail(h: &Harness, dev: u32, port: u8) -> railwatch_core::RailView<'_> {
    h.m.rail(RailId { device: dev, port }).unwrap()
}

fn event(h: &mut Harness, dev: usize, kind: EventKind, port: u32) {
    h.m.handle_event(dev as u32, AsyncEvent::port(kind, port), h.now);
    h.serve();
    h.check();
}

/// The port bounces: PORT_ERR with the port down, then PORT_ACTIVE with it
/// up, 100 ms later.
fn bounce(h: &mut Harness, at: u64) {
    h.advance(Millis(at));
    h.world[0].ports.get_mut(&1).unwrap().state = PortState::Down;
    event(h, 0, EventKind::PortErr, 1);
    h.advance(Millis(at + 100));
    h.world[0].ports.get_mut(&1).unwrap().state = PortState::Active;
    event(h, 0, EventKind::PortActive, 1);
}

#[test]
fn d2_a_flap_while_held_by_damping_is_charged() {
    let cfg = MachineConfig { damping: Some(DampingConfig::default()), ..MachineConfig::default() };
    let mut h = Harness::new(cfg, &[1]);
    for at in [0, 1000, 2000] {
        bounce(&mut h, at);
    }
    let held = rail(&h, 0, 1).damped_until.expect("three quick flaps: damped");
    assert_eq!(rail(&h, 0, 1).word.reason, PauseReason::Damped);
    // Still bouncing while held: the hold grows instead of ending on time.
    bounce(&mut h, 3000);
    let later = rail(&h, 0, 1).damped_until.expect("still damped");
    assert!(later > held, "the hold did not grow: {held} → {later}");
}

#[test]
fn d4_a_partial_reattach_attaches_nothing_and_the_next_one_bumps() {
    let mut h = Harness::new(MachineConfig::default(), &[2]);
    let g0 = rail(&h, 0, 1).word.generation;
    event(&mut h, 0, EventKind::DeviceFatal, 0);
    assert!(matches!(h.m.device(0).unwrap().mode, DeviceMode::Gone { .. }));
    // The re-open succeeds but port 2's query fails.
    h.world[0].ports.get_mut(&2).unwrap().query_fails = true;
    h.advance(Millis(1500));
    for port in [1, 2] {
        let r = rail(&h, 0, port);
        assert_eq!((r.word.state, r.available), (RailState::Inert, false), "port {port} attached on a failed re-open");
    }
    assert!(matches!(h.m.device(0).unwrap().mode, DeviceMode::Gone { .. }));
    h.world[0].ports.get_mut(&2).unwrap().query_fails = false;
    h.advance(Millis(10_000));
    assert_eq!(rail(&h, 0, 1).word.state, RailState::Active);
    assert!(rail(&h, 0, 1).word.generation > g0, "the successful re-open bumps the generation");
}

#[test]
fn d7_a_hangup_closes_the_device_even_while_queries_answer() {
    let mut h = Harness::new(MachineConfig::default(), &[1]);
    let g0 = rail(&h, 0, 1).word.generation;
    h.m.handle_hangup(0, h.now);
    h.serve();
    h.check();
    assert!(matches!(h.m.device(0).unwrap().mode, DeviceMode::Gone { .. }));
    assert_eq!(rail(&h, 0, 1).word.state, RailState::Inert);
    assert!(!h.world[0].open, "closed");
    h.advance(Millis(2000));
    assert_eq!(h.m.device(0).unwrap().mode, DeviceMode::Events, "re-opened");
    assert!(rail(&h, 0, 1).word.generation > g0);
}

#[test]
fn d9_the_audit_finds_a_silent_port_down_and_is_off_by_default() {
    let mut h = Harness::new(MachineConfig::default(), &[1]);
    assert_eq!(h.m.poll_timeout(), None, "a healthy host has no deadline");
    let cfg = MachineConfig { audit_ms: Some(5000), ..MachineConfig::default() };
    let mut h2 = Harness::new(cfg, &[1]);
    h2.world[0].ports.get_mut(&1).unwrap().state = PortState::Down;
    h2.advance(Millis(5000));
    assert_eq!(rail(&h2, 0, 1).word.state, RailState::Paused);
    h.world[0].ports.get_mut(&1).unwrap().state = PortState::Down;
    h.advance(Millis(3_600_000));
    assert_eq!(rail(&h, 0, 1).word.state, RailState::Active, "no audit: nothing looks");
}

#[test]
fn d10_the_event_path_makes_no_heap_allocation() {
    let mut h = Harness::new(MachineConfig::default(), &[2, 2]);
    // Warm up: the action queue and the watched list reach their size.
    for at in [0, 2000] {
        bounce(&mut h, at);
    }
    let info = allocation_counter::measure(|| {
        for at in [4000, 6000, 8000] {
            h.advance(Millis(at));
            h.m.handle_event(0, AsyncEvent::port(EventKind::PortErr, 1), h.now);
            while let Some(a) = h.m.poll_action() {
                std::hint::black_box(a);
            }
            h.m.handle_event(0, AsyncEvent::port(EventKind::PortActive, 1), h.now);
            while let Some(a) = h.m.poll_action() {
                match a {
                    Action::QueryPort { device, port } => {
                        h.m.handle_port_state(device, port, Ok(PortState::Active), h.now)
                    }
                    Action::ReadLink { device, port } => {
                        h.m.handle_link(device, port, Ok(LinkAttrs::new(128, 2)), h.now)
                    }
                    Action::ReadAddress { device, port } => h.m.handle_address(device, port, Err(Errno(95)), h.now),
                    other => {
                        std::hint::black_box(other);
                    }
                }
            }
        }
    });
    assert_eq!(info.count_total, 0, "heap allocations on the event path");
    assert_eq!(rail(&h, 0, 1).word.state, RailState::Active);
}
