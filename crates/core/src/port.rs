//! Port states and link-rate math (`ibv_port_attr`).

use std::fmt;

/// `enum ibv_port_state`, with unknown codes kept as their raw value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PortState {
    /// 0: no state change.
    Nop,
    /// 1: down.
    Down,
    /// 2: init (link up, not yet configured by the subnet manager).
    Init,
    /// 3: armed.
    Armed,
    /// 4: active, the only usable state.
    Active,
    /// 5: active defer.
    ActiveDefer,
    /// Any other code.
    Unknown(u32),
}

impl PortState {
    /// Decodes a raw code; never fails.
    pub const fn from_code(code: u32) -> PortState {
        match code {
            0 => PortState::Nop,
            1 => PortState::Down,
            2 => PortState::Init,
            3 => PortState::Armed,
            4 => PortState::Active,
            5 => PortState::ActiveDefer,
            other => PortState::Unknown(other),
        }
    }

    /// The raw code.
    pub const fn code(self) -> u32 {
        match self {
            PortState::Nop => 0,
            PortState::Down => 1,
            PortState::Init => 2,
            PortState::Armed => 3,
            PortState::Active => 4,
            PortState::ActiveDefer => 5,
            PortState::Unknown(code) => code,
        }
    }

    /// Exactly what `ibv_port_state_str()` returns.
    pub const fn ibv_str(self) -> &'static str {
        match self {
            PortState::Nop => "no state change (NOP)",
            PortState::Down => "down",
            PortState::Init => "init",
            PortState::Armed => "armed",
            PortState::Active => "active",
            PortState::ActiveDefer => "active defer",
            PortState::Unknown(_) => "unknown",
        }
    }

    /// The snake_case name used in scenario files and JSON.
    pub const fn name(self) -> &'static str {
        match self {
            PortState::Nop => "nop",
            PortState::Down => "down",
            PortState::Init => "init",
            PortState::Armed => "armed",
            PortState::Active => "active",
            PortState::ActiveDefer => "active_defer",
            PortState::Unknown(_) => "unknown",
        }
    }

    /// Looks a state up by its snake_case name.
    pub fn from_name(name: &str) -> Option<PortState> {
        [PortState::Nop, PortState::Down, PortState::Init, PortState::Armed, PortState::Active, PortState::ActiveDefer]
            .into_iter()
            .find(|s| s.name() == name)
    }

    /// True for exactly [`PortState::Active`]: INIT, ARMED and ACTIVE_DEFER
    /// are not usable yet.
    pub const fn is_usable(self) -> bool {
        matches!(self, PortState::Active)
    }
}

impl fmt::Display for PortState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PortState::Unknown(code) => write!(f, "unknown({code})"),
            known => f.write_str(known.name()),
        }
    }
}

/// One `active_speed` code: its name and per-lane rate in Mb/s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpeedCode {
    /// The code (`active_speed`, or `active_speed_ex`).
    pub code: u32,
    /// Lower-case name (`"ndr"`).
    pub name: &'static str,
    /// Rate of one lane in Mb/s.
    pub lane_mbps: u64,
}

/// One `active_width` code: its name and lane count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WidthCode {
    /// The code (`active_width`).
    pub code: u8,
    /// Lower-case name (`"4x"`).
    pub name: &'static str,
    /// Number of lanes.
    pub lanes: u64,
}

/// The speed codes libibverbs defines. XDR (256) does not fit the 8-bit
/// `active_speed` and is only expressible through `active_speed_ex`.
pub const SPEEDS: [SpeedCode; 9] = [
    SpeedCode { code: 1, name: "sdr", lane_mbps: 2_500 },
    SpeedCode { code: 2, name: "ddr", lane_mbps: 5_000 },
    SpeedCode { code: 4, name: "qdr", lane_mbps: 10_000 },
    SpeedCode { code: 8, name: "fdr10", lane_mbps: 10_000 },
    SpeedCode { code: 16, name: "fdr", lane_mbps: 14_000 },
    SpeedCode { code: 32, name: "edr", lane_mbps: 25_000 },
    SpeedCode { code: 64, name: "hdr", lane_mbps: 50_000 },
    SpeedCode { code: 128, name: "ndr", lane_mbps: 100_000 },
    SpeedCode { code: 256, name: "xdr", lane_mbps: 200_000 },
];

/// The width codes libibverbs defines (note 2X is code 16, not 2).
pub const WIDTHS: [WidthCode; 5] = [
    WidthCode { code: 1, name: "1x", lanes: 1 },
    WidthCode { code: 2, name: "4x", lanes: 4 },
    WidthCode { code: 4, name: "8x", lanes: 8 },
    WidthCode { code: 8, name: "12x", lanes: 12 },
    WidthCode { code: 16, name: "2x", lanes: 2 },
];

/// Looks up a speed by code.
pub fn speed_by_code(code: u32) -> Option<SpeedCode> {
    SPEEDS.iter().copied().find(|s| s.code == code)
}

/// Looks up a speed by name (`"hdr"`).
pub fn speed_by_name(name: &str) -> Option<SpeedCode> {
    SPEEDS.iter().copied().find(|s| s.name == name)
}

/// Looks up a width by code.
pub fn width_by_code(code: u8) -> Option<WidthCode> {
    WIDTHS.iter().copied().find(|w| w.code == code)
}

/// Looks up a width by name (`"4x"`).
pub fn width_by_name(name: &str) -> Option<WidthCode> {
    WIDTHS.iter().copied().find(|w| w.name == name)
}

/// The link attributes of one port, as read from the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct LinkAttrs {
    /// `active_speed` (8 bits in the struct).
    pub active_speed: u8,
    /// `active_width`.
    pub active_width: u8,
    /// `active_speed_ex` (rdma-core 49+); 0 when absent.
    pub active_speed_ex: u32,
    /// `ibv_query_port_speed()` in units of 100 Mb/s (rdma-core 62+), when the
    /// library has the symbol.
    pub effective_100mbps: Option<u64>,
}

impl LinkAttrs {
    /// Attributes for a named speed code and width code.
    pub fn new(speed: u32, width: u8) -> LinkAttrs {
        match u8::try_from(speed) {
            Ok(s) => LinkAttrs { active_speed: s, active_width: width, ..Default::default() },
            // Speeds above 8 bits (XDR) only exist in active_speed_ex.
            Err(_) => LinkAttrs { active_speed_ex: speed, active_width: width, ..Default::default() },
        }
    }

    /// The speed code that counts: `active_speed_ex` when non-zero.
    pub fn speed_code(&self) -> u32 {
        if self.active_speed_ex != 0 { self.active_speed_ex } else { u32::from(self.active_speed) }
    }

    /// The link rate: the effective speed when present and non-zero, else
    /// per-lane rate × lanes; unknown codes give [`LinkRate::Unknown`].
    pub fn rate(&self) -> LinkRate {
        if let Some(eff) = self.effective_100mbps.filter(|&v| v != 0) {
            return LinkRate::Known { mbps: eff.saturating_mul(100) };
        }
        match (speed_by_code(self.speed_code()), width_by_code(self.active_width)) {
            (Some(s), Some(w)) => LinkRate::Known { mbps: s.lane_mbps * w.lanes },
            _ => LinkRate::Unknown,
        }
    }
}

/// A port's data rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkRate {
    /// Rate in Mb/s.
    Known {
        /// Megabits per second.
        mbps: u64,
    },
    /// The codes were not recognised; never guessed.
    Unknown,
}

impl LinkRate {
    /// A known rate in Gb/s.
    pub const fn gbps(n: u64) -> LinkRate {
        LinkRate::Known { mbps: n * 1000 }
    }

    /// The rate in Gb/s, if known.
    pub fn as_gbps(&self) -> Option<f64> {
        match self {
            LinkRate::Known { mbps } => Some(*mbps as f64 / 1000.0),
            LinkRate::Unknown => None,
        }
    }
}

impl fmt::Display for LinkRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.as_gbps() {
            Some(g) => write!(f, "{g} Gb/s"),
            None => f.write_str("unknown rate"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_speed_times_every_width() {
        // (speed code, Gb/s per lane × 10) and (width code, lanes) from FACTS.md.
        let speeds =
            [(1u32, 25u64), (2, 50), (4, 100), (8, 100), (16, 140), (32, 250), (64, 500), (128, 1000), (256, 2000)];
        let widths = [(1u8, 1u64), (2, 4), (4, 8), (8, 12), (16, 2)];
        for (s, tenth_gbps) in speeds {
            for (w, lanes) in widths {
                let attrs = LinkAttrs::new(s, w);
                assert_eq!(attrs.rate(), LinkRate::Known { mbps: tenth_gbps * 100 * lanes }, "speed {s} width {w}");
            }
        }
    }

    #[test]
    fn examples_from_facts() {
        assert_eq!(LinkAttrs::new(128, 2).rate(), LinkRate::gbps(400));
        assert_eq!(LinkAttrs::new(64, 16).rate(), LinkRate::gbps(100));
        assert_eq!(LinkAttrs::new(32, 2).rate(), LinkRate::gbps(100));
        assert_eq!(LinkAttrs::new(16, 2).rate(), LinkRate::gbps(56));
        assert_eq!(LinkAttrs::new(8, 2).rate(), LinkRate::gbps(40), "FDR10 4x");
        assert_eq!(LinkAttrs::new(256, 2).rate(), LinkRate::gbps(800), "XDR via _ex");
    }

    #[test]
    fn speed_ex_wins_when_non_zero() {
        let attrs = LinkAttrs { active_speed: 64, active_width: 2, active_speed_ex: 128, effective_100mbps: None };
        assert_eq!(attrs.rate(), LinkRate::gbps(400));
        let attrs = LinkAttrs { active_speed_ex: 0, ..attrs };
        assert_eq!(attrs.rate(), LinkRate::gbps(200));
    }

    #[test]
    fn effective_speed_wins_when_present_and_non_zero() {
        let base = LinkAttrs::new(128, 2);
        assert_eq!(LinkAttrs { effective_100mbps: Some(8000), ..base }.rate(), LinkRate::gbps(800));
        assert_eq!(LinkAttrs { effective_100mbps: Some(0), ..base }.rate(), LinkRate::gbps(400));
        // An effective speed is used even when the codes are unknown.
        let odd = LinkAttrs { active_speed: 3, active_width: 3, active_speed_ex: 0, effective_100mbps: Some(250) };
        assert_eq!(odd.rate(), LinkRate::Known { mbps: 25_000 });
    }

    #[test]
    fn unknown_codes_give_unknown() {
        for (s, w) in [(0u32, 2u8), (3, 2), (512, 2), (128, 0), (128, 3), (128, 32), (0, 0)] {
            assert_eq!(LinkAttrs::new(s, w).rate(), LinkRate::Unknown, "speed {s} width {w}");
        }
        assert_eq!(LinkRate::Unknown.as_gbps(), None);
        assert_eq!(LinkRate::Unknown.to_string(), "unknown rate");
    }

    #[test]
    fn names_and_states() {
        assert_eq!(speed_by_name("xdr").map(|s| s.code), Some(256));
        assert_eq!(width_by_name("2x").map(|w| w.code), Some(16));
        for code in 0..=5 {
            let s = PortState::from_code(code);
            assert_eq!(s.code(), code);
            assert_eq!(PortState::from_name(s.name()), Some(s));
        }
        assert_eq!(PortState::from_code(9), PortState::Unknown(9));
        assert!(PortState::Active.is_usable());
        for s in [PortState::Init, PortState::Armed, PortState::ActiveDefer, PortState::Down, PortState::Unknown(4000)]
        {
            assert!(!s.is_usable());
        }
        assert_eq!(PortState::ActiveDefer.ibv_str(), "active defer");
        assert_eq!(PortState::Nop.ibv_str(), "no state change (NOP)");
    }
}

/// The netdev's carrier (`/sys/class/net/<netdev>/carrier`, or an rtnetlink
/// link message's `IFF_LOWER_UP`): a second witness of a port that has a
/// netdev (RoCE, iWARP, EFA), read with every port read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Carrier {
    /// The link layer has a carrier.
    Up,
    /// No carrier (or the netdev is administratively down).
    Down,
}

impl Carrier {
    /// Lower-case name (`"down"`), as in scenario files and JSON.
    pub const fn name(self) -> &'static str {
        match self {
            Carrier::Up => "up",
            Carrier::Down => "down",
        }
    }

    /// Looks a carrier up by its name.
    pub fn from_name(name: &str) -> Option<Carrier> {
        [Carrier::Up, Carrier::Down].into_iter().find(|c| c.name() == name)
    }
}
