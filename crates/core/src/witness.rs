//! Which witness says a port can carry traffic (`port_witness`): the port
//! state, the netdev's carrier, or both.

use crate::port::{Carrier, PortState};
use crate::rail::PauseReason;

/// Which witness decides whether a port is usable (`port_witness`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PortWitness {
    /// The port state alone (`ibv_query_port`); the carrier is only shown.
    Port,
    /// The netdev's carrier alone, for providers whose ports always read
    /// ACTIVE (EFA); the port state where no carrier is known.
    Carrier,
    /// Both (the default): a port that reads ACTIVE while its carrier is
    /// down is not active. Where no carrier is known, the port alone.
    #[default]
    Both,
}

impl PortWitness {
    /// Every witness, in the order of [`name`](Self::name)'s values.
    pub const ALL: [PortWitness; 3] = [PortWitness::Port, PortWitness::Carrier, PortWitness::Both];

    /// The setting's value (`"both"`).
    pub const fn name(self) -> &'static str {
        match self {
            PortWitness::Port => "port",
            PortWitness::Carrier => "carrier",
            PortWitness::Both => "both",
        }
    }

    /// Why a port reading `state` with `carrier` is not usable
    /// (`PortNotActive`, `NoCarrier`), or `None` when it is.
    pub const fn judge(self, state: PortState, carrier: Option<Carrier>) -> Option<PauseReason> {
        match (self, carrier) {
            (PortWitness::Carrier, Some(Carrier::Up)) => None,
            (PortWitness::Carrier | PortWitness::Both, Some(Carrier::Down)) if state.is_usable() => {
                Some(PauseReason::NoCarrier)
            }
            (PortWitness::Carrier, Some(Carrier::Down)) => Some(PauseReason::NoCarrier),
            _ if state.is_usable() => None,
            _ => Some(PauseReason::PortNotActive),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every witness against every carrier, with a usable and an unusable
    /// port: the table docs/STATE-MACHINE.md states.
    #[test]
    fn each_witness_judges_as_documented() {
        use PauseReason::{NoCarrier, PortNotActive};
        let (up, down) = (Some(Carrier::Up), Some(Carrier::Down));
        let (active, dead) = (PortState::Active, PortState::Down);
        let table = [
            (PortWitness::Port, active, down, None),
            (PortWitness::Port, dead, up, Some(PortNotActive)),
            (PortWitness::Both, active, down, Some(NoCarrier)),
            (PortWitness::Both, active, up, None),
            (PortWitness::Both, active, None, None),
            (PortWitness::Both, dead, up, Some(PortNotActive)),
            (PortWitness::Both, dead, down, Some(PortNotActive)),
            (PortWitness::Carrier, dead, up, None),
            (PortWitness::Carrier, active, down, Some(NoCarrier)),
            (PortWitness::Carrier, dead, down, Some(NoCarrier)),
            (PortWitness::Carrier, dead, None, Some(PortNotActive)),
            (PortWitness::Carrier, active, None, None),
        ];
        for (witness, state, carrier, want) in table {
            assert_eq!(witness.judge(state, carrier), want, "{witness:?} {state:?} {carrier:?}");
        }
    }
}
