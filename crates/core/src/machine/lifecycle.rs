//! The device lifecycle: devices that appear (the host's device list), are
//! opened (with a retry while they will not open), leave (closed at once,
//! rails inert), go away (DEVICE_FATAL, a hang-up, a failing query: closed
//! and re-opened with backoff) and come back.
//!
//! The driver only reports what its device source saw
//! ([`Machine::handle_device_list`]) and carries out [`Action::Open`],
//! [`Action::Reopen`] and [`Action::Close`]; every decision and every retry
//! deadline is here, so an engine that keeps its own loop gets hotplug from
//! the same code as the runtime's monitor.

use super::{Action, Device, DeviceMode, DeviceStats, Errno, Log, Machine, Rail, WorkScope};
use crate::counters::CountersBaseline;
use crate::device_name::device_name_problem;
use crate::owner::DeviceOwner;
use crate::ports::RailId;
use crate::rail::{Outcome, PauseReason, RailCell, RailState};
use crate::sync::Arc;
use crate::time::Millis;

/// Why [`Machine::add_device_at`] refused a slot.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SlotError {
    /// The slot holds this device.
    #[error("the slot holds device {0}")]
    Taken(String),
    /// The name left the host under this index: it comes back there.
    #[error("the device left the host from slot {0}: add it there")]
    NameElsewhere(u32),
    /// The slot is at or past [`MAX_DEVICES`], or the machine holds that
    /// many devices already.
    #[error("the machine holds at most {MAX_DEVICES} devices (removed ones and empty slots included)")]
    Full,
}

/// Most devices one machine holds, removed ones and empty slots included:
/// a device keeps its index for the machine's life, so names that come and
/// go must not grow it without bound. Past it, a new name is refused
/// ([`Machine::add_device`]) or skipped as stray input (the device list).
pub const MAX_DEVICES: usize = 4096;

/// What a device list changed, by device index.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListChange {
    /// Devices that appeared: each is asked to be opened ([`Action::Open`]).
    pub appeared: Vec<u32>,
    /// Devices that left: closed (when open), their rails inert.
    pub left: Vec<u32>,
}

impl Machine {
    /// Adds a device the driver opened itself, with these ports: asks to
    /// start reading its fd and to query every port; its rails attach
    /// together once every query is answered. A name that left the host
    /// comes back under its old index, whatever its ports now: the rail of
    /// a port it had keeps its id and its gates, and the attach gives it a
    /// new generation (a re-attach); a new port gets a new rail; the rail
    /// of a port it no longer has stays inert, listed by
    /// [`rails`](Self::rails) but no longer the device's (inputs naming
    /// that port are stray, [`rail`](Self::rail) and
    /// [`gate`](Self::gate) find nothing; gates taken before read it
    /// inert). Returns the device's index, or `None` when
    /// the machine already holds [`MAX_DEVICES`] devices (removed ones and
    /// empty slots included) and this is a new name.
    pub fn add_device(&mut self, name: &str, ports: &[u8], now: Millis) -> Option<u32> {
        let now = self.at(now);
        let idx = match self.removed_index(name) {
            Some(idx) => idx,
            None if self.devices.len() >= MAX_DEVICES => return None,
            None => self.new_device(name, now),
        };
        self.set_ports(idx, ports, now);
        self.open_succeeded(idx, now);
        Some(idx as u32)
    }

    /// Adds a device, as [`add_device`](Self::add_device), at the index
    /// `slot` the driver chose (an engine that keeps one slot per NIC):
    /// the slots below it that no device took yet are left empty (no name,
    /// no rails, never opened or asked about) until one is added there. An
    /// empty slot, or one past the last, is taken, and a device that left
    /// comes back at its own (same name, whatever its ports now); a slot
    /// another device holds, a name that left the host under another
    /// index, or a slot at or past [`MAX_DEVICES`] is an error.
    pub fn add_device_at(&mut self, slot: u32, name: &str, ports: &[u8], now: Millis) -> Result<u32, SlotError> {
        let idx = slot as usize;
        match self.removed_index(name) {
            Some(at) if at == idx => return self.add_device(name, ports, now).ok_or(SlotError::Full),
            Some(at) => return Err(SlotError::NameElsewhere(at as u32)),
            None => {}
        }
        if let Some(d) = self.devices.get(idx).filter(|d| !d.is_empty_slot()) {
            return Err(SlotError::Taken(d.name.to_string()));
        }
        if idx >= MAX_DEVICES {
            return Err(SlotError::Full);
        }
        let now = self.at(now);
        while self.devices.len() <= idx {
            let empty = self.new_device("", now);
            self.devices[empty].mode = DeviceMode::Removed;
        }
        self.devices[idx].name = Box::from(name);
        self.set_ports(idx, ports, now);
        self.open_succeeded(idx, now);
        Ok(slot)
    }

    /// The index of the removed device called `name`, if there is one (a
    /// name is at one index: a device that comes back is at its old one).
    pub fn removed_index(&self, name: &str) -> Option<usize> {
        self.devices.iter().position(|d| d.mode == DeviceMode::Removed && !d.is_empty_slot() && *d.name == *name)
    }

    fn has_ports(&self, d: &Device, ports: &[u8]) -> bool {
        d.rails().len() == ports.len() && self.rails[d.rails()].iter().zip(ports).all(|(r, &p)| r.id.port == p)
    }

    /// The host's device list as the driver's device source read it now (at
    /// start, after a uevent, on a rescan). Devices not in it any more leave
    /// ([`handle_removed`](Self::handle_removed)); names new to it appear
    /// and are asked to be opened ([`Action::Open`], answered with
    /// [`handle_opened`](Self::handle_opened)); a name that left and came
    /// back takes its old index. Names that cannot be a device's (empty,
    /// too long, with a `/` or a control character), and new names once the
    /// machine holds [`MAX_DEVICES`] devices, are counted as stray and
    /// skipped; a name listed twice counts once.
    pub fn handle_device_list<'n>(&mut self, names: impl IntoIterator<Item = &'n str>, now: Millis) -> ListChange {
        let now = self.at(now);
        let mut listed: Vec<&str> = Vec::new();
        for name in names {
            if device_name_problem(name).is_some() {
                self.stray();
            } else if !listed.contains(&name) {
                listed.push(name);
            }
        }
        let mut change = ListChange::default();
        for idx in 0..self.devices.len() {
            let dev = &self.devices[idx];
            if dev.mode != DeviceMode::Removed && !listed.contains(&&*dev.name) {
                self.handle_removed(idx as u32, now);
                change.left.push(idx as u32);
            }
        }
        for name in listed {
            if self.devices.iter().any(|d| d.mode != DeviceMode::Removed && *d.name == *name) {
                continue;
            }
            let idx = match self.devices.iter().rposition(|d| *d.name == *name) {
                Some(idx) => idx,
                None if self.devices.len() >= MAX_DEVICES => {
                    self.stray();
                    continue;
                }
                None => self.new_device(name, now),
            };
            self.appear(idx, now);
            change.appeared.push(idx as u32);
        }
        change
    }

    /// The result of an [`Action::Open`]: the device's ports, or why it
    /// would not open. Opened, it is read and its rails attach (a device
    /// that was attached before goes through damping and the settle delay);
    /// refused, it is asked again after a backoff (the re-open's: doubled up
    /// to `reopen_max_ms`, jittered) while the device list still has it. A
    /// device that left before its open was answered is closed again.
    pub fn handle_opened(&mut self, device: u32, result: Result<&[u8], Errno>, now: Millis) {
        let now = self.at(now);
        let idx = device as usize;
        let Some(dev) = self.devices.get_mut(idx) else { return self.stray() };
        let awaited = std::mem::take(&mut dev.open_in_flight);
        match (dev.mode, result) {
            (_, _) if !awaited => self.stray(),
            // Opened while a re-open was due (it failed after the engine
            // added it meanwhile): the handle is the re-open's.
            (DeviceMode::Opening { .. } | DeviceMode::Gone { .. }, Ok(ports)) => {
                // The first open, or other ports than before: the rails
                // follow the ports (as `add_device`'s do).
                self.set_ports(idx, ports, now);
                self.open_succeeded(idx, now);
            }
            (DeviceMode::Opening { backoff_ms, .. }, Err(errno)) => {
                let retry_at = now.plus(self.with_jitter(backoff_ms, self.config.reopen_max_ms));
                let next = self.next_backoff(backoff_ms);
                self.devices[idx].mode = DeviceMode::Opening { next_open: retry_at, backoff_ms: next };
                self.watch(idx);
                self.push(Action::Log(Log::OpenFailed { device, errno, retry_at }));
            }
            // Opened after it left: the driver holds a handle nobody wants.
            (DeviceMode::Removed, Ok(_)) => self.push(Action::Close { device }),
            _ => self.stray(),
        }
    }

    /// Device `device` left the host (hot-unplug, or a driver that cannot
    /// disassociate its users, such as Soft-RoCE, deleting it: the fd says
    /// nothing and port queries may still answer). Its rails go inert and
    /// the device is closed at once (the kernel's removal waits for the last
    /// handle), never re-opened: only a device of the same name appearing
    /// again brings the rails back.
    pub fn handle_removed(&mut self, device: u32, now: Millis) {
        let now = self.at(now);
        let idx = device as usize;
        let Some(dev) = self.devices.get(idx) else { return self.stray() };
        if dev.mode == DeviceMode::Removed {
            return;
        }
        let was_open = !dev.mode.is_closed();
        // An engine's device taken out of use was never closed: it is now.
        let held = was_open
            || (self.config.device_owner == DeviceOwner::Engine && matches!(dev.mode, DeviceMode::Gone { .. }));
        self.detach_all(idx, PauseReason::DeviceRemoved, now);
        if was_open {
            self.push(Action::StopReading { device });
        }
        if held {
            self.push(Action::Close { device });
        }
        let dev = &mut self.devices[idx];
        dev.mode = DeviceMode::Removed;
        // (An open in flight may still be answered: the handle it opens is
        // then closed again.)
        dev.reopen_in_flight = false;
        dev.attach = None;
        self.push(Action::Log(Log::Removed { device }));
    }

    /// The result of a [`Action::Reopen`] (or, for a device the engine
    /// owns, of an [`Action::Revalidate`]). On success the device is read
    /// again and its rails re-attached (through damping and the settle
    /// delay); on failure the next attempt waits twice as long.
    pub fn handle_reopen(&mut self, device: u32, result: Result<(), Errno>, now: Millis) {
        let now = self.at(now);
        let idx = device as usize;
        let Some(dev) = self.devices.get_mut(idx) else { return self.stray() };
        let DeviceMode::Gone { backoff_ms, .. } = dev.mode else { return self.stray() };
        if !dev.reopen_in_flight {
            return self.stray();
        }
        dev.reopen_in_flight = false;
        match result {
            Ok(()) => {
                dev.mode = DeviceMode::Events;
                self.push(Action::StartReading { device });
                self.begin_attach(idx, now);
            }
            Err(errno) => {
                let retry_at = self.schedule_reopen(idx, self.next_backoff(backoff_ms), now);
                self.push(Action::Log(Log::ReopenFailed { device, errno: Some(errno), retry_at }));
            }
        }
    }

    // ---- inside -------------------------------------------------------------

    /// A device with no rails yet, never opened.
    fn new_device(&mut self, name: &str, now: Millis) -> usize {
        let first = self.rails.len();
        let mut device = Device {
            name: Box::from(name),
            rail_range: 0..0,
            mode: DeviceMode::Opening { next_open: now, backoff_ms: 0 },
            reopen_in_flight: false,
            open_in_flight: false,
            backoff_ms: 0,
            attach: None,
            attached_before: false,
            had_rails: false,
            reads_addresses: true,
            stats: DeviceStats::default(),
            warned: Vec::new(),
            query_failures: 0,
            query_retry_at: Millis::ZERO,
        };
        device.set_rails(first..first);
        self.devices.push(device);
        self.devices.len() - 1
    }

    /// Device `idx`'s rails become one per port of `ports`, at the end of
    /// the rail list, unless it has exactly these already. The rail of a
    /// port it ever had is moved there whole (its id, its cell: gates
    /// taken before follow it, and its attach bumps the generation as any
    /// re-attach does), leaving a hidden placeholder where it was; a new
    /// port gets a new inert rail; the rail of a port it no longer has
    /// stays where it is, inert, outside the device's rails (and is moved
    /// back if the port comes back).
    fn set_ports(&mut self, idx: usize, ports: &[u8], now: Millis) {
        if self.has_ports(&self.devices[idx], ports) {
            return;
        }
        let first = self.rails.len();
        let name = self.devices[idx].name.clone();
        let had_rails = std::mem::replace(&mut self.devices[idx].had_rails, true);
        for &port in ports {
            let id = RailId { device: idx as u32, port };
            // Rails are only ever appended: a rail of this id outside a
            // placeholder is the port's (in the device's rails or left out).
            // A device never given rails has none to look for.
            let old = had_rails.then(|| self.rails[..first].iter().rposition(|r| r.id == id && !r.name.is_empty()));
            let rail = match old.flatten() {
                Some(ri) => {
                    self.moved_rails += 1;
                    std::mem::replace(&mut self.rails[ri], Rail::new(id, Box::from(""), now))
                }
                None => Rail::new(id, format!("{name}/{port}").into_boxed_str(), now),
            };
            self.rails.push(rail);
        }
        self.devices[idx].set_rails(first..self.rails.len());
    }

    /// Device `idx` is open: read it and attach its rails.
    fn open_succeeded(&mut self, idx: usize, now: Millis) {
        let dev = &mut self.devices[idx];
        dev.mode = DeviceMode::Events;
        dev.reopen_in_flight = false;
        dev.warned.clear();
        dev.reads_addresses = true;
        if let Some(audit) = self.config.audit_ms {
            self.next_audit.get_or_insert(now.plus(audit));
        }
        self.push(Action::StartReading { device: idx as u32 });
        self.begin_attach(idx, now);
    }

    /// Device `idx` appeared in the device list: asks for it to be opened
    /// now; a failure is retried after `reopen_initial_ms`, then doubling.
    fn appear(&mut self, idx: usize, now: Millis) {
        let backoff_ms = self.config.reopen_initial_ms.max(1);
        self.ask_open(idx, backoff_ms, now);
    }

    /// Asks for an [`Action::Open`] of device `idx` now; asked again after
    /// `backoff_ms` if no answer comes.
    pub(super) fn ask_open(&mut self, idx: usize, backoff_ms: u64, now: Millis) {
        let dev = &mut self.devices[idx];
        dev.mode = DeviceMode::Opening { next_open: now.plus(backoff_ms), backoff_ms };
        dev.backoff_ms = backoff_ms;
        dev.open_in_flight = true;
        self.watch(idx);
        self.push(Action::Open { device: idx as u32 });
    }

    /// A port query of rail `ri` failed: the device is gone, unless the
    /// queries of fewer than `query_retries` ticks failed in a row before;
    /// then its ports are asked again at the next tick, their states kept
    /// (failures before that tick, such as the audit's beside it, count
    /// once).
    pub(super) fn query_failed(&mut self, ri: usize, errno: Errno, now: Millis) {
        let idx = self.rails[ri].id.device as usize;
        self.push(Action::Log(Log::QueryFailed { rail: self.rails[ri].id, errno }));
        let dev = &self.devices[idx];
        if dev.query_failures > 0 && now < dev.query_retry_at {
            return;
        }
        if u64::from(dev.query_failures) < self.config.query_retries {
            self.devices[idx].query_failures += 1;
            self.watch(idx);
            self.arm_tick(now);
            self.devices[idx].query_retry_at = self.next_tick.unwrap_or(now);
            return;
        }
        self.devices[idx].query_failures = 0;
        self.device_gone(idx, PauseReason::DeviceRemoved, now);
    }

    /// Every rail of the device goes inert and unavailable; the device is
    /// closed and re-opened later with backoff (longer if it was a
    /// re-attach that failed).
    pub(super) fn device_gone(&mut self, idx: usize, reason: PauseReason, now: Millis) {
        let failed_reattach = self.devices[idx].attach.is_some() && self.devices[idx].attached_before;
        self.devices[idx].attach = None;
        self.detach_all(idx, reason, now);
        let device = idx as u32;
        self.push(Action::StopReading { device });
        if self.config.device_owner == DeviceOwner::Railwatch {
            self.push(Action::Close { device });
        }
        let backoff = if failed_reattach {
            self.next_backoff(self.devices[idx].backoff_ms)
        } else {
            self.config.reopen_initial_ms.max(1)
        };
        let retry_at = self.schedule_reopen(idx, backoff, now);
        if failed_reattach {
            self.push(Action::Log(Log::ReopenFailed { device, errno: None, retry_at }));
        } else {
            self.push(Action::Log(Log::DeviceGone { device, reason, retry_at }));
        }
    }

    /// Every rail of the device goes inert and unavailable (the state first,
    /// then unavailable); timers and holds are dropped.
    pub(super) fn detach_all(&mut self, idx: usize, reason: PauseReason, now: Millis) {
        // Attached rails mean a context the engine may have posted on.
        if self.devices[idx].rails().any(|ri| self.rails[ri].cell.load().state != RailState::Inert) {
            self.work_lost(idx as u32, WorkScope::Device(reason), now);
        }
        for ri in self.devices[idx].rails() {
            self.flap_if_up(ri, now);
            let rail = &mut self.rails[ri];
            rail.attach_answer = None;
            rail.take_settle();
            rail.clear_damped();
            rail.activating = false;
            rail.wake_by = None;
            rail.address_event = None;
            // A re-attach is a new device context: what was known of the
            // old path (its failures, its breaker, its address, its
            // counters) is not about the new one.
            rail.clear_window();
            self.probe_lost(ri, false, now);
            let rail = &mut self.rails[ri];
            if rail.breaker().is_some() {
                rail.set_breaker(None);
                let id = rail.id;
                self.push(Action::Log(Log::BreakerReset { rail: id }));
            }
            let rail = &mut self.rails[ri];
            rail.address_ok = false;
            rail.wants_address = None;
            rail.counters.clear();
            let from = rail.cell.load().state;
            if rail.cell.detach(reason, now) == Outcome::Changed {
                self.transition(ri, from, super::Cause::Reason(reason), now);
                self.set_available(ri, false, now);
            }
        }
    }

    /// Twice `backoff_ms`, capped.
    pub(super) fn next_backoff(&self, backoff_ms: u64) -> u64 {
        backoff_ms.saturating_mul(2).min(self.config.reopen_max_ms).max(1)
    }

    /// Marks the device gone with a re-open due after `backoff_ms` plus
    /// jitter; returns when.
    pub(super) fn schedule_reopen(&mut self, idx: usize, backoff_ms: u64, now: Millis) -> Millis {
        let next_reopen = now.plus(self.with_jitter(backoff_ms, self.config.reopen_max_ms));
        let dev = &mut self.devices[idx];
        dev.mode = DeviceMode::Gone { next_reopen, backoff_ms };
        dev.backoff_ms = backoff_ms;
        dev.reopen_in_flight = false;
        self.watch(idx);
        next_reopen
    }
}

impl Rail {
    /// A rail that was never attached: inert, `not_opened`, generation 0.
    fn new(id: RailId, name: Box<str>, now: Millis) -> Rail {
        Rail {
            id,
            name,
            cell: Arc::new(RailCell::new(now)),
            seeded: None,
            must_seed: true,
            available: false,
            recovered_by: None,
            explained_at: None,
            port_up: false,
            carrier: None,
            wake_by: None,
            holds: None,
            activating: false,
            attach_answer: None,
            address: None,
            address_event: None,
            transfers_ok: 0,
            trouble: None,
            counters: CountersBaseline::default(),
            counters_readable: true,
            down_since_counters: false,
            address_ok: false,
            gid_index: None,
            wants_address: None,
        }
    }
}
