//! The verbs backend against this machine's real libibverbs (no fake).
//!
//! On a host without RDMA devices (or without RDMA support in its kernel,
//! where `ibv_get_device_list` fails with ENOSYS) listing is an empty list,
//! not an error.

use std::path::Path;

use railwatch_core::EventKind;
use railwatch_verbs_backend::{VerbsDevice, VerbsError, event_name, list_devices, testing};

fn no_rdma_devices_here() -> bool {
    std::fs::read_dir("/sys/class/infiniband").map_or(true, |mut d| d.next().is_none())
}

#[test]
fn listing_with_the_system_library_is_not_an_error() {
    assert!(!testing::under_fake());
    let devices = list_devices().expect("listing devices never fails on a host without RDMA");
    if no_rdma_devices_here() {
        assert!(devices.is_empty(), "{devices:?}");
    }
}

#[test]
fn opening_a_missing_device_is_not_found() {
    if !Path::new("/sys/class/infiniband/railwatch_no_such_device").exists() {
        match VerbsDevice::open("railwatch_no_such_device") {
            Err(VerbsError::NotFound { device }) => assert_eq!(device, "railwatch_no_such_device"),
            other => panic!("expected NotFound, got {other:?}"),
        }
    }
}

#[test]
fn event_names_from_the_system_library() {
    // rdma-core knows 0..=19 everywhere; 20 from rdma-core 62 on.
    for kind in EventKind::KNOWN.iter().filter(|k| k.code() < 20) {
        assert_eq!(event_name(kind.code()), kind.ibv_str(), "{kind}");
    }
    assert!(matches!(event_name(20), "Device link speed change" | "unknown"), "{}", event_name(20));
    assert_eq!(event_name(99), "unknown");
}

/// A veth pair made for one test and deleted with it.
struct Veth(&'static str);

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip").args(["link", "del", self.0]).status();
    }
}

fn ip(args: &[&str]) -> bool {
    std::process::Command::new("ip").args(args).output().is_ok_and(|o| o.status.success())
}

/// The link socket wakes when a netdev's carrier changes, and a drain
/// empties it. Needs a veth pair (root and the veth driver): where one
/// cannot be made, says so and checks nothing.
#[test]
fn the_link_socket_hears_a_carrier_change() {
    use railwatch_verbs_backend::LinkSocket;
    let Ok(mut socket) = LinkSocket::open() else {
        eprintln!("skipped: no rtnetlink socket here");
        return;
    };
    if !ip(&["link", "add", "rwlk0", "type", "veth", "peer", "name", "rwlk1"]) {
        eprintln!("skipped: a veth pair cannot be made here");
        return;
    }
    let _pair = Veth("rwlk0");
    while socket.drain().unwrap() {}
    // (A guest's busybox `ip` may make the pair but not bring it up.)
    if !(ip(&["link", "set", "rwlk0", "up"]) && ip(&["link", "set", "rwlk1", "up"])) {
        eprintln!("skipped: the veth pair cannot be brought up here");
        return;
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !socket.drain().unwrap() {
        assert!(std::time::Instant::now() < deadline, "no link message within 5 s of the pair coming up");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let operstate = std::fs::read_to_string("/sys/class/net/rwlk0/operstate").unwrap_or_default();
    assert!(["up", "lowerlayerdown", "down"].contains(&operstate.trim()), "{operstate}");
}
