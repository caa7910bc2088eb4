//! The event decoder and the decision table on arbitrary codes.
//!
//! The bytes are read as a sequence of raw observations: an async event
//! (`u32` code, element), a rail's port, a port-state code and a set of link
//! attributes. For each one, every decoder and decision is run and checked
//! against the rules in DESIGN.md, and a [`RailCell`] is driven through the
//! decisions the way the monitor drives it, so the state machine's own
//! invariants are checked on long random histories:
//!
//! - codes round-trip (`EventKind`, `PortState`), unknown codes stay values;
//! - an event for port N never touches a rail on another port, nothing
//!   touches an inert rail, only the handled kinds decide anything;
//! - link rates are the effective speed when present, else lane rate ×
//!   lanes, else unknown — never a guess, never an overflow;
//! - the generation never decreases, inert is left only by `attach`, and
//!   the gate admits exactly the active rail with its generation.

#![no_main]

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use railwatch_core::{
    AsyncEvent, Element, EventClass, EventKind, Gate, LinkAttrs, LinkRate, Millis, ObjectHandle, Outcome, PauseReason,
    PollDecision, PortState, RailCell, RailDecision, RailState, Scope, classify, decide_event, decide_poll,
    decide_reseed, speed_by_code, width_by_code,
};
use std::sync::Arc;

const STATES: [RailState; 3] = [RailState::Active, RailState::Paused, RailState::Inert];

/// A code: mostly near the known range (so every kind is hit often), the
/// rest anywhere in `u32`.
fn code(u: &mut Unstructured<'_>) -> Result<u32> {
    Ok(if u.arbitrary::<bool>()? { u32::from(u.arbitrary::<u8>()? % 32) } else { u.arbitrary()? })
}

fn check_event_kind(code: u32) -> EventKind {
    let kind = EventKind::from_code(code);
    assert_eq!(kind.code(), code, "code round trip");
    let _ = kind.to_string();
    match kind {
        EventKind::Unknown(c) => {
            assert_eq!(c, code);
            assert!(code > 20, "code {code} is known");
            assert_eq!((kind.name(), kind.ibv_str(), kind.scope()), ("unknown", "unknown", Scope::Unknown));
            assert_eq!(classify(kind), EventClass::Unhandled);
        }
        known => {
            assert!(code <= 20);
            assert_eq!(EventKind::from_name(known.name()), Some(known));
            assert!(!known.ibv_str().is_empty() && known.ibv_str() != "unknown");
            assert_ne!(known.scope(), Scope::Unknown);
            assert!(EventKind::KNOWN.contains(&known));
        }
    }
    kind
}

fn check_port_state(code: u32) -> PortState {
    let ps = PortState::from_code(code);
    assert_eq!(ps.code(), code, "port state round trip");
    let _ = ps.to_string();
    assert_eq!(ps.is_usable(), code == 4, "only ACTIVE (4) is usable");
    match ps {
        PortState::Unknown(c) => {
            assert!(c > 5);
            assert_eq!((ps.name(), ps.ibv_str()), ("unknown", "unknown"));
        }
        known => assert_eq!(PortState::from_name(known.name()), Some(known)),
    }
    ps
}

fn check_link(attrs: LinkAttrs, speed_wide: u32) {
    let rate = attrs.rate();
    let _ = (rate.to_string(), rate.as_gbps());
    let expected = match attrs.effective_100mbps.filter(|&e| e != 0) {
        Some(e) => LinkRate::Known { mbps: e.saturating_mul(100) },
        None => match (speed_by_code(attrs.speed_code()), width_by_code(attrs.active_width)) {
            (Some(s), Some(w)) => LinkRate::Known { mbps: s.lane_mbps * w.lanes },
            _ => LinkRate::Unknown,
        },
    };
    assert_eq!(rate, expected, "{attrs:?}");
    if let LinkRate::Known { mbps } = rate {
        assert!(mbps > 0, "a known rate is never zero: {attrs:?}");
        if attrs.effective_100mbps.is_none_or(|e| e == 0) {
            // From the tables: at most XDR (200 Gb/s a lane) × 12 lanes.
            assert!(mbps <= 200_000 * 12);
        }
    }
    let expected_code = if attrs.active_speed_ex != 0 { attrs.active_speed_ex } else { u32::from(attrs.active_speed) };
    assert_eq!(attrs.speed_code(), expected_code);
    // `LinkAttrs::new` keeps any speed code, 8-bit or wide.
    let built = LinkAttrs::new(speed_wide, attrs.active_width);
    assert_eq!(built.speed_code(), speed_wide);
    assert_eq!(built.effective_100mbps, None);
    // Re-seeding happens exactly when the rate changed or was never seeded.
    assert_eq!(decide_reseed(rate, None), Some(rate));
    assert_eq!(decide_reseed(rate, Some(rate)), None);
    let other = built.rate();
    assert_eq!(decide_reseed(rate, Some(other)), (rate != other).then_some(rate));
}

fn check_decide_event(ev: &AsyncEvent, kind: EventKind, rail_port: u8) {
    let for_this_port = ev.port_num() == Some(u32::from(rail_port));
    for state in STATES {
        let d = decide_event(ev, rail_port, state);
        if state == RailState::Inert {
            assert_eq!(d, RailDecision::Leave, "nothing touches an inert rail");
            continue;
        }
        if classify(kind) != EventClass::Handled {
            assert_eq!(d, RailDecision::Leave, "{kind} is not acted on");
        }
        if kind.scope() == Scope::Port && !for_this_port {
            assert_eq!(d, RailDecision::Leave, "{kind} for another port touched rail {rail_port}");
        }
        let expected = match kind {
            EventKind::PortErr if for_this_port => RailDecision::Pause(PauseReason::PortErr),
            EventKind::PortActive if for_this_port => RailDecision::Activate,
            EventKind::LidChange | EventKind::GidChange if for_this_port => RailDecision::AddressChanged,
            EventKind::ClientReregister if for_this_port => RailDecision::Recheck,
            EventKind::DeviceFatal => RailDecision::Detach(PauseReason::DeviceFatal),
            EventKind::CqErr => RailDecision::Restart,
            EventKind::DeviceSpeedChange => RailDecision::RefreshLink,
            _ => RailDecision::Leave,
        };
        assert_eq!(d, expected, "{kind} on port {:?} for rail {rail_port} in {state}", ev.port_num());
    }
}

fn check_decide_poll(ps: PortState) {
    for state in STATES {
        let expected = match (state, ps.is_usable()) {
            (RailState::Inert, _) => PollDecision::Leave,
            (RailState::Paused, true) => PollDecision::Activate,
            (RailState::Paused, false) => PollDecision::Wait,
            (RailState::Active, true) => PollDecision::Leave,
            (RailState::Active, false) => PollDecision::Pause(PauseReason::PortNotActive),
        };
        assert_eq!(decide_poll(ps, state), expected, "{ps} in {state}");
    }
}

/// One rail driven by the decisions, as the monitor drives it.
struct Rail {
    cell: Arc<RailCell>,
    gate: Gate,
    now: u64,
}

impl Rail {
    fn check_gate(&self) {
        let w = self.cell.load();
        match self.gate.check() {
            Ok(ticket) => {
                assert_eq!(w.state, RailState::Active);
                assert_eq!(ticket.generation, w.generation);
                assert_eq!(w.reason, PauseReason::None);
            }
            Err(rej) => {
                assert_ne!(w.state, RailState::Active);
                assert_eq!((rej.state, rej.reason, rej.generation), (w.state, w.reason, w.generation));
                let _ = rej.to_string();
            }
        }
    }

    /// Applies `f` and checks what any transition must keep.
    fn step(&mut self, what: &str, f: impl FnOnce(&RailCell, Millis) -> Option<Outcome>) {
        let before = self.cell.load();
        self.now += 1;
        let outcome = f(&self.cell, Millis(self.now));
        let after = self.cell.load();
        assert!(after.generation >= before.generation, "{what}: generation went back");
        if outcome != Some(Outcome::Changed) && outcome.is_some() {
            assert_eq!((after.state, after.generation), (before.state, before.generation), "{what}: {outcome:?}");
        }
        if before.state == RailState::Inert && after.state != RailState::Inert {
            assert!(what == "attach", "{what} left inert");
        }
        self.check_gate();
    }

    fn on_event(&mut self, ev: &AsyncEvent, rail_port: u8) {
        let state = self.cell.load().state;
        match decide_event(ev, rail_port, state) {
            RailDecision::Leave => {}
            RailDecision::Pause(reason) => self.step("pause", |c, t| Some(c.pause(reason, t))),
            RailDecision::Activate => self.step("resume", |c, t| Some(c.resume(t))),
            RailDecision::Detach(reason) => self.step("detach", |c, t| Some(c.detach(reason, t))),
            RailDecision::Restart | RailDecision::AddressChanged => {
                let g = self.cell.load().generation;
                self.step("bump", |c, _| Some(c.bump_generation()));
                assert_eq!(self.cell.load().generation, g + 1, "a bump on a live rail bumps");
            }
            // A port or link re-read: no state change by itself.
            RailDecision::RefreshLink | RailDecision::Recheck => {}
        }
    }

    fn on_poll(&mut self, ps: PortState) {
        let state = self.cell.load().state;
        if state == RailState::Inert {
            return;
        }
        self.step("observe", |c, _| {
            c.observe_port(ps);
            None
        });
        let seen = self.cell.load().last_port_state;
        let stored = PortState::from_code(ps.code().min(0xFFFE));
        assert_eq!(seen, Some(stored), "observe_port keeps what was read");
        match decide_poll(ps, state) {
            PollDecision::Leave | PollDecision::Wait => {}
            PollDecision::Activate => {
                self.step("resume", |c, t| Some(c.resume(t)));
                assert_eq!(self.cell.load().state, RailState::Active);
            }
            PollDecision::Pause(reason) => {
                self.step("pause", |c, t| Some(c.pause(reason, t)));
                assert_eq!(self.cell.load().state, RailState::Paused);
            }
        }
    }

    fn attach(&mut self, ps: PortState) {
        let before = self.cell.load();
        self.step("attach", |c, t| Some(c.attach(ps, t)));
        let after = self.cell.load();
        if before.state == RailState::Inert {
            let want = if ps.is_usable() { RailState::Active } else { RailState::Paused };
            assert_eq!((after.state, after.generation), (want, before.generation + 1));
        }
    }
}

fn one(u: &mut Unstructured<'_>, rail: &mut Rail) -> Result<()> {
    let kind = check_event_kind(code(u)?);
    let element = match u.arbitrary::<u8>()? % 3 {
        0 => Element::Port(if u.arbitrary()? { u32::from(u.arbitrary::<u8>()? % 4) } else { u.arbitrary()? }),
        1 => Element::Object(ObjectHandle(u.arbitrary()?)),
        _ => Element::None,
    };
    let ev = AsyncEvent::new(kind.code(), element);
    assert_eq!(ev.kind(), kind);
    assert_eq!(ev.port_num(), if let Element::Port(p) = element { Some(p) } else { None });
    let rail_port = u.arbitrary::<u8>()? % 4;
    check_decide_event(&ev, kind, rail_port);

    let ps = check_port_state(code(u)?);
    check_decide_poll(ps);

    let attrs = LinkAttrs {
        active_speed: u.arbitrary()?,
        active_width: u.arbitrary()?,
        active_speed_ex: if u.arbitrary()? { 0 } else { u.arbitrary()? },
        effective_100mbps: u.arbitrary()?,
    };
    check_link(attrs, u.arbitrary()?);

    match u.arbitrary::<u8>()? % 4 {
        0 => rail.attach(ps),
        1 => rail.on_poll(ps),
        _ => rail.on_event(&ev, rail_port),
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let cell = Arc::new(RailCell::new(Millis(0)));
    let mut rail = Rail { gate: Gate::new(cell.clone()), cell, now: 0 };
    rail.check_gate();
    while !u.is_empty() {
        if one(&mut u, &mut rail).is_err() {
            break;
        }
    }
});
