//! Random interleavings of async events, port-state changes, recovery ticks
//! and attach/detach, driven through the crate's real API (the decision
//! table plus [`RailCell`] transitions, as the monitor drives them) and
//! checked against a small reference model written from docs/STATE-MACHINE.md.
//!
//! The harness below plays the monitor for one device with two rails (ports
//! 1 and 2). It only *maps* decisions to transitions; what each event means
//! comes from `decide_event` / `decide_poll`. The model never calls either:
//! it is the decision table re-stated on raw codes.

#![cfg(not(loom))]

use std::cell::RefCell;
use std::sync::Arc;

use proptest::prelude::*;
use railwatch_core::{
    AsyncEvent, Element, EventKind, Gate, LinkRate, Millis, ObjectHandle, Outcome, PauseReason, PollDecision,
    PortState, RailCell, RailDecision, RailId, RailState, RailWord, Scope, Selector, decide_event, decide_poll,
    decide_reseed,
};

/// The rails of the device under test.
const PORTS: [u8; 2] = [1, 2];

// ---------------------------------------------------------------------------
// The system under test: the real cells and gates, driven like the monitor.
// ---------------------------------------------------------------------------

/// A selector that remembers what it was told.
#[derive(Debug, Default)]
struct Recorder {
    rails: RefCell<Vec<Seen>>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Seen {
    available: bool,
    seeded: Option<LinkRate>,
    reseeds: usize,
}

impl Recorder {
    fn new(n: usize) -> Recorder {
        Recorder { rails: RefCell::new(vec![Seen::default(); n]) }
    }

    fn get(&self, i: usize) -> Seen {
        self.rails.borrow()[i]
    }
}

impl Selector for Recorder {
    fn set_available(&self, rail: RailId, available: bool) {
        let mut rails = self.rails.borrow_mut();
        let seen = &mut rails[usize::from(rail.port - 1)];
        if available {
            // The activation path re-seeds before it marks a rail available.
            assert!(seen.seeded.is_some(), "{rail} made available before it was ever seeded");
        }
        seen.available = available;
    }

    fn reseed(&self, rail: RailId, rate: LinkRate) {
        let mut rails = self.rails.borrow_mut();
        let seen = &mut rails[usize::from(rail.port - 1)];
        assert_ne!(seen.seeded, Some(rate), "{rail} re-seeded with the rate it already had");
        seen.seeded = Some(rate);
        seen.reseeds += 1;
    }
}

struct Rail {
    port: u8,
    cell: Arc<RailCell>,
    gate: Gate,
    /// The monitor's cached link rate (what the selector was last seeded with).
    cached: Option<LinkRate>,
}

/// One device with two rails, plus what its ports currently report.
struct Harness {
    rails: Vec<Rail>,
    /// What a port query returns, by port number (index 0 unused).
    port_state: [PortState; 4],
    /// What a link query returns, by port number.
    link: [LinkRate; 4],
    selector: Recorder,
}

impl Harness {
    /// Every rail starts inert (no device yet), every port ACTIVE at 400G.
    fn new() -> Harness {
        let rails = PORTS
            .iter()
            .map(|&port| {
                let cell = Arc::new(RailCell::new(Millis(0)));
                Rail { port, gate: Gate::new(cell.clone()), cell, cached: None }
            })
            .collect();
        Harness {
            rails,
            port_state: [PortState::Active; 4],
            link: [LinkRate::gbps(400); 4],
            selector: Recorder::new(PORTS.len()),
        }
    }

    /// A harness whose rails are attached (active, seeded, available).
    fn attached() -> Harness {
        let mut h = Harness::new();
        for i in 0..h.rails.len() {
            assert_eq!(h.attach(i, Millis(0)), Outcome::Changed);
        }
        h
    }

    fn id(&self, i: usize) -> RailId {
        RailId { device: 0, port: self.rails[i].port }
    }

    fn word(&self, i: usize) -> RailWord {
        self.rails[i].cell.load()
    }

    /// Re-seeds the selector if the port's rate differs from the cache or
    /// was never seeded.
    fn refresh_link(&mut self, i: usize) {
        let fresh = self.link[usize::from(self.rails[i].port)];
        if let Some(rate) = decide_reseed(fresh, self.rails[i].cached) {
            self.selector.reseed(self.id(i), rate);
            self.rails[i].cached = Some(rate);
        }
    }

    /// The activation path: resume → read link → re-seed → available last.
    fn activate(&mut self, i: usize, now: Millis) -> Outcome {
        let out = self.rails[i].cell.resume(now);
        if out == Outcome::Changed {
            self.refresh_link(i);
            self.selector.set_available(self.id(i), true);
        }
        out
    }

    /// Pause: state first, then unavailable.
    fn pause(&mut self, i: usize, reason: PauseReason, now: Millis) -> Outcome {
        let out = self.rails[i].cell.pause(reason, now);
        if out == Outcome::Changed {
            self.selector.set_available(self.id(i), false);
        }
        out
    }

    fn detach(&mut self, i: usize, reason: PauseReason, now: Millis) -> Outcome {
        let out = self.rails[i].cell.detach(reason, now);
        if out == Outcome::Changed {
            self.selector.set_available(self.id(i), false);
        }
        out
    }

    /// The device was (re)opened: attach reads the port, seeds the
    /// bandwidth, and makes the rail available only if it came up active.
    fn attach(&mut self, i: usize, now: Millis) -> Outcome {
        let port = self.port_state[usize::from(self.rails[i].port)];
        let out = self.rails[i].cell.attach(port, now);
        if out == Outcome::Changed {
            self.refresh_link(i);
            if self.word(i).state == RailState::Active {
                self.selector.set_available(self.id(i), true);
            }
        }
        out
    }

    /// One event, applied to every rail of the device as `decide_event` says.
    fn on_event(&mut self, ev: &AsyncEvent, now: Millis) {
        for i in 0..self.rails.len() {
            let state = self.word(i).state;
            match decide_event(ev, self.rails[i].port, state) {
                RailDecision::Leave => {}
                RailDecision::Pause(reason) => {
                    let _ = self.pause(i, reason, now);
                }
                RailDecision::Activate => {
                    let _ = self.activate(i, now);
                }
                RailDecision::Detach(reason) => {
                    let _ = self.detach(i, reason, now);
                }
                RailDecision::Restart | RailDecision::AddressChanged => {
                    assert_eq!(self.rails[i].cell.bump_generation(), Outcome::Changed);
                }
                RailDecision::RefreshLink => self.refresh_link(i),
            }
        }
    }

    /// One recovery tick. Paused rails are always read; active rails only
    /// when the device is poll-only (its event fd failed). Inert rails are
    /// offered to `decide_poll` too, which must leave them alone; their port
    /// is not queried.
    fn tick(&mut self, poll_only: bool, now: Millis) {
        for i in 0..self.rails.len() {
            let state = self.word(i).state;
            let port = self.port_state[usize::from(self.rails[i].port)];
            match state {
                RailState::Active if !poll_only => continue,
                RailState::Inert => {
                    assert_eq!(decide_poll(port, state), PollDecision::Leave, "the poll touched an inert rail");
                    continue;
                }
                _ => {}
            }
            self.rails[i].cell.observe_port(port);
            match decide_poll(port, state) {
                PollDecision::Leave | PollDecision::Wait => {}
                PollDecision::Activate => {
                    assert_eq!(self.activate(i, now), Outcome::Changed);
                }
                PollDecision::Pause(reason) => {
                    assert_eq!(self.pause(i, reason, now), Outcome::Changed);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// The reference model: the decision table of docs/STATE-MACHINE.md on raw codes.
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MState {
    Active,
    Paused,
    Inert,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct MRail {
    port: u8,
    state: MState,
    reason: PauseReason,
    last_port: Option<PortState>,
    generation: u64,
    since: u64,
    available: bool,
    seeded: Option<LinkRate>,
    reseeds: usize,
}

impl MRail {
    fn new(port: u8) -> MRail {
        MRail {
            port,
            state: MState::Inert,
            reason: PauseReason::NotOpened,
            last_port: None,
            generation: 0,
            since: 0,
            available: false,
            seeded: None,
            reseeds: 0,
        }
    }

    fn reseed(&mut self, rate: LinkRate) {
        if self.seeded != Some(rate) {
            self.seeded = Some(rate);
            self.reseeds += 1;
        }
    }

    fn activate(&mut self, now: u64, rate: LinkRate) {
        if self.state == MState::Paused {
            self.state = MState::Active;
            self.reason = PauseReason::None;
            self.last_port = Some(PortState::Active);
            self.generation += 1;
            self.since = now;
            self.reseed(rate);
            self.available = true;
        }
    }

    fn pause(&mut self, reason: PauseReason, now: u64) {
        if self.state == MState::Active {
            self.state = MState::Paused;
            self.reason = reason;
            self.since = now;
            self.available = false;
        }
    }

    fn detach(&mut self, reason: PauseReason, now: u64) {
        if self.state != MState::Inert {
            self.state = MState::Inert;
            self.reason = reason;
            self.since = now;
            self.available = false;
        }
    }

    fn attach(&mut self, port: PortState, now: u64, rate: LinkRate) {
        if self.state == MState::Inert {
            let up = port == PortState::Active;
            self.state = if up { MState::Active } else { MState::Paused };
            self.reason = if up { PauseReason::None } else { PauseReason::PortNotActive };
            self.last_port = Some(port);
            self.generation += 1;
            self.since = now;
            self.reseed(rate);
            self.available = up;
        }
    }

    fn event(&mut self, code: u32, element: Element, now: u64, rate: LinkRate) {
        if self.state == MState::Inert {
            return;
        }
        let mine = element == Element::Port(u32::from(self.port));
        match code {
            10 if mine => self.pause(PauseReason::PortErr, now),
            9 if mine => self.activate(now, rate),
            8 => self.detach(PauseReason::DeviceFatal, now),
            0 => self.generation += 1,
            11 | 18 if mine => self.generation += 1,
            20 => self.reseed(rate),
            _ => {}
        }
    }

    fn tick(&mut self, port: PortState, poll_only: bool, now: u64, rate: LinkRate) {
        let read = match self.state {
            MState::Paused => true,
            MState::Active => poll_only,
            MState::Inert => false,
        };
        if !read {
            return;
        }
        self.last_port = Some(port);
        match (self.state, port == PortState::Active) {
            (MState::Paused, true) => self.activate(now, rate),
            (MState::Active, false) => self.pause(PauseReason::PortNotActive, now),
            _ => {}
        }
    }
}

// ---------------------------------------------------------------------------
// Operations and strategies.
// ---------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Op {
    /// One drain: events read back to back at the same instant.
    Burst(Vec<AsyncEvent>),
    /// What a port query returns from now on (silent: no event).
    SetPort { port: u8, state: PortState },
    /// The link renegotiated (silent).
    SetLink { port: u8, rate: LinkRate },
    /// The recovery tick.
    Tick { poll_only: bool },
    /// The rail's device went away or was closed.
    Detach { rail: usize, reason: PauseReason },
    /// The rail's device was (re)opened.
    Attach { rail: usize },
}

fn element_for(code: u32) -> BoxedStrategy<Element> {
    let port = (0u32..=3).prop_map(Element::Port);
    let object = any::<u64>().prop_map(|h| Element::Object(ObjectHandle(h)));
    let well_formed = match EventKind::from_code(code).scope() {
        Scope::Port => port.clone().boxed(),
        Scope::Cq | Scope::Qp | Scope::Srq | Scope::Wq => object.clone().boxed(),
        Scope::Device => prop_oneof![Just(Element::Port(0)), Just(Element::None)].boxed(),
        Scope::Unknown => prop_oneof![port.clone(), Just(Element::None)].boxed(),
    };
    // Mostly what the kernel sends; sometimes any element with any code.
    prop_oneof![4 => well_formed, 1 => prop_oneof![port, object, Just(Element::None)]].boxed()
}

fn event() -> impl Strategy<Value = AsyncEvent> {
    let code = prop_oneof![
        4 => prop::sample::select(vec![9u32, 10]),
        2 => prop::sample::select(vec![0u32, 11, 18, 20]),
        1 => Just(8u32),
        4 => 0u32..=22,
    ];
    code.prop_flat_map(|code| element_for(code).prop_map(move |element| AsyncEvent::new(code, element)))
}

fn port_state() -> impl Strategy<Value = PortState> {
    prop_oneof![
        3 => Just(PortState::Active),
        1 => prop::sample::select(vec![
            PortState::Nop,
            PortState::Down,
            PortState::Init,
            PortState::Armed,
            PortState::ActiveDefer,
        ]),
        1 => (6u32..1000).prop_map(PortState::Unknown),
    ]
}

fn link_rate() -> impl Strategy<Value = LinkRate> {
    prop_oneof![
        prop::sample::select(vec![LinkRate::gbps(100), LinkRate::gbps(200), LinkRate::gbps(400)]),
        Just(LinkRate::Unknown),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let rail = 0..PORTS.len();
    let port = prop::sample::select(PORTS.to_vec());
    prop_oneof![
        6 => prop::collection::vec(event(), 1..8).prop_map(Op::Burst),
        3 => (port.clone(), port_state()).prop_map(|(port, state)| Op::SetPort { port, state }),
        1 => (port, link_rate()).prop_map(|(port, rate)| Op::SetLink { port, rate }),
        3 => any::<bool>().prop_map(|poll_only| Op::Tick { poll_only }),
        1 => (
            rail.clone(),
            prop::sample::select(vec![PauseReason::DeviceRemoved, PauseReason::NotOpened, PauseReason::DeviceFatal])
        )
            .prop_map(|(rail, reason)| Op::Detach { rail, reason }),
        2 => rail.prop_map(|rail| Op::Attach { rail }),
    ]
}

// ---------------------------------------------------------------------------
// Invariants.
// ---------------------------------------------------------------------------

/// What happened to one rail in one step, for the transition rules.
#[derive(Debug, Clone, Copy)]
enum Cause {
    Event(AsyncEvent),
    Poll { port: PortState, poll_only: bool },
    Attach,
    Detach,
    Silent,
}

fn mstate(s: RailState) -> MState {
    match s {
        RailState::Active => MState::Active,
        RailState::Paused => MState::Paused,
        RailState::Inert => MState::Inert,
    }
}

/// The real rail agrees with the model, and its gate with its word.
fn assert_matches_model(h: &Harness, i: usize, m: &MRail, ctx: &str) {
    let w = h.word(i);
    let real = (mstate(w.state), w.reason, w.last_port_state, w.generation, h.rails[i].cell.since().0);
    let model = (m.state, m.reason, m.last_port, m.generation, m.since);
    assert_eq!(real, model, "rail /{}: (state, reason, last port, generation, since) after {ctx}", m.port);
    let seen = h.selector.get(i);
    assert_eq!(
        (seen.available, seen.seeded, seen.reseeds),
        (m.available, m.seeded, m.reseeds),
        "rail /{}: selector (available, seeded, reseeds) after {ctx}",
        m.port
    );
    assert_eq!(seen.available, w.state == RailState::Active, "rail /{}: available iff active", m.port);
    match h.rails[i].gate.check() {
        Ok(ticket) => {
            assert_eq!(w.state, RailState::Active, "the gate admitted a {} rail", w.state);
            assert_eq!(ticket.generation, w.generation);
        }
        Err(r) => {
            assert_ne!(w.state, RailState::Active, "the gate refused an active rail");
            assert_eq!(
                (r.state, r.reason, r.last_port_state, r.generation),
                (w.state, w.reason, w.last_port_state, w.generation)
            );
            assert_eq!(r.since, h.rails[i].cell.since());
        }
    }
}

/// The transition rules, stated as rules rather than as a model: a state
/// changes only as the decision table says, the generation never decreases
/// and bumps (by exactly one) only on resume, restart, address change and
/// attach, and inert is left only by attach.
fn assert_legal(port: u8, before: RailWord, after: RailWord, cause: Cause) {
    use RailState::{Active, Inert, Paused};
    let mine = |ev: &AsyncEvent| ev.element == Element::Port(u32::from(port));
    assert!(after.generation >= before.generation, "rail /{port}: generation went backwards ({cause:?})");
    let bumped = after.generation - before.generation;
    assert!(bumped <= 1, "rail /{port}: generation bumped {bumped} times by one step ({cause:?})");

    let expected_bump = match cause {
        _ if before.state == Inert && !matches!(cause, Cause::Attach) => false,
        Cause::Attach => before.state == Inert,
        Cause::Event(ev) => match ev.code {
            0 => true,
            11 | 18 => mine(&ev),
            9 => mine(&ev) && before.state == Paused,
            _ => false,
        },
        Cause::Poll { port, .. } => before.state == Paused && port == PortState::Active,
        Cause::Detach | Cause::Silent => false,
    };
    assert_eq!(bumped == 1, expected_bump, "rail /{port}: generation bump {before:?} -> {after:?} by {cause:?}");

    if before.state == after.state {
        return;
    }
    let legal = match (before.state, after.state, cause) {
        // Inert is left only by attach, to whatever the port reads.
        (Inert, Active, Cause::Attach) | (Inert, Paused, Cause::Attach) => true,
        (Inert, _, _) => false,
        // PORT_ERR for this port, or a poll-only read that is not ACTIVE.
        (Active, Paused, Cause::Event(ev)) => ev.code == 10 && mine(&ev) && after.reason == PauseReason::PortErr,
        (Active, Paused, Cause::Poll { port, poll_only }) => {
            poll_only && port != PortState::Active && after.reason == PauseReason::PortNotActive
        }
        // PORT_ACTIVE for this port, or the poll reading exactly ACTIVE.
        (Paused, Active, Cause::Event(ev)) => ev.code == 9 && mine(&ev),
        (Paused, Active, Cause::Poll { port, .. }) => port == PortState::Active,
        // DEVICE_FATAL (whatever its element) or a detach.
        (_, Inert, Cause::Event(ev)) => ev.code == 8 && after.reason == PauseReason::DeviceFatal,
        (_, Inert, Cause::Detach) => true,
        _ => false,
    };
    assert!(legal, "rail /{port}: illegal transition {} -> {} by {cause:?}", before.state, after.state);
    if before.state == Paused && after.state == Active {
        assert_eq!(after.reason, PauseReason::None);
        assert_eq!(after.last_port_state, Some(PortState::Active));
    }
}

/// Applies `op` to the harness and the model, checking after every event.
fn step(h: &mut Harness, model: &mut [MRail], op: &Op, now: u64) {
    let t = Millis(now);
    let rate = |h: &Harness, i: usize| h.link[usize::from(h.rails[i].port)];
    let before: Vec<RailWord> = (0..h.rails.len()).map(|i| h.word(i)).collect();
    let check = |h: &Harness, model: &[MRail], before: &[RailWord], cause: &dyn Fn(usize) -> Cause, ctx: &str| {
        for (i, m) in model.iter().enumerate() {
            assert_legal(m.port, before[i], h.word(i), cause(i));
            assert_matches_model(h, i, m, ctx);
        }
    };
    match op {
        Op::Burst(events) => {
            let mut before = before;
            for ev in events {
                h.on_event(ev, t);
                for (i, m) in model.iter_mut().enumerate() {
                    m.event(ev.code, ev.element, now, rate(h, i));
                }
                check(h, model, &before, &|_| Cause::Event(*ev), &format!("{ev:?}"));
                before = (0..h.rails.len()).map(|i| h.word(i)).collect();
            }
        }
        Op::SetPort { port, state } => {
            h.port_state[usize::from(*port)] = *state;
            check(h, model, &before, &|_| Cause::Silent, "a silent port change");
        }
        Op::SetLink { port, rate } => {
            h.link[usize::from(*port)] = *rate;
            check(h, model, &before, &|_| Cause::Silent, "a silent link change");
        }
        Op::Tick { poll_only } => {
            h.tick(*poll_only, t);
            for (i, m) in model.iter_mut().enumerate() {
                m.tick(h.port_state[usize::from(m.port)], *poll_only, now, rate(h, i));
            }
            let ports: Vec<PortState> = h.rails.iter().map(|r| h.port_state[usize::from(r.port)]).collect();
            check(h, model, &before, &|i| Cause::Poll { port: ports[i], poll_only: *poll_only }, "a tick");
        }
        Op::Detach { rail, reason } => {
            let expected =
                if before[*rail].state == RailState::Inert { Outcome::AlreadyThere } else { Outcome::Changed };
            assert_eq!(h.detach(*rail, *reason, t), expected);
            model[*rail].detach(*reason, now);
            check(h, model, &before, &|i| if i == *rail { Cause::Detach } else { Cause::Silent }, "detach");
        }
        Op::Attach { rail } => {
            let expected = match before[*rail].state {
                RailState::Inert => Outcome::Changed,
                from => Outcome::Refused { from },
            };
            assert_eq!(h.attach(*rail, t), expected);
            let port = h.port_state[usize::from(model[*rail].port)];
            model[*rail].attach(port, now, rate(h, *rail));
            check(h, model, &before, &|i| if i == *rail { Cause::Attach } else { Cause::Silent }, "attach");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Any interleaving keeps the real rails equal to the model and every
    /// step legal; ending with every port ACTIVE and one tick leaves every
    /// rail active unless it is inert.
    #[test]
    fn random_interleavings_follow_the_decision_table(
        attach_first in any::<bool>(),
        ops in prop::collection::vec(op(), 0..40),
    ) {
        let mut h = Harness::new();
        let mut model: Vec<MRail> = PORTS.iter().map(|&p| MRail::new(p)).collect();
        let mut now = 0;
        if attach_first {
            for rail in 0..PORTS.len() {
                now += 1;
                step(&mut h, &mut model, &Op::Attach { rail }, now);
            }
        }
        for op in &ops {
            now += 1;
            step(&mut h, &mut model, op, now);
        }

        // Every port comes back ACTIVE (silently), then one recovery tick.
        for port in PORTS {
            now += 1;
            step(&mut h, &mut model, &Op::SetPort { port, state: PortState::Active }, now);
        }
        now += 1;
        step(&mut h, &mut model, &Op::Tick { poll_only: false }, now);
        for (i, rail) in h.rails.iter().enumerate() {
            let w = rail.cell.load();
            if w.state != RailState::Inert {
                prop_assert_eq!(w.state, RailState::Active, "rail /{} not recovered by one tick", rail.port);
                prop_assert_eq!(rail.gate.check().map(|t| t.generation), Ok(w.generation));
                prop_assert!(h.selector.get(i).available);
            }
        }
    }

    /// Ticks alone never change an inert rail, whatever the ports read.
    #[test]
    fn the_poll_never_touches_an_inert_rail(ports in prop::collection::vec((port_state(), any::<bool>()), 1..10)) {
        let mut h = Harness::attached();
        let _ = h.detach(0, PauseReason::DeviceRemoved, Millis(1));
        let before = h.word(0);
        for (state, poll_only) in ports {
            h.port_state[1] = state;
            h.tick(poll_only, Millis(2));
            prop_assert_eq!(h.word(0), before);
            prop_assert_eq!(h.rails[0].cell.since(), Millis(1));
            prop_assert_eq!(decide_poll(state, RailState::Inert), PollDecision::Leave);
        }
    }
}

// ---------------------------------------------------------------------------
// Examples.
// ---------------------------------------------------------------------------

#[test]
fn port_active_then_port_err_in_one_burst_ends_paused() {
    let mut h = Harness::attached();
    h.on_event(&AsyncEvent::port(EventKind::PortErr, 1), Millis(10));
    let g = h.word(0).generation;
    assert_eq!(h.word(0).state, RailState::Paused);

    // The link bounced back and forth before the monitor woke up: one drain.
    for ev in [
        AsyncEvent::port(EventKind::PortActive, 1),
        AsyncEvent::new(4, Element::Object(ObjectHandle(0x10))),
        AsyncEvent::port(EventKind::PortErr, 1),
    ] {
        h.on_event(&ev, Millis(20));
    }
    let w = h.word(0);
    assert_eq!((w.state, w.reason), (RailState::Paused, PauseReason::PortErr));
    assert_eq!(w.generation, g + 1, "the resume in the middle of the burst still bumped");
    assert!(!h.selector.get(0).available);
    assert!(h.rails[0].gate.check().is_err());
}

#[test]
fn a_double_activation_changes_nothing() {
    let mut h = Harness::attached();
    h.on_event(&AsyncEvent::port(EventKind::PortErr, 1), Millis(10));
    assert_eq!(h.activate(0, Millis(20)), Outcome::Changed);
    let after_first = (h.word(0), h.rails[0].cell.since(), h.selector.get(0));

    // PORT_ACTIVE arrives after the poll already activated the rail.
    assert_eq!(decide_event(&AsyncEvent::port(EventKind::PortActive, 1), 1, RailState::Active), RailDecision::Activate);
    assert_eq!(h.activate(0, Millis(30)), Outcome::AlreadyThere);
    assert_eq!((h.word(0), h.rails[0].cell.since(), h.selector.get(0)), after_first, "no bump, no re-seed");
    assert_eq!(h.rails[0].gate.check().map(|t| t.generation), Ok(after_first.0.generation));

    // And the poll, seeing ACTIVE on an active rail, leaves it.
    assert_eq!(decide_poll(PortState::Active, RailState::Active), PollDecision::Leave);
    h.tick(false, Millis(40));
    h.tick(true, Millis(41));
    assert_eq!((h.word(0), h.selector.get(0)), (after_first.0, after_first.2));
}

#[test]
fn an_event_for_port_2_never_touches_rail_1() {
    for paused in [false, true] {
        for code in 0..=22u32 {
            if EventKind::from_code(code).scope() != Scope::Port {
                continue;
            }
            let mut h = Harness::attached();
            if paused {
                h.on_event(&AsyncEvent::port(EventKind::PortErr, 1), Millis(1));
            }
            let rail1 = (h.word(0), h.rails[0].cell.since(), h.selector.get(0));
            let rail2 = h.word(1);
            h.on_event(&AsyncEvent::new(code, Element::Port(2)), Millis(5));
            assert_eq!((h.word(0), h.rails[0].cell.since(), h.selector.get(0)), rail1, "code {code}");
            // ...while rail /2 sees it.
            let w2 = h.word(1);
            match code {
                10 => assert_eq!(w2.state, RailState::Paused),
                11 | 18 => assert_eq!(w2.generation, rail2.generation + 1),
                _ => assert_eq!(w2, rail2, "code {code}"),
            }
        }
    }
}

#[test]
fn the_poll_decision_never_touches_an_inert_rail() {
    let states = [
        PortState::Nop,
        PortState::Down,
        PortState::Init,
        PortState::Armed,
        PortState::Active,
        PortState::ActiveDefer,
        PortState::Unknown(6),
        PortState::Unknown(u32::MAX),
    ];
    for state in states {
        assert_eq!(decide_poll(state, RailState::Inert), PollDecision::Leave, "{state}");
    }
    // Never attached, and attached then lost: ticks with a live port leave both.
    let mut h = Harness::new();
    let _ = h.attach(1, Millis(1));
    let _ = h.detach(1, PauseReason::DeviceFatal, Millis(2));
    let before = [h.word(0), h.word(1)];
    for poll_only in [false, true] {
        h.tick(poll_only, Millis(3));
    }
    assert_eq!([h.word(0), h.word(1)], before);
    assert_eq!(before[0].last_port_state, None, "an inert rail's port is not even read");
    assert!(h.rails.iter().all(|r| r.gate.check().is_err()));
    // Only attach brings it back.
    assert_eq!(h.attach(1, Millis(4)), Outcome::Changed);
    assert_eq!(h.word(1).state, RailState::Active);
}

#[test]
fn attach_to_a_port_not_active_starts_paused_and_one_tick_recovers_it() {
    let mut h = Harness::new();
    h.port_state[1] = PortState::Armed;
    assert_eq!(h.attach(0, Millis(1)), Outcome::Changed);
    let w = h.word(0);
    assert_eq!((w.state, w.reason, w.generation), (RailState::Paused, PauseReason::PortNotActive, 1));
    let seen = h.selector.get(0);
    assert_eq!((seen.available, seen.seeded), (false, Some(LinkRate::gbps(400))), "seeded, unavailable");
    h.tick(false, Millis(2));
    assert_eq!(h.word(0).state, RailState::Paused, "ARMED is not usable");
    h.port_state[1] = PortState::Active;
    h.tick(false, Millis(3));
    let w = h.word(0);
    assert_eq!((w.state, w.generation), (RailState::Active, 2));
    assert_eq!(h.selector.get(0).reseeds, 1, "the rate did not change: no second seed");
}
