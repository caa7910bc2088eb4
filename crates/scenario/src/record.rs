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
//! **When a change is placed.** A query saw a change at `t`; the port was
//! last asked at `p`. The change happened in between, and the replay must
//! see it at its own query, which runs on time where the live one may have
//! woken a little late. So the step is placed at `max(p + 1, t - SLACK_MS)`:
//! after the replay's previous query, no later than its next.
//!
//! **Incremental.** Steps are written once no later observation can be
//! placed before them (`SLACK_MS` behind the clock), on
//! [`flush`](Recorder::flush), which the caller runs at least once a
//! second (it writes at most every `FLUSH_EVERY_MS`). `duration_ms` sits
//! at a fixed place in the header and is rewritten before the steps it
//! must cover, so the file is valid after every write: a crash loses at
//! most the last second.
//!
//! A device that appears after the start is declared `present = false`
//! and plugged in when it appeared.
//!
//! **What a scenario cannot say** (left as a `#` comment in the file): a
//! query that fails while the device lives (replayed as the port down). A read
//! error is replayed at the start of the drain it ended.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use railwatch_core::{
    AsyncEvent, Element, Errno, EventKind, LinkAttrs, LinkRate, Millis, ObjectHandle, PortAddress, PortState,
    RailState, Scope,
};
use railwatch_runtime::{Config, Observed, Snapshot};
use railwatch_sim_backend::PortSpec;

use crate::scenario::{
    DeviceDecl, Expect, Fault, GidChange, LinkChange, MAX_DURATION_MS, MAX_FILE_BYTES, MAX_TOTAL_EVENTS,
    PortStateChange, RailRef, Scenario, Step, StepEvent, write,
};

/// How far before a query's time its change may be placed (see the module
/// docs): more than a live wake-up is ever late, less than a tick.
pub const SLACK_MS: u64 = 50;

/// What [`Recorder::stopped`] says after [`Recorder::finish`].
const FINISHED: &str = "finished";

/// A flush writes at most this often; what it leaves waits for the next.
pub const FLUSH_EVERY_MS: u64 = 100;

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

/// Stop recording short of the loader's limit, leaving room for the
/// closing expectations.
const MAX_RECORDING_BYTES: u64 = MAX_FILE_BYTES - (1 << 20);

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

/// One port as the replay's simulated device will answer it.
#[derive(Debug, Default)]
struct PortView {
    port: u8,
    state: Option<PortState>,
    link: Option<LinkAttrs>,
    /// `None` until an address was read (or ever, on a device that cannot).
    gids: Option<BTreeMap<u32, [u8; 16]>>,
    /// The distinct non-GID parts of the address seen, in order.
    others: Vec<u64>,
    last_query: Option<u64>,
}

#[derive(Debug)]
struct DeviceView {
    /// The name written to the file.
    name: String,
    ports: Vec<PortView>,
    /// Its `[[device]]` is written (after that, a first answer is a change).
    declared: bool,
    /// In the host's list at the start; otherwise declared `present =
    /// false` and plugged in when it appeared.
    present: bool,
    /// The simulated device is removed (after `remove`, until `restore`).
    removed: bool,
    last_reopen: Option<u64>,
    /// When a `DEVICE_FATAL` last closed it, and when it was last opened
    /// again: what the first queries after that saw changed in between.
    closed_at: Option<u64>,
    reopened_at: Option<u64>,
    reads_addresses: Option<bool>,
}

impl DeviceView {
    fn port(&mut self, port: u8) -> Option<&mut PortView> {
        self.ports.iter_mut().find(|p| p.port == port)
    }
}

/// What one pending step changes. Small on purpose: the monitor's path
/// pushes one per change it saw, and a burst of them must stay in cache
/// (a `Step` is three times the size); the `Step` is built when written.
#[derive(Debug, Clone, Copy)]
enum Change {
    PortState(PortStateChange),
    Link(LinkChange),
    Gid(GidChange),
    /// A fault; `wake`: with the event that only wakes the reader (a read
    /// error is noticed on a wake-up).
    Fault {
        fault: Fault,
        wake: bool,
    },
    Event(StepEvent),
}

#[derive(Debug)]
enum Entry {
    Step { device: u32, change: Change },
    Comment(String),
}

impl Change {
    /// The scenario step that makes this change on `device` at `at_ms`.
    fn step(self, at_ms: u64, device: u32, name: &str) -> Step {
        let mut step = Step {
            index: 0,
            line: 0,
            at_ms,
            device: name.to_owned(),
            device_index: device as usize,
            port_state: None,
            link: None,
            fault: None,
            event: None,
            gid: None,
        };
        match self {
            Change::PortState(c) => step.port_state = Some(c),
            Change::Link(c) => step.link = Some(c),
            Change::Gid(c) => step.gid = Some(c),
            Change::Fault { fault, wake } => {
                step.fault = Some(fault);
                if wake {
                    step.event = Some(StepEvent { event: AsyncEvent::new(WAKE_EVENT_CODE, Element::None), repeat: 1 });
                }
            }
            Change::Event(e) => step.event = Some(e),
        }
        step
    }
}

/// Writes a scenario file from a live monitor's inputs. Feed it with
/// [`observe`](Self::observe) (from `Monitor::set_observer`), call
/// [`flush`](Self::flush) at least once a second and
/// [`finish`](Self::finish) at a clean stop.
#[derive(Debug)]
pub struct Recorder {
    file: File,
    /// Where the file ends (written with `write_all_at`, never `O_APPEND`,
    /// so the header can be rewritten in place).
    end: u64,
    /// The offset of `duration_ms`'s value in the header.
    duration_at: u64,
    duration: u64,
    devices: Vec<DeviceView>,
    pending: Vec<(u64, Entry)>,
    /// Nothing from now on is placed before this.
    floor: u64,
    /// A flush happened: the start is over.
    flushed: bool,
    /// The text of the last write, kept for its capacity.
    text: String,
    /// When a flush last wrote.
    written_at: u64,
    events: u64,
    stopped: Option<String>,
    anonymize: bool,
    gid_names: HashMap<[u8; 16], u32>,
    objects: HashMap<u64, u64>,
}

/// The header's `duration_ms` value is padded to this width, so it can be
/// rewritten in place.
const DURATION_WIDTH: usize = 10;

impl Recorder {
    /// Creates (or truncates) `path` and writes the header.
    pub fn create(path: &Path, opts: &RecordOptions) -> io::Result<Recorder> {
        let file = File::create(path)?;
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
        let header = write::header(&sc);
        let key = "duration_ms = ";
        let at = header.find(key).map_or(0, |i| i + key.len());
        let duration_at = (text.len() + at) as u64;
        // `duration_ms = 1         # grows with the recording`
        let line_end = header[at..].find('\n').map_or(header.len(), |i| at + i);
        text.push_str(&header[..at]);
        text.push_str(&format!("{:<DURATION_WIDTH$} # grows with the recording", 1));
        text.push_str(&header[line_end..]);
        file.write_all_at(text.as_bytes(), 0)?;
        Ok(Recorder {
            file,
            end: text.len() as u64,
            duration_at,
            duration: 1,
            devices: Vec::new(),
            pending: Vec::new(),
            floor: 0,
            flushed: false,
            text: String::new(),
            written_at: 0,
            events: 0,
            stopped: None,
            anonymize: opts.anonymize,
            gid_names: HashMap::new(),
            objects: HashMap::new(),
        })
    }

    /// A second handle on the file, to sync it to disk without holding
    /// the recorder (the monitor's observer waits on it).
    pub fn file_handle(&self) -> io::Result<File> {
        self.file.try_clone()
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

    /// Takes one input the monitor fed its machine at `now`.
    pub fn observe(&mut self, now: Millis, what: Observed<'_>) {
        if self.stopped.is_some() {
            return;
        }
        let t = now.0;
        match what {
            Observed::Attached { device, name, ports } => self.attached(t, device, name, ports),
            Observed::Removed { device } => self.fault_at(device, t, Fault::Unplug),
            // A scenario has no way to say a device would not open: the
            // replay's plug opens it (the attach that follows is recorded).
            Observed::OpenFailed { .. } => {}
            Observed::Event { device, event } => self.event(t, device, event),
            Observed::ReadError { device, errno } => {
                let fault = if errno == Errno::EBADF { Fault::Ebadf } else { Fault::Eio };
                if fault == Fault::Eio && errno != Errno::EIO {
                    self.comment(t, format!("device {device}: a read failed with errno {}, replayed as EIO", errno.0));
                }
                self.fault_at(device, t, fault);
            }
            Observed::HungUp { device } => self.hung_up(t, device),
            Observed::Reopened { device, result } => self.reopened(t, device, result),
            Observed::PortState { device, port, answer } => self.port_state(t, device, port, answer),
            Observed::Link { device, port, answer } => self.link(t, device, port, answer),
            Observed::Address { device, port, answer } => self.address(t, device, port, answer),
        }
    }

    fn attached(&mut self, t: u64, device: u32, name: &str, ports: &[u8]) {
        let idx = device as usize;
        if idx < self.devices.len() {
            // The same name came back (it had left the host's list).
            self.devices[idx].removed = false;
            self.push_step(t, device, Change::Fault { fault: Fault::Plug, wake: false });
            return;
        }
        if idx > self.devices.len() {
            // The monitor numbers devices in order; a gap means attaches
            // this recorder never saw.
            self.comment(t, format!("device {idx} attached, but not the ones before it: not recorded"));
            return;
        }
        // A device that appears after the start is declared absent at the
        // start (`present = false`) and plugged in when it appeared.
        // Before the first flush is the start: the monitor attaches the
        // host's devices before its first wait.
        let present = !self.flushed;
        let shown = if self.anonymize { format!("dev{idx}") } else { name.to_owned() };
        self.devices.push(DeviceView {
            name: shown,
            ports: ports.iter().map(|&port| PortView { port, ..PortView::default() }).collect(),
            declared: false,
            present,
            removed: false,
            last_reopen: None,
            closed_at: None,
            reopened_at: None,
            reads_addresses: None,
        });
        if !present {
            self.push_step(t, device, Change::Fault { fault: Fault::Plug, wake: false });
        }
    }

    fn live(&mut self, device: u32) -> Option<&mut DeviceView> {
        self.devices.get_mut(device as usize)
    }

    /// `max(previous + 1, t - SLACK_MS)`, never before what is written.
    fn placed(&self, previous: Option<u64>, t: u64) -> u64 {
        self.placed_after(previous, t.saturating_sub(SLACK_MS), t)
    }

    /// `max(previous + 1, earliest)`, at most `t`, never before what is
    /// written.
    fn placed_after(&self, previous: Option<u64>, earliest: u64, t: u64) -> u64 {
        previous.map_or(0, |p| p.saturating_add(1)).max(earliest).min(t).max(self.floor)
    }

    /// Where a change a query of `device` saw at `t` goes: as
    /// [`placed`](Self::placed), unless it is the port's first query since
    /// the device was opened again after a `DEVICE_FATAL`. Then the change
    /// happened while the device was closed, and goes just after the close:
    /// the replay re-opens at its own time (the backoff's jitter is drawn
    /// anew), which may be earlier than the live one, and must see it too.
    fn placed_for(&self, device: u32, previous: Option<u64>, t: u64) -> u64 {
        let d = self.devices.get(device as usize);
        match d.and_then(|d| d.closed_at.zip(d.reopened_at)) {
            Some((closed, reopened)) if closed < reopened && previous.is_none_or(|p| p < reopened) => {
                self.placed_after(previous, closed.saturating_add(1), t)
            }
            _ => self.placed(previous, t),
        }
    }

    fn push_step(&mut self, at: u64, device: u32, change: Change) {
        if self.live(device).is_none() {
            return;
        }
        self.pending.push((at, Entry::Step { device, change }));
    }

    fn comment(&mut self, t: u64, text: String) {
        self.pending.push((t.max(self.floor), Entry::Comment(text.replace('\n', " "))));
    }

    fn fault_at(&mut self, device: u32, t: u64, fault: Fault) {
        let Some(d) = self.live(device) else { return };
        if matches!(fault, Fault::Remove) {
            d.removed = true;
        }
        // After the events this drain read (a fault in their step would
        // come first and drop or block them).
        let after_events = self.pending.iter().any(|(at, e)| {
            *at == t && matches!(e, Entry::Step { device: d, change: Change::Event(_) } if *d == device)
        });
        let at = if after_events { t + 1 } else { t };
        let wake = matches!(fault, Fault::Eio | Fault::Ebadf);
        if wake {
            self.comment(at, "a read failed: the event of the next step only wakes the reader (never read)".into());
        }
        self.push_step(at.max(self.floor), device, Change::Fault { fault, wake });
    }

    /// Turns the read error this device recorded at `t` (if it did) into a
    /// removal: the fd hung up, or its port queries fail too. Returns
    /// whether there was one.
    fn read_error_was_removal(&mut self, t: u64, device: u32) -> bool {
        let last = self.pending.iter_mut().rev().find_map(|(at, e)| match e {
            Entry::Step { device: d, change }
                if *d == device && matches!(change, Change::Fault { fault: Fault::Eio | Fault::Ebadf, .. }) =>
            {
                Some((*at, change))
            }
            _ => None,
        });
        let Some((_, change)) = last.filter(|(at, _)| *at >= t) else { return false };
        // A removal hangs the fd up itself: no wake-up event.
        *change = Change::Fault { fault: Fault::Remove, wake: false };
        if let Some(d) = self.live(device) {
            d.removed = true;
        }
        true
    }

    fn hung_up(&mut self, t: u64, device: u32) {
        if !self.read_error_was_removal(t, device) {
            self.fault_at(device, t, Fault::Remove);
        }
    }

    fn reopened(&mut self, t: u64, device: u32, result: Result<(), Errno>) {
        let Some(d) = self.live(device) else { return };
        let previous = d.last_reopen.replace(t);
        let removed = d.removed;
        if result.is_ok() && !removed {
            d.reopened_at = Some(t);
        }
        match result {
            Ok(()) if removed => {
                let at = self.placed(previous, t);
                if let Some(d) = self.live(device) {
                    d.removed = false;
                }
                self.push_step(at, device, Change::Fault { fault: Fault::Restore, wake: false });
            }
            Err(errno) if !removed => {
                // The simulator re-opens a living device; only a removed one
                // refuses, and refuses until restored.
                let at = self.placed(previous, t);
                if let Some(d) = self.live(device) {
                    d.removed = true;
                }
                self.push_step(at, device, Change::Fault { fault: Fault::Remove, wake: false });
                self.comment(t, format!("the re-open failed with errno {}: replayed as a removal", errno.0));
            }
            _ => {}
        }
    }

    fn event(&mut self, t: u64, device: u32, event: AsyncEvent) {
        let Some(d) = self.live(device) else { return };
        if event.kind() == EventKind::DeviceFatal {
            d.closed_at = Some(t);
        }
        self.events += 1;
        if self.events > MAX_TOTAL_EVENTS {
            self.stop(format!("more than {MAX_TOTAL_EVENTS} events, the scenario limit"));
            return;
        }
        // The element as a scenario can say it for the event's scope.
        let declared =
            |r: &mut Self, p: u32| u8::try_from(p).ok().and_then(|p| r.live(device).and_then(|d| d.port(p))).is_some();
        let element = match (event.kind().scope(), event.element) {
            (Scope::Port, Element::Port(p)) if declared(self, p) => Element::Port(p),
            (Scope::Port, other) => {
                self.comment(t, format!("event code {} for {other:?}, not a port of the device", event.code));
                return;
            }
            (Scope::Device, _) => Element::None,
            (Scope::Unknown, Element::Port(p)) if declared(self, p) => Element::Port(p),
            (Scope::Unknown, Element::Port(_) | Element::None) => Element::None,
            (_, Element::Object(h)) => Element::Object(ObjectHandle(self.object_number(h.0))),
            // An object event without its object: the null handle.
            (_, _) => Element::Object(ObjectHandle(0)),
        };
        let event = AsyncEvent { code: event.code, element };
        // A burst of the same event in one instant: one step, `repeat`.
        if let Some((at, Entry::Step { device: d, change: Change::Event(ev) })) = self.pending.last_mut() {
            if *at == t && *d == device && ev.event == event {
                ev.repeat += 1;
                return;
            }
        }
        self.push_step(t, device, Change::Event(StepEvent { event, repeat: 1 }));
    }

    /// An object handle (a pointer in the live process, meaningless in
    /// another) numbered by first appearance, keeping which are equal, up
    /// to a bound (the machine never compares handles; this only keeps the
    /// file readable); past it, every new handle is one more number.
    fn object_number(&mut self, handle: u64) -> u64 {
        let next = self.objects.len() as u64 + 1;
        match self.objects.get(&handle) {
            _ if handle == 0 => 0,
            Some(&n) => n,
            None if self.objects.len() < MAX_NAMED_OBJECTS => *self.objects.entry(handle).or_insert(next),
            None => next,
        }
    }

    fn port_state(&mut self, t: u64, device: u32, port: u8, answer: Result<PortState, Errno>) {
        let Some(d) = self.live(device) else { return };
        let (removed, declared) = (d.removed, d.declared);
        let Some(p) = d.port(port) else { return };
        let previous = p.last_query.replace(t);
        let state = match answer {
            Ok(s) => s,
            // The simulator answers ENODEV itself while removed.
            Err(_) if removed => return,
            Err(e) => {
                // Reads and queries both fail: the device is gone.
                if self.read_error_was_removal(t, device) {
                    return;
                }
                // A live device whose query failed (the kernel's ENODEV
                // after its netdev went): the machine reads it as "not
                // ACTIVE", and so will the replay.
                self.comment(t, format!("port {port}: the query failed with errno {}, replayed as down", e.0));
                PortState::Down
            }
        };
        let Some(p) = self.live(device).and_then(|d| d.port(port)) else { return };
        match p.state {
            None if !declared => p.state = Some(state),
            Some(known) if known == state => {}
            _ => {
                p.state = Some(state);
                let at = self.placed_for(device, previous, t);
                self.push_step(at, device, Change::PortState(PortStateChange { port, state }));
            }
        }
    }

    fn link(&mut self, t: u64, device: u32, port: u8, answer: Result<LinkAttrs, Errno>) {
        let Some(d) = self.live(device) else { return };
        let declared = d.declared;
        let Some(p) = d.port(port) else { return };
        let previous = p.last_query.replace(t);
        let Ok(link) = answer else { return };
        let same = |a: &LinkAttrs, b: &LinkAttrs| {
            a.speed_code() == b.speed_code()
                && a.active_width == b.active_width
                && a.effective_100mbps == b.effective_100mbps
        };
        match &p.link {
            None if !declared => p.link = Some(link),
            Some(known) if same(known, &link) => {}
            _ => {
                p.link = Some(link);
                let at = self.placed_for(device, previous, t);
                self.push_step(at, device, Change::Link(LinkChange { port, link }));
            }
        }
    }

    fn address(&mut self, t: u64, device: u32, port: u8, answer: Result<&PortAddress, Errno>) {
        let anonymize = self.anonymize;
        let Some(d) = self.live(device) else { return };
        let address = match answer {
            Ok(a) => a,
            Err(Errno::EOPNOTSUPP) => {
                d.reads_addresses.get_or_insert(false);
                return;
            }
            Err(e) => {
                self.comment(t, format!("port {port}: an address read failed with errno {}", e.0));
                return;
            }
        };
        if d.reads_addresses == Some(false) || (d.declared && d.reads_addresses.is_none()) {
            // Declared without addresses: the replay cannot start reading.
            return;
        }
        d.reads_addresses = Some(true);
        let declared = d.declared;
        let rest = PortAddress { gids: Vec::new(), ..address.clone() }.fingerprint();
        let mut table: BTreeMap<u32, [u8; 16]> = address.gids.iter().map(|g| (g.index, g.raw)).collect();
        let Some(p) = d.port(port) else { return };
        let previous = p.last_query.replace(t);
        let other = match p.others.iter().position(|&o| o == rest) {
            Some(i) => i,
            None => {
                p.others.push(rest);
                p.others.len() - 1
            }
        };
        if other > 0 {
            let mut raw = [0u8; 16];
            raw[0] = 0xfd;
            raw[12..].copy_from_slice(&(other as u32).to_be_bytes());
            table.insert(OTHER_ADDRESS_INDEX, raw);
        }
        if anonymize {
            for raw in table.values_mut() {
                *raw = anonymous_gid(&mut self.gid_names, *raw);
            }
        }
        let Some(d) = self.live(device) else { return };
        let Some(p) = d.port(port) else { return };
        let Some(known) = p.gids.as_ref() else {
            if !declared {
                p.gids = Some(table);
            }
            return;
        };
        let mut changes: Vec<GidChange> = Vec::new();
        for (&index, &raw) in &table {
            if known.get(&index) != Some(&raw) {
                changes.push(GidChange { port, index, gid: Some(raw) });
            }
        }
        for &index in known.keys() {
            if !table.contains_key(&index) {
                changes.push(GidChange { port, index, gid: None });
            }
        }
        p.gids = Some(table);
        let at = self.placed_for(device, previous, t);
        for g in changes {
            self.push_step(at, device, Change::Gid(g));
        }
    }

    fn stop(&mut self, why: String) {
        self.comment(self.floor, format!("recording stopped: {why}"));
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
        if !first && now.0 < self.written_at.saturating_add(FLUSH_EVERY_MS) {
            return Ok(false);
        }
        self.written_at = now.0;
        self.write_out(now.0, now.0.saturating_sub(SLACK_MS)).map(|()| true)
    }

    /// Writes everything left and an `[[expect]]` per recorded rail with
    /// its state in `snapshot` (taken at `now`), and ends the recording.
    pub fn finish(&mut self, now: Millis, snapshot: &Snapshot) -> io::Result<()> {
        if self.stopped.as_deref() == Some(FINISHED) {
            return Ok(());
        }
        let end = now.0.min(MAX_DURATION_MS);
        self.write_out(now.0, end.saturating_add(1))?;
        if self.stopped.is_some() {
            // What came after the stop is not in the file: the end state
            // would expect what the steps cannot produce.
            return self.append("\n# no [[expect]]: the recording stopped before the end\n");
        }
        let mut text = String::new();
        for (idx, d) in self.devices.iter().enumerate() {
            if !d.declared {
                continue;
            }
            for r in snapshot.rails.iter().filter(|r| r.id.device as usize == idx) {
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
                }));
            }
        }
        self.append(&text)?;
        self.stopped = Some(FINISHED.to_owned());
        Ok(())
    }

    /// Appends `text` whole or not at all: a write cut short (a full disk)
    /// is cut back off, so the file stays the valid scenario it was.
    fn append(&mut self, text: &str) -> io::Result<()> {
        if let Err(e) = self.file.write_all_at(text.as_bytes(), self.end) {
            let _ = self.file.set_len(self.end);
            return Err(e);
        }
        self.end += text.len() as u64;
        Ok(())
    }

    /// Declares the devices, then writes the steps placed before `cutoff`
    /// in time order, after setting `duration_ms` to `duration` (so the
    /// file is valid after each write).
    fn write_out(&mut self, now: u64, cutoff: u64) -> io::Result<()> {
        let duration = now.min(MAX_DURATION_MS).max(self.duration);
        let mut text = std::mem::take(&mut self.text);
        text.clear();
        for d in self.devices.iter_mut().filter(|d| !d.declared) {
            d.declared = true;
            text.push_str(&write::device(&declaration(d)));
        }
        // Stable: equal times keep the order they were observed in. In
        // place, and drained in place: the buffer keeps its capacity.
        self.pending.sort_by_key(|(at, _)| *at);
        let due = self.pending.partition_point(|(at, _)| *at < cutoff);
        let room = MAX_RECORDING_BYTES.saturating_sub(self.end) as usize;
        let mut full = false;
        for (at, e) in self.pending.drain(..due) {
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
        self.floor = self.floor.max(cutoff);
        if duration != self.duration {
            self.file.write_all_at(format!("{duration:<DURATION_WIDTH$}").as_bytes(), self.duration_at)?;
            self.duration = duration;
        }
        if !text.is_empty() {
            self.append(&text)?;
        }
        self.text = text;
        if full && self.stopped.is_none() {
            self.stopped = Some(format!("the file reached {} bytes, near the scenario limit", self.end));
            self.append("\n# recording stopped: the file is near the 16 MiB scenario limit\n")?;
        }
        // Exactly 7 days still fits: only what comes after is lost.
        if now > MAX_DURATION_MS && self.stopped.is_none() {
            self.stopped = Some("7 days, the scenario limit".to_owned());
            self.append("\n# recording stopped: 7 days is the scenario limit\n")?;
        }
        Ok(())
    }
}

/// The `[[device]]` for what the device's ports answered first (a port
/// never asked reads as declared by default: active, NDR 4x).
fn declaration(d: &DeviceView) -> DeviceDecl {
    let ports = d
        .ports
        .iter()
        .map(|p| {
            let default = PortSpec::active(p.port);
            PortSpec::new(p.port, p.state.unwrap_or(default.state), p.link.unwrap_or(default.link))
        })
        .collect();
    let gids = (d.reads_addresses == Some(true)).then(|| {
        d.ports
            .iter()
            .flat_map(|p| {
                p.gids.iter().flatten().map(|(&index, &raw)| GidChange { port: p.port, index, gid: Some(raw) })
            })
            .collect()
    });
    DeviceDecl { line: 0, name: d.name.clone(), ports, gids, present: d.present }
}

/// `fe80::N`, N counting the distinct GIDs seen.
fn anonymous_gid(names: &mut HashMap<[u8; 16], u32>, raw: [u8; 16]) -> [u8; 16] {
    let next = names.len() as u32 + 1;
    let n = *names.entry(raw).or_insert(next);
    let mut out = [0u8; 16];
    out[0] = 0xfe;
    out[1] = 0x80;
    out[12..].copy_from_slice(&n.to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the monitor's path pushes stays small (docs/PERFORMANCE.md,
    /// row 11): a burst of queued changes must fit in cache.
    #[test]
    fn a_queued_change_is_a_third_of_a_step_at_most() {
        let queued = std::mem::size_of::<(u64, Entry)>();
        assert!(queued <= 64, "{queued} bytes");
        assert!(queued * 3 <= std::mem::size_of::<Step>(), "{queued} vs {}", std::mem::size_of::<Step>());
        eprintln!("a queued change: {queued} bytes; a Step: {} bytes", std::mem::size_of::<Step>());
    }
}
