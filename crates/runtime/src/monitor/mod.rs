//! The monitor: the driver of core's [`Machine`]. One mio `Poll` for every
//! device, the drain on each wake-up, the clock, and carrying out the
//! machine's actions. No rail or device policy lives here: every decision
//! is the machine's.

use std::borrow::Cow;
use std::fmt;
use std::io;
use std::time::Duration;

use crossbeam_channel::Receiver;
use mio::{Events, Poll, Token};
use railwatch_core::{
    AsyncEvent, Clock, ConfigError, DeviceMode, Errno, Gate, Handled, Input, Machine, Millis, Notification,
    PortAddress, RailId, RailIdentity, Selector, TransferReport, VerbsPort,
};

use crate::config::Config;
use crate::device::{DeviceCounters, DeviceSlot};
use crate::notify::Notifier;
use crate::observe::{Observed, Observer};
use crate::snapshot::{DeviceSnapshot, RailSnapshot, Snapshot};

mod actions;
mod hotplug;
mod log_line;
pub use log_line::log_text;
mod service;

use hotplug::{CARRIERS, HOTPLUG, Hotplug};

/// The token of the waker that stops or wakes a spawned monitor.
pub(crate) const WAKER: Token = Token(usize::MAX);

/// Why a monitor could not be made.
#[derive(Debug)]
pub enum NewMonitorError {
    /// A setting is refused (it names the key).
    Config(ConfigError),
    /// The poll set could not be created.
    Io(io::Error),
}

impl fmt::Display for NewMonitorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NewMonitorError::Config(e) => write!(f, "invalid setting: {e}"),
            NewMonitorError::Io(e) => write!(f, "cannot create the poll set: {e}"),
        }
    }
}

impl std::error::Error for NewMonitorError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            NewMonitorError::Config(e) => Some(e),
            NewMonitorError::Io(e) => Some(e),
        }
    }
}

impl From<ConfigError> for NewMonitorError {
    fn from(e: ConfigError) -> Self {
        NewMonitorError::Config(e)
    }
}

impl From<io::Error> for NewMonitorError {
    fn from(e: io::Error) -> Self {
        NewMonitorError::Io(e)
    }
}

/// For callers in `io::Result` code: a refused setting is `InvalidInput`.
impl From<NewMonitorError> for io::Error {
    fn from(e: NewMonitorError) -> Self {
        match e {
            NewMonitorError::Config(e) => io::Error::new(io::ErrorKind::InvalidInput, e),
            NewMonitorError::Io(e) => e,
        }
    }
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
    hotplug: Option<Hotplug<P>>,
    /// Each rail's address as last read (for snapshots).
    addresses: std::collections::HashMap<RailId, PortAddress>,
    /// Each rail's identity as read at its device's last attach or
    /// re-open (for snapshots; kept after the device leaves).
    identities: std::collections::HashMap<RailId, RailIdentity>,
    /// Sees every input fed to the machine (a recorder), if set.
    observer: Option<Observer>,
    /// Rails whose word an observer was told reads `probing` (a worker
    /// took the half-open breaker's probe), until it no longer does.
    probes_out: Vec<RailId>,
    /// Handed a snapshot when a rail changed state, before the wake-up's
    /// next read of a device (see [`on_transition`](Self::on_transition)).
    on_transition: Option<OnTransition>,
    /// A rail changed state or availability since `on_transition` was
    /// last called.
    transitioned: bool,
}

/// What [`Monitor::on_transition`] calls.
pub type OnTransition = Box<dyn FnMut(&Snapshot) + Send>;

/// The errno a failed read gives the machine: the OS's, found through a
/// backend's error; `EOPNOTSUPP` for a backend that cannot read it at
/// all, `ENOENT` for one with nothing there to read; else unknown.
pub fn errno_of(e: &io::Error) -> Errno {
    match os_errno(e) {
        Some(errno) => Errno(errno),
        // A backend that cannot read addresses says so without an errno.
        None if e.kind() == io::ErrorKind::Unsupported => Errno::EOPNOTSUPP,
        // Nothing there to read (a driver with no flap counters in sysfs).
        None if e.kind() == io::ErrorKind::NotFound => Errno(libc::ENOENT),
        None => Errno::UNKNOWN,
    }
}

impl<P: VerbsPort, S: Selector, C: Clock> Monitor<P, S, C> {
    /// A monitor with no devices yet. A config that does not validate is
    /// refused, naming the setting ([`NewMonitorError::Config`]).
    pub fn new(config: Config, selector: S, clock: C) -> Result<Self, NewMonitorError> {
        config.validate_for_monitor()?;
        let machine = Machine::new(config.machine_seeded())?;
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
            hotplug: None,
            addresses: std::collections::HashMap::new(),
            identities: std::collections::HashMap::new(),
            observer: None,
            probes_out: Vec::new(),
            on_transition: None,
            transitioned: false,
            config,
        })
    }

    /// Takes ownership of an opened device: registers its async fd
    /// (edge-triggered), creates one rail per port and attaches each, active
    /// or paused by its port state, with its bandwidth seeded. Returns the
    /// device's index (the `device` of its [`RailId`]s), or `None` when the
    /// machine holds [`MAX_DEVICES`](railwatch_core::MAX_DEVICES) devices
    /// already and this name is new (the device is closed, and logged).
    pub fn add_device(&mut self, port: P) -> Option<u32> {
        let now = self.clock.now();
        let ports = port.ports();
        // The slot first: the machine's first actions are for it. A name
        // that left the host and came back takes its old slot (its rails
        // keep their ids, or new ones with new ports).
        let name = port.name().to_string();
        match self.machine.removed_index(&name) {
            Some(idx) => self.devices[idx] = DeviceSlot::new(port),
            None if self.machine.devices().len() >= railwatch_core::MAX_DEVICES => {
                log::error!("{name}: not watched: the monitor holds {} devices already", railwatch_core::MAX_DEVICES);
                return None;
            }
            None => {
                // Devices the list named but that never opened have
                // indexes too: the new one goes after them.
                let idx = self.machine.devices().len();
                self.devices.resize_with(idx, DeviceSlot::empty);
                self.devices.push(DeviceSlot::new(port));
            }
        }
        let Handled::Added(idx) =
            self.feed(now, Input::AddDevice { name: Cow::Borrowed(&name), ports: Cow::Borrowed(&ports) })
        else {
            unreachable!("an added device is answered Added")
        };
        let idx = idx?;
        self.read_identity(idx);
        self.observe(now, Observed::Attached { device: idx, name: &name, ports: &ports });
        self.carry_out(now);
        Some(idx)
    }

    /// The engine's transfer outcomes on `rail` since its last report (see
    /// [`Machine::handle_transfers`]): failures against the local path
    /// through enough distinct peers open the data-path breaker.
    pub fn report_transfers(&mut self, rail: RailId, reports: &[TransferReport]) {
        let now = self.clock.now();
        self.feed(now, Input::Transfers { device: rail.device, port: rail.port, reports: Cow::Borrowed(reports) });
        self.carry_out(now);
    }

    /// The outcome of the probe `rail`'s gate granted
    /// ([`Gate::probe`](railwatch_core::Gate::probe), see
    /// [`Machine::handle_probe`]): success closes the data-path breaker,
    /// failure opens it again with the next backoff.
    pub fn report_probe(&mut self, rail: RailId, succeeded: bool) {
        let now = self.clock.now();
        if self.observer.is_some() {
            // The probe reported was taken: an observer learns it first.
            self.observe_probes_taken(now);
        }
        self.feed(now, Input::Probe { device: rail.device, port: rail.port, succeeded });
        self.carry_out(now);
    }

    /// Device `device` left the host (the device list or a uevent says so):
    /// the machine closes it at once and its rails go inert. Adding a device
    /// of the same name later attaches it again under the same index.
    pub fn remove_device(&mut self, device: u32) {
        let now = self.clock.now();
        self.feed(now, Input::Removed { device });
        self.carry_out(now);
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

    /// The backend of device `device` (`None` for a device the device list
    /// named that never opened).
    pub fn device(&self, device: u32) -> Option<&P> {
        self.devices.get(device as usize).and_then(|d| d.port.as_ref())
    }

    /// The address of `rail` as last read (after attach, activation and
    /// LID/GID changes), if the backend reads addresses.
    pub fn address(&self, rail: RailId) -> Option<&PortAddress> {
        self.addresses.get(&rail)
    }

    /// The identity of `rail` (node GUID, port GUID, PCI address) as read
    /// at its device's last attach or re-open, if the backend reads it.
    pub fn identity(&self, rail: RailId) -> Option<&RailIdentity> {
        self.identities.get(&rail)
    }

    /// Reads the identity of every port of device `device` (at an attach
    /// or re-open: not a machine input, so not observed). A port whose
    /// read fails keeps no identity.
    pub(crate) fn read_identity(&mut self, device: u32) {
        let Some(port) = self.devices.get_mut(device as usize).and_then(|slot| slot.port.as_mut()) else { return };
        for number in port.ports() {
            let rail = RailId { device, port: number };
            match port.identity(number) {
                Ok(identity) => self.identities.insert(rail, identity),
                Err(_) => self.identities.remove(&rail),
            };
        }
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

    /// Hands `publish` a snapshot as soon as a rail has changed state or
    /// availability within a wake-up, before the reads that follow (a
    /// port query, the link, counters, an address, the carriers; slow on
    /// some hosts), so a reader of the state hears the transition when the
    /// gate does, not at the end of the loop's turn: after the devices'
    /// drains at the latest, and before a read that follows a change.
    /// Nothing in a wake-up without a change. Replaces an earlier one.
    pub fn on_transition(&mut self, publish: OnTransition) {
        self.on_transition = Some(publish);
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
        let rescan = self.next_rescan();
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
        self.notifier.hold();
        if self.observer.is_some() {
            let now = self.clock.now();
            self.observe(now, Observed::Woke);
        }

        let mut ready = std::mem::take(&mut self.ready);
        ready.clear();
        let (mut list_changed, mut carriers_changed) = (false, false);
        for ev in self.events.iter() {
            if ev.token() == HOTPLUG {
                list_changed = true;
                continue;
            }
            if ev.token() == CARRIERS {
                carriers_changed = true;
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
        // The drains' transitions out before the carriers' reads.
        if self.transitioned {
            self.tell_transition();
        }
        // Carrier changes are read as the devices' events are, before the
        // timers (a tick due now must not find a returned carrier first).
        if carriers_changed {
            self.follow_carriers(now);
        }
        if self.observer.is_some() && self.machine.poll_timeout().is_some_and(|due| due <= now) {
            self.observe(now, Observed::Timers);
            self.observe_probes_taken(now);
        }
        self.feed(now, Input::Timeout);
        self.carry_out(now);
        self.follow_device_list(list_changed, now);
        if self.observer.is_some() {
            self.observe(now, Observed::Done);
        }
        self.notifier.release();
        self.transitioned = false;
        Ok(())
    }

    /// A copy of every rail and counter.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            t: self.clock.now(),
            rails: self.machine.rails().map(|r| self.rail_snapshot_of(r)).collect(),
            devices: self
                .machine
                .devices()
                .map(|d| DeviceSnapshot {
                    name: d.name.to_string(),
                    mode: d.mode,
                    counters: DeviceCounters::new(
                        d.stats,
                        self.devices.get(d.index as usize).map(|slot| slot.io).unwrap_or_default(),
                    ),
                })
                .collect(),
            wakeups: self.wakeups,
            ticks: self.machine.ticks(),
            notifications_dropped: self.notifier.dropped,
        }
    }

    /// The rail called `name` as [`snapshot`](Self::snapshot) would copy
    /// it ([`Snapshot::rail`]: the first of that name), without copying
    /// the others.
    pub fn rail_snapshot(&self, name: &str) -> Option<RailSnapshot> {
        self.machine.rail_named(name).map(|r| self.rail_snapshot_of(r))
    }

    fn rail_snapshot_of(&self, r: railwatch_core::RailView<'_>) -> RailSnapshot {
        RailSnapshot {
            id: r.id,
            name: r.name.to_string(),
            state: r.word.state,
            reason: r.word.reason,
            since: r.since,
            last_port_state: r.word.last_port_state,
            carrier: r.carrier,
            generation: r.word.generation,
            available: r.available,
            rate: r.rate,
            recovered_by: r.recovered_by,
            address: self.addresses.get(&r.id).cloned(),
            identity: self.identities.get(&r.id).cloned(),
            breaker_until: r.breaker_until,
            gid_index: r.gid_index,
            counters: r.counters,
            evidence: r.evidence,
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
