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
