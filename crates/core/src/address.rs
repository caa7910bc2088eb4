//! A port's address: what endpoints are built on (link layer, LID, the GID
//! table with each entry's type, the netdev under a RoCE port).
//!
//! After a flap a RoCE GID index can move, and endpoints built on the old
//! address are stale: the machine compares a [`PortAddress::fingerprint`]
//! read after activation and after `LID_CHANGE`/`GID_CHANGE`, and bumps the
//! generation when it changed.

use std::fmt;

/// `ibv_port_attr.link_layer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkLayer {
    /// 0: not reported (InfiniBand, by convention).
    Unspecified,
    /// 1: InfiniBand.
    InfiniBand,
    /// 2: Ethernet (RoCE).
    Ethernet,
    /// Any other code.
    Unknown(u8),
}

impl LinkLayer {
    /// Decodes a raw code; never fails.
    pub const fn from_code(code: u8) -> LinkLayer {
        match code {
            0 => LinkLayer::Unspecified,
            1 => LinkLayer::InfiniBand,
            2 => LinkLayer::Ethernet,
            other => LinkLayer::Unknown(other),
        }
    }

    /// Lower-case name (`"ethernet"`).
    pub const fn name(self) -> &'static str {
        match self {
            LinkLayer::Unspecified => "unspecified",
            LinkLayer::InfiniBand => "infiniband",
            LinkLayer::Ethernet => "ethernet",
            LinkLayer::Unknown(_) => "unknown",
        }
    }
}

/// What a GID table entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GidType {
    /// InfiniBand, or RoCE v1 (the kernel names them alike: "IB/RoCE v1").
    IbRoceV1,
    /// RoCE v2 (routable, over UDP).
    RoceV2,
    /// Not known (the backend could not say).
    Unknown,
}

impl GidType {
    /// Lower-case name (`"roce_v2"`).
    pub const fn name(self) -> &'static str {
        match self {
            GidType::IbRoceV1 => "ib_roce_v1",
            GidType::RoceV2 => "roce_v2",
            GidType::Unknown => "unknown",
        }
    }
}

/// One non-empty GID table entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Gid {
    /// Its index in the port's table (what endpoints name).
    pub index: u32,
    /// The 128-bit GID, network byte order.
    pub raw: [u8; 16],
    /// Its type.
    pub kind: GidType,
}

impl fmt::Display for Gid {
    /// The GID as an IPv6 address (`fe80::…`, `::ffff:10.1.1.1`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ip = std::net::Ipv6Addr::from(self.raw);
        match ip.to_ipv4_mapped() {
            Some(v4) => write!(f, "::ffff:{v4}"),
            None => write!(f, "{ip}"),
        }
    }
}

/// A port's address.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct PortAddress {
    /// The link layer.
    pub link_layer: Option<LinkLayer>,
    /// The LID (InfiniBand; 0 on RoCE).
    pub lid: u16,
    /// The non-empty GID table entries, by index.
    pub gids: Vec<Gid>,
    /// The network device under a RoCE port (`"veth0"`), when known.
    pub netdev: Option<String>,
}

impl PortAddress {
    /// A stable 64-bit digest (FNV-1a) of everything endpoints depend on:
    /// equal addresses have equal fingerprints, and a changed GID, LID or
    /// netdev changes it (with the odds of any 64-bit hash).
    pub fn fingerprint(&self) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut eat = |bytes: &[u8]| {
            for &b in bytes {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
        };
        let layer = match self.link_layer {
            None => 0xff,
            Some(LinkLayer::Unspecified) => 0,
            Some(LinkLayer::InfiniBand) => 1,
            Some(LinkLayer::Ethernet) => 2,
            Some(LinkLayer::Unknown(c)) => c,
        };
        eat(&[layer]);
        eat(&self.lid.to_be_bytes());
        for g in &self.gids {
            eat(&g.index.to_be_bytes());
            eat(&g.raw);
            eat(&[g.kind as u8]);
        }
        eat(self.netdev.as_deref().unwrap_or("").as_bytes());
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gid(index: u32, last: u8) -> Gid {
        let mut raw = [0u8; 16];
        raw[0] = 0xfe;
        raw[1] = 0x80;
        raw[15] = last;
        Gid { index, raw, kind: GidType::RoceV2 }
    }

    #[test]
    fn the_fingerprint_follows_what_endpoints_depend_on() {
        let a = PortAddress {
            link_layer: Some(LinkLayer::Ethernet),
            lid: 0,
            gids: vec![gid(0, 1)],
            netdev: Some("veth0".into()),
        };
        assert_eq!(a.fingerprint(), a.clone().fingerprint());
        let moved = PortAddress { gids: vec![gid(1, 1)], ..a.clone() };
        let added = PortAddress { gids: vec![gid(0, 1), gid(1, 2)], ..a.clone() };
        let other_dev = PortAddress { netdev: Some("veth1".into()), ..a.clone() };
        let other_lid = PortAddress { lid: 7, ..a.clone() };
        for b in [moved, added, other_dev, other_lid] {
            assert_ne!(a.fingerprint(), b.fingerprint(), "{b:?}");
        }
    }

    #[test]
    fn gids_print_as_addresses() {
        assert_eq!(gid(0, 1).to_string(), "fe80::1");
        let mut raw = [0u8; 16];
        raw[10] = 0xff;
        raw[11] = 0xff;
        raw[12..].copy_from_slice(&[10, 1, 1, 1]);
        assert_eq!(Gid { index: 1, raw, kind: GidType::RoceV2 }.to_string(), "::ffff:10.1.1.1");
        assert_eq!(LinkLayer::from_code(2), LinkLayer::Ethernet);
    }
}
