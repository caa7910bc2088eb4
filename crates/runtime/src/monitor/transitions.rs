//! Rail transitions and their side effects: the pause path, the one
//! activation path (with its settle delay and flap damping), re-seeding
//! and attach.
//!
//! Every side effect (selector call, notification, log line) follows a
//! `Changed` outcome of the rail's CAS transition; `AlreadyThere` and
//! `Refused` do nothing, so a double activation is a no-op.

use log::{info, warn};
use railwatch_core::{Outcome, PauseReason, PortState, RailState, Selector, VerbsPort, decide_reseed};

use super::Monitor;
use crate::clock::Clock;
use crate::notify::{Cause, Happening, RecoveredBy};
use railwatch_core::{EventKind, Millis};

impl<P: VerbsPort, S: Selector, C: Clock> Monitor<P, S, C> {
    pub(super) fn transition(&mut self, ri: usize, from: RailState, cause: Cause, now: Millis) {
        let rail = &self.rails[ri];
        let w = rail.cell.load();
        self.notifier
            .send(now, Happening::Transition { rail: rail.id, from, to: w.state, cause, generation: w.generation });
    }

    fn set_available(&mut self, ri: usize, available: bool, now: Millis) {
        let rail = &mut self.rails[ri];
        if rail.available == available {
            return;
        }
        rail.available = available;
        self.selector.set_available(rail.id, available);
        self.notifier.send(now, Happening::Available { rail: rail.id, available });
    }

    /// Changes why a paused rail is paused, and says so.
    fn set_reason(&mut self, ri: usize, reason: PauseReason, now: Millis) {
        if self.rails[ri].cell.set_reason(reason) == Outcome::Changed {
            self.transition(ri, RailState::Paused, Cause::Reason(reason), now);
        }
    }

    /// Pause: the state first, then unavailable. A pause cancels a pending
    /// settle; each flap adds to the damping penalty.
    pub(super) fn pause_rail(&mut self, ri: usize, reason: PauseReason, now: Millis) {
        if self.rails[ri].settle_until.take().is_some() {
            warn!("{} went down again while settling ({reason}); activation cancelled", self.rails[ri].name);
            self.record_flap(ri, now);
            self.set_reason(ri, reason, now);
            self.arm_tick(self.rails[ri].id.device as usize);
            return;
        }
        if self.rails[ri].cell.pause(reason, now) != Outcome::Changed {
            return;
        }
        warn!("{} down: {reason}; paused, the gate refuses until the port is ACTIVE again", self.rails[ri].name);
        self.rails[ri].explained_at = Some(now);
        self.record_flap(ri, now);
        self.transition(ri, RailState::Active, Cause::Reason(reason), now);
        self.set_available(ri, false, now);
        self.arm_tick(self.rails[ri].id.device as usize);
    }

    fn record_flap(&mut self, ri: usize, now: Millis) {
        if let Some(cfg) = self.config.damping {
            let penalty = self.rails[ri].penalty.flap(&cfg, now);
            if self.rails[ri].penalty.suppressed(&cfg, now) {
                info!("{}: flap penalty {penalty:.0} ≥ {:.0}: damped", self.rails[ri].name, cfg.suppress);
            }
        }
    }

    pub(super) fn detach_rail(&mut self, ri: usize, reason: PauseReason, now: Millis) {
        let from = self.rails[ri].cell.load().state;
        if self.rails[ri].cell.detach(reason, now) != Outcome::Changed {
            return;
        }
        warn!("{} inert: {reason}", self.rails[ri].name);
        let rail = &mut self.rails[ri];
        rail.settle_until = None;
        rail.damped_until = None;
        self.transition(ri, from, Cause::Reason(reason), now);
        self.set_available(ri, false, now);
    }

    pub(super) fn bump(&mut self, ri: usize, kind: EventKind, now: Millis) {
        if self.rails[ri].cell.bump_generation() != Outcome::Changed {
            return;
        }
        info!("{}: {kind}: generation bumped, endpoints built before are stale", self.rails[ri].name);
        let state = self.rails[ri].cell.load().state;
        self.transition(ri, state, Cause::Bump(kind), now);
    }

    /// The port reads ACTIVE (a PORT_ACTIVE event, or the poll): activate,
    /// unless flap damping holds the rail or a settle delay must pass first.
    pub(super) fn request_activation(&mut self, ri: usize, by: RecoveredBy, now: Millis) {
        if self.rails[ri].cell.load().state != RailState::Paused || self.rails[ri].settle_until.is_some() {
            // Active already (a no-op), inert (only attach leaves it), or
            // settling (the settle timer decides).
            return;
        }
        if let Some(cfg) = self.config.damping {
            if self.rails[ri].penalty.suppressed(&cfg, now) {
                let until = self.rails[ri].penalty.reuse_at(&cfg).unwrap_or(now);
                if self.rails[ri].damped_until != Some(until) {
                    info!(
                        "{}: port is ACTIVE but the rail is damped (penalty {:.0}); held until {until}",
                        self.rails[ri].name,
                        self.rails[ri].penalty.value(&cfg, now)
                    );
                }
                self.rails[ri].damped_until = Some(until);
                self.set_reason(ri, PauseReason::Damped, now);
                return;
            }
        }
        if self.config.settle_ms > 0 {
            let rail = &mut self.rails[ri];
            rail.settle_until = Some(now.plus(self.config.settle_ms));
            rail.settle_by = by;
            info!("{}: port is ACTIVE; settling {} ms before activating", rail.name, self.config.settle_ms);
            self.set_reason(ri, PauseReason::Settling, now);
            return;
        }
        self.activate(ri, by, now);
    }

    /// The settle delay is over: activate if the port still reads ACTIVE.
    pub(super) fn finish_settle(&mut self, ri: usize, now: Millis) {
        let Some(_) = self.rails[ri].settle_until.take() else { return };
        let by = self.rails[ri].settle_by;
        match self.query_port(ri) {
            Some(PortState::Active) => self.activate(ri, by, now),
            Some(state) => {
                info!("{}: port reads {state} after the settle delay; waiting", self.rails[ri].name);
                self.set_reason(ri, PauseReason::PortNotActive, now);
            }
            None => {}
        }
    }

    /// A damped rail's penalty has decayed: release it if the port reads
    /// ACTIVE (through the settle delay, if any).
    pub(super) fn release_damped(&mut self, ri: usize, now: Millis) {
        self.rails[ri].damped_until = None;
        match self.query_port(ri) {
            Some(PortState::Active) => self.request_activation(ri, RecoveredBy::Poll, now),
            Some(_) => self.set_reason(ri, PauseReason::PortNotActive, now),
            None => {}
        }
    }

    /// The one activation path, for the event and the poll: resume →
    /// read the link → re-seed if changed or never seeded → available last,
    /// so no worker scores the rail on the old rate.
    fn activate(&mut self, ri: usize, by: RecoveredBy, now: Millis) {
        if self.rails[ri].cell.resume(now) != Outcome::Changed {
            return;
        }
        match by {
            RecoveredBy::Poll => warn!(
                "{} up: the port reads ACTIVE but no PORT_ACTIVE event was seen; recovered by the poll",
                self.rails[ri].name
            ),
            _ => info!("{} up ({})", self.rails[ri].name, by.name()),
        }
        self.rails[ri].recovered_by = Some(by);
        self.rails[ri].explained_at = None;
        self.transition(ri, RailState::Paused, Cause::By(by), now);
        self.refresh_link(ri, now);
        self.set_available(ri, true, now);
    }

    /// Reads the link and re-seeds the selector when the rate differs from
    /// the cached one or was never seeded. Reading the port *state* never
    /// touches the cache.
    pub(super) fn refresh_link(&mut self, ri: usize, now: Millis) {
        let id = self.rails[ri].id;
        let slot = &mut self.devices[id.device as usize];
        slot.counters.port_queries += 1;
        let attrs = match slot.port.link(id.port) {
            Ok(a) => a,
            Err(e) => {
                warn!("{}: reading the link rate failed ({e}); keeping the cached rate", self.rails[ri].name);
                return;
            }
        };
        let rate = attrs.rate();
        let rail = &mut self.rails[ri];
        if let Some(to) = decide_reseed(rate, rail.seeded) {
            let from = rail.seeded.replace(to);
            if let Some(from) = from {
                info!("{}: link rate {from} → {to}; re-seeded", rail.name);
            }
            self.selector.reseed(id, to);
            self.notifier.send(now, Happening::Reseed { rail: id, from, to });
        }
    }

    /// Attaches every rail of a freshly (re)opened device, active or paused
    /// by its port state, bandwidth seeded, generation bumped. Returns
    /// false, attaching nothing more, when a port query fails: the device
    /// is not usable after all.
    pub(super) fn attach_rails(&mut self, idx: usize) -> bool {
        let now = self.clock.now();
        for ri in self.devices[idx].rails.clone() {
            let port = self.rails[ri].id.port;
            self.devices[idx].counters.port_queries += 1;
            let state = match self.devices[idx].port.port_state(port) {
                Ok(s) => s,
                Err(e) => {
                    log::error!("{}: port query failed at attach ({e})", self.rails[ri].name);
                    return false;
                }
            };
            if self.rails[ri].cell.attach(state, now) != Outcome::Changed {
                continue;
            }
            let w = self.rails[ri].cell.load();
            let cause = match w.state {
                RailState::Active => Cause::By(RecoveredBy::Attach),
                _ => Cause::Reason(w.reason),
            };
            self.transition(ri, RailState::Inert, cause, now);
            self.refresh_link(ri, now);
            if w.state == RailState::Active {
                self.rails[ri].recovered_by = Some(RecoveredBy::Attach);
                self.set_available(ri, true, now);
            } else {
                info!("{}: port is {state} at attach; paused until it reads ACTIVE", self.rails[ri].name);
                self.rails[ri].explained_at = Some(now);
                self.set_available(ri, false, now);
                self.arm_tick(idx);
            }
        }
        true
    }

    /// Queries a rail's port state, counting the query and recording what
    /// it read. A failure means the device is gone: its rails are detached
    /// and `None` is returned.
    pub(super) fn query_port(&mut self, ri: usize) -> Option<PortState> {
        let id = self.rails[ri].id;
        let idx = id.device as usize;
        self.devices[idx].counters.port_queries += 1;
        match self.devices[idx].port.port_state(id.port) {
            Ok(state) => {
                self.rails[ri].cell.observe_port(state);
                Some(state)
            }
            Err(e) => {
                log::error!("{}: port query failed ({e}): the device is gone", self.rails[ri].name);
                if !matches!(self.devices[idx].mode, crate::device::DeviceMode::Gone { .. }) {
                    self.device_gone(idx, PauseReason::DeviceRemoved);
                }
                None
            }
        }
    }
}
