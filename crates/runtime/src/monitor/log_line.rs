//! How the machine's log requests and notifications read in the log. Only
//! wording lives here: the machine decided that (and when) each is said.

use log::{Level, debug, info, warn};
use railwatch_core::{
    Cause, Happening, Log, Machine, Notification, ObjectHandle, PauseReason, RailId, RailState, RecoveredBy, WorkScope,
};

fn handle_text(handle: Option<ObjectHandle>) -> String {
    handle.map_or_else(|| "(no handle)".to_owned(), |h| format!("{:#x}", h.0))
}

fn rail(m: &Machine, id: RailId) -> &str {
    m.rail(id).map_or("?", |r| r.name)
}

fn device(m: &Machine, idx: u32) -> &str {
    m.device(idx).map_or("?", |d| d.name)
}

/// A log line for a notification worth one.
pub(super) fn note(m: &Machine, note: &Notification) {
    match note.what {
        Happening::Transition { rail: id, from, to, cause, .. } => match (from, to, cause) {
            (RailState::Active, RailState::Paused, Cause::Reason(PauseReason::DataPath)) => warn!(
                "{} out: transfers fail against the local path through several peers (data_path); the gate \
                 refuses until a probe succeeds",
                rail(m, id)
            ),
            (RailState::Active, RailState::Paused, Cause::Reason(PauseReason::NoAddress)) => warn!(
                "{} out: its address lost the GID require_address asks for (no_address); the gate refuses until \
                 it is back",
                rail(m, id)
            ),
            (RailState::Active, RailState::Paused, Cause::Reason(PauseReason::NoCarrier)) => warn!(
                "{} down: its netdev has no carrier, whatever the port reads (no_carrier); paused, the gate \
                 refuses until the carrier is back and the port ACTIVE",
                rail(m, id)
            ),
            (RailState::Active, RailState::Paused, Cause::Reason(reason)) => {
                warn!("{} down: {reason}; paused, the gate refuses until the port is ACTIVE again", rail(m, id))
            }
            (_, RailState::Active, Cause::By(RecoveredBy::Poll)) => {
                warn!("{} up: the port reads usable but no event said so; recovered by the poll", rail(m, id))
            }
            (_, RailState::Active, Cause::By(by)) => info!("{} up ({by})", rail(m, id)),
            (_, RailState::Inert, Cause::Reason(reason)) => warn!("{} inert: {reason}", rail(m, id)),
            (RailState::Inert, RailState::Paused, Cause::Reason(reason)) => {
                info!("{}: attached paused ({reason}); waiting until the port reads ACTIVE", rail(m, id))
            }
            (_, _, Cause::Bump(kind)) => {
                info!("{}: {kind}: generation bumped, endpoints built before are stale", rail(m, id))
            }
            (_, _, Cause::SilentFlap) => {}
            _ => {}
        },
        Happening::Reseed { rail: id, from: Some(from), to } => {
            info!("{}: link rate {from} → {to}; re-seeded", rail(m, id))
        }
        Happening::AddressChanged { rail: id, generation } => {
            info!(
                "{}: address changed (generation {generation}); endpoints built on the old one are stale",
                rail(m, id)
            )
        }
        Happening::WorkLost { device: d, scope } => match scope {
            WorkScope::Qp { kind, handle } => warn!(
                "{}: {} on QP {}: its posted work will never complete",
                device(m, d),
                kind.ibv_str(),
                handle_text(handle)
            ),
            WorkScope::Wq(handle) => {
                warn!("{}: WQ_FATAL on WQ {}: its posted work will never complete", device(m, d), handle_text(handle))
            }
            WorkScope::Cq(handle) => warn!(
                "{}: CQ_ERR on CQ {}: work completing to it will never complete",
                device(m, d),
                handle_text(handle)
            ),
            WorkScope::Device(reason) => {
                warn!("{}: the context is gone ({reason}): all work posted on it will never complete", device(m, d))
            }
        },
        Happening::Event { device: d, kind, .. } => debug!("{}: {kind}", device(m, d)),
        Happening::PeerFailing { rail: id, peer } => warn!(
            "{}: transfers through peer {peer} fail against the local path, through no other peer: the peer is \
             the likely cause; the rail stays in service",
            rail(m, id)
        ),
        Happening::HalfOpen { rail: id } => {
            info!("{}: the breaker is half-open: one probe may test the path", rail(m, id))
        }
        Happening::ProbeFailed { rail: id, timed_out: false } => {
            warn!("{}: the probe failed; the breaker is open again", rail(m, id))
        }
        Happening::ProbeFailed { rail: id, timed_out: true } => {
            warn!("{}: the probe was not reported in time; the breaker is open again", rail(m, id))
        }
        _ => {}
    }
}

/// The line the machine asked for, logged.
pub(super) fn log(m: &Machine, line: &Log) {
    let (level, text) = log_text(m, line);
    log::log!(level, "{text}");
}

/// A log level and its text.
macro_rules! say {
    ($level:ident, $($arg:tt)*) => {
        (Level::$level, format!($($arg)*))
    };
}

/// Whether the engine owns the devices (`device_owner = "engine"`): none
/// is opened or closed by railwatch, so the words say "in use".
fn engine_owns(m: &Machine) -> bool {
    m.config().device_owner == railwatch_core::DeviceOwner::Engine
}

/// The line the machine asked for, with its level: the wording the
/// monitor logs and the C API hands an engine with each log request.
pub fn log_text(m: &Machine, line: &Log) -> (Level, String) {
    match *line {
        Log::Unhandled { device: d, code, capped } => say!(
            Warn,
            "{}: async event {} (code {code}) is not acted on; counted and acknowledged (warned once per device \
             and code){}",
            device(m, d),
            railwatch_core::EventKind::from_code(code),
            if capped { "; too many distinct unhandled codes: further new codes are only counted" } else { "" }
        ),
        Log::StillPaused { rail: id, reason, since, port } => say!(
            Info,
            "{} still paused: {reason} since {since}, port reads {}",
            rail(m, id),
            port.map_or("unknown", |p| p.ibv_str())
        ),
        Log::Damped { rail: id, penalty, until } => {
            say!(
                Info,
                "{}: port is ACTIVE but the rail is damped (penalty {penalty:.0}); held until {until}",
                rail(m, id)
            )
        }
        Log::Settling { rail: id, until } => {
            say!(Info, "{}: port is ACTIVE; settling until {until} before activating", rail(m, id))
        }
        Log::SettleCancelled { rail: id } => {
            say!(Warn, "{} went down again while settling; activation cancelled", rail(m, id))
        }
        Log::ReadFailed { device: d, errno } => say!(
            Error,
            "{}: reading async events failed ({errno}); no longer reading this fd, polling its ports every tick \
             instead",
            device(m, d)
        ),
        Log::HungUp { device: d } => {
            say!(Error, "{}: the async event fd hung up: the device context is gone", device(m, d))
        }
        Log::QueryFailed { rail: id, errno } => {
            say!(Error, "{}: port query failed ({errno})", rail(m, id))
        }
        Log::LinkUnreadable { rail: id, errno } => {
            say!(Warn, "{}: reading the link rate failed ({errno}); keeping the cached rate", rail(m, id))
        }
        Log::DeviceGone { device: d, reason, retry_at } if engine_owns(m) => {
            say!(Error, "{}: out of use ({reason}); the engine re-validates it at {retry_at}", device(m, d))
        }
        Log::DeviceGone { device: d, reason, retry_at } => {
            say!(Error, "{}: closed ({reason}); re-opening at {retry_at}", device(m, d))
        }
        Log::ReopenFailed { device: d, errno, retry_at } => match errno {
            Some(e) => say!(Debug, "{}: re-open failed ({e}); next attempt at {retry_at}", device(m, d)),
            None => {
                say!(Debug, "{}: re-opened but its ports cannot be queried; next attempt at {retry_at}", device(m, d))
            }
        },
        Log::CountersUnavailable { rail: id, errno } => {
            say!(
                Info,
                "{}: its flap counters cannot be read ({errno}); silent flaps are not looked for on it",
                rail(m, id)
            )
        }
        Log::SilentFlap { rail: id } => say!(
            Warn,
            "{}: a flap counter rose with no PORT_ERR seen: a silent flap; generation bumped, endpoints built \
             before are stale",
            rail(m, id)
        ),
        Log::BreakerOpen { rail: id, trials, until } => say!(
            Warn,
            "{}: the data-path breaker is open ({trials} probe(s) failed so far): out of service (data_path), \
             half-open for probe {} from {until}",
            rail(m, id),
            trials + 1
        ),
        Log::NoAddress { rail: id } => {
            say!(Info, "{}: the port is ACTIVE but has no address require_address accepts; held", rail(m, id))
        }
        Log::OpenFailed { device: d, errno, retry_at } => {
            say!(Warn, "{}: appeared but cannot be opened ({errno}); trying again at {retry_at}", device(m, d))
        }
        Log::Attached { device: d } if engine_owns(m) => say!(Info, "{}: in use; rails attached", device(m, d)),
        Log::Attached { device: d } => say!(Info, "{}: opened; rails attached", device(m, d)),
        Log::CounterStuck { rail: id, counter, value, blind } => say!(
            Warn,
            "{}: {} reads {value}, the maximum of a {}-bit counter: it counts no more flaps; {}",
            rail(m, id),
            counter.name(),
            railwatch_core::saturated_width(value).unwrap_or(64),
            if blind {
                "no counter of the port is left, so silent flaps are found only by port reads and the carrier"
            } else {
                "silent flaps are looked for in the port's other counters"
            }
        ),
        Log::BreakerReset { rail: id } => say!(
            Info,
            "{}: its device closed while the data-path breaker held the rail: the breaker is reset, and a \
             re-attach re-admits the rail without a probe",
            rail(m, id)
        ),
        Log::Removed { device: d } => say!(Warn, "{}: left the host; closed, its rails are inert", device(m, d)),
    }
}
