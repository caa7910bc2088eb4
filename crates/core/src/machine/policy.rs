//! The rail and device paths: attach, the observation of a port state, the
//! one activation path with its settle delay and flap damping, the pause
//! path, re-seeding and device loss.
//!
//! Every side effect (an action for the driver, a notification) follows a
//! `Changed` outcome of the rail's CAS transition; `AlreadyThere` and
//! `Refused` do nothing, so a double activation is a no-op.

use super::{Action, Attach, Cause, Errno, Happening, Log, Machine, RecoveredBy, Settle};
use crate::decide::decide_reseed;
use crate::event::EventKind;
use crate::port::{LinkAttrs, LinkRate, PortState};
use crate::rail::{Outcome, PauseReason, RailState};
use crate::time::Millis;

impl Machine {
    // ---- attach ---------------------------------------------------------

    /// Queries every port of a freshly (re)opened device.
    pub(super) fn begin_attach(&mut self, idx: usize, now: Millis) {
        let rails = self.devices[idx].rails();
        // A device has at most a few hundred ports (they are numbered by a u8).
        let left = u32::try_from(rails.len()).unwrap_or(u32::MAX);
        self.devices[idx].attach = Some(Attach { left });
        for ri in rails {
            self.rails[ri].attach_answer = None;
            self.query(ri);
        }
        if self.devices[idx].rails().is_empty() {
            self.finish_attach(idx, now);
        } else {
            // Answers that never come are asked for again by the tick.
            self.watch(idx);
            self.arm_tick(now);
        }
    }

    pub(super) fn attach_answer(&mut self, idx: usize, ri: usize, answer: Result<PortState, Errno>, now: Millis) {
        if self.rails[ri].attach_answer.is_some() {
            return self.stray();
        }
        match answer {
            Ok(state) => {
                self.rails[ri].attach_answer = Some(state);
                // The flap counters' baseline.
                self.read_counters(ri);
                let Some(att) = self.devices[idx].attach.as_mut() else { return };
                att.left = att.left.saturating_sub(1);
                if att.left == 0 {
                    self.finish_attach(idx, now);
                }
            }
            Err(errno) => {
                // Nothing was attached yet: no rail is ever active on a
                // device that could not be queried.
                self.push(Action::Log(Log::QueryFailed { rail: self.rails[ri].id, errno }));
                self.device_gone(idx, PauseReason::NotOpened, now);
            }
        }
    }

    /// Every port answered: attach the rails, active or paused by their port
    /// state, generation bumped, bandwidth (re-)seeded. A re-attach goes
    /// through flap damping and the settle delay like any activation.
    fn finish_attach(&mut self, idx: usize, now: Millis) {
        let reattach = self.devices[idx].attached_before;
        self.devices[idx].attach = None;
        self.devices[idx].attached_before = true;
        if reattach {
            self.devices[idx].stats.reopens += 1;
        }
        for ri in self.devices[idx].rails() {
            let Some(state) = self.rails[ri].attach_answer.take() else { continue };
            let unusable = self.unusable(ri, state);
            let rail = &mut self.rails[ri];
            rail.port_up = unusable.is_none();
            rail.must_seed = true;
            let needs_address = self.config.require_address != crate::AddressRequirement::None;
            let held = match (unusable.is_none(), reattach) {
                // Not usable, by the witness in force (the port, or the
                // carrier): paused for its reason, held by nothing.
                (false, _) => unusable,
                (true, true) if self.suppressed(ri, now) => Some(PauseReason::Damped),
                (true, true) if self.config.settle_ms > 0 => Some(PauseReason::Settling),
                // The address is read below; its answer activates the rail
                // (through the settle delay, if one is set).
                (true, _) if needs_address => Some(PauseReason::NoAddress),
                _ => None,
            };
            let rail = &mut self.rails[ri];
            let outcome = match held {
                Some(reason) => rail.cell.attach_paused(state, reason, now),
                // Usable by the witness: active, whatever the port reads
                // (`port_witness = "carrier"`).
                None => rail.cell.attach_active(state, now),
            };
            if outcome != Outcome::Changed {
                continue;
            }
            let w = rail.cell.load();
            let cause = match w.state {
                RailState::Active => Cause::By(RecoveredBy::Attach),
                _ => Cause::Reason(w.reason),
            };
            self.transition(ri, RailState::Inert, cause, now);
            match held {
                Some(PauseReason::Damped) => self.hold_damped(ri, now),
                Some(PauseReason::NoAddress) => self.rails[ri].wants_address = Some(RecoveredBy::Attach),
                Some(PauseReason::Settling) => self.start_settle(ri, RecoveredBy::Attach, now),
                Some(_) | None => {}
            }
            if w.state == RailState::Active {
                self.rails[ri].recovered_by = Some(RecoveredBy::Attach);
                self.rails[ri].activating = true;
            } else {
                self.rails[ri].explained_at = Some(now);
                self.watch(idx);
                self.arm_tick(now);
            }
            self.read_link(ri);
            // A new baseline: a re-attach bumped the generation already.
            self.rails[ri].address = None;
            self.read_address(ri);
        }
        self.push(Action::Log(Log::Attached { device: idx as u32 }));
        // The tick armed for this attach's answers is not needed any more:
        // drop it, so the next need starts a full period.
        self.disarm_tick_if_idle();
    }

    // ---- observing a port ---------------------------------------------

    /// A fresh reading of rail `ri`'s port, whoever asked for it.
    pub(super) fn observe(&mut self, ri: usize, state: PortState, now: Millis) {
        let by = self.rails[ri].wake_by.take().unwrap_or(RecoveredBy::Poll);
        let word = self.rails[ri].cell.load();
        if word.state == RailState::Inert {
            return;
        }
        self.rails[ri].cell.observe_port(state);
        match (word.state, self.unusable(ri, state)) {
            (RailState::Active, None) => self.rails[ri].port_up = true,
            // The PORT_ERR was lost (or the fd is not read), or the
            // carrier went: pause.
            (RailState::Active, Some(reason)) => self.pause_rail(ri, reason, now),
            (_, None) => {
                self.rails[ri].port_up = true;
                self.request_activation(ri, by, now);
            }
            (_, Some(reason)) => self.went_down_while_paused(ri, word.reason, reason, now),
        }
    }

    /// The carrier of rail `ri`'s netdev went (`handle_carrier`): as a
    /// reading of the port, by the port state last read, that keeps an
    /// event's pending query its own.
    pub(super) fn lose_carrier(&mut self, ri: usize, now: Millis) {
        let word = self.rails[ri].cell.load();
        let Some(state) = word.last_port_state else { return };
        match (word.state, self.unusable(ri, state)) {
            (RailState::Inert, _) | (_, None) => {}
            (RailState::Active, Some(reason)) => self.pause_rail(ri, reason, now),
            (_, Some(reason)) => self.went_down_while_paused(ri, word.reason, reason, now),
        }
    }

    /// A paused rail's port (or carrier) is not usable: a flap if it was
    /// up while held or settling, and a settle in progress is cancelled.
    fn went_down_while_paused(&mut self, ri: usize, was: PauseReason, reason: PauseReason, now: Millis) {
        self.rails[ri].down_since_counters = true;
        self.flap_if_up(ri, now);
        self.rails[ri].clear_damped();
        if self.rails[ri].take_settle().is_some() {
            self.push(Action::Log(Log::SettleCancelled { rail: self.rails[ri].id }));
        }
        if was.is_hold() {
            self.set_reason(ri, reason, now);
        }
        self.explain(ri, now);
    }

    /// Why rail `ri`'s port reading `state` is not usable, by the
    /// witness in force and the carrier last known; `None` when it is.
    pub(super) fn unusable(&self, ri: usize, state: PortState) -> Option<PauseReason> {
        self.config.port_witness.judge(state, self.rails[ri].carrier)
    }

    /// The port reads ACTIVE: activate, unless the data-path breaker or
    /// flap damping holds the rail, a settle delay must pass first, or the
    /// address `require_address` asks for is not there yet; a rail whose
    /// breaker tripped becomes half-open instead (only a probe closes it).
    pub(super) fn request_activation(&mut self, ri: usize, by: RecoveredBy, now: Millis) {
        if self.rails[ri].cell.load().state != RailState::Paused {
            return;
        }
        if self.breaker_holds(ri, now) {
            return self.set_reason(ri, PauseReason::DataPath, now);
        }
        if self.suppressed(ri, now) {
            self.rails[ri].take_settle();
            return self.hold_damped(ri, now);
        }
        self.rails[ri].clear_damped();
        let mut by = by;
        if self.config.settle_ms > 0 && !self.first_attach(ri, by) {
            match self.rails[ri].settle() {
                None => return self.start_settle(ri, by, now),
                Some(s) if now < s.until => return,
                Some(s) => by = s.by,
            }
        }
        if !self.address_ready(ri, by, now) {
            return;
        }
        if self.breaker_tripped(ri) {
            self.half_open(ri, now);
        } else {
            self.activate(ri, by, now);
        }
    }

    /// Whether an activation `by` is the first attach of the rail's device
    /// (one that waited for its address): the settle delay is for
    /// recoveries and re-attaches only.
    fn first_attach(&self, ri: usize, by: RecoveredBy) -> bool {
        by == RecoveredBy::Attach && self.devices[self.rails[ri].id.device as usize].stats.reopens == 0
    }

    fn suppressed(&mut self, ri: usize, now: Millis) -> bool {
        // A rail damping never charged has no penalty: not suppressed.
        match (self.config.damping, self.rails[ri].holds.as_mut()) {
            (Some(cfg), Some(holds)) => holds.penalty.suppressed(&cfg, now),
            _ => false,
        }
    }

    /// Holds a suppressed rail (reason `damped`) until its penalty decays;
    /// the release timer is always in the future.
    fn hold_damped(&mut self, ri: usize, now: Millis) {
        let Some(cfg) = self.config.damping else { return };
        let holds = self.rails[ri].holds_mut();
        let until = holds.penalty.reuse_at(&cfg).unwrap_or(now).max(now.plus(1));
        if holds.damped_until != Some(until) {
            holds.damped_until = Some(until);
            let penalty = holds.penalty.value(&cfg, now);
            self.push(Action::Log(Log::Damped { rail: self.rails[ri].id, penalty, until }));
        }
        self.set_reason(ri, PauseReason::Damped, now);
        self.watch(self.rails[ri].id.device as usize);
    }

    fn start_settle(&mut self, ri: usize, by: RecoveredBy, now: Millis) {
        let until = now.plus(self.config.settle_ms);
        self.rails[ri].holds_mut().settle = Some(Settle { until, by, confirming: false });
        self.push(Action::Log(Log::Settling { rail: self.rails[ri].id, until }));
        self.set_reason(ri, PauseReason::Settling, now);
        self.watch(self.rails[ri].id.device as usize);
    }

    /// The one activation path, for the event, the poll and the end of a
    /// hold: resume → read the link → re-seed if changed or never seeded →
    /// available last (in [`link_answer`](Self::link_answer)), so no worker
    /// scores the rail on the old rate.
    pub(super) fn activate(&mut self, ri: usize, by: RecoveredBy, now: Millis) {
        let rail = &mut self.rails[ri];
        rail.take_settle();
        rail.clear_damped();
        if rail.cell.resume(now) != Outcome::Changed {
            return;
        }
        rail.recovered_by = Some(by);
        rail.explained_at = None;
        rail.activating = true;
        rail.wants_address = None;
        self.transition(ri, RailState::Paused, Cause::By(by), now);
        if let Some(index) = self.rails[ri].gid_index.filter(|_| self.rails[ri].address_ok) {
            let rail = self.rails[ri].id;
            self.notify(now, Happening::GidIndex { rail, index });
        }
        self.read_link(ri);
        // A GID index can move across a flap: compare (the resume bumped
        // the generation already; a change is notified).
        self.read_address(ri);
    }

    /// The answer to a link read.
    pub(super) fn link_answer(&mut self, ri: usize, answer: Result<LinkAttrs, Errno>, now: Millis) {
        let rail = &mut self.rails[ri];
        let to = match answer {
            Ok(attrs) if rail.must_seed => Some(attrs.rate()),
            Ok(attrs) => decide_reseed(attrs.rate(), rail.seeded),
            Err(errno) => {
                let id = rail.id;
                let to = rail.seeded.is_none().then_some(LinkRate::Unknown);
                self.push(Action::Log(Log::LinkUnreadable { rail: id, errno }));
                to
            }
        };
        let rail = &mut self.rails[ri];
        rail.must_seed = false;
        if let Some(to) = to {
            let from = rail.seeded.replace(to);
            let id = rail.id;
            self.push(Action::Reseed { rail: id, rate: to });
            self.notify(now, Happening::Reseed { rail: id, from, to });
        }
        let rail = &mut self.rails[ri];
        if rail.activating && rail.cell.load().state == RailState::Active {
            rail.activating = false;
            self.set_available(ri, true, now);
            self.disarm_tick_if_idle();
        }
    }

    // ---- pausing ------------------------------------------------------

    /// Pause: the state first, then unavailable. Cancels a settle or a
    /// damping hold in progress (the port is down again) and charges a flap
    /// if the port was up, also while the rail is held (RFC 2439 keeps
    /// charging a suppressed route).
    pub(super) fn pause_rail(&mut self, ri: usize, reason: PauseReason, now: Millis) {
        self.flap_if_up(ri, now);
        let rail = &mut self.rails[ri];
        rail.activating = false;
        rail.clear_damped();
        // The port went down: a counter rise next is this flap, not a
        // silent one; the address is read again before the next activation
        // (a GID index can move across a flap); failures counted so far
        // are explained by the flap.
        rail.down_since_counters = true;
        rail.address_ok = false;
        rail.clear_window();
        if rail.take_settle().is_some() {
            self.push(Action::Log(Log::SettleCancelled { rail: self.rails[ri].id }));
        }
        let word = self.rails[ri].cell.load();
        match self.rails[ri].cell.pause(reason, now) {
            Outcome::Changed => {
                self.rails[ri].explained_at = Some(now);
                self.transition(ri, RailState::Active, Cause::Reason(reason), now);
                self.set_available(ri, false, now);
            }
            // Already paused: the first reason is kept, except a hold's.
            Outcome::AlreadyThere if word.reason.is_hold() => self.set_reason(ri, reason, now),
            Outcome::AlreadyThere => {}
            Outcome::Refused { .. } => return,
        }
        self.watch(self.rails[ri].id.device as usize);
        self.arm_tick(now);
    }

    pub(super) fn flap_if_up(&mut self, ri: usize, now: Millis) {
        let rail = &mut self.rails[ri];
        if !std::mem::replace(&mut rail.port_up, false) {
            return;
        }
        if let Some(cfg) = self.config.damping {
            rail.holds_mut().penalty.flap(&cfg, now);
        }
    }

    /// Says, at a low rate, why a rail is still paused.
    fn explain(&mut self, ri: usize, now: Millis) {
        let rail = &mut self.rails[ri];
        if rail.explained_at.is_some_and(|t| now.since(t) < self.config.explain_every_ms) {
            return;
        }
        rail.explained_at = Some(now);
        let w = rail.cell.load();
        let log =
            Log::StillPaused { rail: rail.id, reason: w.reason, since: rail.cell.since(), port: w.last_port_state };
        self.push(Action::Log(log));
    }

    // ---- other transitions ----------------------------------------------

    pub(super) fn transition(&mut self, ri: usize, from: RailState, cause: Cause, now: Millis) {
        let rail = &self.rails[ri];
        let w = rail.cell.load();
        let what = Happening::Transition { rail: rail.id, from, to: w.state, cause, generation: w.generation };
        self.notify(now, what);
    }

    pub(super) fn set_available(&mut self, ri: usize, available: bool, now: Millis) {
        let rail = &mut self.rails[ri];
        if rail.available == available {
            return;
        }
        rail.available = available;
        let id = rail.id;
        self.push(Action::SetAvailable { rail: id, available });
        self.notify(now, Happening::Available { rail: id, available });
    }

    /// Changes why a paused rail is paused, and says so; a probe out is
    /// lost when the rail stops probing for another reason.
    pub(super) fn set_reason(&mut self, ri: usize, reason: PauseReason, now: Millis) {
        if reason != PauseReason::Probing {
            self.probe_lost(ri, true, now);
        }
        if self.rails[ri].cell.set_reason(reason) == Outcome::Changed {
            self.transition(ri, RailState::Paused, Cause::Reason(reason), now);
        }
    }

    /// A CQ_ERR restart or an address change: generation bump, state kept.
    pub(super) fn bump(&mut self, ri: usize, kind: EventKind, now: Millis) {
        if self.rails[ri].cell.bump_generation() != Outcome::Changed {
            return;
        }
        let state = self.rails[ri].cell.load().state;
        self.transition(ri, state, Cause::Bump(kind), now);
    }
}
