//! What the monitor hands its machine, as it happens: every input with the
//! time the machine was given, and the driver's markers. The input log
//! (`railwatch watch --record x.rwlog`) writes the inputs down; the
//! scenario recorder (`--record x.toml`) turns them into a scenario.

use railwatch_core::{Input, Millis};

/// What an observer of the monitor sees: every input it feeds its machine
/// ([`Observed::Input`], all of them: the monitor feeds none another way)
/// and a few markers of the driver's own that are no machine input.
/// Borrowed: an observer copies what it keeps.
#[derive(Debug, Clone, Copy)]
pub enum Observed<'a> {
    /// The monitor woke (its wait ended): what follows, up to the next, is
    /// what that wake-up read and asked. A recorder needs it to tell apart
    /// the wake-ups of one millisecond.
    Woke,
    /// The wake-up is done: the notifications it held are sent now (lost
    /// work first, then the rest, each in order).
    Done,
    /// The monitor runs its machine's timers and some are due (the tick,
    /// the audit, settle and re-open delays): the answers that follow in
    /// this wake-up are theirs, and a timer runs late when the host is slow.
    Timers,
    /// A device was attached (at start, after appearing, or again after
    /// leaving the host) under this index; its ports' answers follow.
    Attached {
        /// Its index.
        device: u32,
        /// Its name.
        name: &'a str,
        /// Its port numbers.
        ports: &'a [u8],
    },
    /// The device list no longer has the device (its input was the list).
    Left {
        /// Its index.
        device: u32,
    },
    /// Reads of the device's fd failed with `EINTR` in one drain, and were
    /// retried (each counts against the drain's budget, so which drain
    /// reads which event depends on them).
    Interrupted {
        /// The device read.
        device: u32,
        /// How many reads of the drain were interrupted.
        count: u64,
    },
    /// An input, as the machine is given it next.
    Input(&'a Input<'a>),
}

/// Receives every [`Observed`] input with the time the machine was given.
/// Runs on the monitor's thread, inside its loop: keep it short.
pub type Observer = Box<dyn FnMut(Millis, Observed<'_>) + Send>;
