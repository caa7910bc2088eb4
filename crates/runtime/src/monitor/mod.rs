//! The monitor: the driver of core's [`Machine`]. One mio `Poll` for every
//! device, the drain on each wake-up, the clock, and carrying out the
//! machine's actions. No rail or device policy lives here: every decision
//! is the machine's.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use crossbeam_channel::Receiver;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use railwatch_core::{
    Action, AsyncEvent, Clock, DeviceMode, Errno, Gate, Happening, Machine, Millis, Notification, PortAddress, RailId,
    Selector, VerbsPort,
};

use crate::config::Config;
use crate::device::{DeviceCounters, DeviceSlot};
use crate::drain::{DrainEnd, drain};
use crate::hotplug::{DeviceSource, Rescan};
use crate::notify::Notifier;
use crate::observe::{Observed, Observer};
use crate::snapshot::{DeviceSnapshot, RailSnapshot, Snapshot};

mod log_line;

/// The token of the waker that stops or commands a spawned monitor.
pub(crate) const WAKER: Token = Token(usize::MAX);
/// The token of the device source's fd (uevents).
const HOTPLUG: Token = Token(usize::MAX - 1);
/// How soon a device that appeared but could not be opened is tried again.
const OPEN_RETRY_MS: u64 = 1000;

/// The monitor's device source and its rescan timer.
struct Hotplug<P> {
    source: Box<dyn DeviceSource<Device = P>>,
    /// Rescan period when the source has no fd.
    every_ms: u64,
    next_rescan: Option<Millis>,
}

/// Watches devices and keeps their rails' state, the selector and the gates
/// true to the ports.
///
/// Generic over the device backend (`P`), the engine's selector (`S`) and
/// the clock (`C`); it never names a backend. Drive it with
/// [`poll_once`](Self::poll_once) from an engine's loop (or the simulator),
/// or give it a thread with [`spawn`](Self::spawn).
pub struct Monitor<P, S, C> {
    config: Config,
    machine: Machine,
    poll: Poll,
    events: Events,
    devices: Vec<DeviceSlot<P>>,
    selector: S,
    clock: C,
    notifier: Notifier,
    /// Events of the drain in progress, reused so the hot path does not
    /// allocate.
    scratch: Vec<AsyncEvent>,
    /// Devices made ready by the last wait, reused likewise.
    ready: Vec<usize>,
    /// Devices left pending or hung up by the last wake-up: the next one
    /// looks at these, not at every device.
    busy: Vec<usize>,
    wakeups: u64,
    /// Commands from a [`MonitorHandle`](crate::MonitorHandle), once spawned.
    pub(crate) commands: Option<Receiver<crate::spawn::Command>>,
    hotplug: Option<Hotplug<P>>,
    /// Each rail's address as last read (for snapshots).
    addresses: std::collections::HashMap<RailId, PortAddress>,
    /// Sees every input fed to the machine (a recorder), if set.
    observer: Option<Observer>,
}

fn errno_of(e: &io::Error) -> Errno {
    match os_errno(e) {
        Some(errno) => Errno(errno),
        // A backend that cannot read addresses says so without an errno.
        None if e.kind() == io::ErrorKind::Unsupported => Errno::EOPNOTSUPP,
        None => Errno::UNKNOWN,
    }
}

impl<P: VerbsPort, S: Selector, C: Clock> Monitor<P, S, C> {
    /// A monitor with no devices yet. A config that does not validate is
    /// refused (`InvalidInput`, naming the setting).
    pub fn new(config: Config, selector: S, clock: C) -> io::Result<Self> {
        config.validate().map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let machine = Machine::new(config.machine()).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        Ok(Monitor {
            machine,
            poll: Poll::new()?,
            events: Events::with_capacity(64),
            devices: Vec::new(),
            selector,
            clock,
            notifier: Notifier::default(),
            scratch: Vec::with_capacity(config.drain_budget),
            ready: Vec::new(),
            busy: Vec::new(),
            wakeups: 0,
            commands: None,
            hotplug: None,
            addresses: std::collections::HashMap::new(),
            observer: None,
            config,
        })
    }

    /// Takes ownership of an opened device: registers its async fd
    /// (edge-triggered), creates one rail per port and attaches each, active
    /// or paused by its port state, with its bandwidth seeded. Returns the
    /// device's index (the `device` of its [`RailId`]s).
    pub fn add_device(&mut self, port: P) -> u32 {
        let now = self.clock.now();
        let ports = port.ports();
        // The slot first: the machine's first actions are for it. A name
        // that left the host and came back takes its old slot (its rails
        // keep their ids; the machine attaches them as a new device).
        let name = port.name().to_string();
        match self.machine.removed_device(&name, &ports) {
            Some(idx) => self.devices[idx] = DeviceSlot::new(port),
            None => self.devices.push(DeviceSlot::new(port)),
        }
        let idx = self.machine.add_device(&name, &ports, now);
        self.observe(now, Observed::Attached { device: idx, name: &name, ports: &ports });
        self.carry_out(now);
        idx
    }

    /// Device `device` left the host (the device list or a uevent says so):
    /// the machine closes it at once and its rails go inert. Adding a device
    /// of the same name later attaches it again under the same index.
    pub fn remove_device(&mut self, device: u32) {
        let now = self.clock.now();
        self.observe(now, Observed::Removed { device });
        self.machine.handle_removed(device, now);
        self.carry_out(now);
    }

    /// Takes the host's devices from `source` from now on: adds every device
    /// it lists that the monitor does not have, and follows the list as it
    /// changes (through the source's fd where it has one, so an idle host
    /// still never wakes; otherwise by rescanning every `rescan_every`).
    /// Returns what the first scan did.
    pub fn watch_devices(
        &mut self,
        source: Box<dyn DeviceSource<Device = P>>,
        rescan_every: Duration,
    ) -> io::Result<Rescan> {
        if let Some(fd) = source.fd() {
            self.poll.registry().register(&mut SourceFd(&fd), HOTPLUG, Interest::READABLE)?;
        }
        let every_ms = u64::try_from(rescan_every.as_millis()).unwrap_or(u64::MAX).max(1);
        self.hotplug = Some(Hotplug { source, every_ms, next_rescan: None });
        Ok(self.rescan())
    }

    /// Compares the source's device list with the monitor's devices: removes
    /// those that left, opens and adds those that appeared.
    pub fn rescan(&mut self) -> Rescan {
        let now = self.clock.now();
        let Some(mut hp) = self.hotplug.take() else { return Rescan::default() };
        let mut found = Rescan::default();
        match hp.source.list() {
            Ok(names) => {
                let present: Vec<(u32, String)> = self
                    .machine
                    .devices()
                    .filter(|d| d.mode != DeviceMode::Removed)
                    .map(|d| (d.index, d.name.to_string()))
                    .collect();
                for (idx, name) in &present {
                    if !names.contains(name) {
                        self.remove_device(*idx);
                        found.removed.push(name.clone());
                    }
                }
                for name in names {
                    if present.iter().any(|(_, n)| *n == name) {
                        continue;
                    }
                    match hp.source.open(&name) {
                        Ok(dev) => {
                            self.add_device(dev);
                            found.added.push(name);
                        }
                        Err(e) => {
                            log::warn!("{name}: appeared but cannot be opened ({e}); trying again");
                            found.failed.push(name);
                        }
                    }
                }
            }
            Err(e) => log::warn!("listing the devices failed ({e}); trying again"),
        }
        hp.next_rescan = if !found.failed.is_empty() {
            Some(now.plus(OPEN_RETRY_MS.min(hp.every_ms)))
        } else if hp.source.fd().is_none() {
            Some(now.plus(hp.every_ms))
        } else {
            None
        };
        self.hotplug = Some(hp);
        found
    }

    /// The index of the open (not removed) device called `name`.
    pub fn device_index(&self, name: &str) -> Option<u32> {
        self.machine.devices().filter(|d| d.name == name && d.mode != DeviceMode::Removed).map(|d| d.index).last()
    }

    /// A gate for `rail`, to clone into worker threads.
    pub fn gate(&self, rail: RailId) -> Option<Gate> {
        self.machine.gate(rail)
    }

    /// A gate for the rail called `name` (`"mlx5_0/1"`).
    pub fn gate_of(&self, name: &str) -> Option<Gate> {
        self.machine.gate_of(name)
    }

    /// The id of the rail called `name` (`"mlx5_0/1"`).
    pub fn rail_id(&self, name: &str) -> Option<RailId> {
        self.machine.rails().find(|r| r.name == name).map(|r| r.id)
    }

    /// The name of `rail` (`"mlx5_0/1"`).
    pub fn rail_name(&self, rail: RailId) -> Option<&str> {
        self.machine.rail(rail).map(|r| r.name)
    }

    /// Every rail's id and name, in order.
    pub fn rails(&self) -> Vec<(RailId, String)> {
        self.machine.rails().map(|r| (r.id, r.name.to_string())).collect()
    }

    /// The name of device `device`.
    pub fn device_name(&self, device: u32) -> Option<&str> {
        self.machine.device(device).map(|d| d.name)
    }

    /// The backend of device `device`.
    pub fn device(&self, device: u32) -> Option<&P> {
        self.devices.get(device as usize).map(|d| &d.port)
    }

    /// The address of `rail` as last read (after attach, activation and
    /// LID/GID changes), if the backend reads addresses.
    pub fn address(&self, rail: RailId) -> Option<&PortAddress> {
        self.addresses.get(&rail)
    }

    /// The machine this monitor drives (read-only: its inputs come from the
    /// devices).
    pub fn machine(&self) -> &Machine {
        &self.machine
    }

    /// Hands `observer` every input the monitor feeds its machine from now
    /// on (events, answers, read errors, hang-ups, re-opens, devices
    /// attached and removed), with the time the machine was given: what a
    /// recorder needs to replay the run. Replaces an earlier observer.
    pub fn set_observer(&mut self, observer: Observer) {
        self.observer = Some(observer);
    }

    /// Subscribes to the monitor's notifications from now on, through a
    /// channel of `notify_capacity`. A full channel drops (and counts) what
    /// does not fit; dropping the receiver unsubscribes.
    pub fn subscribe(&mut self) -> Receiver<Notification> {
        self.notifier.subscribe(self.config.notify_capacity)
    }

    /// Subscribes without a bound: nothing is ever dropped, so the reader
    /// must empty the receiver after every [`poll_once`](Self::poll_once)
    /// (as the scenario driver does), or memory grows with what it leaves.
    pub fn subscribe_unbounded(&mut self) -> Receiver<Notification> {
        self.notifier.subscribe_unbounded()
    }

    /// The selector the monitor drives.
    pub fn selector(&self) -> &S {
        &self.selector
    }

    /// The clock the monitor reads.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// True when a device must be serviced again before the next blocking
    /// wait (its drain hit the budget, or its fd hung up).
    pub fn has_pending(&self) -> bool {
        self.busy.iter().any(|&idx| self.devices[idx].pending || self.devices[idx].hung_up)
    }

    /// When the recovery tick runs next; `None` while nothing needs it.
    /// [`next_deadline`](Self::next_deadline) also counts the other timers.
    pub fn next_tick(&self) -> Option<Millis> {
        self.machine.next_tick()
    }

    /// When the monitor next has time-driven work (the tick, the audit, a
    /// settle, damping or re-open timer); `None` while nothing is
    /// scheduled, so an idle monitor blocks until a device event.
    pub fn next_deadline(&self) -> Option<Millis> {
        self.machine.poll_timeout()
    }

    /// Waits for device events at most `timeout` (`None`: until something
    /// happens; a due timer or pending work shortens it), drains every ready
    /// device, services devices left pending, and hands the machine the
    /// time.
    ///
    /// Device failures are handled inside (the machine decides what they
    /// mean); an error here is the poll set's own.
    pub fn poll_once(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        let now = self.clock.now();
        let mut timeout = timeout;
        if self.has_pending() {
            timeout = Some(Duration::ZERO);
        }
        let rescan = self.hotplug.as_ref().and_then(|h| h.next_rescan);
        if let Some(deadline) = [self.machine.poll_timeout(), rescan].into_iter().flatten().min() {
            let until = Duration::from_millis(deadline.since(now));
            timeout = Some(timeout.map_or(until, |t| t.min(until)));
        }
        match self.poll.poll(&mut self.events, timeout) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(()),
            Err(e) => return Err(e),
        }
        self.wakeups += 1;

        let mut ready = std::mem::take(&mut self.ready);
        ready.clear();
        let mut list_changed = false;
        for ev in self.events.iter() {
            if ev.token() == HOTPLUG {
                list_changed = true;
                continue;
            }
            let idx = ev.token().0;
            let Some(slot) = self.devices.get_mut(idx) else { continue };
            if ev.is_error() || ev.is_read_closed() {
                slot.hung_up = true;
            }
            ready.push(idx);
        }
        for &idx in &ready {
            self.service(idx);
        }
        // Only a device serviced just now or left busy by the last wake-up
        // can be pending or hung up: visit those, in index order.
        let mut busy = std::mem::take(&mut self.busy);
        busy.extend_from_slice(&ready);
        self.ready = ready;
        busy.sort_unstable();
        busy.dedup();
        for &idx in &busy {
            if self.devices[idx].pending {
                self.service(idx);
            }
        }
        busy.retain(|&idx| self.devices[idx].pending || self.devices[idx].hung_up);
        self.busy = busy;

        let now = self.clock.now();
        self.machine.handle_timeout(now);
        self.carry_out(now);
        if let Some(hp) = self.hotplug.as_mut() {
            if list_changed {
                list_changed = hp.source.drain().unwrap_or_else(|e| {
                    log::warn!("reading device notifications failed ({e}); rescanning");
                    true
                });
            }
            if list_changed || hp.next_rescan.is_some_and(|t| t <= now) {
                self.rescan();
            }
        }
        if self.commands.is_some() {
            self.serve_commands();
        }
        Ok(())
    }

    /// A copy of every rail and counter.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            t: self.clock.now(),
            rails: self
                .machine
                .rails()
                .map(|r| RailSnapshot {
                    id: r.id,
                    name: r.name.to_string(),
                    state: r.word.state,
                    reason: r.word.reason,
                    since: r.since,
                    last_port_state: r.word.last_port_state,
                    generation: r.word.generation,
                    available: r.available,
                    rate: r.rate,
                    recovered_by: r.recovered_by,
                    address: self.addresses.get(&r.id).cloned(),
                })
                .collect(),
            devices: self
                .machine
                .devices()
                .zip(&self.devices)
                .map(|(d, slot)| DeviceSnapshot {
                    name: d.name.to_string(),
                    mode: d.mode,
                    counters: DeviceCounters::new(d.stats, slot.io),
                })
                .collect(),
            wakeups: self.wakeups,
            ticks: self.machine.ticks(),
            notifications_dropped: self.notifier.dropped,
        }
    }

    /// A waker for this monitor's wait: `wake()` from any thread makes a
    /// blocking [`poll_once`](Self::poll_once) return (for a driver that
    /// also waits on something else, such as signals). One per monitor,
    /// and not together with [`spawn`](Self::spawn), which makes its own.
    pub fn waker(&self) -> io::Result<mio::Waker> {
        mio::Waker::new(self.poll.registry(), WAKER)
    }

    pub(crate) fn poll_registry(&self) -> &mio::Registry {
        self.poll.registry()
    }

    // ---- reading ------------------------------------------------------

    /// Drains device `idx` once (up to the budget) and hands what it read
    /// to the machine, one event at a time, carrying out the machine's
    /// actions after each (so an activation's query is answered before the
    /// next event is looked at).
    fn service(&mut self, idx: usize) {
        if !self.devices[idx].reading {
            self.devices[idx].pending = false;
            self.devices[idx].hung_up = false;
            return;
        }
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        let report = drain(&mut self.devices[idx].port, self.config.drain_budget.max(1), |ev| scratch.push(ev));
        let slot = &mut self.devices[idx];
        slot.io.gets += report.gets as u64;
        slot.io.interrupted += report.interrupted as u64;
        // Events of this drain so far, counted before handling them: an
        // event in the batch (DEVICE_FATAL) may close the device.
        let events = (std::mem::take(&mut slot.drained_in_progress) + report.events as u64) as usize;
        let now = self.clock.now();
        let device = idx as u32;
        for ev in scratch.drain(..) {
            self.observe(now, Observed::Event { device, event: ev });
            self.machine.handle_event(device, ev, now);
            self.carry_out(now);
        }
        self.scratch = scratch;
        let slot = &mut self.devices[idx];
        match report.end {
            DrainEnd::Budget if slot.reading => {
                slot.io.budget_hits += 1;
                slot.pending = true;
                slot.drained_in_progress = events as u64;
            }
            DrainEnd::Budget | DrainEnd::Empty => {
                slot.pending = false;
                self.notify(now, Happening::Drain { device, events, errno: None });
            }
            DrainEnd::Failed(e) => {
                slot.pending = false;
                let errno = errno_of(&e);
                self.notify(now, Happening::Drain { device, events, errno: Some(errno.0) });
                self.observe(now, Observed::ReadError { device, errno });
                self.machine.handle_read_error(device, errno, now);
                self.carry_out(now);
            }
        }
        if std::mem::take(&mut self.devices[idx].hung_up) {
            self.observe(now, Observed::HungUp { device });
            self.machine.handle_hangup(device, now);
            self.carry_out(now);
        }
    }

    fn observe(&mut self, now: Millis, what: Observed<'_>) {
        if let Some(observer) = self.observer.as_mut() {
            observer(now, what);
        }
    }

    fn notify(&mut self, t: Millis, what: Happening) {
        self.notifier.send(Notification { t, what });
    }

    // ---- carrying out the machine's actions -------------------------------

    /// Carries out every action the machine asks for, feeding each answer
    /// back at once.
    fn carry_out(&mut self, now: Millis) {
        while let Some(action) = self.machine.poll_action() {
            match action {
                Action::StartReading { device } => self.start_reading(device, now),
                Action::StopReading { device } => self.stop_reading(device),
                Action::Close { device } => {
                    let slot = &mut self.devices[device as usize];
                    slot.port.close();
                    slot.pending = false;
                    slot.hung_up = false;
                    // Events counted by budget-limited passes belong to the
                    // closed fd.
                    slot.drained_in_progress = 0;
                }
                Action::Reopen { device } => {
                    let result = self.devices[device as usize].port.reopen().map_err(|e| errno_of(&e));
                    self.observe(now, Observed::Reopened { device, result });
                    self.machine.handle_reopen(device, result, now);
                }
                Action::QueryPort { device, port } => {
                    let answer = self.devices[device as usize].port.port_state(port).map_err(|e| errno_of(&e));
                    self.observe(now, Observed::PortState { device, port, answer });
                    self.machine.handle_port_state(device, port, answer, now);
                }
                Action::ReadAddress { device, port } => {
                    let answer = self.devices[device as usize].port.address(port);
                    self.observe(now, Observed::Address { device, port, answer: answer.as_ref().map_err(errno_of) });
                    self.machine.handle_address(device, port, answer.as_ref().map_err(errno_of), now);
                    if let Ok(address) = answer {
                        self.addresses.insert(RailId { device, port }, address);
                    }
                }
                Action::ReadLink { device, port } => {
                    let answer = self.devices[device as usize].port.link(port).map_err(|e| errno_of(&e));
                    self.observe(now, Observed::Link { device, port, answer });
                    self.machine.handle_link(device, port, answer, now);
                }
                Action::SetAvailable { rail, available } => self.selector.set_available(rail, available),
                Action::Reseed { rail, rate } => self.selector.reseed(rail, rate),
                Action::Notify(note) => {
                    log_line::note(&self.machine, &note);
                    self.notifier.send(note);
                }
                Action::Log(line) => log_line::log(&self.machine, &line),
            }
        }
    }

    fn start_reading(&mut self, device: u32, now: Millis) {
        let slot = &mut self.devices[device as usize];
        let fd: RawFd = slot.port.async_fd();
        match self.poll.registry().register(&mut SourceFd(&fd), Token(device as usize), Interest::READABLE) {
            Ok(()) => slot.reading = true,
            Err(e) => {
                let errno = errno_of(&e);
                self.machine.handle_read_error(device, errno, now);
            }
        }
    }

    fn stop_reading(&mut self, device: u32) {
        let slot = &mut self.devices[device as usize];
        if std::mem::take(&mut slot.reading) {
            let fd = slot.port.async_fd();
            // The fd may already be closed.
            let _ = self.poll.registry().deregister(&mut SourceFd(&fd));
        }
        slot.pending = false;
    }
}

/// The errno behind an I/O error, also when a backend wrapped it in an error
/// of its own (the verbs backend names the device and call).
fn os_errno(e: &io::Error) -> Option<i32> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(n) = err.downcast_ref::<io::Error>().and_then(io::Error::raw_os_error) {
            return Some(n);
        }
        cur = err.source();
    }
    None
}
