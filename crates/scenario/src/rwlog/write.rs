//! A log written as the monitor runs: the observer appends each input as a
//! line to a buffer (no I/O on the monitor's path beyond that), which the
//! owner writes out when it flushes.

use railwatch_core::{Input, Millis};
use railwatch_runtime::Observed;

use super::{Entry, Header, Mark};

/// Lines not yet written out.
#[derive(Debug, Default)]
pub struct LogWriter {
    pending: Vec<u8>,
    lines: u64,
}

impl LogWriter {
    /// A writer whose first line is `header`.
    pub fn new(header: &Header) -> LogWriter {
        let mut w = LogWriter::default();
        w.line(header);
        w
    }

    /// Takes what the monitor's observer saw at `now`: each input, and the
    /// wake-ups (the other markers are the scenario recorder's).
    pub fn observe(&mut self, now: Millis, what: Observed<'_>) {
        match what {
            Observed::Woke => self.line(&Entry::Mark { t: now.0, mark: Mark::Woke }),
            Observed::Done => self.line(&Entry::Mark { t: now.0, mark: Mark::Done }),
            Observed::Input(input) => self.input(now, input),
            _ => {}
        }
    }

    /// Appends one input at `now`.
    pub fn input(&mut self, now: Millis, input: &Input<'_>) {
        self.line(&Entry::Input { t: now.0, input: input.clone() });
    }

    fn line(&mut self, value: &impl serde::Serialize) {
        // Every entry is plain data: serialising it cannot fail.
        if serde_json::to_writer(&mut self.pending, value).is_ok() {
            self.pending.push(b'\n');
            self.lines += 1;
        }
    }

    /// The lines not yet written out, taken (whole lines only).
    pub fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.pending)
    }

    /// How many lines were appended in all, the header's included.
    pub fn lines(&self) -> u64 {
        self.lines
    }
}
