//! The event decoder and the decision table on arbitrary codes.
//!
//! The bytes are read as a sequence of raw observations: an async event
//! (`u32` code, element), a rail's port, a port-state code and a set of link
//! attributes. For each one, every decoder and decision is run and checked,
//! and a [`RailCell`] is driven through the decisions the way the monitor
//! drives it, so the state machine is checked on long random histories.
//!
//! The oracle is docs/STATE-MACHINE.md, not the code it checks: its event,
//! poll and transition tables written here as data (rows keyed by the raw
//! codes the document gives), and the properties its prose states:
//!
//! - codes round-trip (`EventKind`, `PortState`), unknown codes stay values
//!   and decide nothing, `classify` sorts the codes as the document lists
//!   them;
//! - an event for port N never touches a rail on another port, nothing
//!   touches an inert rail, active and paused rails decide alike;
//! - link rates are the effective speed when present, else lane rate ×
//!   lanes, else unknown — never a guess, never an overflow;
//! - every transition leads where the transitions table says, with its
//!   outcome, generation and reason; a poll only records the port state
//!   before deciding; the gate admits exactly the active rail with its
//!   generation.

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

// ---- The oracle: docs/STATE-MACHINE.md's tables, written as data --------
//
// From the document, not from `decide.rs` or `rail.rs`: rows keyed by the
// raw codes the document gives, in its words, so a change to the code that
// the document does not say (or the other way round) fails here.

/// Which rails of the device an event row applies to.
#[derive(Clone, Copy, Debug)]
enum Applies {
    /// "this port": only the rail whose port the element names.
    ThisPort,
    /// A device event: every rail of the device, whatever the element.
    EveryRail,
}

/// "Event decisions": the raw code, the rails it applies to and the
/// decision for a non-inert rail. Every other code, known or unknown,
/// decides `Leave`.
const EVENT_TABLE: [(u32, Applies, RailDecision); 8] = [
    (10, Applies::ThisPort, RailDecision::Pause(PauseReason::PortErr)), // PORT_ERR
    (9, Applies::ThisPort, RailDecision::Activate),                     // PORT_ACTIVE
    (8, Applies::EveryRail, RailDecision::Detach(PauseReason::DeviceFatal)), // DEVICE_FATAL
    (0, Applies::EveryRail, RailDecision::Restart),                     // CQ_ERR
    (11, Applies::ThisPort, RailDecision::AddressChanged),              // LID_CHANGE
    (18, Applies::ThisPort, RailDecision::AddressChanged),              // GID_CHANGE
    (17, Applies::ThisPort, RailDecision::Recheck),                     // CLIENT_REREGISTER
    (20, Applies::EveryRail, RailDecision::RefreshLink),                // DEVICE_SPEED_CHANGE
];

/// `classify`, as the document lists the codes: `Handled`, then
/// `NotifyObject`, then `CountOnly`; every other code is `Unhandled`.
const HANDLED: [u32; 8] = [0, 8, 9, 10, 11, 17, 18, 20];
const NOTIFY_OBJECT: [u32; 4] = [1, 2, 3, 19];
const COUNT_ONLY: [u32; 1] = [4];

/// The names the document gives the codes of its tables.
const NAMED: [(u32, EventKind); 13] = [
    (0, EventKind::CqErr),
    (1, EventKind::QpFatal),
    (2, EventKind::QpReqErr),
    (3, EventKind::QpAccessErr),
    (4, EventKind::CommEst),
    (8, EventKind::DeviceFatal),
    (9, EventKind::PortActive),
    (10, EventKind::PortErr),
    (11, EventKind::LidChange),
    (17, EventKind::ClientReregister),
    (18, EventKind::GidChange),
    (19, EventKind::WqFatal),
    (20, EventKind::DeviceSpeedChange),
];

/// What the event table says an event with raw `code` and `element` does
/// to the rail on `rail_port` in `state`.
fn documented_event(code: u32, element: Element, rail_port: u8, state: RailState) -> RailDecision {
    // "Nothing touches an inert rail: every event decides Leave for it."
    if state == RailState::Inert {
        return RailDecision::Leave;
    }
    match EVENT_TABLE.iter().find(|(c, ..)| *c == code) {
        Some((_, Applies::ThisPort, d)) if element == Element::Port(u32::from(rail_port)) => *d,
        Some((_, Applies::EveryRail, d)) => *d,
        _ => RailDecision::Leave,
    }
}

/// "Poll decisions", row by row (paused, active, inert), each with its two
/// columns: the port reads exactly ACTIVE (4), any other state.
const POLL_TABLE: [(RailState, [PollDecision; 2]); 3] = [
    (RailState::Paused, [PollDecision::Activate, PollDecision::Wait]),
    (RailState::Active, [PollDecision::Leave, PollDecision::Pause(PauseReason::PortNotActive)]),
    (RailState::Inert, [PollDecision::Leave, PollDecision::Leave]),
];

fn documented_poll(port_code: u32, state: RailState) -> PollDecision {
    let row = POLL_TABLE.iter().find(|(s, _)| *s == state).map(|(_, cols)| cols);
    row.map_or(PollDecision::Leave, |cols| cols[usize::from(port_code != 4)])
}

/// The transitions of "Transitions and their outcomes".
#[derive(Clone, Copy, Debug)]
enum Transition {
    Pause(PauseReason),
    Resume,
    Detach(PauseReason),
    /// `attach` with the port's raw state code.
    Attach(u32),
    Bump,
}

/// What an outcome is, without `Refused`'s state (always the one it was in).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Said {
    Changed,
    AlreadyThere,
    Refused,
}

/// The transitions table: from active, from paused, from inert, the state
/// it leads to, the outcome and how much the generation grows.
fn documented_transition(t: Transition, from: RailState) -> (RailState, Said, u64) {
    use RailState::{Active, Inert, Paused};
    use Said::{AlreadyThere, Changed, Refused};
    let row: [(RailState, Said, u64); 3] = match t {
        Transition::Pause(_) => [(Paused, Changed, 0), (Paused, AlreadyThere, 0), (Inert, Refused, 0)],
        Transition::Resume => [(Active, AlreadyThere, 0), (Active, Changed, 1), (Inert, Refused, 0)],
        Transition::Detach(_) => [(Inert, Changed, 0), (Inert, Changed, 0), (Inert, AlreadyThere, 0)],
        Transition::Attach(4) => [(Active, Refused, 0), (Paused, Refused, 0), (Active, Changed, 1)],
        Transition::Attach(_) => [(Active, Refused, 0), (Paused, Refused, 0), (Paused, Changed, 1)],
        Transition::Bump => [(Active, Changed, 1), (Paused, Changed, 1), (Inert, Refused, 0)],
    };
    row[match from {
        Active => 0,
        Paused => 1,
        Inert => 2,
    }]
}

/// The reason the rail has after `t` from a rail whose reason was
/// `before`, when the outcome was `said`: the table's notes ("the first
/// reason is kept", "reason none", "`port_not_active`").
fn documented_reason(t: Transition, said: Said, before: PauseReason) -> PauseReason {
    match (t, said) {
        (Transition::Pause(r) | Transition::Detach(r), Said::Changed) => r,
        (Transition::Resume | Transition::Attach(4), Said::Changed) => PauseReason::None,
        (Transition::Attach(_), Said::Changed) => PauseReason::PortNotActive,
        _ => before,
    }
}

fn check_classify(code: u32, kind: EventKind) {
    let documented = if HANDLED.contains(&code) {
        EventClass::Handled
    } else if NOTIFY_OBJECT.contains(&code) {
        EventClass::NotifyObject
    } else if COUNT_ONLY.contains(&code) {
        EventClass::CountOnly
    } else {
        EventClass::Unhandled
    };
    assert_eq!(classify(kind), documented, "code {code}");
    if let Some((_, named)) = NAMED.iter().find(|(c, _)| *c == code) {
        assert_eq!(kind, *named, "code {code} is {named} in the document");
    }
}

fn check_decide_event(ev: &AsyncEvent, kind: EventKind, rail_port: u8) {
    let code = kind.code();
    check_classify(code, kind);
    let mut non_inert = Vec::new();
    for state in STATES {
        let d = decide_event(ev, rail_port, state);
        assert_eq!(
            d,
            documented_event(code, ev.element, rail_port, state),
            "{kind} ({ev:?}) for rail {rail_port} in {state}"
        );
        // The properties the document's prose states, beside the table.
        if state == RailState::Inert {
            assert_eq!(d, RailDecision::Leave, "nothing touches an inert rail");
        } else {
            non_inert.push(d);
        }
        if classify(kind) != EventClass::Handled {
            assert_eq!(d, RailDecision::Leave, "{kind} is not acted on");
        }
        if kind.scope() == Scope::Port && ev.port_num() != Some(u32::from(rail_port)) {
            assert_eq!(d, RailDecision::Leave, "{kind} for another port touched rail {rail_port}");
        }
        if matches!(kind, EventKind::Unknown(_)) {
            assert_eq!(d, RailDecision::Leave, "an unknown code decided something");
        }
    }
    // One column for every non-inert rail: active and paused decide alike.
    assert_eq!(non_inert[0], non_inert[1], "{kind}: active and paused rails decided differently");
}

fn check_decide_poll(ps: PortState) {
    for state in STATES {
        let d = decide_poll(ps, state);
        assert_eq!(d, documented_poll(ps.code(), state), "{ps} in {state}");
        // A poll never pauses a paused rail, never activates an active one.
        assert!(!(state == RailState::Paused && matches!(d, PollDecision::Pause(_))));
        assert!(!(state == RailState::Active && matches!(d, PollDecision::Activate | PollDecision::Wait)));
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

    /// Applies `t` and checks it against the transitions table.
    fn apply(&mut self, t: Transition) {
        let before = self.cell.load();
        self.now += 1;
        let now = Millis(self.now);
        let outcome = match t {
            Transition::Pause(r) => self.cell.pause(r, now),
            Transition::Resume => self.cell.resume(now),
            Transition::Detach(r) => self.cell.detach(r, now),
            Transition::Attach(code) => self.cell.attach(PortState::from_code(code), now),
            Transition::Bump => self.cell.bump_generation(),
        };
        let after = self.cell.load();
        let (to, said, grows) = documented_transition(t, before.state);
        let got = match outcome {
            Outcome::Changed => Said::Changed,
            Outcome::AlreadyThere => Said::AlreadyThere,
            Outcome::Refused { from } => {
                assert_eq!(from, before.state, "{t:?}: refused from the wrong state");
                Said::Refused
            }
        };
        assert_eq!(got, said, "{t:?} from {}", before.state);
        let state = if said == Said::Changed { to } else { before.state };
        assert_eq!(after.state, state, "{t:?} from {}", before.state);
        assert_eq!(after.generation, before.generation + grows, "{t:?} from {}: generation", before.state);
        assert_eq!(after.reason, documented_reason(t, said, before.reason), "{t:?} from {}: reason", before.state);
        self.check_gate();
    }

    fn on_event(&mut self, ev: &AsyncEvent, rail_port: u8) {
        let state = self.cell.load().state;
        match decide_event(ev, rail_port, state) {
            RailDecision::Leave => {}
            RailDecision::Pause(reason) => self.apply(Transition::Pause(reason)),
            RailDecision::Activate => self.apply(Transition::Resume),
            RailDecision::Detach(reason) => self.apply(Transition::Detach(reason)),
            RailDecision::Restart | RailDecision::AddressChanged => self.apply(Transition::Bump),
            // A port or link re-read: no state change by itself.
            RailDecision::RefreshLink | RailDecision::Recheck => {}
        }
    }

    fn on_poll(&mut self, ps: PortState) {
        let before = self.cell.load();
        if before.state == RailState::Inert {
            return;
        }
        // "records the port state only, in any state".
        self.cell.observe_port(ps);
        let seen = self.cell.load();
        let stored = PortState::from_code(ps.code().min(0xFFFE));
        assert_eq!(seen.last_port_state, Some(stored), "observe_port keeps what was read");
        assert_eq!((seen.state, seen.reason, seen.generation), (before.state, before.reason, before.generation));
        match decide_poll(ps, before.state) {
            PollDecision::Leave | PollDecision::Wait => {}
            PollDecision::Activate => self.apply(Transition::Resume),
            PollDecision::Pause(reason) => self.apply(Transition::Pause(reason)),
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
        0 => rail.apply(Transition::Attach(ps.code())),
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
