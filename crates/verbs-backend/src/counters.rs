//! A port's flap counters from sysfs: `link_downed` (the port's
//! `counters/`, or the `hw_counters/` of drivers that keep it there, as
//! rxe does) and, under a RoCE port, the netdev's `carrier_changes` and
//! `carrier_down_count`. They witness a flap whose PORT_ERR and
//! PORT_ACTIVE were both lost.

use std::io;
use std::path::Path;

use railwatch_core::PortCounters;

/// The counters of `device`'s `port`, read under `sys` (`/sys` on a host).
/// `NotFound` when the driver has none of them (older drivers): the
/// machine then stops asking.
pub fn read_flap_counters(sys: &Path, device: &str, port: u8) -> io::Result<PortCounters> {
    let port_dir = sys.join("class/infiniband").join(device).join("ports").join(port.to_string());
    let link_downed = read_number(&port_dir.join("counters/link_downed"))
        .or_else(|| read_number(&port_dir.join("hw_counters/link_downed")));
    let net = crate::netdev::netdev_dir(sys, device, port);
    let carrier_changes = net.as_ref().and_then(|d| read_number(&d.join("carrier_changes")));
    let carrier_down = net.as_ref().and_then(|d| read_number(&d.join("carrier_down_count")));
    let counters = PortCounters { link_downed, carrier_changes, carrier_down };
    if counters.any() {
        Ok(counters)
    } else {
        Err(io::Error::new(io::ErrorKind::NotFound, format!("{device} port {port}: no flap counters in sysfs")))
    }
}

/// A sysfs number: one line, a decimal integer.
fn read_number(path: &Path) -> Option<u64> {
    crate::netdev::read_word(path)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn rxe_keeps_link_downed_in_hw_counters_and_the_carrier_is_the_netdevs() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "class/infiniband/rxe0/ports/1/hw_counters/link_downed", "3\n");
        write(root, "class/infiniband/rxe0/ports/1/gid_attrs/ndevs/0", "veth0\n");
        write(root, "class/net/veth0/carrier_changes", "7\n");
        write(root, "class/net/veth0/carrier_down_count", "3\n");
        let c = read_flap_counters(root, "rxe0", 1).unwrap();
        assert_eq!(c, PortCounters { link_downed: Some(3), carrier_changes: Some(7), carrier_down: Some(3) });
    }

    #[test]
    fn the_port_counters_directory_wins_and_missing_files_are_none() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "class/infiniband/mlx5_0/ports/1/counters/link_downed", "1\n");
        write(root, "class/infiniband/mlx5_0/ports/1/hw_counters/link_downed", "9\n");
        let c = read_flap_counters(root, "mlx5_0", 1).unwrap();
        assert_eq!(c, PortCounters { link_downed: Some(1), carrier_changes: None, carrier_down: None });
        let e = read_flap_counters(root, "mlx5_0", 2).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn a_netdev_name_cannot_climb_out_and_garbage_is_no_number() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "class/infiniband/x/ports/1/gid_attrs/ndevs/0", "../../../etc\n");
        write(root, "class/infiniband/x/ports/1/counters/link_downed", "lots\n");
        assert!(read_flap_counters(root, "x", 1).is_err());
        // A netdev named with ESC (the kernel allows it) is no netdev here:
        // its counters are not read, its name reaches no label.
        write(root, "class/infiniband/y/ports/1/gid_attrs/ndevs/0", "e\u{1b}[2J\n");
        write(root, "class/net/e\u{1b}[2J/carrier_changes", "3\n");
        assert!(read_flap_counters(root, "y", 1).is_err());
    }
}
