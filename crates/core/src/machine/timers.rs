//! Time-driven work: the recovery tick (armed only while something needs
//! it), the opt-in audit, settle and damping timers, and re-opening gone
//! devices with exponential backoff and jitter.
//!
//! Every deadline the machine returns is finite and, once
//! [`Machine::handle_timeout`] has run for a time, later than that time: no
//! timer is ever due forever, so no driver spins.

use super::{Action, DeviceMode, Machine};
use crate::counters::Suspect;
use crate::owner::DeviceOwner;
use crate::rail::{PauseReason, RailState};
use crate::time::Millis;

impl Machine {
    /// When the machine next has time-driven work; `None` while nothing is
    /// scheduled, so an idle driver blocks until a device event.
    pub fn poll_timeout(&self) -> Option<Millis> {
        [self.next_tick(), self.next_timer()].into_iter().flatten().min()
    }

    /// When the recovery tick runs next; `None` while nothing needs it.
    pub fn next_tick(&self) -> Option<Millis> {
        self.next_tick.filter(|_| self.tick_needed())
    }

    /// Arms the tick (a rail paused, a device went poll-only).
    pub(super) fn arm_tick(&mut self, now: Millis) {
        // A tick left armed from an earlier need that has passed is stale.
        if self.next_tick.is_none_or(|t| t <= now) {
            self.next_tick = Some(now.plus(self.config.tick_ms));
        }
    }

    /// Drops the armed tick when nothing needs it. Devices whose timed
    /// work is done leave the watched list first: `tick_needed` then looks
    /// only at those that may need it, so a host attaching thousands of
    /// rails does not rescan the finished ones at every activation.
    pub(super) fn disarm_tick_if_idle(&mut self) {
        self.forget_finished_devices();
        if !self.tick_needed() {
            self.next_tick = None;
        }
    }

    /// Keeps in the watched list only the devices with timed work left.
    fn forget_finished_devices(&mut self) {
        let mut watched = std::mem::take(&mut self.watched);
        watched.retain(|&idx| self.has_timed_work(idx as usize));
        self.watched = watched;
    }

    /// Adds device `idx` to the devices with time-driven work.
    pub(super) fn watch(&mut self, idx: usize) {
        let idx = idx as u32;
        if let Err(pos) = self.watched.binary_search(&idx) {
            self.watched.insert(pos, idx);
        }
    }

    /// Whether device `idx` still has time-driven work.
    fn has_timed_work(&self, idx: usize) -> bool {
        let d = &self.devices[idx];
        if d.mode == DeviceMode::Removed {
            return false;
        }
        d.mode != DeviceMode::Events
            || d.attach.is_some()
            || d.query_failures > 0
            || self.rails[d.rails()].iter().any(|r| {
                r.settle().is_some()
                    || r.damped_until().is_some()
                    || matches!(r.breaker(), Some(super::Breaker::Open { .. }))
                    || r.activating
                    || r.address_event.is_some()
                    || r.counters.suspect().is_some_and(|s| !s.asked)
                    || r.cell.load().state == RailState::Paused
            })
    }

    /// Something needs the tick: a paused or activating rail, or a
    /// poll-only device with a rail to poll. A healthy host never wakes.
    fn tick_needed(&self) -> bool {
        self.watched.iter().any(|&idx| {
            let d = &self.devices[idx as usize];
            let rails = &self.rails[d.rails()];
            if (d.attach.is_some() || d.query_failures > 0) && !d.mode.is_closed() {
                // An attach whose answers did not come, or a failed query
                // to retry: ask again.
                return true;
            }
            match d.mode {
                DeviceMode::Events => rails
                    .iter()
                    .any(|r| r.activating || r.address_event.is_some() || r.cell.load().state == RailState::Paused),
                DeviceMode::PollOnly => rails.iter().any(|r| r.cell.load().state != RailState::Inert),
                DeviceMode::Gone { .. } | DeviceMode::Opening { .. } | DeviceMode::Removed => false,
            }
        })
    }

    /// The earliest deadline other than the recovery tick (a settle,
    /// damping, re-open or audit timer). A driver that knows nothing
    /// changed since the last tick (a simulator) may skip the idle ticks
    /// before it.
    pub fn next_timer(&self) -> Option<Millis> {
        [self.next_audit, self.next_rail_or_device_timer()].into_iter().flatten().min()
    }

    /// The earliest settle, damping or re-open timer.
    fn next_rail_or_device_timer(&self) -> Option<Millis> {
        self.watched
            .iter()
            .filter_map(|&idx| {
                let d = &self.devices[idx as usize];
                let reopen = match d.mode {
                    DeviceMode::Gone { next_reopen, .. } => Some(next_reopen),
                    DeviceMode::Opening { next_open, .. } => Some(next_open),
                    _ => None,
                };
                let rails = d
                    .rails()
                    .filter_map(|ri| {
                        let r = &self.rails[ri];
                        let settle = r.settle().filter(|s| !s.confirming).map(|s| s.until);
                        let suspect = r.counters.suspect().filter(|s| !s.asked).map(|s| s.until);
                        let probe = self.probe_deadline(ri);
                        [settle, r.damped_until(), self.trial_at(ri), probe, suspect].into_iter().flatten().min()
                    })
                    .min();
                [reopen, rails].into_iter().flatten().min()
            })
            .min()
    }

    /// Why device `idx` is out of use: its rails' pause reason (they went
    /// inert together).
    fn gone_reason(&self, idx: usize) -> PauseReason {
        let first = self.devices[idx].rails().next();
        first.map_or(PauseReason::NotOpened, |ri| self.rails[ri].cell.load().reason)
    }

    /// Runs whatever is due at `now`: re-opens, settle and damping timers
    /// first, then the tick and the audit.
    pub(super) fn run_due(&mut self, now: Millis) {
        for k in 0..self.watched.len() {
            let idx = self.watched[k] as usize;
            if let DeviceMode::Gone { next_reopen, backoff_ms } = self.devices[idx].mode {
                if next_reopen <= now {
                    // Asked again after another backoff if the answer never
                    // comes (a late one is still taken).
                    self.devices[idx].reopen_in_flight = true;
                    self.devices[idx].stats.reopen_attempts += 1;
                    self.devices[idx].mode = DeviceMode::Gone { next_reopen: now.plus(backoff_ms.max(1)), backoff_ms };
                    let device = idx as u32;
                    self.push(match self.config.device_owner {
                        DeviceOwner::Railwatch => Action::Reopen { device },
                        DeviceOwner::Engine => Action::Revalidate { device, reason: self.gone_reason(idx) },
                    });
                }
                continue;
            }
            if let DeviceMode::Opening { next_open, backoff_ms } = self.devices[idx].mode {
                if next_open <= now {
                    self.ask_open(idx, backoff_ms, now);
                }
                continue;
            }
            for ri in self.devices[idx].rails() {
                let holds = self.rails[ri].holds.as_deref_mut();
                let settle = holds.and_then(|h| h.settle.as_mut());
                if let Some(s) = settle.filter(|s| !s.confirming && s.until <= now) {
                    // The settle delay is over: one query confirms the port
                    // still reads ACTIVE.
                    s.confirming = true;
                    self.query(ri);
                } else if self.rails[ri].damped_until().is_some_and(|t| t <= now) {
                    // The penalty has decayed: release if the port reads
                    // ACTIVE (through the settle delay, if any).
                    self.rails[ri].clear_damped();
                    self.query(ri);
                } else if self.trial_at(ri).is_some_and(|t| t <= now) {
                    // The breaker's backoff is over: a trial query (half-open if ACTIVE).
                    self.run_trial(ri);
                } else if self.probe_deadline(ri).is_some_and(|t| t <= now) {
                    self.probe_timed_out(ri, now);
                }
                // Apart from the rest: a due deadline is always taken.
                if let Some(s) = self.rails[ri].counters.suspect().filter(|s| !s.asked && s.until <= now) {
                    // A counter rise to confirm: the port read again (the
                    // counters follow it), a silent flap if still quiet.
                    self.rails[ri].counters.set_suspect(Some(Suspect { asked: true, ..s }));
                    self.query(ri);
                }
            }
        }
        if let Some(due) = self.next_tick.filter(|&t| t <= now) {
            self.next_tick = None;
            if self.tick_needed() {
                self.tick(due, now);
            }
        }
        if let Some(due) = self.next_audit.filter(|&t| t <= now) {
            self.audit(due, now);
        }
        self.forget_finished_devices();
    }

    /// Reads the port state of every paused rail (and of every rail of a
    /// poll-only device, whose links are read too: no event will say the
    /// rate changed); retries the link read of a rail still activating.
    /// The tick was `due` then; it runs at `now`.
    fn tick(&mut self, due: Millis, now: Millis) {
        self.ticks += 1;
        for k in 0..self.watched.len() {
            let idx = self.watched[k] as usize;
            let mode = self.devices[idx].mode;
            if self.devices[idx].attach.is_some() && !mode.is_closed() {
                for ri in self.devices[idx].rails() {
                    if self.rails[ri].attach_answer.is_none() {
                        self.query(ri);
                    }
                }
                continue;
            }
            let retry = self.devices[idx].query_failures > 0;
            for ri in self.devices[idx].rails() {
                let state = self.rails[ri].cell.load().state;
                if state == RailState::Paused && !mode.is_closed() {
                    self.watch_probe(ri, now);
                }
                if retry && mode == DeviceMode::Events && state == RailState::Active {
                    // A failed query retried (a paused rail's is asked below).
                    self.query(ri);
                }
                match (mode, state) {
                    (DeviceMode::Gone { .. } | DeviceMode::Opening { .. } | DeviceMode::Removed, _)
                    | (_, RailState::Inert) => {}
                    (DeviceMode::PollOnly, _) => {
                        self.query(ri);
                        if state == RailState::Active {
                            self.read_link(ri);
                        }
                    }
                    (DeviceMode::Events, RailState::Paused) => self.query(ri),
                    (DeviceMode::Events, RailState::Active) if self.rails[ri].activating => self.read_link(ri),
                    (DeviceMode::Events, RailState::Active) => {}
                }
                // An address read after a LID/GID change not answered: ask
                // again (its bump waits for the answer).
                if state != RailState::Inert && !mode.is_closed() && self.rails[ri].address_event.is_some() {
                    self.read_address(ri);
                }
            }
        }
        self.next_tick = Some(next_period(due, self.config.tick_ms, now));
    }

    /// The opt-in audit: re-reads every active rail of a device that is
    /// read for events: its port (a port that went down with no event at
    /// all) and its link (a rate that changed with no event: re-seeded).
    fn audit(&mut self, due: Millis, now: Millis) {
        for ri in 0..self.rails.len() {
            let device = self.rails[ri].id.device as usize;
            if self.devices[device].mode == DeviceMode::Events
                && self.devices[device].attach.is_none()
                && self.rails[ri].cell.load().state == RailState::Active
            {
                self.query(ri);
                self.read_link(ri);
            }
        }
        self.next_audit = self.config.audit_ms.map(|a| next_period(due, a, now));
    }

    /// A backoff's delay: `backoff_ms` plus up to `reopen_jitter_pct`
    /// percent of it, so hosts that lost a device in the same fabric event
    /// do not all re-open it in the same instant; never more than `cap_ms`
    /// (the jitter is taken within the longest backoff, not added after
    /// it).
    pub(super) fn with_jitter(&mut self, backoff_ms: u64, cap_ms: u64) -> u64 {
        self.jittered(backoff_ms).min(cap_ms.max(backoff_ms)).max(1)
    }

    fn jittered(&mut self, backoff_ms: u64) -> u64 {
        // xorshift64*: tiny, seeded from the config, reproducible.
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        let r = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
        let span = backoff_ms.saturating_mul(u64::from(self.config.reopen_jitter_pct.min(100))) / 100;
        backoff_ms.saturating_add(if span == 0 { 0 } else { r % (span + 1) }).max(1)
    }
}

/// The next run of a periodic timer that was `due` and ran at `now`: one
/// period after it was due, so a late wake-up does not push every later run
/// back (the period keeps its phase, and a recording's replay, which wakes
/// on time, polls at the same instants), or one period from `now` when the
/// wake-up was later than a whole period (a suspended host).
fn next_period(due: Millis, period: u64, now: Millis) -> Millis {
    let next = due.plus(period);
    if next > now { next } else { now.plus(period) }
}
