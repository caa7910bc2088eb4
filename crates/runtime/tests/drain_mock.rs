//! The drain rules against a mockall mock of `VerbsPort`: every `get_event`
//! is scripted and counted, so the number of reads is exact.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mockall::mock;
use railwatch_core::{AsyncEvent, Element, EventKind, LinkAttrs, Millis, NoSelector, PortState, RailState, VerbsPort};
use railwatch_runtime::{Clock, Config, DeviceMode, DrainEnd, Monitor, drain};

mock! {
    pub Nic {}
    impl VerbsPort for Nic {
        fn name(&self) -> &str;
        fn ports(&self) -> Vec<u8>;
        fn async_fd(&self) -> RawFd;
        fn get_event(&mut self) -> io::Result<AsyncEvent>;
        fn port_state(&mut self, port: u8) -> io::Result<PortState>;
        fn link(&mut self, port: u8) -> io::Result<LinkAttrs>;
        fn close(&mut self);
        fn reopen(&mut self) -> io::Result<()>;
    }
}

type Script = Arc<Mutex<VecDeque<io::Result<AsyncEvent>>>>;

/// A mock whose `get_event` plays `script` and then reports an empty queue.
fn scripted(script: Vec<io::Result<AsyncEvent>>) -> (MockNic, Script) {
    let script: Script = Arc::new(Mutex::new(script.into()));
    let mut nic = MockNic::new();
    let s = script.clone();
    nic.expect_get_event()
        .returning(move || s.lock().unwrap().pop_front().unwrap_or_else(|| Err(io::ErrorKind::WouldBlock.into())));
    (nic, script)
}

fn comm_est() -> AsyncEvent {
    AsyncEvent::new(EventKind::CommEst.code(), Element::None)
}

fn err(errno: i32) -> io::Result<AsyncEvent> {
    Err(io::Error::from_raw_os_error(errno))
}

#[test]
fn a_burst_of_five_drains_with_six_gets_and_five_acks() {
    let (mut nic, _) = scripted((0..5).map(|_| Ok(comm_est())).collect());
    let mut acked = 0;
    let report = drain(&mut nic, 1000, |_| acked += 1);
    assert_eq!((report.gets, report.events, acked), (6, 5, 5));
    assert!(matches!(report.end, DrainEnd::Empty));
    nic.checkpoint();
}

#[test]
fn a_port_active_behind_comm_ests_is_handled_and_every_event_acked_once() {
    let mut script: Vec<_> = (0..7).map(|_| Ok(comm_est())).collect();
    script.push(Ok(AsyncEvent::port(EventKind::PortActive, 1)));
    let (mut nic, _) = scripted(script);
    let mut seen = Vec::new();
    let report = drain(&mut nic, 1000, |ev| seen.push(ev));
    assert_eq!(report.gets, 9);
    assert_eq!(seen.len(), 8, "each event handed over (and so acked) exactly once");
    assert_eq!(seen.last().unwrap().kind(), EventKind::PortActive);
}

#[test]
fn an_empty_queue_is_not_an_error() {
    let (mut nic, _) = scripted(vec![]);
    let mut acked = 0;
    let report = drain(&mut nic, 1000, |_| acked += 1);
    assert_eq!((report.gets, acked), (1, 0));
    assert!(matches!(report.end, DrainEnd::Empty));
}

#[test]
fn one_eintr_is_retried() {
    let (mut nic, _) = scripted(vec![err(libc::EINTR), Ok(comm_est())]);
    let mut acked = 0;
    let report = drain(&mut nic, 1000, |_| acked += 1);
    assert_eq!((report.gets, report.interrupted, acked), (3, 1, 1));
    assert!(matches!(report.end, DrainEnd::Empty));
}

#[test]
fn eio_after_one_event_stops_the_drain() {
    let (mut nic, script) = scripted(vec![Ok(comm_est()), err(libc::EIO), Ok(comm_est())]);
    let mut acked = 0;
    let report = drain(&mut nic, 1000, |_| acked += 1);
    assert_eq!((report.gets, acked), (2, 1));
    match report.end {
        DrainEnd::Failed(e) => assert_eq!(e.raw_os_error(), Some(libc::EIO)),
        other => panic!("expected a failure, got {other:?}"),
    }
    assert_eq!(script.lock().unwrap().len(), 1, "nothing read past the error");
}

#[test]
fn the_budget_bounds_one_drain() {
    let (mut nic, script) = scripted((0..10).map(|_| Ok(comm_est())).collect());
    let report = drain(&mut nic, 4, |_| {});
    assert_eq!((report.gets, report.events), (4, 4));
    assert!(matches!(report.end, DrainEnd::Budget));
    assert_eq!(script.lock().unwrap().len(), 6);
}

/// A settable clock for driving the monitor's tick.
#[derive(Clone, Default)]
struct TestClock(Arc<Mutex<u64>>);
impl Clock for TestClock {
    fn now(&self) -> Millis {
        Millis(*self.0.lock().unwrap())
    }
}

#[test]
fn after_eio_further_wakeups_and_ticks_make_a_bounded_number_of_reads() {
    // A real fd, kept readable, so the monitor has something to wait on.
    let (reader, mut writer) = io::pipe().unwrap();
    io::Write::write_all(&mut writer, b"x").unwrap();
    let fd = reader.as_raw_fd();

    let gets = Arc::new(Mutex::new(0u32));
    let g = gets.clone();
    let mut script: VecDeque<io::Result<AsyncEvent>> = vec![Ok(comm_est()), err(libc::EIO)].into();
    let mut nic = MockNic::new();
    nic.expect_get_event().returning(move || {
        *g.lock().unwrap() += 1;
        // After the failure the fd keeps failing, as a dead device's does.
        script.pop_front().unwrap_or_else(|| err(libc::EIO))
    });
    nic.expect_name().return_const("mlx5_0".to_string());
    nic.expect_ports().returning(|| vec![1]);
    nic.expect_async_fd().return_const(fd);
    // Port queries keep working: the device stays, in poll-only mode.
    nic.expect_port_state().returning(|_| Ok(PortState::Active));
    nic.expect_link().returning(|_| Ok(LinkAttrs::new(128, 2)));
    nic.expect_close().never();
    nic.expect_reopen().never();

    let clock = TestClock::default();
    let mut monitor = Monitor::new(Config::default(), NoSelector, clock.clone()).unwrap();
    monitor.add_device(nic);
    for i in 0..100u64 {
        io::Write::write_all(&mut writer, b"x").unwrap();
        *clock.0.lock().unwrap() = i * 500;
        monitor.poll_once(Some(Duration::ZERO)).unwrap();
    }
    assert_eq!(*gets.lock().unwrap(), 2, "one event, one EIO, then no more reads");
    let snap = monitor.snapshot();
    assert_eq!(snap.devices[0].mode, DeviceMode::PollOnly);
    assert_eq!(snap.devices[0].counters.read_errors, 1);
    assert!(snap.ticks >= 40, "the poll took over: {} ticks", snap.ticks);
    assert_eq!(snap.rails[0].state, RailState::Active);
}
