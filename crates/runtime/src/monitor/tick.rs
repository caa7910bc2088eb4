//! Time-driven work: the recovery tick (armed only while something needs
//! it), settle and damping timers, and re-opening gone devices with
//! exponential backoff and jitter.

use log::{debug, info};
use railwatch_core::{Millis, PollDecision, RailState, Selector, VerbsPort, decide_poll};

use super::Monitor;
use crate::clock::Clock;
use crate::device::DeviceMode;
use crate::notify::RecoveredBy;

impl<P: VerbsPort, S: Selector, C: Clock> Monitor<P, S, C> {
    /// Arms the tick for device `idx` (a rail of it paused, or it went
    /// poll-only).
    pub(super) fn arm_tick(&mut self, idx: usize) {
        self.watch(idx);
        if self.next_tick.is_none() {
            self.next_tick = Some(self.clock.now().plus(self.config.tick_ms));
        }
    }

    /// Adds device `idx` to the devices with time-driven work. Everything
    /// time-driven (the tick, timers) visits only these: its cost follows
    /// the paused rails, not every rail.
    pub(super) fn watch(&mut self, idx: usize) {
        if let Err(pos) = self.watched.binary_search(&idx) {
            self.watched.insert(pos, idx);
        }
    }

    /// Puts back the watched devices taken out for a pass, with any that
    /// the pass watched meanwhile.
    fn restore_watched(&mut self, mut devs: Vec<usize>) {
        for idx in std::mem::take(&mut self.watched) {
            if let Err(pos) = devs.binary_search(&idx) {
                devs.insert(pos, idx);
            }
        }
        self.watched = devs;
    }

    /// Whether device `idx` still has time-driven work: gone (its re-open
    /// timer), poll-only (the tick), a paused rail (the tick) or a rail's
    /// settle or damping timer.
    fn has_timed_work(&self, idx: usize) -> bool {
        let d = &self.devices[idx];
        d.mode != DeviceMode::Events
            || d.rails.iter().any(|&ri| {
                let r = &self.rails[ri];
                r.settle_until.is_some() || r.damped_until.is_some() || r.cell.load().state == RailState::Paused
            })
    }

    /// Something needs the tick: a paused rail or a poll-only device. A
    /// healthy host never wakes. (Gone devices have their own re-open
    /// timer.)
    fn tick_needed(&self) -> bool {
        self.watched.iter().any(|&idx| {
            let d = &self.devices[idx];
            match d.mode {
                DeviceMode::Events => d.rails.iter().any(|&ri| self.rails[ri].cell.load().state == RailState::Paused),
                DeviceMode::PollOnly => true,
                DeviceMode::Gone { .. } => false,
            }
        })
    }

    /// The earliest settle, damping or re-open timer.
    fn next_timer(&self) -> Option<Millis> {
        self.watched
            .iter()
            .filter_map(|&idx| {
                let d = &self.devices[idx];
                let reopen = match d.mode {
                    DeviceMode::Gone { next_reopen, .. } => Some(next_reopen),
                    _ => None,
                };
                let rails = d
                    .rails
                    .iter()
                    .filter_map(|&ri| {
                        [self.rails[ri].settle_until, self.rails[ri].damped_until].into_iter().flatten().min()
                    })
                    .min();
                [reopen, rails].into_iter().flatten().min()
            })
            .min()
    }

    /// When the monitor next has time-driven work (the tick, a settle,
    /// damping or re-open timer); `None` while nothing is scheduled, so an
    /// idle monitor blocks until a device event.
    pub fn next_deadline(&self) -> Option<Millis> {
        [self.next_tick, self.next_timer()].into_iter().flatten().min()
    }

    /// Runs whatever is due at `now`: re-opens, settle and damping timers
    /// first, then the tick.
    pub(super) fn run_due(&mut self, now: Millis) {
        if self.next_timer().is_some_and(|t| t <= now) {
            let devs = std::mem::take(&mut self.watched);
            for &idx in &devs {
                if let DeviceMode::Gone { next_reopen, backoff_ms } = self.devices[idx].mode {
                    if next_reopen <= now {
                        self.try_reopen(idx, backoff_ms, now);
                    }
                }
            }
            // Rails in index order: a device's rails are contiguous.
            for &idx in &devs {
                for k in 0..self.devices[idx].rails.len() {
                    let ri = self.devices[idx].rails[k];
                    if self.rails[ri].settle_until.is_some_and(|t| t <= now) {
                        self.finish_settle(ri, now);
                    }
                    if self.rails[ri].damped_until.is_some_and(|t| t <= now) {
                        self.release_damped(ri, now);
                    }
                }
            }
            self.restore_watched(devs);
        }
        if self.next_tick.is_some_and(|t| t <= now) {
            self.tick(now);
        }
        let mut devs = std::mem::take(&mut self.watched);
        devs.retain(|&idx| self.has_timed_work(idx));
        self.watched = devs;
    }

    fn tick(&mut self, now: Millis) {
        self.ticks += 1;
        self.next_tick = None;
        let devs = std::mem::take(&mut self.watched);
        for &idx in &devs {
            match self.devices[idx].mode {
                DeviceMode::Gone { .. } => {}
                DeviceMode::Events => self.poll_rails(idx, now, |s| s == RailState::Paused),
                DeviceMode::PollOnly => self.poll_rails(idx, now, |s| s != RailState::Inert),
            }
        }
        self.restore_watched(devs);
        if self.tick_needed() {
            self.next_tick = Some(now.plus(self.config.tick_ms));
        }
    }

    /// Reads the port state of the device's rails that `which` selects and
    /// acts on it. Inert rails are never queried, nor rails whose settle or
    /// damping timer is running (the timer re-reads the port itself).
    fn poll_rails(&mut self, idx: usize, now: Millis, which: impl Fn(RailState) -> bool) {
        for ri in self.devices[idx].rails.clone() {
            let rail = &self.rails[ri];
            let state = rail.cell.load().state;
            if state == RailState::Inert || !which(state) || rail.settle_until.is_some() || rail.damped_until.is_some()
            {
                continue;
            }
            let Some(port_state) = self.query_port(ri) else { return };
            match decide_poll(port_state, state) {
                PollDecision::Leave => {}
                PollDecision::Activate => self.request_activation(ri, RecoveredBy::Poll, now),
                PollDecision::Pause(reason) => self.pause_rail(ri, reason, now),
                PollDecision::Wait => self.explain(ri, now),
            }
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
        info!(
            "{} still paused: {} since {}, port reads {}",
            rail.name,
            w.reason,
            rail.cell.since(),
            w.last_port_state.map_or("unknown", |p| p.ibv_str())
        );
    }

    /// The delay before the next re-open attempt: `backoff_ms` plus up to
    /// `reopen_jitter_pct` percent of it, so hosts that lost a device in
    /// the same fabric event do not all re-open it in the same instant.
    pub(super) fn with_jitter(&mut self, backoff_ms: u64) -> u64 {
        // xorshift64*: tiny, seeded from the config, reproducible in the
        // simulator.
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        let r = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
        let span = backoff_ms.saturating_mul(u64::from(self.config.reopen_jitter_pct.min(100))) / 100;
        backoff_ms + if span == 0 { 0 } else { r % (span + 1) }
    }

    fn try_reopen(&mut self, idx: usize, backoff_ms: u64, now: Millis) {
        self.devices[idx].counters.reopen_attempts += 1;
        let result = self.devices[idx].port.reopen();
        let error = match result {
            Ok(()) => {
                self.register(idx);
                if self.attach_rails(idx) {
                    info!("{}: re-opened; rails re-attached", self.devices[idx].name);
                    self.devices[idx].counters.reopens += 1;
                    return;
                }
                self.deregister(idx);
                self.devices[idx].port.close();
                "its ports cannot be queried".to_string()
            }
            Err(e) => e.to_string(),
        };
        let next = backoff_ms.saturating_mul(2).min(self.config.reopen_max_ms).max(1);
        let delay = self.with_jitter(next);
        debug!("{}: re-open failed ({error}); next attempt in {delay} ms", self.devices[idx].name);
        self.devices[idx].mode = DeviceMode::Gone { next_reopen: now.plus(delay), backoff_ms: next };
    }
}
