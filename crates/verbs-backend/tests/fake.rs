//! The verbs backend through the real FFI path against the fake
//! libibverbs (fake/fake_ibverbs.c): each test re-runs itself under the fake
//! and reads the fake's counters of gets and acks.

use std::io::{self, ErrorKind};

use railwatch_core::{
    AsyncEvent, Element, EventKind, LinkAttrs, LinkRate, ObjectHandle, PortState, SPEEDS, VerbsPort, WIDTHS,
};
use railwatch_verbs_backend::fake_test;
use railwatch_verbs_backend::testing::{Fake, FakeLib, fd_is_nonblocking};
use railwatch_verbs_backend::{VerbsDevice, VerbsError, errno_of, event_name, has_effective_speed, list_devices};

const PORT_ACTIVE: u32 = 9;
const PORT_ERR: u32 = 10;
const COMM_EST: u32 = 4;
const IBV_PORT_DOWN: u32 = 1;
const IBV_PORT_ACTIVE: u32 = 4;

/// What a drain saw.
#[derive(Debug)]
struct Drain {
    events: Vec<AsyncEvent>,
    interrupts: usize,
    /// `None` when it ended on WouldBlock.
    error: Option<io::Error>,
}

/// The monitor's drain, written here: read until WouldBlock, retry
/// Interrupted, stop on any other error.
fn drain(dev: &mut impl VerbsPort) -> Drain {
    let mut d = Drain { events: Vec::new(), interrupts: 0, error: None };
    loop {
        match dev.get_event() {
            Ok(ev) => d.events.push(ev),
            Err(e) if e.kind() == ErrorKind::WouldBlock => return d,
            Err(e) if e.kind() == ErrorKind::Interrupted => d.interrupts += 1,
            Err(e) => {
                d.error = Some(e);
                return d;
            }
        }
    }
}

/// One device with one port, opened.
fn open_one(fake: &Fake) -> VerbsDevice {
    fake.set_devices(1);
    VerbsDevice::open("mlx5_0").expect("open mlx5_0")
}

fn gets_and_acks(fake: &Fake) -> (i64, i64) {
    let c = fake.counters();
    (c.gets, c.acks)
}

/// Every event handed out was acknowledged once, in order, and nothing else.
fn assert_all_acked_once(fake: &Fake) {
    let c = fake.counters();
    assert_eq!(c.acks, c.gets_ok, "one ack per event read");
    assert_eq!(fake.acked(), fake.got(), "each event acked exactly once, as it was read");
}

// ---- devices ---------------------------------------------------------------

fake_test!(no_kernel_support_is_zero_devices, FakeLib::Basic, |fake| {
    fake.set_devices(2);
    fake.set_list_errno(libc::ENOSYS);
    assert_eq!(list_devices().expect("ENOSYS is not an error"), Vec::<String>::new());
    match VerbsDevice::open("mlx5_0") {
        Err(VerbsError::NotFound { device }) => assert_eq!(device, "mlx5_0"),
        other => panic!("expected NotFound, got {other:?}"),
    }
});

fake_test!(zero_devices_is_an_empty_list, FakeLib::Basic, |fake| {
    fake.set_devices(0);
    assert!(list_devices().unwrap().is_empty());
    let c = fake.counters();
    assert_eq!((c.lists, c.lists_freed), (1, 1), "the list is freed");
});

fake_test!(lists_n_devices_in_order, FakeLib::Basic, |fake| {
    fake.set_devices(3);
    fake.set_device_name(2, "rocep1s0f0");
    assert_eq!(list_devices().unwrap(), ["mlx5_0", "mlx5_1", "rocep1s0f0"]);
    fake.set_devices(8);
    assert_eq!(list_devices().unwrap().len(), 8);
    let c = fake.counters();
    assert_eq!((c.lists, c.lists_freed), (2, 2));
});

fake_test!(a_real_list_error_is_reported, FakeLib::Basic, |fake| {
    fake.set_list_errno(libc::EPERM);
    let err = list_devices().unwrap_err();
    assert!(matches!(err, VerbsError::List { call: "ibv_get_device_list", .. }), "{err:?}");
    assert_eq!((err.errno(), err.kind()), (Some(libc::EPERM), ErrorKind::PermissionDenied));
    assert!(err.to_string().starts_with("ibv_get_device_list failed: "), "{err}");
});

fake_test!(open_sets_the_async_fd_nonblocking_and_reads_the_ports, FakeLib::Basic, |fake| {
    fake.set_devices(2);
    fake.set_ports(1, 2);
    let dev = VerbsDevice::open("mlx5_1").unwrap();
    assert_eq!((dev.name(), dev.ports(), dev.port_count(), dev.is_open()), ("mlx5_1", vec![1, 2], 2, true));
    let fd = dev.async_fd();
    assert!(fd >= 0);
    assert!(fd_is_nonblocking(fd), "async fd {fd} must be O_NONBLOCK");
    let c = fake.counters();
    assert_eq!((c.opens, c.device_queries, c.lists, c.lists_freed), (1, 1, 1, 1));
    assert!(format!("{dev:?}").contains("mlx5_1"));
    drop(dev);
    assert_eq!(fake.counters().closes, 1, "drop closes the device");
});

fake_test!(open_errors_name_the_device_and_the_call, FakeLib::Basic, |fake| {
    fake.set_devices(1);
    match VerbsDevice::open("mlx5_7") {
        Err(e @ VerbsError::NotFound { .. }) => assert_eq!(e.to_string(), "mlx5_7: no such RDMA device"),
        other => panic!("expected NotFound, got {other:?}"),
    }
    fake.set_open_errno(0, libc::EACCES);
    let err = VerbsDevice::open("mlx5_0").unwrap_err();
    assert_eq!(
        (err.device(), err.failed_call(), err.errno()),
        (Some("mlx5_0"), Some("ibv_open_device"), Some(libc::EACCES))
    );
    let io_err = io::Error::from(err);
    assert_eq!(io_err.kind(), ErrorKind::PermissionDenied);
    assert!(io_err.to_string().starts_with("mlx5_0: ibv_open_device failed: "), "{io_err}");
    assert_eq!(errno_of(&io_err), Some(libc::EACCES));

    // A failure after the context is open closes it again.
    fake.set_open_errno(0, 0);
    fake.set_query_errno(0, libc::EIO);
    let err = VerbsDevice::open("mlx5_0").unwrap_err();
    assert_eq!((err.failed_call(), err.errno()), (Some("ibv_query_device"), Some(libc::EIO)));
    let c = fake.counters();
    assert_eq!((c.opens, c.closes), (1, 1), "the half-opened context is closed");
    assert_eq!(c.lists, c.lists_freed);
});

// ---- port state and link -----------------------------------------------------

fake_test!(port_state_reads_every_state_through_the_extended_op, FakeLib::Basic, |fake| {
    fake.set_devices(1);
    fake.set_ports(0, 2);
    let mut dev = VerbsDevice::open("mlx5_0").unwrap();
    let codes = [0, 1, 2, 3, 4, 5, 6, 77];
    for code in codes {
        fake.set_port_state(0, 2, code);
        assert_eq!(dev.port_state(2).unwrap(), PortState::from_code(code));
    }
    assert_eq!(dev.port_state(1).unwrap(), PortState::Active, "port 1 untouched");
    let c = fake.counters();
    assert_eq!(
        (c.ext_queries, c.compat_queries),
        (codes.len() as i64 + 1, 0),
        "an extended context is queried through its query_port op, as verbs.h does"
    );
});

fake_test!(port_query_errors_are_errnos, FakeLib::Basic, |fake| {
    let mut dev = open_one(&fake);
    let err = dev.port_state(2).unwrap_err();
    assert_eq!(errno_of(&err), Some(libc::EINVAL), "port 2 of a 1-port device: {err}");
    fake.set_query_errno(0, libc::ENODEV);
    for err in [dev.port_state(1).unwrap_err(), dev.link(1).unwrap_err()] {
        assert_eq!(errno_of(&err), Some(libc::ENODEV));
        assert!(err.to_string().starts_with("mlx5_0: ibv_query_port failed: "), "{err}");
    }
});

fake_test!(link_rate_for_every_speed_and_width, FakeLib::Basic, |fake| {
    let mut dev = open_one(&fake);
    for speed in SPEEDS.iter().filter(|s| s.code <= 255) {
        for width in WIDTHS {
            let code = speed.code as u8;
            fake.set_port(0, 1, IBV_PORT_ACTIVE, code, width.code, speed.code);
            let link = dev.link(1).unwrap();
            let expected_ex = if railwatch_verbs_backend::HAS_ACTIVE_SPEED_EX { speed.code } else { 0 };
            assert_eq!(
                link,
                LinkAttrs {
                    active_speed: code,
                    active_width: width.code,
                    active_speed_ex: expected_ex,
                    effective_100mbps: None
                },
                "{} {}",
                speed.name,
                width.name
            );
            assert_eq!(
                link.rate(),
                LinkRate::Known { mbps: speed.lane_mbps * width.lanes },
                "{} {}",
                speed.name,
                width.name
            );
        }
    }
    // The ones FACTS.md spells out.
    for (speed, width, gbps) in [(128, 2, 400), (64, 16, 100), (32, 2, 100), (16, 2, 56)] {
        fake.set_port(0, 1, IBV_PORT_ACTIVE, speed, width, u32::from(speed));
        assert_eq!(dev.link(1).unwrap().rate(), LinkRate::gbps(gbps));
    }
    // XDR only exists in active_speed_ex (active_speed reads 0).
    fake.set_port(0, 1, IBV_PORT_ACTIVE, 0, 2, 256);
    let xdr = dev.link(1).unwrap();
    if railwatch_verbs_backend::HAS_ACTIVE_SPEED_EX {
        assert_eq!((xdr.active_speed_ex, xdr.rate()), (256, LinkRate::gbps(800)));
    } else {
        assert_eq!((xdr.active_speed_ex, xdr.rate()), (0, LinkRate::Unknown), "no guess without active_speed_ex");
    }
    assert_eq!(fake.counters().speed_queries, 0);
});

fake_test!(unknown_speed_or_width_codes_give_an_unknown_rate, FakeLib::Basic, |fake| {
    let mut dev = open_one(&fake);
    for (speed, width) in [(0, 2), (3, 2), (200, 2), (255, 1), (128, 0), (128, 3), (128, 32), (128, 255)] {
        fake.set_port(0, 1, IBV_PORT_ACTIVE, speed, width, 0);
        let link = dev.link(1).unwrap();
        assert_eq!((link.active_speed, link.active_width), (speed, width));
        assert_eq!(link.rate(), LinkRate::Unknown, "speed {speed} width {width}");
    }
    // Reading the rate of a down port still works; state and rate are separate.
    fake.set_port(0, 1, IBV_PORT_DOWN, 64, 2, 64);
    assert_eq!(dev.link(1).unwrap().rate(), LinkRate::gbps(200));
    assert_eq!(dev.port_state(1).unwrap(), PortState::Down);
});

fake_test!(without_ibv_query_port_speed_there_is_no_effective_speed, FakeLib::Basic, |fake| {
    let mut dev = open_one(&fake);
    assert!(!has_effective_speed());
    assert_eq!(dev.link(1).unwrap().effective_100mbps, None);
});

fake_test!(the_effective_speed_wins_when_the_library_has_it, FakeLib::PortSpeed, |fake| {
    let mut dev = open_one(&fake);
    assert!(has_effective_speed());
    // A LAG of two NDR 2x ports: 400 Gb/s where speed x width says 200.
    fake.set_port(0, 1, IBV_PORT_ACTIVE, 128, 16, 128);
    fake.set_effective_speed(0, 1, 4000, 0);
    let link = dev.link(1).unwrap();
    assert_eq!((link.effective_100mbps, link.rate()), (Some(4000), LinkRate::gbps(400)));
    // Zero means "not reported": speed x width.
    fake.set_effective_speed(0, 1, 0, 0);
    assert_eq!(dev.link(1).unwrap().rate(), LinkRate::gbps(200));
    // A failing ibv_query_port_speed is no effective speed, not an error.
    fake.set_effective_speed(0, 1, 4000, libc::EOPNOTSUPP);
    let link = dev.link(1).unwrap();
    assert_eq!((link.effective_100mbps, link.rate()), (None, LinkRate::gbps(200)));
    assert_eq!(fake.counters().speed_queries, 3);
});

// ---- draining ------------------------------------------------------------

fake_test!(a_burst_of_five_drains_with_six_gets_and_five_acks, FakeLib::Basic, |fake| {
    let mut dev = open_one(&fake);
    for qp in 1..=5u64 {
        fake.push_event(0, COMM_EST, 0x7f00_0000_1000 * qp);
    }
    let d = drain(&mut dev);
    assert!(d.error.is_none(), "{:?}", d.error);
    assert_eq!(d.events.len(), 5);
    for (i, ev) in d.events.iter().enumerate() {
        let handle = ObjectHandle(0x7f00_0000_1000 * (i as u64 + 1));
        assert_eq!(*ev, AsyncEvent::new(COMM_EST, Element::Object(handle)));
    }
    assert_eq!(gets_and_acks(&fake), (6, 5));
    assert_all_acked_once(&fake);
});

fake_test!(a_port_active_behind_comm_ests_is_returned_and_all_are_acked, FakeLib::Basic, |fake| {
    let mut dev = open_one(&fake);
    for qp in 1..=4u64 {
        fake.push_event(0, COMM_EST, 0x5000 + qp);
    }
    fake.push_event(0, PORT_ACTIVE, 1);
    let d = drain(&mut dev);
    assert!(d.error.is_none());
    assert_eq!(d.events.len(), 5);
    assert_eq!(d.events.last(), Some(&AsyncEvent::port(EventKind::PortActive, 1)));
    assert_eq!(gets_and_acks(&fake), (6, 5));
    assert_all_acked_once(&fake);
});

fake_test!(an_empty_queue_is_one_get_no_ack_and_would_block, FakeLib::Basic, |fake| {
    let mut dev = open_one(&fake);
    let err = dev.get_event().unwrap_err();
    assert_eq!((err.kind(), err.raw_os_error()), (ErrorKind::WouldBlock, Some(libc::EAGAIN)));
    assert_eq!(gets_and_acks(&fake), (1, 0));
});

fake_test!(one_eintr_is_surfaced_as_interrupted_and_the_retry_succeeds, FakeLib::Basic, |fake| {
    let mut dev = open_one(&fake);
    fake.push_event(0, PORT_ERR, 1);
    fake.set_get_fault(0, libc::EINTR, 0, 1);
    let err = dev.get_event().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Interrupted);
    assert_eq!(gets_and_acks(&fake), (1, 0), "nothing acked for a failed read");
    assert_eq!(dev.get_event().unwrap(), AsyncEvent::port(EventKind::PortErr, 1));
    assert_eq!(gets_and_acks(&fake), (2, 1));

    // The same through the drain loop.
    fake.push_event(0, PORT_ACTIVE, 1);
    fake.set_get_fault(0, libc::EINTR, 0, 1);
    let d = drain(&mut dev);
    assert!(d.error.is_none());
    assert_eq!((d.interrupts, d.events), (1, vec![AsyncEvent::port(EventKind::PortActive, 1)]));
    assert_eq!(gets_and_acks(&fake), (5, 2), "EINTR, event, EAGAIN");
    assert_all_acked_once(&fake);
});

fake_test!(eio_after_one_event_stops_the_drain_with_an_error, FakeLib::Basic, |fake| {
    let mut dev = open_one(&fake);
    fake.push_event(0, PORT_ERR, 1);
    fake.push_event(0, PORT_ACTIVE, 1);
    fake.set_get_fault(0, libc::EIO, 1, -1);
    let d = drain(&mut dev);
    assert_eq!(d.events, [AsyncEvent::port(EventKind::PortErr, 1)]);
    let err = d.error.expect("the drain stops on EIO");
    assert!(!matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted));
    assert_eq!(errno_of(&err), Some(libc::EIO));
    assert!(err.to_string().starts_with("mlx5_0: ibv_get_async_event failed: "), "{err}");
    let inner = err.get_ref().and_then(|e| e.downcast_ref::<VerbsError>()).expect("wraps a VerbsError");
    assert_eq!((inner.device(), inner.failed_call()), (Some("mlx5_0"), Some("ibv_get_async_event")));
    assert_eq!(gets_and_acks(&fake), (2, 1));
    assert_all_acked_once(&fake);
});

fake_test!(a_dead_event_queue_reads_as_eio, FakeLib::Basic, |fake| {
    let mut dev = open_one(&fake);
    fake.push_event(0, 8, 0); // DEVICE_FATAL, then the queue closes
    fake.close_event_queue(0);
    let d = drain(&mut dev);
    assert_eq!(d.events, [AsyncEvent::new(8, Element::Port(0))]);
    assert_eq!(errno_of(&d.error.expect("EIO")), Some(libc::EIO));
    assert_eq!(gets_and_acks(&fake), (2, 1));
});

fake_test!(events_pushed_from_another_thread_reach_the_reader, FakeLib::Basic, |fake| {
    let mut dev = open_one(&fake);
    let reader = std::thread::spawn(move || {
        let mut seen = Vec::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while seen.len() < 100 && std::time::Instant::now() < deadline {
            let d = drain(&mut dev);
            assert!(d.error.is_none(), "{:?}", d.error);
            seen.extend(d.events);
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        seen
    });
    for i in 0..100u64 {
        fake.push_event(0, COMM_EST, 0x1000 + i);
    }
    let seen = reader.join().unwrap();
    let expected: Vec<AsyncEvent> =
        (0..100u64).map(|i| AsyncEvent::new(COMM_EST, Element::Object(ObjectHandle(0x1000 + i)))).collect();
    assert_eq!(seen, expected);
    assert_all_acked_once(&fake);
});

fake_test!(codes_20_and_99_are_values_not_undefined_behaviour, FakeLib::Basic, |fake| {
    let mut dev = open_one(&fake);
    fake.push_event(0, 20, 1);
    fake.push_event(0, 99, 7);
    fake.push_event(0, 21, 0);
    fake.push_event(0, u32::MAX, 3);
    fake.push_event(0, PORT_ACTIVE, 1);
    let d = drain(&mut dev);
    assert!(d.error.is_none());
    assert_eq!(
        d.events,
        [
            AsyncEvent::new(20, Element::Port(1)),
            AsyncEvent::new(99, Element::None),
            AsyncEvent::new(21, Element::None),
            AsyncEvent::new(u32::MAX, Element::None),
            AsyncEvent::port(EventKind::PortActive, 1),
        ]
    );
    assert_eq!(d.events[0].kind(), EventKind::DeviceSpeedChange);
    assert_eq!(d.events[1].kind(), EventKind::Unknown(99));
    assert_eq!(gets_and_acks(&fake), (6, 5));
    assert_all_acked_once(&fake);
    assert_eq!(
        (event_name(20), event_name(99), event_name(u32::MAX)),
        ("Device link speed change", "unknown", "unknown")
    );
});

fake_test!(elements_are_copied_by_scope, FakeLib::Basic, |fake| {
    let mut dev = open_one(&fake);
    let objects = [(0, 0x1111_0000u64), (1, 0x2222_0000), (3, 0x3333_0000), (14, 0x4444_0000), (19, 0x5555_0000)];
    for (code, ptr) in objects {
        fake.push_event(0, code, ptr);
    }
    fake.push_event(0, 8, 0); // DEVICE_FATAL: port 0
    fake.push_event(0, 18, 2); // GID_CHANGE on port 2
    let d = drain(&mut dev);
    let mut expected: Vec<AsyncEvent> =
        objects.iter().map(|&(code, ptr)| AsyncEvent::new(code, Element::Object(ObjectHandle(ptr)))).collect();
    expected.push(AsyncEvent::new(8, Element::Port(0)));
    expected.push(AsyncEvent::port(EventKind::GidChange, 2));
    assert_eq!(d.events, expected);
    assert_all_acked_once(&fake);
});

fake_test!(event_names_come_from_the_library, FakeLib::Basic, |_fake| {
    for kind in EventKind::KNOWN {
        assert_eq!(event_name(kind.code()), kind.ibv_str(), "{kind}");
    }
});

// ---- identity ----------------------------------------------------------------

fake_test!(a_rail_is_named_by_its_guids_and_pci_address, FakeLib::Basic, |fake| {
    let sysfs = tempfile::tempdir().unwrap();
    let entry = sysfs.path().join("mlx5_0");
    std::fs::create_dir(&entry).unwrap();
    std::os::unix::fs::symlink("../../../devices/pci0000:3a/0000:3a:00.0/0000:3b:00.1", entry.join("device")).unwrap();
    fake.set_devices(2);
    fake.set_ibdev_path(0, &entry);
    fake.set_node_guid(0, 0x0002_c903_00f1_c2a0);
    fake.set_gid(0, 1, 0, [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x00, 0x02, 0xc9, 0x03, 0x00, 0xf1, 0xc2, 0xa1]);
    let mut dev = VerbsDevice::open("mlx5_0").unwrap();
    let id = dev.identity(1).unwrap();
    assert_eq!(id.node_guid, Some(0x0002_c903_00f1_c2a0));
    assert_eq!(id.port_guid, Some(0x0002_c903_00f1_c2a1), "GID 0's interface id on InfiniBand");
    assert_eq!(id.pci_address.as_deref(), Some("0000:3b:00.1"));
    assert_eq!(railwatch_core::guid_text(id.port_guid.unwrap()), "0002:c903:00f1:c2a1");
    // No `device` link (Soft-RoCE), a GUID of zero: not known, not invented.
    fake.set_node_guid(1, 0);
    let mut other = VerbsDevice::open("mlx5_1").unwrap();
    let id = other.identity(1).unwrap();
    assert_eq!((id.node_guid, id.pci_address), (None, None));
    // A link that is no PCI function names none either.
    std::fs::remove_file(entry.join("device")).unwrap();
    std::os::unix::fs::symlink("../../virtual/net/veth0", entry.join("device")).unwrap();
    dev.reopen().unwrap();
    assert_eq!(dev.identity(1).unwrap().pci_address, None, "read again at the re-open");
    dev.close();
    assert_eq!(dev.identity(1).unwrap_err().kind(), ErrorKind::NotConnected);
});

// ---- close and reopen ----------------------------------------------------

fake_test!(close_is_idempotent_and_reopen_gives_a_fresh_nonblocking_fd, FakeLib::Basic, |fake| {
    let mut dev = open_one(&fake);
    fake.push_event(0, PORT_ERR, 1);
    dev.close();
    dev.close();
    assert_eq!(fake.counters().closes, 1, "close is idempotent");
    assert!(!dev.is_open());
    assert_eq!((dev.async_fd(), dev.ports()), (-1, vec![1]), "the ports are kept while closed");
    for err in [dev.get_event().unwrap_err(), dev.port_state(1).unwrap_err(), dev.link(1).unwrap_err()] {
        assert_eq!(err.kind(), ErrorKind::NotConnected);
        assert_eq!(err.to_string(), "mlx5_0: device is closed");
    }

    // The device "went away": reopen fails and the device stays closed.
    fake.set_open_errno(0, libc::ENODEV);
    let err = dev.reopen().unwrap_err();
    assert_eq!(errno_of(&err), Some(libc::ENODEV));
    assert!(!dev.is_open());

    fake.set_open_errno(0, 0);
    dev.reopen().unwrap();
    assert!(dev.is_open());
    let fd = dev.async_fd();
    assert!(fd_is_nonblocking(fd));
    // The event queued on the old context died with it.
    assert_eq!(dev.get_event().unwrap_err().kind(), ErrorKind::WouldBlock);
    fake.push_event(0, PORT_ACTIVE, 1);
    assert_eq!(dev.get_event().unwrap(), AsyncEvent::port(EventKind::PortActive, 1));

    // reopen of an open device closes it first.
    dev.reopen().unwrap();
    drop(dev);
    let c = fake.counters();
    assert_eq!((c.opens, c.closes), (3, 3));
    assert_eq!(c.lists, c.lists_freed);
    assert_all_acked_once(&fake);
});

fake_test!(a_verbs_device_can_move_to_the_monitor_thread, FakeLib::Basic, |fake| {
    let mut dev = open_one(&fake);
    fake.push_event(0, PORT_ERR, 1);
    let events = std::thread::spawn(move || drain(&mut dev).events).join().unwrap();
    assert_eq!(events, [AsyncEvent::port(EventKind::PortErr, 1)]);
    assert_eq!(fake.counters().closes, 1, "dropped on the other thread");
});

// ---- configuration through the environment (for other processes) -----------

/// Set in the child of the test below.
const ENV_CHILD: &str = "RAILWATCH_TEST_FAKE_ENV_CONFIG";

#[test]
fn the_fake_reads_its_configuration_from_the_environment() {
    if std::env::var_os(ENV_CHILD).is_none() {
        let exe = std::env::current_exe().unwrap();
        let out =
            railwatch_verbs_backend::testing::command_under_fake(&mut std::process::Command::new(exe), FakeLib::Basic)
                .env(ENV_CHILD, "1")
                .env("FAKE_IBVERBS_DEVICES", "mlx5_0:4/128/2,1/64/16;mlx5_1:2/0/2/256")
                .env("FAKE_IBVERBS_EVENTS", "mlx5_1:10@1,9@1")
                .args(["the_fake_reads_its_configuration_from_the_environment", "--exact", "--test-threads=1"])
                .output()
                .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("test result: ok. 1 passed"),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
    assert!(railwatch_verbs_backend::testing::under_fake());
    assert_eq!(list_devices().unwrap(), ["mlx5_0", "mlx5_1"]);
    let mut a = VerbsDevice::open("mlx5_0").unwrap();
    assert_eq!(a.ports(), [1, 2]);
    assert_eq!((a.port_state(1).unwrap(), a.port_state(2).unwrap()), (PortState::Active, PortState::Down));
    assert_eq!((a.link(1).unwrap().rate(), a.link(2).unwrap().rate()), (LinkRate::gbps(400), LinkRate::gbps(100)));
    assert_eq!(a.get_event().unwrap_err().kind(), ErrorKind::WouldBlock);

    let mut b = VerbsDevice::open("mlx5_1").unwrap();
    assert_eq!((b.ports(), b.port_state(1).unwrap()), (vec![1], PortState::Init));
    let expected_xdr =
        if railwatch_verbs_backend::HAS_ACTIVE_SPEED_EX { LinkRate::gbps(800) } else { LinkRate::Unknown };
    assert_eq!(b.link(1).unwrap().rate(), expected_xdr);
    let expected = [AsyncEvent::port(EventKind::PortErr, 1), AsyncEvent::port(EventKind::PortActive, 1)];
    assert_eq!(drain(&mut b).events, expected);
    b.reopen().unwrap();
    assert_eq!(drain(&mut b).events, expected, "queued again on every open");
}
