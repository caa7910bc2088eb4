//! What the monitor hands its machine, as it happens: the devices' side of
//! the conversation, with the time the machine was given. A recorder
//! (`railwatch watch --record`) turns it into a scenario that replays the
//! same inputs at the same times.

use railwatch_core::{
    AsyncEvent, Carrier, Errno, LinkAttrs, Millis, PortAddress, PortCounters, PortState, TransferReport,
};

/// One input the monitor fed its machine: every one passes here first (a
/// device list is seen as the devices it added and removed). Borrowed: an
/// observer copies what it keeps.
#[derive(Debug, Clone, Copy)]
pub enum Observed<'a> {
    /// The monitor woke (its wait ended): what follows, up to the next, is
    /// what that wake-up read and asked. Not a machine input: a recorder
    /// needs it to tell apart the wake-ups of one millisecond.
    Woke,
    /// The monitor runs its machine's timers, some due (the tick, the
    /// audit, settle and re-open delays): the answers that follow in this
    /// wake-up are theirs, and a timer runs late when the host is slow.
    /// Not a machine input either.
    Timers,
    /// A device was attached (at start, after appearing, or again after
    /// leaving the host); its ports' answers follow.
    Attached {
        /// Its index.
        device: u32,
        /// Its name.
        name: &'a str,
        /// Its port numbers.
        ports: &'a [u8],
    },
    /// A device the device list named would not open (the machine asks
    /// again later).
    OpenFailed {
        /// Its index.
        device: u32,
        /// Its name.
        name: &'a str,
        /// Why.
        errno: Errno,
    },
    /// The device left the host's device list.
    Removed {
        /// Its index.
        device: u32,
    },
    /// An async event read from the device (already acknowledged).
    Event {
        /// The device read.
        device: u32,
        /// The event.
        event: AsyncEvent,
    },
    /// Reads of the device's fd failed with `EINTR` in one drain, and were
    /// retried (not a machine input, but each counts against the drain's
    /// budget, so which drain reads which event depends on them).
    Interrupted {
        /// The device read.
        device: u32,
        /// How many reads of the drain were interrupted.
        count: u64,
    },
    /// A drain stopped on a real read error.
    ReadError {
        /// The device read.
        device: u32,
        /// Why.
        errno: Errno,
    },
    /// The device's fd hung up (the device went away).
    HungUp {
        /// The device.
        device: u32,
    },
    /// The answer to a port query.
    PortState {
        /// The device asked.
        device: u32,
        /// The port asked about.
        port: u8,
        /// What it said.
        answer: Result<PortState, Errno>,
        /// The netdev's carrier read with it (`None`: no netdev, or the
        /// query failed).
        carrier: Option<Carrier>,
    },
    /// A carrier notification led to reading a port's carrier, and it
    /// differs from the one the machine knew.
    Carrier {
        /// The device read.
        device: u32,
        /// The port read.
        port: u8,
        /// Its netdev's carrier now.
        carrier: Carrier,
    },
    /// The answer to a link read.
    Link {
        /// The device asked.
        device: u32,
        /// The port asked about.
        port: u8,
        /// What it said.
        answer: Result<LinkAttrs, Errno>,
    },
    /// The answer to an address read.
    Address {
        /// The device asked.
        device: u32,
        /// The port asked about.
        port: u8,
        /// What it said.
        answer: Result<&'a PortAddress, Errno>,
    },
    /// The answer to a flap-counter read.
    Counters {
        /// The device asked.
        device: u32,
        /// The port asked about.
        port: u8,
        /// What it said.
        answer: Result<PortCounters, Errno>,
    },
    /// Transfer outcomes the engine reported on a rail.
    Transfers {
        /// The rail's device.
        device: u32,
        /// The rail's port.
        port: u8,
        /// The report.
        reports: &'a [TransferReport],
    },
    /// A worker took the half-open breaker's probe on a rail (its word
    /// reads `probing`), seen as the machine's timers run. Not a call into
    /// the machine: the word is its input.
    ProbeTaken {
        /// The rail's device.
        device: u32,
        /// The rail's port.
        port: u8,
    },
    /// The outcome of a probe the engine reported on a rail.
    Probe {
        /// The rail's device.
        device: u32,
        /// The rail's port.
        port: u8,
        /// Whether it succeeded.
        succeeded: bool,
    },
    /// The result of re-opening a device that had gone away.
    Reopened {
        /// The device.
        device: u32,
        /// Whether it opened.
        result: Result<(), Errno>,
    },
}

/// Receives every [`Observed`] input with the time the machine was given.
/// Runs on the monitor's thread, inside its loop: keep it short.
pub type Observer = Box<dyn FnMut(Millis, Observed<'_>) + Send>;
