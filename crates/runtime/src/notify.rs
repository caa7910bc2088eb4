//! What the monitor tells the engine, as it happens.
//!
//! Notifications go through a bounded crossbeam channel with `try_send`: a
//! slow or absent reader never blocks the monitor, and what does not fit is
//! counted as dropped.

use crossbeam_channel::{Receiver, Sender, TrySendError};
use railwatch_core::{EventKind, LinkRate, Millis, ObjectHandle, PauseReason, RailId, RailState};

/// How a rail came back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecoveredBy {
    /// A `PORT_ACTIVE` event.
    Event,
    /// The recovery tick read the port ACTIVE (the event was missed).
    Poll,
    /// The device was (re)opened with the port ACTIVE.
    Attach,
}

impl std::fmt::Display for RecoveredBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl RecoveredBy {
    /// Lower-case name (`"poll"`), as in scenario files and JSON.
    pub const fn name(self) -> &'static str {
        match self {
            RecoveredBy::Event => "event",
            RecoveredBy::Poll => "poll",
            RecoveredBy::Attach => "attach",
        }
    }
}

/// Why a transition happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// A pause or detach, for this reason.
    Reason(PauseReason),
    /// An activation, by this path.
    By(RecoveredBy),
    /// A generation bump without a state change (`cq_err`, `lid_change`,
    /// `gid_change`).
    Bump(EventKind),
}

/// One thing that happened.
#[derive(Debug, Clone, PartialEq)]
pub enum Happening {
    /// An async event was read (and acknowledged).
    Event {
        /// Device index.
        device: u32,
        /// The port, for port events.
        port: Option<u32>,
        /// What it was.
        kind: EventKind,
    },
    /// A rail's state word changed.
    Transition {
        /// The rail.
        rail: RailId,
        /// State before.
        from: RailState,
        /// State after.
        to: RailState,
        /// Why.
        cause: Cause,
        /// Generation after.
        generation: u64,
    },
    /// The selector's bandwidth for a rail was (re)seeded.
    Reseed {
        /// The rail.
        rail: RailId,
        /// Previous rate (`None`: never seeded).
        from: Option<LinkRate>,
        /// New rate.
        to: LinkRate,
    },
    /// The selector was told a rail is (un)available.
    Available {
        /// The rail.
        rail: RailId,
        /// Its availability now.
        available: bool,
    },
    /// A QP/WQ error the engine must handle.
    ObjectError {
        /// Device index.
        device: u32,
        /// Which error.
        kind: EventKind,
        /// The object, as an opaque handle.
        handle: Option<ObjectHandle>,
    },
    /// A drain finished.
    Drain {
        /// Device index.
        device: u32,
        /// Events read by this drain.
        events: usize,
        /// `None` when the queue was emptied (or the budget ran out); the
        /// errno (or -1 when unknown) when a read failed.
        errno: Option<i32>,
    },
}

/// A happening and when it happened.
#[derive(Debug, Clone, PartialEq)]
pub struct Notification {
    /// The monitor clock's time.
    pub t: Millis,
    /// What happened.
    pub what: Happening,
}

/// The sending side, with its drop counter.
#[derive(Debug)]
pub(crate) struct Notifier {
    tx: Sender<Notification>,
    rx: Receiver<Notification>,
    pub(crate) dropped: u64,
}

impl Notifier {
    pub(crate) fn new(capacity: usize) -> Notifier {
        let (tx, rx) = crossbeam_channel::bounded(capacity.max(1));
        Notifier { tx, rx, dropped: 0 }
    }

    pub(crate) fn receiver(&self) -> Receiver<Notification> {
        self.rx.clone()
    }

    pub(crate) fn send(&mut self, t: Millis, what: Happening) {
        match self.tx.try_send(Notification { t, what }) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => self.dropped += 1,
        }
    }
}
