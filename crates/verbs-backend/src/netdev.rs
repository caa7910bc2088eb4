//! A RoCE port's netdev in sysfs: which it is (`gid_attrs/ndevs/0`) and
//! its carrier, the second witness of the port (an EFA port reads ACTIVE
//! whatever its link does; a RoCE port and its netdev can disagree for a
//! while).

use std::io::{self, Read};
use std::path::{Path, PathBuf};

use railwatch_core::{Carrier, is_netdev_name};

/// The netdev's directory under `sys` (`/sys` on a host) of `device`'s
/// `port`, if the port has a netdev with a name that is safe to join.
pub fn netdev_dir(sys: &Path, device: &str, port: u8) -> Option<PathBuf> {
    let port_dir = sys.join("class/infiniband").join(device).join("ports").join(port.to_string());
    let name = read_word(&port_dir.join("gid_attrs/ndevs/0"))?;
    is_netdev_name(&name).then(|| sys.join("class/net").join(name))
}

/// The carrier of `device`'s `port`'s netdev: its RFC 2863 `operstate`
/// (`up` is up; `down`, `lowerlayerdown`, `notpresent`, `dormant` and
/// `testing` are not), or, where the operstate is `unknown` (drivers that
/// do not keep it), the `carrier` flag (which reads `EINVAL` while the
/// interface is administratively down: no carrier). `NotFound` for a port
/// without a netdev, or a netdev that says neither.
pub fn read_carrier(sys: &Path, device: &str, port: u8) -> io::Result<Carrier> {
    let not_found = || io::Error::new(io::ErrorKind::NotFound, format!("{device} port {port}: no netdev carrier"));
    let dir = netdev_dir(sys, device, port).ok_or_else(not_found)?;
    match read_word(&dir.join("operstate")).as_deref() {
        Some("up") => Ok(Carrier::Up),
        Some("down" | "lowerlayerdown" | "notpresent" | "dormant" | "testing") => Ok(Carrier::Down),
        Some(_) => match std::fs::read_to_string(dir.join("carrier")) {
            Ok(flag) if flag.trim() == "1" => Ok(Carrier::Up),
            Ok(flag) if flag.trim() == "0" => Ok(Carrier::Down),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(Carrier::Down),
            _ => Err(not_found()),
        },
        None => Err(not_found()),
    }
}

/// One short sysfs line, trimmed (at most 64 bytes read).
pub(crate) fn read_word(path: &Path) -> Option<String> {
    let mut text = String::new();
    std::fs::File::open(path).ok()?.take(64).read_to_string(&mut text).ok()?;
    Some(text.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn port_with(root: &Path, operstate: &str, carrier: Option<&str>) -> io::Result<Carrier> {
        write(root, "class/infiniband/rxe0/ports/1/gid_attrs/ndevs/0", "eth0\n");
        write(root, "class/net/eth0/operstate", &format!("{operstate}\n"));
        if let Some(c) = carrier {
            write(root, "class/net/eth0/carrier", &format!("{c}\n"));
        }
        read_carrier(root, "rxe0", 1)
    }

    #[test]
    fn the_operstate_decides_and_unknown_falls_back_to_the_carrier_flag() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        assert_eq!(port_with(root, "up", Some("0")).unwrap(), Carrier::Up);
        for down in ["down", "lowerlayerdown", "notpresent", "dormant", "testing"] {
            assert_eq!(port_with(root, down, Some("1")).unwrap(), Carrier::Down, "{down}");
        }
        assert_eq!(port_with(root, "unknown", Some("1")).unwrap(), Carrier::Up);
        assert_eq!(port_with(root, "unknown", Some("0")).unwrap(), Carrier::Down);
        assert_eq!(port_with(root, "unknown", Some("maybe")).unwrap_err().kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn a_port_without_a_safe_netdev_has_no_carrier() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        assert_eq!(read_carrier(root, "mlx5_0", 1).unwrap_err().kind(), io::ErrorKind::NotFound);
        write(root, "class/infiniband/x/ports/1/gid_attrs/ndevs/0", "../../../etc\n");
        assert!(read_carrier(root, "x", 1).is_err());
        write(root, "class/infiniband/y/ports/1/gid_attrs/ndevs/0", "eth9\n");
        assert!(read_carrier(root, "y", 1).is_err(), "a netdev with no operstate says nothing");
    }
}
