//! The decision table: pure functions from what was observed to what the
//! monitor must do. docs/STATE-MACHINE.md explains why each row exists.
//!
//! Decisions say what to *attempt*; the rail's CAS transitions then report
//! what actually happened ([`crate::Outcome`]). A decision never touches an
//! inert rail: only an explicit attach leaves inert.

use crate::event::{AsyncEvent, EventKind};
use crate::port::{Carrier, LinkRate, PortState};
use crate::rail::{PauseReason, RailState};
use crate::witness::PortWitness;

/// What one event means for one rail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RailDecision {
    /// Nothing to do for this rail.
    Leave,
    /// Pause with this reason, then mark unavailable.
    Pause(PauseReason),
    /// Run the activation path (resume → link → re-seed → available).
    Activate,
    /// Go inert with this reason (the device is gone) and unavailable.
    Detach(PauseReason),
    /// CQ_ERR: bump the generation; availability unchanged.
    Restart,
    /// LID/GID change: bump the generation, notify, and re-read the port
    /// state (a lost PORT_ERR is real).
    AddressChanged,
    /// CLIENT_REREGISTER: re-read the port state.
    Recheck,
    /// DEVICE_SPEED_CHANGE: re-read the link and re-seed if it changed.
    RefreshLink,
}

/// What the monitor does with an event beyond the per-rail decisions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventClass {
    /// Acted on through [`decide_event`]; logged at info or warn.
    Handled,
    /// QP/WQ errors: the engine is notified with the object handle.
    NotifyObject,
    /// COMM_EST: counted, logged at debug (one per connection).
    CountOnly,
    /// Any other code, known or unknown: counted, warned once per
    /// (device, code), acked.
    Unhandled,
}

/// How the monitor treats an event kind as a whole.
pub const fn classify(kind: EventKind) -> EventClass {
    match kind {
        EventKind::PortErr
        | EventKind::PortActive
        | EventKind::DeviceFatal
        | EventKind::CqErr
        | EventKind::LidChange
        | EventKind::GidChange
        | EventKind::ClientReregister
        | EventKind::DeviceSpeedChange => EventClass::Handled,
        EventKind::QpFatal | EventKind::QpReqErr | EventKind::QpAccessErr | EventKind::WqFatal => {
            EventClass::NotifyObject
        }
        EventKind::CommEst => EventClass::CountOnly,
        _ => EventClass::Unhandled,
    }
}

/// What `event` means for the rail on port `rail_port` of the event's
/// device, currently in `state`.
///
/// Port events are filtered by `element.port_num`: an event for another port
/// never touches this rail. Device events apply to every rail of the device.
pub fn decide_event(event: &AsyncEvent, rail_port: u8, state: RailState) -> RailDecision {
    if state == RailState::Inert {
        return RailDecision::Leave;
    }
    let for_this_port = event.port_num() == Some(u32::from(rail_port));
    match event.kind() {
        EventKind::PortErr if for_this_port => RailDecision::Pause(PauseReason::PortErr),
        EventKind::PortActive if for_this_port => RailDecision::Activate,
        EventKind::LidChange | EventKind::GidChange if for_this_port => RailDecision::AddressChanged,
        EventKind::ClientReregister if for_this_port => RailDecision::Recheck,
        EventKind::DeviceFatal => RailDecision::Detach(PauseReason::DeviceFatal),
        EventKind::CqErr => RailDecision::Restart,
        EventKind::DeviceSpeedChange => RailDecision::RefreshLink,
        _ => RailDecision::Leave,
    }
}

/// What a port state read by the recovery tick means for a rail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PollDecision {
    /// Inert, or active and still ACTIVE: nothing to do.
    Leave,
    /// Paused and the port reads exactly ACTIVE: run the activation path.
    Activate,
    /// Paused and the port is not ACTIVE yet (DOWN, INIT, ARMED,
    /// ACTIVE_DEFER, …): look again next tick.
    Wait,
    /// Active but the port no longer reads ACTIVE (a rail of a device
    /// whose event fd failed, where no PORT_ERR will arrive) or its
    /// carrier is gone: pause, for this reason.
    Pause(PauseReason),
}

/// What the recovery tick does with a rail after reading its port state
/// alone (no carrier known): [`decide_reading`] with no carrier.
pub fn decide_poll(port: PortState, state: RailState) -> PollDecision {
    decide_reading(port, None, PortWitness::Both, state)
}

/// What the recovery tick does with a rail after reading its port state
/// and its netdev's carrier, judged by `witness` (`port_witness`): the
/// machine's own rule, for engines that take the policy piecewise.
pub fn decide_reading(
    port: PortState,
    carrier: Option<Carrier>,
    witness: PortWitness,
    state: RailState,
) -> PollDecision {
    match (state, witness.judge(port, carrier)) {
        (RailState::Inert, _) => PollDecision::Leave,
        (RailState::Paused, None) => PollDecision::Activate,
        (RailState::Paused, Some(_)) => PollDecision::Wait,
        (RailState::Active, None) => PollDecision::Leave,
        (RailState::Active, Some(reason)) => PollDecision::Pause(reason),
    }
}

/// Whether the selector's bandwidth for a rail must be re-seeded: when the
/// rate was never seeded or differs from the cached one. Returns the rate to
/// seed.
pub fn decide_reseed(fresh: LinkRate, cached: Option<LinkRate>) -> Option<LinkRate> {
    match cached {
        Some(c) if c == fresh => None,
        _ => Some(fresh),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Element, ObjectHandle};

    const STATES: [RailState; 3] = [RailState::Active, RailState::Paused, RailState::Inert];

    fn port_ev(kind: EventKind, port: u32) -> AsyncEvent {
        AsyncEvent::port(kind, port)
    }

    #[test]
    fn port_events_for_this_port() {
        for state in [RailState::Active, RailState::Paused] {
            assert_eq!(
                decide_event(&port_ev(EventKind::PortErr, 1), 1, state),
                RailDecision::Pause(PauseReason::PortErr)
            );
            assert_eq!(decide_event(&port_ev(EventKind::PortActive, 1), 1, state), RailDecision::Activate);
            assert_eq!(decide_event(&port_ev(EventKind::LidChange, 1), 1, state), RailDecision::AddressChanged);
            assert_eq!(decide_event(&port_ev(EventKind::GidChange, 1), 1, state), RailDecision::AddressChanged);
            assert_eq!(decide_event(&port_ev(EventKind::ClientReregister, 1), 1, state), RailDecision::Recheck);
        }
    }

    #[test]
    fn an_event_for_port_2_never_touches_rail_1() {
        for kind in EventKind::KNOWN.iter().copied().filter(|k| k.scope() == crate::event::Scope::Port) {
            for state in STATES {
                assert_eq!(decide_event(&port_ev(kind, 2), 1, state), RailDecision::Leave, "{kind} in {state}");
            }
        }
    }

    #[test]
    fn device_events_apply_to_every_rail() {
        let fatal = AsyncEvent::new(8, Element::Port(0));
        let speed = AsyncEvent::new(20, Element::None);
        let cq = AsyncEvent::new(0, Element::Object(ObjectHandle(0xdead)));
        for port in [1, 2] {
            for state in [RailState::Active, RailState::Paused] {
                assert_eq!(decide_event(&fatal, port, state), RailDecision::Detach(PauseReason::DeviceFatal));
                assert_eq!(decide_event(&speed, port, state), RailDecision::RefreshLink);
                assert_eq!(decide_event(&cq, port, state), RailDecision::Restart);
            }
        }
    }

    #[test]
    fn nothing_touches_an_inert_rail() {
        for code in 0..=25 {
            for element in [Element::Port(1), Element::None, Element::Object(ObjectHandle(1))] {
                assert_eq!(decide_event(&AsyncEvent::new(code, element), 1, RailState::Inert), RailDecision::Leave);
            }
        }
    }

    /// The tick's decision follows the witness: a carrier loss under an
    /// ACTIVE port pauses an active rail (`no_carrier`) and keeps a paused
    /// one waiting, unless the witness is the port alone; with no carrier
    /// known, the port decides (as `decide_poll`).
    #[test]
    fn a_reading_is_decided_by_the_witness() {
        use PortWitness::{Both, Carrier as ByCarrier, Port};
        let (up, down) = (Some(Carrier::Up), Some(Carrier::Down));
        let active = PortState::Active;
        let no_carrier = PollDecision::Pause(PauseReason::NoCarrier);
        assert_eq!(decide_reading(active, down, Both, RailState::Active), no_carrier);
        assert_eq!(decide_reading(active, down, Both, RailState::Paused), PollDecision::Wait);
        assert_eq!(decide_reading(active, down, Port, RailState::Active), PollDecision::Leave);
        assert_eq!(decide_reading(PortState::Down, up, ByCarrier, RailState::Paused), PollDecision::Activate);
        assert_eq!(decide_reading(active, down, Both, RailState::Inert), PollDecision::Leave);
        for port in [PortState::Down, PortState::Armed, active] {
            for state in [RailState::Active, RailState::Paused, RailState::Inert] {
                assert_eq!(
                    decide_poll(port, state),
                    decide_reading(port, None, ByCarrier, state),
                    "{port:?} {state:?}"
                );
            }
        }
    }

    #[test]
    fn object_count_and_unknown_events_change_no_rail() {
        for code in [1, 2, 3, 4, 5, 6, 7, 12, 13, 14, 15, 16, 19, 21, 99] {
            for element in [Element::Port(1), Element::Object(ObjectHandle(7))] {
                for state in STATES {
                    assert_eq!(
                        decide_event(&AsyncEvent::new(code, element), 1, state),
                        RailDecision::Leave,
                        "code {code}"
                    );
                }
            }
        }
    }

    #[test]
    fn classification() {
        use EventClass::*;
        let expected = [
            (0, Handled),
            (1, NotifyObject),
            (2, NotifyObject),
            (3, NotifyObject),
            (4, CountOnly),
            (5, Unhandled),
            (6, Unhandled),
            (7, Unhandled),
            (8, Handled),
            (9, Handled),
            (10, Handled),
            (11, Handled),
            (12, Unhandled),
            (13, Unhandled),
            (14, Unhandled),
            (15, Unhandled),
            (16, Unhandled),
            (17, Handled),
            (18, Handled),
            (19, NotifyObject),
            (20, Handled),
            (21, Unhandled),
            (99, Unhandled),
        ];
        for (code, class) in expected {
            assert_eq!(classify(EventKind::from_code(code)), class, "code {code}");
        }
    }

    #[test]
    fn poll_decisions() {
        assert_eq!(decide_poll(PortState::Active, RailState::Paused), PollDecision::Activate);
        for waiting in [
            PortState::Init,
            PortState::Armed,
            PortState::ActiveDefer,
            PortState::Down,
            PortState::Nop,
            PortState::Unknown(9),
        ] {
            assert_eq!(decide_poll(waiting, RailState::Paused), PollDecision::Wait, "{waiting}");
            assert_eq!(decide_poll(waiting, RailState::Active), PollDecision::Pause(PauseReason::PortNotActive));
        }
        assert_eq!(decide_poll(PortState::Active, RailState::Active), PollDecision::Leave);
        for port in [PortState::Active, PortState::Down, PortState::Init] {
            assert_eq!(
                decide_poll(port, RailState::Inert),
                PollDecision::Leave,
                "the poll never touches an inert rail"
            );
        }
    }

    #[test]
    fn reseed_only_when_changed_or_never_seeded() {
        assert_eq!(decide_reseed(LinkRate::gbps(400), None), Some(LinkRate::gbps(400)));
        assert_eq!(decide_reseed(LinkRate::gbps(400), Some(LinkRate::gbps(400))), None);
        assert_eq!(decide_reseed(LinkRate::gbps(200), Some(LinkRate::gbps(400))), Some(LinkRate::gbps(200)));
        assert_eq!(decide_reseed(LinkRate::Unknown, Some(LinkRate::gbps(400))), Some(LinkRate::Unknown));
        assert_eq!(decide_reseed(LinkRate::Unknown, Some(LinkRate::Unknown)), None);
    }
}
