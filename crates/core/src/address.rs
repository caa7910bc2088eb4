//! A port's address: what endpoints are built on (link layer, LID, the GID
//! table with each entry's type, the netdev under a RoCE port).
//!
//! After a flap a RoCE GID index can move, and endpoints built on the old
//! address are stale: the machine compares a [`PortAddress::fingerprint`]
//! read after activation and after `LID_CHANGE`/`GID_CHANGE`, and bumps the
//! generation when it changed.

use std::fmt;

/// `ibv_port_attr.link_layer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
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

/// What a rail needs in its GID table before it may carry traffic
/// (`require_address`): a RoCE port reads ACTIVE before it has a routable
/// address, and an engine that connects on the wrong GID never recovers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum AddressRequirement {
    /// Nothing (the default): the port's state alone decides.
    #[default]
    None,
    /// Any GID at all.
    Any,
    /// A RoCE v2 GID (link-local included).
    RoceV2,
    /// A RoCE v2 GID that is an IPv4-mapped address (`::ffff:a.b.c.d`):
    /// what engines that route by IPv4 connect on.
    RoceV2Ipv4,
    /// An InfiniBand address: a LID assigned on an InfiniBand port.
    Ib,
}

impl AddressRequirement {
    /// Every requirement, in the order of [`name`](Self::name)'s values.
    pub const ALL: [AddressRequirement; 5] = [
        AddressRequirement::None,
        AddressRequirement::Any,
        AddressRequirement::RoceV2,
        AddressRequirement::RoceV2Ipv4,
        AddressRequirement::Ib,
    ];

    /// The setting's value (`"roce_v2_ipv4"`).
    pub const fn name(self) -> &'static str {
        match self {
            AddressRequirement::None => "none",
            AddressRequirement::Any => "any",
            AddressRequirement::RoceV2 => "roce_v2",
            AddressRequirement::RoceV2Ipv4 => "roce_v2_ipv4",
            AddressRequirement::Ib => "ib",
        }
    }

    /// The GID index an engine should build endpoints on, when `address`
    /// meets the requirement: the lowest index of the kind asked for (0
    /// for `ib`); `None` when it does not. `none` is met by any address
    /// and names no index.
    pub fn gid_index(self, address: &PortAddress) -> Option<Option<u32>> {
        let first = |ok: &dyn Fn(&Gid) -> bool| address.gids.iter().filter(|g| ok(g)).map(|g| g.index).min();
        match self {
            AddressRequirement::None => Some(None),
            AddressRequirement::Any => first(&|_| true).map(Some),
            AddressRequirement::RoceV2 => first(&|g| g.kind == GidType::RoceV2).map(Some),
            AddressRequirement::RoceV2Ipv4 => first(&|g| g.kind == GidType::RoceV2 && is_ipv4_mapped(&g.raw)).map(Some),
            AddressRequirement::Ib => {
                let ib = matches!(address.link_layer, Some(LinkLayer::InfiniBand | LinkLayer::Unspecified));
                (ib && address.lid != 0).then_some(Some(0))
            }
        }
    }
}

/// `::ffff:a.b.c.d`.
fn is_ipv4_mapped(raw: &[u8; 16]) -> bool {
    raw[..10].iter().all(|&b| b == 0) && raw[10] == 0xff && raw[11] == 0xff
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
    fn requirements_pick_the_lowest_index_of_their_kind() {
        let mut v4 = [0u8; 16];
        v4[10] = 0xff;
        v4[11] = 0xff;
        v4[12..].copy_from_slice(&[10, 1, 1, 1]);
        let roce = PortAddress {
            link_layer: Some(LinkLayer::Ethernet),
            lid: 0,
            gids: vec![gid(0, 1), Gid { index: 3, raw: v4, kind: GidType::RoceV2 }],
            netdev: Some("veth0".into()),
        };
        assert_eq!(AddressRequirement::None.gid_index(&roce), Some(None));
        assert_eq!(AddressRequirement::Any.gid_index(&roce), Some(Some(0)));
        assert_eq!(AddressRequirement::RoceV2.gid_index(&roce), Some(Some(0)));
        assert_eq!(AddressRequirement::RoceV2Ipv4.gid_index(&roce), Some(Some(3)));
        assert_eq!(AddressRequirement::Ib.gid_index(&roce), None);
        let link_local_only = PortAddress { gids: vec![gid(0, 1)], ..roce.clone() };
        assert_eq!(AddressRequirement::RoceV2Ipv4.gid_index(&link_local_only), None);
        let empty = PortAddress { gids: vec![], ..roce };
        assert_eq!(AddressRequirement::Any.gid_index(&empty), None);
        let ib = PortAddress { link_layer: Some(LinkLayer::InfiniBand), lid: 7, gids: vec![], netdev: None };
        assert_eq!(AddressRequirement::Ib.gid_index(&ib), Some(Some(0)));
        assert_eq!(AddressRequirement::Ib.gid_index(&PortAddress { lid: 0, ..ib }), None);
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
