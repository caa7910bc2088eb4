//! SimDevice behind a real pipe: non-blocking, edge-triggered readiness from
//! the kernel, faults, counters, and a million queued events.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use railwatch_core::{AsyncEvent, Element, EventKind, LinkAttrs, LinkRate, ObjectHandle, PortState, VerbsPort};
use railwatch_sim_backend::{PortSpec, SimCounters, SimDevice, SimHandle};

fn device() -> (SimDevice, SimHandle) {
    let dev = SimDevice::new("mlx5_0", &[PortSpec::active(1), PortSpec::active(2)]).unwrap();
    let h = dev.handle();
    (dev, h)
}

/// The fd's `flags:` line from /proc (octal), read without unsafe code.
fn fd_flags(fd: RawFd) -> u32 {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).unwrap();
    let line = info.lines().find(|l| l.starts_with("flags:")).unwrap();
    u32::from_str_radix(line["flags:".len()..].trim(), 8).unwrap()
}

fn fd_target(fd: RawFd) -> Option<std::path::PathBuf> {
    std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()
}

/// A poll with the device's fd registered (mio registers edge-triggered).
fn poll_for(dev: &SimDevice) -> Poll {
    let poll = Poll::new().unwrap();
    poll.registry().register(&mut SourceFd(&dev.async_fd()), Token(7), Interest::READABLE).unwrap();
    poll
}

/// Readiness events for our token within `timeout`.
fn wait(poll: &mut Poll, timeout: Duration) -> Vec<(bool, bool, bool)> {
    let mut events = Events::with_capacity(8);
    poll.poll(&mut events, Some(timeout)).unwrap();
    events
        .iter()
        .filter(|e| e.token() == Token(7))
        .map(|e| (e.is_readable(), e.is_read_closed(), e.is_error()))
        .collect()
}

fn errno(r: io::Result<impl std::fmt::Debug>) -> i32 {
    r.unwrap_err().raw_os_error().expect("an OS error")
}

fn would_block(r: io::Result<AsyncEvent>) -> bool {
    matches!(r, Err(e) if e.kind() == io::ErrorKind::WouldBlock)
}

#[test]
fn fd_is_a_nonblocking_cloexec_pipe_closed_on_drop() {
    let (dev, h) = device();
    let fd = dev.async_fd();
    assert!(fd >= 0);
    let flags = fd_flags(fd);
    assert_ne!(flags & libc::O_NONBLOCK as u32, 0, "O_NONBLOCK set (flags {flags:o})");
    assert_ne!(flags & libc::O_CLOEXEC as u32, 0, "O_CLOEXEC set (flags {flags:o})");
    let target = fd_target(fd).unwrap();
    assert!(target.to_string_lossy().starts_with("pipe:"), "{target:?}");
    // The device owns the fd: dropping it closes the fd although the
    // script's handle lives on (the number may already be reused by a
    // parallel test, but not for this pipe).
    drop(dev);
    assert!(!h.is_open());
    assert_eq!(h.queue(AsyncEvent::port(EventKind::CommEst, 1), 1), 0);
    assert_ne!(fd_target(fd), Some(target));
}

#[test]
fn empty_queue_is_would_block_not_an_error() {
    let (mut dev, h) = device();
    assert!(would_block(dev.get_event()));
    let c = h.counters();
    assert_eq!((c.gets, c.read, c.acked), (1, 0, 0));
}

#[test]
fn edge_triggered_readiness_is_the_kernels() {
    let (mut dev, h) = device();
    let mut poll = poll_for(&dev);
    assert!(wait(&mut poll, Duration::ZERO).is_empty(), "nothing queued, nothing ready");

    for _ in 0..3 {
        h.queue(AsyncEvent::port(EventKind::CommEst, 1), 1);
    }
    assert_eq!(wait(&mut poll, Duration::from_secs(1)), vec![(true, false, false)]);
    dev.get_event().unwrap();
    // Two events still queued, but no new edge: an engine that waits now
    // strands them. That is the bug railwatch exists for.
    assert!(wait(&mut poll, Duration::ZERO).is_empty(), "edge-triggered: no new readiness");
    dev.get_event().unwrap();
    dev.get_event().unwrap();
    assert!(would_block(dev.get_event()));

    // A new event is a new edge.
    h.queue(AsyncEvent::port(EventKind::PortActive, 2), 1);
    assert_eq!(wait(&mut poll, Duration::from_secs(1)), vec![(true, false, false)]);
    assert_eq!(dev.get_event().unwrap(), AsyncEvent::port(EventKind::PortActive, 2));
    assert!(would_block(dev.get_event()));
    let c = h.counters();
    assert_eq!((c.queued, c.read, c.acked, c.gets), (4, 4, 4, 6));
}

#[test]
fn events_come_out_in_queue_order_with_their_elements() {
    let (mut dev, h) = device();
    let evs = [
        AsyncEvent::port(EventKind::PortErr, 1),
        AsyncEvent::new(EventKind::QpFatal.code(), Element::Object(ObjectHandle(0xdead_beef))),
        AsyncEvent::new(99, Element::None),
        AsyncEvent::new(EventKind::DeviceFatal.code(), Element::None),
        AsyncEvent::port(EventKind::PortActive, 2),
    ];
    for ev in evs {
        assert_eq!(h.queue(ev, 1), 1);
    }
    assert_eq!(h.pending(), 5);
    for ev in evs {
        assert_eq!(dev.get_event().unwrap(), ev);
    }
    assert!(would_block(dev.get_event()));
    assert_eq!(h.pending(), 0);
}

#[test]
fn burst_counts_match_the_peer_regression_tests() {
    // A burst of 5 drains with 6 gets and 5 acks.
    let (mut dev, h) = device();
    h.queue(AsyncEvent::port(EventKind::CommEst, 1), 4);
    h.queue(AsyncEvent::port(EventKind::PortActive, 1), 1);
    let mut got = Vec::new();
    loop {
        match dev.get_event() {
            Ok(ev) => got.push(ev),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(got.last(), Some(&AsyncEvent::port(EventKind::PortActive, 1)));
    let c = dev.counters();
    assert_eq!((c.queued, c.gets, c.read, c.acked), (5, 6, 5, 5));
}

#[test]
fn eintr_fails_the_next_n_reads_then_reads_resume() {
    let (mut dev, h) = device();
    h.queue(AsyncEvent::port(EventKind::PortErr, 1), 1);
    h.eintr(2);
    for _ in 0..2 {
        let e = dev.get_event().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::Interrupted);
        assert_eq!(e.raw_os_error(), Some(libc::EINTR));
    }
    assert_eq!(dev.get_event().unwrap(), AsyncEvent::port(EventKind::PortErr, 1));
    assert!(would_block(dev.get_event()));
    let c = h.counters();
    assert_eq!((c.gets, c.read, c.acked), (4, 1, 1), "errors ack nothing");
}

#[test]
fn eio_after_one_event_stops_the_drain_and_the_device_lives() {
    // A real read error (EIO) after one event: 2 gets, 1 ack.
    let (mut dev, h) = device();
    h.queue(AsyncEvent::port(EventKind::CommEst, 1), 3);
    dev.get_event().unwrap();
    h.eio();
    assert_eq!(errno(dev.get_event()), libc::EIO);
    let c = h.counters();
    assert_eq!((c.gets, c.acked), (2, 1));
    // It persists, the events stay queued, and the device itself answers.
    assert_eq!(errno(dev.get_event()), libc::EIO);
    assert_eq!(h.pending(), 2);
    assert_eq!(dev.port_state(1).unwrap(), PortState::Active);
    assert_eq!(dev.link(2).unwrap().rate(), LinkRate::gbps(400));
    assert!(dev.async_fd() >= 0);
    // A re-open gives a fresh fd without the fault (the old queue is gone).
    dev.close();
    dev.reopen().unwrap();
    assert!(would_block(dev.get_event()));
    let c = h.counters();
    assert_eq!((c.dropped, c.reopens), (2, 1));
}

#[test]
fn ebadf_fails_every_read_and_the_device_lives() {
    let (mut dev, h) = device();
    h.queue(AsyncEvent::port(EventKind::CommEst, 1), 1);
    h.ebadf();
    assert_eq!(errno(dev.get_event()), libc::EBADF);
    assert_eq!(errno(dev.get_event()), libc::EBADF);
    assert_eq!(dev.port_state(2).unwrap(), PortState::Active);
    let c = h.counters();
    assert_eq!((c.gets, c.read, c.acked, c.port_queries), (2, 0, 0, 1));
}

#[test]
fn eintr_is_consumed_before_a_persistent_fault() {
    let (mut dev, h) = device();
    h.eio();
    h.eintr(1);
    assert_eq!(errno(dev.get_event()), libc::EINTR);
    assert_eq!(errno(dev.get_event()), libc::EIO);
}

#[test]
fn remove_hangs_up_the_fd_and_restore_allows_a_reopen() {
    let (mut dev, h) = device();
    let mut poll = poll_for(&dev);
    h.queue(AsyncEvent::port(EventKind::CommEst, 1), 3);
    assert_eq!(wait(&mut poll, Duration::from_secs(1)), vec![(true, false, false)]);
    dev.get_event().unwrap();

    h.remove();
    assert!(h.is_removed());
    // Queued events are dropped; epoll reports the hang-up (a new edge).
    let ready = wait(&mut poll, Duration::from_secs(1));
    assert_eq!(ready.len(), 1, "{ready:?}");
    assert!(ready[0].1, "read-closed (EPOLLHUP) reported: {ready:?}");
    assert_eq!(errno(dev.get_event()), libc::EIO);
    assert_eq!(errno(dev.port_state(1)), libc::ENODEV);
    assert_eq!(errno(dev.link(1)), libc::ENODEV);
    assert_eq!(h.queue(AsyncEvent::port(EventKind::PortErr, 1), 1), 0, "nothing queues on a removed device");
    assert_eq!(errno(dev.reopen()), libc::ENODEV);
    let c = h.counters();
    assert_eq!((c.queued, c.read, c.dropped), (3, 1, 3));

    // The monitor closes it; later the device comes back.
    let old = dev.async_fd();
    poll.registry().deregister(&mut SourceFd(&old)).unwrap();
    dev.close();
    assert_eq!(dev.async_fd(), -1);
    h.restore();
    assert!(!h.is_removed());
    assert_eq!(errno(dev.port_state(1)), libc::EBADF, "closed until re-opened");
    dev.reopen().unwrap();
    assert!(dev.async_fd() >= 0);
    assert_eq!(dev.port_state(1).unwrap(), PortState::Active);
    let mut poll = poll_for(&dev);
    h.port_up(1);
    assert_eq!(wait(&mut poll, Duration::from_secs(1)), vec![(true, false, false)]);
    assert_eq!(dev.get_event().unwrap(), AsyncEvent::port(EventKind::PortActive, 1));
    assert!(would_block(dev.get_event()));
}

#[test]
fn restore_before_reopen_leaves_the_old_fd_dead() {
    let (mut dev, h) = device();
    h.remove();
    h.restore();
    assert_eq!(errno(dev.get_event()), libc::EIO);
    assert_eq!(h.queue(AsyncEvent::port(EventKind::PortErr, 1), 2), 0);
    assert_eq!(h.counters().dropped, 2);
    // The held context stays dead, as the kernel's does: a poll-only
    // device removed and restored between two ticks is still noticed.
    assert_eq!(errno(dev.port_state(1)), libc::ENODEV);
    assert_eq!(errno(dev.link(1)), libc::ENODEV);
    dev.reopen().unwrap();
    assert_eq!(dev.port_state(1).unwrap(), PortState::Active);
    assert_eq!(h.queue(AsyncEvent::port(EventKind::PortErr, 1), 1), 1);
    assert_eq!(dev.get_event().unwrap(), AsyncEvent::port(EventKind::PortErr, 1));
}

#[test]
fn close_is_idempotent_and_refuses_everything_until_reopen() {
    let (mut dev, h) = device();
    h.queue(AsyncEvent::port(EventKind::CommEst, 1), 2);
    dev.close();
    dev.close();
    assert!(!h.is_open());
    assert_eq!(dev.async_fd(), -1);
    assert_eq!(errno(dev.get_event()), libc::EBADF);
    assert_eq!(errno(dev.port_state(1)), libc::EBADF);
    assert_eq!(h.queue(AsyncEvent::port(EventKind::CommEst, 1), 1), 0);
    assert_eq!(h.counters().dropped, 3);
    dev.reopen().unwrap();
    assert!(h.is_open());
    assert!(would_block(dev.get_event()));
}

#[test]
fn port_states_and_links_silently_or_with_an_event() {
    let (mut dev, h) = device();
    assert_eq!(dev.name(), "mlx5_0");
    assert_eq!(dev.ports(), vec![1, 2]);
    assert_eq!(h.ports(), vec![1, 2]);

    // Silent: the missed-event case.
    h.set_port_state(2, PortState::Armed);
    h.set_link(2, LinkAttrs::new(64, 16));
    assert_eq!(dev.port_state(2).unwrap(), PortState::Armed);
    assert_eq!(dev.link(2).unwrap().rate(), LinkRate::gbps(100));
    assert_eq!(dev.port_state(1).unwrap(), PortState::Active, "the other port is untouched");
    assert!(would_block(dev.get_event()), "no event");

    assert_eq!(h.port_down(1), 1);
    assert_eq!(dev.port_state(1).unwrap(), PortState::Down);
    assert_eq!(dev.get_event().unwrap(), AsyncEvent::port(EventKind::PortErr, 1));
    h.set_port_state_with_event(1, PortState::Init, EventKind::ClientReregister);
    assert_eq!(dev.get_event().unwrap(), AsyncEvent::port(EventKind::ClientReregister, 1));
    assert_eq!(dev.port_state(1).unwrap(), PortState::Init);
    h.port_up(1);
    assert_eq!(dev.get_event().unwrap(), AsyncEvent::port(EventKind::PortActive, 1));
    let eff = LinkAttrs { effective_100mbps: Some(8000), ..LinkAttrs::new(128, 2) };
    h.set_link_with_event(1, eff);
    assert_eq!(dev.get_event().unwrap(), AsyncEvent::new(EventKind::DeviceSpeedChange.code(), Element::None));
    assert_eq!(dev.link(1).unwrap().rate(), LinkRate::gbps(800));

    // Bad port numbers are EINVAL, like ibv_query_port.
    assert_eq!(errno(dev.port_state(3)), libc::EINVAL);
    let c = h.counters();
    assert_eq!(
        c,
        SimCounters { queued: 4, read: 4, acked: 4, gets: 5, port_queries: 5, link_queries: 2, dropped: 0, reopens: 0 }
    );
    assert_eq!(dev.counters(), c);
}

/// Drains with an edge-triggered poll the way the monitor does; returns the
/// events in order.
fn drain_all(dev: &mut SimDevice, poll: &mut Poll, expected: u64) -> (u64, Option<AsyncEvent>) {
    let mut events = Events::with_capacity(8);
    let (mut n, mut last) = (0u64, None);
    while n < expected {
        poll.poll(&mut events, Some(Duration::from_secs(5))).unwrap();
        assert!(!events.is_empty(), "stalled after {n} of {expected} events: no readiness");
        loop {
            match dev.get_event() {
                Ok(ev) => {
                    n += 1;
                    last = Some(ev);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
    }
    (n, last)
}

#[test]
fn a_million_events_on_one_device_none_lost() {
    const N: u64 = 1_000_000;
    let (mut dev, h) = device();
    let mut poll = poll_for(&dev);
    // One big burst with a PORT_ACTIVE at the very end, queued without
    // blocking although the pipe holds a small fraction of it.
    assert_eq!(h.queue(AsyncEvent::port(EventKind::CommEst, 1), N - 1), N - 1);
    assert_eq!(h.queue(AsyncEvent::port(EventKind::PortActive, 1), 1), 1);
    assert!((h.pipe_capacity() as u64) / 16 < N);
    assert_eq!(h.pending(), N);
    let (n, last) = drain_all(&mut dev, &mut poll, N);
    assert_eq!(n, N);
    assert_eq!(last, Some(AsyncEvent::port(EventKind::PortActive, 1)));
    assert!(would_block(dev.get_event()));
    let c = h.counters();
    assert_eq!((c.queued, c.read, c.acked, c.dropped), (N, N, N, 0));
}

#[test]
fn many_separate_queues_beyond_the_pipe_keep_order() {
    let (mut dev, h) = device();
    let per_pipe = (h.pipe_capacity() / 16) as u32;
    let total = per_pipe * 3 + 5;
    for i in 0..total {
        // Distinct events so any reordering or loss shows.
        h.queue(AsyncEvent::new(1, Element::Object(ObjectHandle(u64::from(i)))), 1);
    }
    for i in 0..total {
        assert_eq!(dev.get_event().unwrap(), AsyncEvent::new(1, Element::Object(ObjectHandle(u64::from(i)))));
    }
    assert!(would_block(dev.get_event()));
}

#[test]
fn a_reader_that_stops_early_still_has_a_readable_fd() {
    // With events waiting in memory, the pipe is never left empty: a reader
    // that stops mid-drain (a budget) finds the fd readable on its next poll.
    let (mut dev, h) = device();
    let mut poll = poll_for(&dev);
    let cap = (h.pipe_capacity() / 16) as u64;
    h.queue(AsyncEvent::port(EventKind::CommEst, 1), cap * 2);
    assert_eq!(wait(&mut poll, Duration::from_secs(1)).len(), 1);
    // Read exactly what the pipe held at first.
    for _ in 0..cap {
        dev.get_event().unwrap();
    }
    assert_eq!(h.pending(), cap);
    // The top-ups were real writes: new edges.
    assert_eq!(wait(&mut poll, Duration::from_secs(1)).len(), 1);
    let (n, _) = drain_all(&mut dev, &mut poll, 0);
    assert_eq!(n, 0);
    let mut rest = 0;
    while dev.get_event().is_ok() {
        rest += 1;
    }
    assert_eq!(rest, cap);
}

#[test]
fn a_script_thread_and_a_monitor_thread() {
    const N: u64 = 50_000;
    let (mut dev, h) = device();
    let mut poll = poll_for(&dev);
    let script = std::thread::spawn(move || {
        for i in 0..N {
            h.queue(AsyncEvent::new(4, Element::Object(ObjectHandle(i))), 1);
        }
        h
    });
    let mut next = 0u64;
    let mut events = Events::with_capacity(8);
    while next < N {
        poll.poll(&mut events, Some(Duration::from_secs(5))).unwrap();
        assert!(!events.is_empty(), "stalled at {next}");
        while let Ok(ev) = dev.get_event() {
            assert_eq!(ev, AsyncEvent::new(4, Element::Object(ObjectHandle(next))));
            next += 1;
        }
    }
    let h = script.join().unwrap();
    assert_eq!(h.counters().read, N);
}
