//! Recording: what a live monitor's devices said, written as a scenario
//! file that `railwatch simulate` replays against the same machine.
//!
//! The [`Recorder`] receives every input the monitor feeds its machine
//! ([`Observed`], with the time the machine was given) and writes:
//!
//! - one `[[device]]` per device attached at the start, from the first
//!   answers its ports gave (state, link, GID table);
//! - events as `event` steps at the time they were read (a burst of equal
//!   events in one instant as one step with `repeat`);
//! - every change a query saw (port state, link, addresses) as a silent
//!   `port_state`, `link` or `gid` step;
//! - read errors, hang-ups, re-opens and devices leaving or coming back as
//!   faults (`eio`/`ebadf`, `remove`, `restore`, `unplug`, `plug`);
//! - at a clean stop, an `[[expect]]` per rail with its final state.
//!
//! A device that appears after the start is declared `present = false`
//! and plugged in when it appeared.
//!
//! Four parts: `observe.rs` turns each input into the replay's device
//! views and the steps that change them; `place.rs` decides **when** each
//! step goes, so that the replay, which asks on time where the live monitor
//! may have woken late, sees it (a query's change at `max(p + 1, t -
//! SLACK_MS)`, `p` the port's previous query); `wake.rs` tells where in an
//! instant the replay must read the devices (a `drain` step) to read them
//! as the live monitor's wake-ups did; `file.rs` writes the file
//! **incrementally**: steps are written once no later observation can be
//! placed before them ([`SLACK_MS`] behind the clock), on
//! [`flush`](Recorder::flush), which the caller runs at least once a second
//! (it writes at most every [`FLUSH_EVERY_MS`]), and `duration_ms` is
//! rewritten in place before the steps it must cover, so the file is valid
//! after every write: a crash loses at most the last second.
//!
//! **What a scenario cannot say** (left as a `#` comment in the file): a
//! query that fails while the device lives (replayed as the port down). A read
//! error is replayed at the start of the drain it ended.

mod file;
mod observe;
mod place;
mod wake;

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::path::Path;

use railwatch_core::{Errno, Input, LinkRate, Millis, RailState};
use railwatch_runtime::{Config, Observed, Snapshot};

pub use file::FLUSH_EVERY_MS;
pub use place::SLACK_MS;

use crate::scenario::{Expect, Fault, MAX_DURATION_MS, ProbeOutcome, RailRef, Scenario, write};
use file::RecordingFile;
use observe::DeviceView;
use place::{Entry, Timeline};
use wake::Wakes;

/// What [`Recorder::stopped`] says after [`Recorder::finish`].
const FINISHED: &str = "finished";

/// The GID index that stands for the rest of an address (LID, netdev, link
/// layer), which a scenario cannot set: a change there changes this entry.
pub const OTHER_ADDRESS_INDEX: u32 = 255;

/// The code of the event that goes with a recorded read error: the live
/// fd was readable and its read failed, and a replay's fd must be readable
/// too for the monitor to read and see the fault. The fault fails the read
/// before the event is reached, and a re-open drops it: it is never read.
/// No `ibv_event_type` has this code.
pub const WAKE_EVENT_CODE: u32 = 65535;

/// How many distinct object handles are numbered by first appearance.
const MAX_NAMED_OBJECTS: usize = 4096;

/// A rail as the run leaves it: what the final expectations say.
#[derive(Debug, Clone, Copy)]
pub struct RailEnd {
    /// The rail.
    pub id: railwatch_core::RailId,
    /// Its state.
    pub state: RailState,
    /// Whether the selector may pick it.
    pub available: bool,
    /// Its link rate.
    pub rate: Option<LinkRate>,
    /// How it last came back.
    pub recovered_by: Option<railwatch_core::RecoveredBy>,
}

/// What goes into the recording's header.
#[derive(Debug, Clone)]
pub struct RecordOptions {
    /// The command that records (`"railwatch watch --record"`), for the
    /// file's first comment.
    pub recorded_by: String,
    /// `name`.
    pub name: String,
    /// `description`.
    pub description: Option<String>,
    /// The monitor's settings, written as the scenario's (the replay runs
    /// with them; its re-open jitter is drawn anew).
    pub config: Config,
    /// What else was in force that a replay does not do, written as
    /// comments.
    pub notes: Vec<String>,
    /// Rename devices `dev0`, `dev1`, ... and replace addresses by
    /// placeholders that keep which are equal.
    pub anonymize: bool,
}

/// Writes a scenario file from a live monitor's inputs. Feed it with
/// [`observe`](Self::observe) (from `Monitor::set_observer`), call
/// [`flush`](Self::flush) at least once a second and
/// [`finish`](Self::finish) at a clean stop.
#[derive(Debug)]
pub struct Recorder {
    file: RecordingFile,
    devices: Vec<DeviceView>,
    timeline: Timeline,
    wakes: Wakes,
    /// A flush happened: the start is over.
    flushed: bool,
    /// The host's devices at the start are all attached ([`Recorder::started`]).
    started: bool,
    events: u64,
    stopped: Option<String>,
    anonymize: bool,
    gid_names: HashMap<[u8; 16], u32>,
    objects: HashMap<u64, u64>,
}

impl Recorder {
    /// Creates (or truncates) `path` and writes the header.
    pub fn create(path: &Path, opts: &RecordOptions) -> io::Result<Recorder> {
        Recorder::create_in(File::options().read(true).write(true).create(true).truncate(true).open(path)?, opts)
    }

    /// Writes the header to `file` (new and empty: the caller created it,
    /// as it sees fit; opened for reading too, for
    /// [`copy_into`](Self::copy_into)) and records into it.
    pub fn create_in(file: File, opts: &RecordOptions) -> io::Result<Recorder> {
        let sc = Scenario {
            file: String::new(),
            name: opts.name.clone(),
            description: opts.description.clone(),
            config: opts.config.clone(),
            duration_ms: 1,
            devices: Vec::new(),
            steps: Vec::new(),
            expects: Vec::new(),
        };
        let mut text = format!("# Recorded by `{}`; replay it with `railwatch simulate FILE`.\n", opts.recorded_by);
        text.push_str(if opts.anonymize {
            "# Anonymized: the devices are named dev0, dev1, ... and the GIDs are placeholders.\n"
        } else {
            "# It names the devices and their addresses (--record-anonymize replaces them).\n"
        });
        for note in &opts.notes {
            text.push_str(&format!("# in force, not replayed: {note}\n"));
        }
        Ok(Recorder {
            file: RecordingFile::create(file, text, &write::header(&sc))?,
            devices: Vec::new(),
            timeline: Timeline::default(),
            wakes: Wakes::default(),
            flushed: false,
            started: false,
            events: 0,
            stopped: None,
            anonymize: opts.anonymize,
            gid_names: HashMap::new(),
            objects: HashMap::new(),
        })
    }

    /// The devices the host had at the start are attached: any attached
    /// from now on appeared later (declared `present = false`, plugged in
    /// when it came), even before the first flush.
    pub fn started(&mut self) {
        self.started = true;
    }

    /// The monitor runs on a virtual clock (`simulate --record`): its
    /// queries are never late, so each change is placed at the query that
    /// saw it (docs/RECORDING.md, "When a change is placed").
    pub fn on_virtual_time(&mut self) {
        self.timeline.set_on_time();
    }

    /// A second handle on the file, to sync it to disk without holding
    /// the recorder (the monitor's observer waits on it).
    pub fn file_handle(&self) -> io::Result<File> {
        self.file.handle()
    }

    /// Copies what was written so far into `to` (new and empty): the
    /// caller found the recording's name no longer naming its file (moved
    /// away, deleted, replaced) and puts the copy under it.
    pub fn copy_into(&self, to: &File) -> io::Result<()> {
        self.file.copy_into(to)
    }

    /// Goes on writing in `file`, a copy made by [`copy_into`](Self::copy_into)
    /// with nothing written in between.
    pub fn continue_in(&mut self, file: File) {
        self.file.continue_in(file);
    }

    /// Why recording stopped early (a limit of the scenario format), if it
    /// did.
    pub fn stopped(&self) -> Option<&str> {
        self.stopped.as_deref()
    }

    /// The name the recording gives device `device` (its own, or `devN`).
    pub fn device_name(&self, device: u32) -> Option<&str> {
        self.devices.get(device as usize).map(|d| d.name.as_str())
    }

    /// Takes one input the monitor fed its machine at `now`, or one of
    /// its markers.
    pub fn observe(&mut self, now: Millis, what: Observed<'_>) {
        if self.stopped.is_some() {
            return;
        }
        let t = now.0;
        let input = match what {
            Observed::Woke => {
                self.wakes.woke(t);
                self.timeline.woke();
                return;
            }
            Observed::Timers => return self.wakes.timers_run(),
            Observed::Done => return,
            Observed::Attached { device, name, ports } => return self.seen(t, |r| r.attached(t, device, name, ports)),
            Observed::Left { device } => return self.seen(t, |r| r.removed(t, device)),
            Observed::Interrupted { device, count } => return self.seen(t, |r| r.interrupted(t, device, count)),
            Observed::Input(input) => input,
        };
        match *input {
            // The timers (marked above), a device list (its leavers are
            // marked) and an added or opened device (marked as attached)
            // say nothing more here.
            Input::Timeout
            | Input::DeviceList { .. }
            | Input::AddDevice { .. }
            | Input::Opened { result: Ok(_), .. } => {}
            // Answers, and a re-open (the timers' too): asked by whoever
            // asked before. A scenario has no way to say a device would
            // not open: the replay's plug opens it (the attach that
            // follows is recorded).
            Input::Opened { result: Err(_), .. } => {
                self.wakes.saw(t);
            }
            Input::PortState { device, port, answer, carrier } => {
                self.wakes.saw(t);
                self.port_reading(t, device, port, answer, carrier);
            }
            Input::Link { device, port, answer } => {
                self.wakes.saw(t);
                self.link(t, device, port, answer);
            }
            Input::Address { device, port, ref answer } => {
                self.wakes.saw(t);
                self.address(t, device, port, answer.as_ref().map(|a| &**a).map_err(|e| *e));
            }
            Input::Counters { device, port, answer } => {
                self.wakes.saw(t);
                self.counters(t, device, port, answer);
            }
            Input::Reopened { device, result } => {
                self.wakes.saw(t);
                self.reopened(t, device, result);
            }
            _ => self.seen(t, |r| r.unasked(t, input)),
        }
    }

    /// An input nobody asked for (an event, a report, a fault), at `t`.
    fn unasked(&mut self, t: u64, input: &Input<'_>) {
        match *input {
            Input::Removed { device } => self.removed(t, device),
            Input::Transfers { device, port, ref reports } => self.transfers(t, device, port, reports),
            Input::Probe { device, port, succeeded } => {
                let outcome = if succeeded { ProbeOutcome::Success } else { ProbeOutcome::Failure };
                self.probe(t, device, port, outcome);
            }
            Input::ProbeTaken { device, port } => self.probe(t, device, port, ProbeOutcome::Taken),
            Input::Event { device, event } => self.event(t, device, event),
            Input::ReadError { device, errno } => {
                let fault = if errno == Errno::EBADF { Fault::Ebadf } else { Fault::Eio };
                if fault == Fault::Eio && errno != Errno::EIO {
                    self.comment(t, format!("device {device}: a read failed with errno {}, replayed as EIO", errno.0));
                }
                self.fault_at(device, t, fault);
            }
            Input::HungUp { device } => self.hung_up(t, device),
            Input::Carrier { device, port, carrier } => self.carrier_notified(t, device, port, carrier),
            _ => {}
        }
    }

    /// Something nobody asked for, seen at `t`: the wake-up's own.
    fn seen(&mut self, t: u64, then: impl FnOnce(&mut Self)) {
        self.wakes.asked_otherwise();
        self.wakes.saw(t);
        then(self);
    }

    fn stop(&mut self, why: String) {
        self.comment(self.timeline.floor(), format!("recording stopped: {why}"));
        self.stopped = Some(why);
    }

    /// Writes what can no longer change (everything placed more than
    /// [`SLACK_MS`] before `now`), the declarations of devices attached so
    /// far, and the new `duration_ms`, at most every [`FLUSH_EVERY_MS`]
    /// (a busy monitor may call it on every wake-up: the writes stay a few
    /// a second). Call it at least once a second. Says whether it wrote
    /// (a caller that syncs the file need only look then).
    pub fn flush(&mut self, now: Millis) -> io::Result<bool> {
        let first = !self.flushed;
        self.flushed = true;
        if !self.file.flush_due(now.0, first) {
            return Ok(false);
        }
        self.write_out(now.0, now.0.saturating_sub(self.timeline.slack())).map(|()| true)
    }

    /// Writes everything left and an `[[expect]]` per recorded rail with
    /// its state in `snapshot` (taken at `now`), and ends the recording.
    pub fn finish(&mut self, now: Millis, snapshot: &Snapshot) -> io::Result<()> {
        let rails: Vec<RailEnd> = snapshot
            .rails
            .iter()
            .map(|r| RailEnd {
                id: r.id,
                state: r.state,
                available: r.available,
                rate: r.rate,
                recovered_by: r.recovered_by,
            })
            .collect();
        self.finish_rails(now, &rails)
    }

    /// [`finish`](Self::finish) from the rails' end states (a replay's
    /// machine has no monitor's snapshot).
    pub fn finish_rails(&mut self, now: Millis, rails: &[RailEnd]) -> io::Result<()> {
        if self.stopped.as_deref() == Some(FINISHED) {
            return Ok(());
        }
        let end = now.0.min(MAX_DURATION_MS);
        self.write_out(now.0, end.saturating_add(1))?;
        if self.stopped.is_some() {
            // What came after the stop is not in the file: the end state
            // would expect what the steps cannot produce.
            return self.file.append("\n# no [[expect]]: the recording stopped before the end\n");
        }
        let mut text = String::new();
        for (idx, d) in self.devices.iter().enumerate() {
            if !d.declared {
                continue;
            }
            for r in rails.iter().filter(|r| r.id.device as usize == idx) {
                let rate = match r.rate {
                    Some(LinkRate::Known { mbps }) if mbps > 0 => Some(LinkRate::Known { mbps }),
                    _ => None,
                };
                text.push_str(&write::expect(&Expect {
                    index: 0,
                    line: 0,
                    at_ms: end,
                    rail: RailRef { device: d.name.clone(), device_index: idx, port: r.id.port },
                    state: Some(r.state),
                    available: Some(r.available),
                    bandwidth: rate,
                    recovered_by: if r.state == RailState::Active { r.recovered_by } else { None },
                    reason: None,
                    half_open: None,
                    generation: None,
                }));
            }
        }
        self.file.append(&text)?;
        self.stopped = Some(FINISHED.to_owned());
        Ok(())
    }

    /// Declares the devices, then writes the steps placed before `cutoff`
    /// in time order, after setting `duration_ms` to `duration` (so the
    /// file is valid after each write).
    fn write_out(&mut self, now: u64, cutoff: u64) -> io::Result<()> {
        let duration = now.min(MAX_DURATION_MS).max(self.file.duration());
        let mut text = self.file.buffer();
        for d in self.devices.iter_mut().filter(|d| !d.declared) {
            d.declared = true;
            text.push_str(&write::device(&d.declaration()));
        }
        let room = self.file.room();
        let mut full = false;
        for (at, e) in self.timeline.take_due(cutoff) {
            if full {
                continue;
            }
            match e {
                Entry::Step { device, change } if at <= duration => {
                    let name = &self.devices[device as usize].name;
                    text.push_str(&write::step(&change.step(at, device, name)));
                }
                Entry::Step { .. } => {}
                Entry::Comment(c) => text.push_str(&format!("\n# {at} ms: {c}\n")),
            }
            full = text.len() > room;
        }
        self.file.write(duration, text)?;
        if full && self.stopped.is_none() {
            self.stopped = Some(format!("the file reached {} bytes, near the scenario limit", self.file.end()));
            self.file.append("\n# recording stopped: the file is near the 16 MiB scenario limit\n")?;
        }
        // Exactly 7 days still fits: only what comes after is lost.
        if now > MAX_DURATION_MS && self.stopped.is_none() {
            self.stopped = Some("7 days, the scenario limit".to_owned());
            self.file.append("\n# recording stopped: 7 days is the scenario limit\n")?;
        }
        Ok(())
    }
}
