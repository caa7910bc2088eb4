//! What names a rail across boots: device names move (`mlx5_0` can come
//! back as `mlx5_1`), the hardware's GUIDs and PCI address do not.

/// A rail's identity, as far as the backend can read it: the device's
/// node GUID and PCI address, the port's GUID (InfiniBand only: a RoCE
/// port has none). The netdev is part of the port's address.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct RailIdentity {
    /// The device's node GUID (`ibv_query_device`), host byte order.
    pub node_guid: Option<u64>,
    /// The port's GUID (InfiniBand: GID 0's interface identifier).
    pub port_guid: Option<u64>,
    /// The PCI address of the device's function (`0000:3b:00.0`), where it
    /// sits on PCI (Soft-RoCE does not).
    pub pci_address: Option<String>,
}

/// A GUID as sysfs and `ibv_devinfo` write it: four groups of four hex
/// digits, `0002:c903:00f1:c2a0`.
pub fn guid_text(guid: u64) -> String {
    let g = guid.to_be_bytes();
    format!("{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}", g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7])
}

/// Whether `name` is a netdev name railwatch uses (as a path under
/// `class/net`, as a label): what the kernel allows (at most 15 bytes,
/// no `/`, `:` or whitespace, not `.` or `..`) and no control character
/// (the kernel allows ESC; a label or a log line must not carry it).
///
/// ```
/// use railwatch_core::is_netdev_name;
/// assert!(is_netdev_name("enp59s0f0np0"));
/// assert!(!is_netdev_name("../../etc") && !is_netdev_name("e\u{1b}[2J") && !is_netdev_name(""));
/// ```
pub fn is_netdev_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 15
        && name != "."
        && name != ".."
        && !name.chars().any(|c| c == '/' || c == ':' || c.is_whitespace() || c.is_control())
}

/// Whether `text` is a PCI address as sysfs names a function:
/// `DDDD:BB:DD.F` in hex (domain, bus, device, function).
pub fn is_pci_address(text: &str) -> bool {
    let b = text.as_bytes();
    let hex = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_hexdigit);
    b.len() == 12
        && b[4] == b':'
        && b[7] == b':'
        && b[10] == b'.'
        && hex(0..4)
        && hex(5..7)
        && hex(8..10)
        && hex(11..12)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guids_and_pci_addresses_read_as_sysfs_writes_them() {
        assert_eq!(guid_text(0x0002_c903_00f1_c2a0), "0002:c903:00f1:c2a0");
        assert_eq!(guid_text(0), "0000:0000:0000:0000");
        assert!(is_pci_address("0000:3b:00.0"));
        assert!(is_pci_address("10de:AF:1f.7"));
        for bad in ["", "0000:3b:00", "0000:3b:00.00", "0000-3b:00.0", "000g:3b:00.0", "rxe0", "0000:3b:00.0x"] {
            assert!(!is_pci_address(bad), "{bad}");
        }
    }
}
