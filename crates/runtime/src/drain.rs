//! Draining one device's async-event fd.
//!
//! The fd is registered edge-triggered: a wake-up says "something arrived",
//! not "one thing arrived". So every wake-up reads until `WouldBlock` (the
//! rule mio states for all its edge-triggered sources), retries `EINTR`, and
//! stops on any other error instead of spinning on it. Reading one event
//! per wake-up strands whatever is queued behind it, possibly a
//! `PORT_ACTIVE`, until an unrelated future event.

use std::io;

use railwatch_core::{AsyncEvent, VerbsPort};

/// Why a drain stopped.
#[derive(Debug)]
pub enum DrainEnd {
    /// `WouldBlock`: the queue is empty (not an error).
    Empty,
    /// The per-wake-up budget ran out; the device must be serviced again
    /// before the next blocking wait.
    Budget,
    /// A real read error: stop reading this fd.
    Failed(io::Error),
}

/// What one drain did.
#[derive(Debug)]
pub struct DrainReport {
    /// Events read (each already acknowledged by the backend).
    pub events: usize,
    /// `get_event` calls, including those that failed.
    pub gets: usize,
    /// `EINTR`s retried.
    pub interrupted: usize,
    /// Why it stopped.
    pub end: DrainEnd,
}

/// Reads events from `port` until the queue is empty, the budget of
/// `get_event` calls is spent, or a real error occurs; hands each event to
/// `on_event` as it is read.
pub fn drain<P: VerbsPort + ?Sized>(port: &mut P, budget: usize, on_event: impl FnMut(AsyncEvent)) -> DrainReport {
    drain_with(|| port.get_event(), budget, on_event)
}

/// The drain itself, over any way of reading one event (`get`, with
/// [`VerbsPort::get_event`]'s contract): every embedding's drain is this
/// loop (the C API's `rw_machine_drain` calls it with the engine's
/// callback).
pub fn drain_with(
    mut get: impl FnMut() -> io::Result<AsyncEvent>,
    budget: usize,
    mut on_event: impl FnMut(AsyncEvent),
) -> DrainReport {
    let mut report = DrainReport { events: 0, gets: 0, interrupted: 0, end: DrainEnd::Budget };
    while report.gets < budget {
        report.gets += 1;
        match get() {
            Ok(event) => {
                report.events += 1;
                on_event(event);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                report.end = DrainEnd::Empty;
                return report;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => report.interrupted += 1,
            Err(e) => {
                report.end = DrainEnd::Failed(e);
                return report;
            }
        }
    }
    report
}
