//! One turn of the watch loop: what the last wake-up produced goes out,
//! then a stop, a reload or the next wait.

use std::time::{Duration, Instant};

use railwatch_runtime::Clock;
use railwatch_runtime::lines::Names;

use super::{Turn, Watch};
use crate::output::write_failed;

/// A recording is written at least this often.
const RECORDING_FLUSH_EVERY: Duration = Duration::from_secs(1);

impl Watch {
    /// One turn: names renewed if a device appeared, the notifications
    /// (attaching produced the first ones) and a snapshot published, then
    /// stop (deadline or signal), reload (SIGHUP), or write the recording
    /// and wait for the monitor's next wake-up.
    pub(super) fn turn(&mut self) -> Turn {
        if self.monitor.machine().rails().len() != self.names.rails_len() {
            self.names = Names::of(&self.monitor);
        }
        let notes: Vec<_> = self.notes.try_iter().collect();
        let snapshot = self.outputs.wants_snapshot().then(|| self.monitor.snapshot());
        let monitor = &self.monitor;
        if let Err(e) = self.outputs.publish(&self.names, &notes, snapshot.as_ref(), |rail| monitor.address(rail)) {
            // The reader went away: stop watching.
            self.outputs.notifier.send("STOPPING=1");
            return Turn::Exit(write_failed(&e));
        }
        let remaining = self.deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if self.signals.stopping() || remaining == Some(Duration::ZERO) {
            return Turn::Stop;
        }
        if self.signals.take_reload() {
            self.reload();
            // Attaching may have changed the rails: round again to print it.
            return Turn::Again;
        }
        if self.outputs.flush_recording(self.monitor.clock().now()).is_err() {
            self.failed = true;
        }
        let flush_due = self.outputs.recording.as_ref().map(|_| RECORDING_FLUSH_EVERY);
        let wait = [remaining, self.outputs.notifier.next_due(), flush_due].into_iter().flatten().min();
        if let Err(e) = self.monitor.poll_once(wait) {
            eprintln!("railwatch: the monitor stopped: waiting on its poll set failed: {e}");
            self.failed = true;
            return Turn::Stop;
        }
        Turn::Again
    }
}
