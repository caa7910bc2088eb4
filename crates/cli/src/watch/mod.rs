//! `railwatch watch`: the real monitor over the host's devices on this
//! thread (feature `verbs`), printing what happens, then a summary
//! (docs/JSON.md, "railwatch watch --json").
//!
//! A [`Watch`] is started ([`start`]: the outputs that can fail on bad
//! input first, then the devices, the monitor, the recording), turned until
//! a deadline or a signal ([`turn`]: one wake-up, its notifications handed
//! to the [`outputs`] at once), reloaded on SIGHUP ([`reload`]), and
//! finished with the summary.
//!
//! With no RDMA device at start it waits for one (ready, "0 rails, waiting
//! for devices"); `--exit-without-devices` ends it instead.
//!
//! Exit codes: 0 after a normal end (deadline or signal; also when there is
//! no RDMA device at all with `--exit-without-devices`: "no RDMA devices
//! found"), 1 a device could not be
//! opened, the recording failed or the monitor stopped (said on stderr), 2
//! bad input (`--device` names no device, `include`/`exclude` leave none of
//! the devices present, an output that cannot be set up) or stdout that
//! cannot be written (a closed pipe ends quietly with 0).

mod outputs;
mod print;
mod reload;
mod signals;
mod source;
mod start;
mod turn;

use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crossbeam_channel::Receiver;
use railwatch_runtime::lines::Names;
use railwatch_runtime::{BandwidthSelector, Clock, Monitor, Notification, SystemClock};
use railwatch_verbs_backend::VerbsDevice;

use crate::WatchArgs;
use crate::config::{DeviceFilter, Settings};
use crate::output::write_failed;
use outputs::Outputs;
use signals::Signals;

/// The monitor `watch` runs.
type VerbsMonitor = Monitor<VerbsDevice, Arc<BandwidthSelector>, SystemClock>;

/// A watch in progress.
pub struct Watch {
    args: WatchArgs,
    /// What runs now; a reload changes only what it can apply.
    running: Settings,
    monitor: VerbsMonitor,
    notes: Receiver<Notification>,
    /// Names for the ids in notifications (renewed when a device appears).
    names: Names,
    /// The devices chosen, shared with the monitor's device source.
    filter: Arc<Mutex<DeviceFilter>>,
    signals: Signals,
    outputs: Outputs,
    deadline: Option<Instant>,
    /// Something failed on the way (a device not opened, the recording):
    /// the exit status says so.
    failed: bool,
}

/// What a turn of the loop leads to.
enum Turn {
    /// Another turn.
    Again,
    /// The end: the summary.
    Stop,
    /// The end, now, with this status (stdout is gone).
    Exit(ExitCode),
}

/// Runs `watch` with `settings` (already checked) to its end.
pub fn run(args: WatchArgs, settings: Settings) -> ExitCode {
    let mut watch = match Watch::start(args, settings) {
        Ok(w) => w,
        Err(code) => return code,
    };
    loop {
        match watch.turn() {
            Turn::Again => {}
            Turn::Stop => return watch.finish(),
            Turn::Exit(code) => return code,
        }
    }
}

impl Watch {
    /// The end: the recording finished, the metrics' last values out, the
    /// summary printed.
    fn finish(mut self) -> ExitCode {
        self.outputs.notifier.send("STOPPING=1");
        let snapshot = self.monitor.snapshot();
        if let Err(e) = self.outputs.finish(self.monitor.clock().now(), &snapshot) {
            eprintln!("railwatch: writing the recording failed: {e}");
            self.failed = true;
        }
        let printed = self.outputs.printer.summary(&snapshot);
        self.outputs.printer.finish(snapshot.t.0);
        if let Err(e) = printed {
            return write_failed(&e);
        }
        if self.failed { ExitCode::from(1) } else { ExitCode::SUCCESS }
    }
}
