//! A log written as the monitor runs: the observer keeps each input as a
//! value (a copy of a few words: no formatting, no I/O on the monitor's
//! event path), and the owner turns them into lines when it flushes.

use railwatch_core::{Input, Millis};
use railwatch_runtime::Observed;

use super::{Entry, Header, Mark};

/// Lines not yet written out.
#[derive(Debug, Default)]
pub struct LogWriter {
    /// The header, until taken.
    header: Option<Header>,
    pending: Vec<Entry<'static>>,
    /// A wake-up began at this time and nothing of it is written yet.
    woke_at: Option<u64>,
    /// The wake-up's `woke` is written: its `done` will be.
    in_wakeup: bool,
    /// The monitor said timers are due: its next timeout is an input.
    timers_due: bool,
}

impl LogWriter {
    /// A writer whose first line is `header`.
    pub fn new(header: &Header) -> LogWriter {
        LogWriter { header: Some(header.clone()), ..LogWriter::default() }
    }

    /// Takes what the monitor's observer saw at `now`: each input, and the
    /// wake-ups that had one (the other markers are the scenario
    /// recorder's). A timeout with no timer due is left out: it changes
    /// nothing (the inputs after it bring their own time), and a busy
    /// monitor runs its timers every wake-up.
    pub fn observe(&mut self, now: Millis, what: Observed<'_>) {
        match what {
            Observed::Woke => {
                self.end_wakeup(now);
                self.woke_at = Some(now.0);
            }
            Observed::Done => self.end_wakeup(now),
            Observed::Timers => self.timers_due = true,
            Observed::Input(Input::Timeout) if !std::mem::take(&mut self.timers_due) => {}
            Observed::Input(input) => self.input(now, input),
            _ => {}
        }
    }

    /// Appends one input at `now` (after its wake-up's `woke`).
    pub fn input(&mut self, now: Millis, input: &Input<'_>) {
        if let Some(t) = self.woke_at.take() {
            self.pending.push(Entry::Mark { t, mark: Mark::Woke });
            self.in_wakeup = true;
        }
        self.pending.push(Entry::Input { t: now.0, input: input.clone().into_owned() });
    }

    fn end_wakeup(&mut self, now: Millis) {
        self.woke_at = None;
        self.timers_due = false;
        if std::mem::take(&mut self.in_wakeup) {
            self.pending.push(Entry::Mark { t: now.0, mark: Mark::Done });
        }
    }

    /// The lines not yet taken, as text (whole lines only).
    pub fn take(&mut self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.pending.len() * 96);
        if let Some(header) = self.header.take() {
            line(&mut out, &header);
        }
        for entry in self.pending.drain(..) {
            line(&mut out, &entry);
        }
        out
    }

    /// How many entries wait to be taken.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }
}

/// Appends `value` as one line.
fn line(out: &mut Vec<u8>, value: &impl serde::Serialize) {
    // Every entry is plain data: serialising it cannot fail.
    if serde_json::to_writer(&mut *out, value).is_ok() {
        out.push(b'\n');
    }
}
