//! The monitor: one mio `Poll` for every device, the drain on each
//! wake-up, the recovery tick, and the one activation path.

use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::Receiver;
use log::{debug, error, info, warn};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use railwatch_core::{
    AsyncEvent, EventClass, EventKind, Gate, Millis, PauseReason, RailCell, RailDecision, RailId, Selector, VerbsPort,
    classify, decide_event,
};

use crate::clock::Clock;
use crate::config::Config;
use crate::device::{DeviceMode, DeviceSlot};
use crate::drain::{DrainEnd, drain};
use crate::notify::{Happening, Notification, Notifier, RecoveredBy};
use crate::rail::Rail;
use crate::snapshot::{DeviceSnapshot, RailSnapshot, Snapshot};

mod tick;
mod transitions;

/// Distinct unhandled codes warned about per device; past this they are
/// only counted.
const MAX_WARNED_CODES: usize = 64;

/// The token of the waker that stops a spawned monitor.
pub(crate) const WAKER: Token = Token(usize::MAX);

/// Watches devices and keeps their rails' state, the selector and the gates
/// true to the ports.
///
/// Generic over the device backend (`P`), the engine's selector (`S`) and
/// the clock (`C`); it never names a backend. Drive it with
/// [`poll_once`](Self::poll_once) from an engine's loop (or the simulator),
/// or give it a thread with [`spawn`](Self::spawn).
pub struct Monitor<P, S, C> {
    config: Config,
    poll: Poll,
    events: Events,
    devices: Vec<DeviceSlot<P>>,
    rails: Vec<Rail>,
    selector: S,
    clock: C,
    notifier: Notifier,
    /// Events of the drain in progress, reused so the hot path does not
    /// allocate.
    scratch: Vec<AsyncEvent>,
    /// Devices made ready by the last wait, reused likewise.
    ready: Vec<usize>,
    /// Devices left `pending` or `suspect` by the last wake-up: the next
    /// one looks at these, not at every device.
    busy: Vec<usize>,
    /// Devices with time-driven work (a paused rail, a timer, poll-only,
    /// gone), in index order: the tick and the timers visit these, not
    /// every device, so their cost follows the paused rails.
    watched: Vec<usize>,
    next_tick: Option<Millis>,
    /// State of the re-open jitter generator.
    rng: u64,
    wakeups: u64,
    ticks: u64,
}

impl<P: VerbsPort, S: Selector, C: Clock> Monitor<P, S, C> {
    /// A monitor with no devices yet.
    pub fn new(config: Config, selector: S, clock: C) -> io::Result<Self> {
        let notifier = Notifier::new(config.notify_capacity);
        Ok(Monitor {
            poll: Poll::new()?,
            events: Events::with_capacity(64),
            devices: Vec::new(),
            rails: Vec::new(),
            selector,
            clock,
            notifier,
            scratch: Vec::with_capacity(config.drain_budget),
            ready: Vec::new(),
            busy: Vec::new(),
            watched: Vec::new(),
            next_tick: None,
            rng: config.seed | 1,
            wakeups: 0,
            ticks: 0,
            config,
        })
    }

    /// Takes ownership of an opened device: registers its async fd
    /// (edge-triggered), creates one rail per port and attaches each, active
    /// or paused by its port state, with its bandwidth seeded. Returns the
    /// device's index (the `device` of its [`RailId`]s).
    pub fn add_device(&mut self, port: P) -> u32 {
        let idx = self.devices.len();
        let now = self.clock.now();
        let mut slot = DeviceSlot::new(port);
        for p in slot.port.ports() {
            let id = RailId { device: idx as u32, port: p };
            slot.rails.push(self.rails.len());
            self.rails.push(Rail {
                id,
                name: format!("{}/{}", slot.name, p),
                cell: Arc::new(RailCell::new(now)),
                seeded: None,
                available: false,
                recovered_by: None,
                explained_at: None,
                settle_until: None,
                settle_by: RecoveredBy::Event,
                penalty: Default::default(),
                damped_until: None,
            });
        }
        self.devices.push(slot);
        self.register(idx);
        if !self.attach_rails(idx) {
            self.device_gone(idx, PauseReason::NotOpened);
        }
        idx as u32
    }

    /// A gate for `rail`, to clone into worker threads.
    pub fn gate(&self, rail: RailId) -> Option<Gate> {
        self.rails.iter().find(|r| r.id == rail).map(|r| Gate::new(r.cell.clone()))
    }

    /// The id of the rail called `name` (`"mlx5_0/1"`).
    pub fn rail_id(&self, name: &str) -> Option<RailId> {
        self.rails.iter().find(|r| r.name == name).map(|r| r.id)
    }

    /// The name of `rail` (`"mlx5_0/1"`).
    pub fn rail_name(&self, rail: RailId) -> Option<&str> {
        self.rails.iter().find(|r| r.id == rail).map(|r| r.name.as_str())
    }

    /// Every rail's id and name, in order.
    pub fn rails(&self) -> Vec<(RailId, String)> {
        self.rails.iter().map(|r| (r.id, r.name.clone())).collect()
    }

    /// The name of device `device`.
    pub fn device_name(&self, device: u32) -> Option<&str> {
        self.devices.get(device as usize).map(|d| d.name.as_str())
    }

    /// The backend of device `device`.
    pub fn device(&self, device: u32) -> Option<&P> {
        self.devices.get(device as usize).map(|d| &d.port)
    }

    /// A receiver of the monitor's notifications (all receivers share one
    /// bounded queue).
    pub fn notifications(&self) -> Receiver<Notification> {
        self.notifier.receiver()
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
    /// wait (its drain hit the budget, or its fd reported an error).
    pub fn has_pending(&self) -> bool {
        self.busy.iter().any(|&idx| self.devices[idx].pending || self.devices[idx].suspect)
    }

    /// When the recovery tick runs next; `None` while nothing needs it.
    /// [`next_deadline`](Self::next_deadline) also counts settle and
    /// damping timers.
    pub fn next_tick(&self) -> Option<Millis> {
        self.next_tick
    }

    /// Waits for device events at most `timeout` (`None`: until something
    /// happens; a due tick or pending work shortens it), drains every ready
    /// device, services devices left pending, and runs the recovery tick if
    /// it is due.
    ///
    /// Device failures are handled inside (logged, counted, and the device
    /// falls back to polling); an error here is the poll set's own.
    pub fn poll_once(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        let now = self.clock.now();
        let mut timeout = timeout;
        if self.has_pending() {
            timeout = Some(Duration::ZERO);
        }
        if let Some(deadline) = self.next_deadline() {
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
        for ev in self.events.iter() {
            if ev.token() == WAKER {
                continue;
            }
            let idx = ev.token().0;
            let Some(slot) = self.devices.get_mut(idx) else { continue };
            if ev.is_error() || ev.is_read_closed() {
                slot.suspect = true;
            }
            ready.push(idx);
        }
        for &idx in &ready {
            self.service(idx);
        }
        self.ready = ready;
        // Only a device serviced just now or left busy by the last wake-up
        // can be pending or suspect: visit those, in index order.
        let mut busy = std::mem::take(&mut self.busy);
        busy.extend_from_slice(&self.ready);
        busy.sort_unstable();
        busy.dedup();
        for &idx in &busy {
            if self.devices[idx].pending {
                self.service(idx);
            }
            if self.devices[idx].suspect {
                self.confirm_suspect(idx);
            }
        }
        busy.retain(|&idx| self.devices[idx].pending || self.devices[idx].suspect);
        self.busy = busy;

        let now = self.clock.now();
        self.run_due(now);
        Ok(())
    }

    /// A copy of every rail and counter.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            t: self.clock.now(),
            rails: self
                .rails
                .iter()
                .map(|r| {
                    let w = r.cell.load();
                    RailSnapshot {
                        id: r.id,
                        name: r.name.clone(),
                        state: w.state,
                        reason: w.reason,
                        since: r.cell.since(),
                        last_port_state: w.last_port_state,
                        generation: w.generation,
                        available: r.available,
                        rate: r.seeded,
                        recovered_by: r.recovered_by,
                    }
                })
                .collect(),
            devices: self
                .devices
                .iter()
                .map(|d| DeviceSnapshot { name: d.name.clone(), mode: d.mode, counters: d.counters.clone() })
                .collect(),
            wakeups: self.wakeups,
            ticks: self.ticks,
            notifications_dropped: self.notifier.dropped,
        }
    }

    pub(crate) fn poll_registry(&self) -> &mio::Registry {
        self.poll.registry()
    }

    // ---- the fd -------------------------------------------------------

    fn register(&mut self, idx: usize) {
        let slot = &mut self.devices[idx];
        let fd: RawFd = slot.port.async_fd();
        match self.poll.registry().register(&mut SourceFd(&fd), Token(idx), Interest::READABLE) {
            Ok(()) => slot.mode = DeviceMode::Events,
            Err(e) => {
                error!("{}: cannot watch the async event fd ({e}); polling its ports every tick instead", slot.name);
                slot.mode = DeviceMode::PollOnly;
                self.arm_tick(idx);
            }
        }
    }

    fn deregister(&mut self, idx: usize) {
        let fd = self.devices[idx].port.async_fd();
        // The fd may already be closed or never have been registered.
        let _ = self.poll.registry().deregister(&mut SourceFd(&fd));
    }

    /// Drains device `idx` once (up to the budget) and applies what it read.
    fn service(&mut self, idx: usize) {
        if self.devices[idx].mode != DeviceMode::Events {
            self.devices[idx].pending = false;
            return;
        }
        let budget = self.config.drain_budget.max(1);
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        let report = drain(&mut self.devices[idx].port, budget, |ev| scratch.push(ev));
        {
            let c = &mut self.devices[idx].counters;
            c.gets += report.gets as u64;
            c.interrupted += report.interrupted as u64;
        }
        let now = self.clock.now();
        for ev in scratch.drain(..) {
            self.handle_event(idx, ev, now);
        }
        self.scratch = scratch;
        if self.devices[idx].mode != DeviceMode::Events {
            // An event in this batch (DEVICE_FATAL) closed the device.
            return;
        }
        let slot = &mut self.devices[idx];
        slot.drained_in_progress += report.events as u64;
        match report.end {
            DrainEnd::Budget => {
                slot.pending = true;
                slot.counters.budget_hits += 1;
            }
            DrainEnd::Empty => {
                slot.pending = false;
                let events = std::mem::take(&mut slot.drained_in_progress) as usize;
                self.notifier.send(now, Happening::Drain { device: idx as u32, events, errno: None });
            }
            DrainEnd::Failed(e) => {
                slot.pending = false;
                slot.counters.read_errors += 1;
                let events = std::mem::take(&mut slot.drained_in_progress) as usize;
                let errno = os_errno(&e);
                // Logged once: the fd leaves the poll set right here.
                error!(
                    "{}: reading async events failed after {events} event(s): {e}; no longer reading this fd, \
                     polling its ports every tick instead",
                    slot.name
                );
                if errno == Some(libc::EIO) {
                    slot.suspect = true;
                }
                self.notifier
                    .send(now, Happening::Drain { device: idx as u32, events, errno: Some(errno.unwrap_or(-1)) });
                self.fall_back_to_polling(idx);
                if self.devices[idx].suspect {
                    self.confirm_suspect(idx);
                }
            }
        }
    }

    fn fall_back_to_polling(&mut self, idx: usize) {
        self.deregister(idx);
        self.devices[idx].mode = DeviceMode::PollOnly;
        self.devices[idx].pending = false;
        self.arm_tick(idx);
    }

    /// The fd reported an error or hang-up, or a read failed with EIO: the
    /// device may be gone. A port query decides.
    fn confirm_suspect(&mut self, idx: usize) {
        self.devices[idx].suspect = false;
        if matches!(self.devices[idx].mode, DeviceMode::Gone { .. }) {
            return;
        }
        if self.devices[idx].mode == DeviceMode::Events {
            // Whatever the reads say, a hung-up fd will not wake us again.
            warn!("{}: async event fd reported an error or hang-up; polling its ports instead", self.devices[idx].name);
            self.fall_back_to_polling(idx);
        }
        let Some(&first) = self.devices[idx].rails.first() else { return };
        let port = self.rails[first].id.port;
        self.devices[idx].counters.port_queries += 1;
        match self.devices[idx].port.port_state(port) {
            Ok(_) => info!("{}: port queries still work; the device stays in poll-only mode", self.devices[idx].name),
            Err(e) => {
                error!("{}: port query failed too ({e}): the device is gone", self.devices[idx].name);
                self.device_gone(idx, PauseReason::DeviceRemoved);
            }
        }
    }

    /// Every rail of the device goes inert and unavailable; the device is
    /// closed and re-opened later with backoff.
    fn device_gone(&mut self, idx: usize, reason: PauseReason) {
        let now = self.clock.now();
        for ri in self.devices[idx].rails.clone() {
            self.detach_rail(ri, reason, now);
            // Seeded again when the device comes back.
            self.rails[ri].seeded = None;
        }
        self.deregister(idx);
        let slot = &mut self.devices[idx];
        slot.port.close();
        slot.pending = false;
        slot.suspect = false;
        // Events counted by budget-limited passes belong to the closed fd.
        slot.drained_in_progress = 0;
        let backoff_ms = self.config.reopen_initial_ms.max(1);
        let delay = self.with_jitter(backoff_ms);
        self.devices[idx].mode = DeviceMode::Gone { next_reopen: now.plus(delay), backoff_ms };
        self.watch(idx);
    }

    // ---- events -------------------------------------------------------

    fn handle_event(&mut self, idx: usize, ev: AsyncEvent, now: Millis) {
        let kind = ev.kind();
        let slot = &mut self.devices[idx];
        slot.counters.events += 1;
        match classify(kind) {
            EventClass::CountOnly => {
                slot.counters.comm_est += 1;
                debug!("{}: {kind}", slot.name);
                return;
            }
            EventClass::Unhandled => {
                slot.counters.unhandled += 1;
                // The set is capped: a device spraying distinct codes must
                // not grow the monitor's memory without bound.
                if slot.warned_codes.len() < MAX_WARNED_CODES && slot.warned_codes.insert(ev.code) {
                    warn!(
                        "{}: async event {kind} (code {}) is not acted on; counted and acknowledged \
                         (warned once per device and code)",
                        slot.name, ev.code
                    );
                    if slot.warned_codes.len() == MAX_WARNED_CODES {
                        warn!(
                            "{}: {MAX_WARNED_CODES} distinct unhandled codes; further new codes are only counted",
                            slot.name
                        );
                    }
                }
            }
            EventClass::NotifyObject => {
                let handle = match ev.element {
                    railwatch_core::Element::Object(h) => Some(h),
                    _ => None,
                };
                warn!("{}: {} on object {:?}; the engine is notified", slot.name, kind.ibv_str(), handle);
                self.notifier.send(now, Happening::ObjectError { device: idx as u32, kind, handle });
            }
            EventClass::Handled => {}
        }
        self.notifier.send(now, Happening::Event { device: idx as u32, port: ev.port_num(), kind });
        if classify(kind) != EventClass::Handled {
            return;
        }
        for ri in self.devices[idx].rails.clone() {
            let port = self.rails[ri].id.port;
            match decide_event(&ev, port, self.rails[ri].cell.load().state) {
                RailDecision::Leave => {}
                RailDecision::Pause(reason) => self.pause_rail(ri, reason, now),
                RailDecision::Activate => self.request_activation(ri, RecoveredBy::Event, now),
                RailDecision::Detach(reason) => self.detach_rail(ri, reason, now),
                RailDecision::Restart | RailDecision::AddressChanged => self.bump(ri, kind, now),
                RailDecision::RefreshLink => self.refresh_link(ri, now),
            }
        }
        if kind == EventKind::DeviceFatal {
            error!("{}: device fatal error; closing it and re-opening with backoff", self.devices[idx].name);
            self.device_gone(idx, PauseReason::DeviceFatal);
        }
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
