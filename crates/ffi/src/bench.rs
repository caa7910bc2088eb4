//! The Rust side of the C API's benchmark (`cargo xtask bench`, row 9):
//! the same flaps fed to the machine in Rust, so the C program can time
//! both in one process, round by round. Not in the header (cbindgen.toml
//! excludes it); the benchmark declares it itself. Only built with the
//! `bench-exports` feature, so the shipped library exports none of it.

use railwatch_core::{Action, AsyncEvent, Errno, EventKind, LinkAttrs, Machine, MachineConfig, Millis, PortState};

use crate::status::guard;

/// Feeds `count` `COMM_EST` events (a QP event the machine only counts:
/// the bursts an engine drains) to a machine with one attached port, as
/// `c_api_bench.c` does through the C API, and returns the nanoseconds
/// the feeding took (0 on failure).
#[unsafe(no_mangle)]
pub extern "C" fn rw_bench_comm_est_rust(count: u64) -> u64 {
    timed_on_attached_port(|m, dev| {
        for i in 0..count {
            let qp = railwatch_core::Element::Object(railwatch_core::ObjectHandle(0x1000 + (i & 0xff)));
            m.handle_event(dev, AsyncEvent::new(EventKind::CommEst.code(), qp), Millis(1));
        }
    })
}

/// Feeds `flaps` flaps (PORT_ERR, then PORT_ACTIVE, each with the actions
/// they cause answered at once, as `c_api_bench.c` does through the C
/// API) to a machine with one attached port, and returns the nanoseconds
/// the feeding took (0 on failure).
#[unsafe(no_mangle)]
pub extern "C" fn rw_bench_feed_rust(flaps: u64) -> u64 {
    timed_on_attached_port(|m, dev| {
        let mut now = 1;
        for _ in 0..flaps {
            m.handle_event(dev, AsyncEvent::port(EventKind::PortErr, 1), Millis(now));
            serve(m, PortState::Down, Millis(now));
            m.handle_event(dev, AsyncEvent::port(EventKind::PortActive, 1), Millis(now + 1));
            serve(m, PortState::Active, Millis(now + 1));
            now += 2;
        }
    })
}

/// Times `feed` on a machine with one device whose port 1 is attached
/// ACTIVE (set up outside the timing): nanoseconds, 0 on failure.
fn timed_on_attached_port(feed: impl FnOnce(&mut Machine, u32)) -> u64 {
    let mut ns = 0;
    guard(|| {
        let mut m = Machine::new(MachineConfig::default())
            .map_err(|e| crate::status::Error::new(crate::status::rw_status::RW_ERR_INVALID, e.to_string()))?;
        let dev = m.add_device("bench0", &[1], Millis(0)).ok_or_else(|| {
            crate::status::Error::new(crate::status::rw_status::RW_ERR_RANGE, "no room for the bench's device")
        })?;
        serve(&mut m, PortState::Active, Millis(0));
        let started = std::time::Instant::now();
        feed(&mut m, dev);
        ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        std::hint::black_box(&m);
        Ok(())
    });
    ns
}

/// Answers every question at once: the port reads `state`, the link NDR
/// 4x, addresses are not read.
fn serve(m: &mut Machine, state: PortState, now: Millis) {
    while let Some(a) = m.poll_action() {
        match a {
            Action::QueryPort { device, port } => m.handle_port_state(device, port, Ok(state), now),
            Action::ReadLink { device, port } => m.handle_link(device, port, Ok(LinkAttrs::new(128, 2)), now),
            Action::ReadAddress { device, port } => m.handle_address(device, port, Err(Errno(95)), now),
            other => {
                std::hint::black_box(other);
            }
        }
    }
}
