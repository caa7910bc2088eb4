//! Async events as libibverbs delivers them.
//!
//! The code is kept as the raw `u32` the kernel wrote: a kernel newer than the
//! headers can deliver a code nobody here knows (reading it into a closed enum
//! would be undefined behaviour in C-generated bindings), so an unknown code is
//! a value, never an error.

use std::fmt;

macro_rules! event_kinds {
    ($( $code:literal => $variant:ident, $name:literal, $ibv:literal, $scope:ident; )*) => {
        /// What an async event code means (`enum ibv_event_type`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum EventKind {
            $(
                #[doc = concat!("`", $ibv, "` (code ", stringify!($code), ")")]
                $variant,
            )*
            /// A code this build does not know, kept as the raw value.
            Unknown(u32),
        }

        impl EventKind {
            /// Every known kind, in code order.
            pub const KNOWN: &'static [EventKind] = &[$(EventKind::$variant),*];

            /// Decodes a raw code; never fails.
            pub const fn from_code(code: u32) -> EventKind {
                match code {
                    $($code => EventKind::$variant,)*
                    other => EventKind::Unknown(other),
                }
            }

            /// The raw code.
            pub const fn code(self) -> u32 {
                match self {
                    $(EventKind::$variant => $code,)*
                    EventKind::Unknown(code) => code,
                }
            }

            /// The snake_case name used in logs, scenario files and JSON
            /// (`"unknown"` for unknown codes).
            pub const fn name(self) -> &'static str {
                match self {
                    $(EventKind::$variant => $name,)*
                    EventKind::Unknown(_) => "unknown",
                }
            }

            /// Exactly what `ibv_event_type_str()` returns for this code.
            pub const fn ibv_str(self) -> &'static str {
                match self {
                    $(EventKind::$variant => $ibv,)*
                    EventKind::Unknown(_) => "unknown",
                }
            }

            /// What the event's element refers to.
            pub const fn scope(self) -> Scope {
                match self {
                    $(EventKind::$variant => Scope::$scope,)*
                    EventKind::Unknown(_) => Scope::Unknown,
                }
            }

            /// Looks a kind up by its snake_case name.
            pub fn from_name(name: &str) -> Option<EventKind> {
                match name {
                    $($name => Some(EventKind::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

event_kinds! {
    0 => CqErr, "cq_err", "CQ error", Cq;
    1 => QpFatal, "qp_fatal", "local work queue catastrophic error", Qp;
    2 => QpReqErr, "qp_req_err", "invalid request local work queue error", Qp;
    3 => QpAccessErr, "qp_access_err", "local access violation work queue error", Qp;
    4 => CommEst, "comm_est", "communication established", Qp;
    5 => SqDrained, "sq_drained", "send queue drained", Qp;
    6 => PathMig, "path_mig", "path migrated", Qp;
    7 => PathMigErr, "path_mig_err", "path migration request error", Qp;
    8 => DeviceFatal, "device_fatal", "local catastrophic error", Device;
    9 => PortActive, "port_active", "port active", Port;
    10 => PortErr, "port_err", "port error", Port;
    11 => LidChange, "lid_change", "LID change", Port;
    12 => PkeyChange, "pkey_change", "P_Key change", Port;
    13 => SmChange, "sm_change", "SM change", Port;
    14 => SrqErr, "srq_err", "SRQ catastrophic error", Srq;
    15 => SrqLimitReached, "srq_limit_reached", "SRQ limit reached", Srq;
    16 => QpLastWqeReached, "qp_last_wqe_reached", "last WQE reached", Qp;
    17 => ClientReregister, "client_reregister", "client reregistration", Port;
    18 => GidChange, "gid_change", "GID table change", Port;
    19 => WqFatal, "wq_fatal", "WQ fatal", Wq;
    20 => DeviceSpeedChange, "device_speed_change", "Device link speed change", Device;
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EventKind::Unknown(code) => write!(f, "unknown({code})"),
            known => f.write_str(known.name()),
        }
    }
}

/// What an event's `element` union refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// A completion queue.
    Cq,
    /// A queue pair.
    Qp,
    /// A shared receive queue.
    Srq,
    /// A work queue.
    Wq,
    /// A port (`element.port_num`).
    Port,
    /// The whole device.
    Device,
    /// An unknown code: the element cannot be interpreted.
    Unknown,
}

/// An object pointer from an event, reduced to an opaque key.
///
/// After the event is acknowledged the object may be destroyed, so the
/// pointer is only ever compared, never dereferenced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct ObjectHandle(pub u64);

/// The event's element, copied out before the event was acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Element {
    /// `element.port_num` of a port event.
    Port(u32),
    /// The cq/qp/srq/wq pointer of an object event, as an opaque handle.
    Object(ObjectHandle),
    /// Device events and unknown codes carry nothing usable.
    None,
}

/// One async event, owned and already acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct AsyncEvent {
    /// The raw `event_type` the kernel wrote.
    pub code: u32,
    /// The element, copied before the ack.
    pub element: Element,
}

impl AsyncEvent {
    /// An event with the given raw code and element.
    pub const fn new(code: u32, element: Element) -> AsyncEvent {
        AsyncEvent { code, element }
    }

    /// A port event of `kind` for `port`.
    pub const fn port(kind: EventKind, port: u32) -> AsyncEvent {
        AsyncEvent::new(kind.code(), Element::Port(port))
    }

    /// What the code means.
    pub const fn kind(&self) -> EventKind {
        EventKind::from_code(self.code)
    }

    /// The port number, for port events.
    pub const fn port_num(&self) -> Option<u32> {
        match self.element {
            Element::Port(p) => Some(p),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_unknown_codes_are_kept() {
        for code in 0..=20 {
            let kind = EventKind::from_code(code);
            assert!(!matches!(kind, EventKind::Unknown(_)), "{code} is known");
            assert_eq!(kind.code(), code);
            assert_eq!(EventKind::from_name(kind.name()), Some(kind));
        }
        for code in [21, 99, u32::MAX] {
            assert_eq!(EventKind::from_code(code), EventKind::Unknown(code));
            assert_eq!(EventKind::from_code(code).code(), code);
            assert_eq!(EventKind::from_code(code).ibv_str(), "unknown");
        }
        assert_eq!(EventKind::KNOWN.len(), 21);
    }

    #[test]
    fn strings_match_ibv_event_type_str() {
        let expected = [
            "CQ error",
            "local work queue catastrophic error",
            "invalid request local work queue error",
            "local access violation work queue error",
            "communication established",
            "send queue drained",
            "path migrated",
            "path migration request error",
            "local catastrophic error",
            "port active",
            "port error",
            "LID change",
            "P_Key change",
            "SM change",
            "SRQ catastrophic error",
            "SRQ limit reached",
            "last WQE reached",
            "client reregistration",
            "GID table change",
            "WQ fatal",
            "Device link speed change",
        ];
        for (code, s) in expected.iter().enumerate() {
            assert_eq!(EventKind::from_code(code as u32).ibv_str(), *s);
        }
        assert_eq!(EventKind::PortActive.code(), 9);
        assert_eq!(EventKind::PortErr.code(), 10);
        assert_eq!(EventKind::DeviceFatal.scope(), Scope::Device);
        assert_eq!(EventKind::Unknown(42).to_string(), "unknown(42)");
        assert_eq!(EventKind::CommEst.to_string(), "comm_est");
    }
}
