//! Evidence beyond the port state: transfer outcomes the engine reports
//! (the data-path breaker and its probes), flap counters (silent flaps) and
//! the address a rail needs (`require_address`).
//!
//! docs/STATE-MACHINE.md, "Evidence beyond the port state", states each rule
//! and why; the pure parts are `breaker.rs`, `counters.rs`, `wc.rs` and
//! [`AddressRequirement`](crate::AddressRequirement).

use super::{Action, Breaker, Cause, Errno, Happening, Log, Machine};
use crate::breaker::{Verdict, backoff};
use crate::counters::{Counter, PortCounters, SILENT_FLAP_CONFIRM_MS, Suspect};
use crate::rail::{Outcome, PauseReason, RailState};
use crate::time::Millis;
use crate::wc::{WC_STATUSES, WcClass, classify_wc};

/// One line of a transfer report: `count` completions with status
/// `wc_status` (`ibv_wc_status`; 0 is success) on transfers to `peer` (an
/// opaque id the engine chooses: a remote NIC, a host).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct TransferReport {
    /// The engine's id of the peer.
    pub peer: u64,
    /// The work-completion status.
    pub wc_status: u32,
    /// How many completions had it.
    pub count: u32,
}

/// `IBV_WC_SUCCESS`: the one status of class success (`wc.rs` tests it).
const SUCCESS: u32 = 0;
const _: () = assert!(matches!(WC_STATUSES[SUCCESS as usize].class, WcClass::Success));

/// Counts a report's lines into rail `rail` (one pass; the common report,
/// successes and peers' errors, asks nothing more). Returns whether a line
/// succeeded and whether one failed against the local path (lines of
/// count 0 say nothing, and a failed one creates no trouble record).
/// Counters wrap at 2^64 completions.
#[inline]
fn count_reports(rail: &mut super::Rail, reports: &[TransferReport]) -> (bool, bool) {
    let (mut succeeded, mut failed_locally) = (false, false);
    for r in reports {
        let n = u64::from(r.count);
        match classify_wc(r.wc_status) {
            WcClass::Success => {
                rail.transfers_ok = rail.transfers_ok.wrapping_add(n);
                succeeded |= n != 0;
            }
            _ if n == 0 => {}
            class => {
                let t = rail.trouble_mut();
                let slot = t.failed_by_status.get_mut(r.wc_status as usize).unwrap_or(&mut t.failed_unknown);
                *slot = slot.wrapping_add(n);
                failed_locally |= class == WcClass::LocalPath;
            }
        }
    }
    (succeeded, failed_locally)
}

impl Machine {
    /// Transfer outcomes on the rail of `device`'s `port`, as the engine
    /// polled them from its CQs since its last report: each line a count of
    /// completions with one status through one peer. Failures against the
    /// local path through enough distinct peers within the window open the
    /// breaker (the rail pauses, `data_path`); through one peer only they
    /// are notified ([`Happening::PeerFailing`]) and the rail stays.
    /// Successes close nothing: only a probe does
    /// ([`handle_probe`](Self::handle_probe)). Makes no heap allocation,
    /// except once per rail: the first failed line creates its record of
    /// failures.
    pub fn handle_transfers(&mut self, device: u32, port: u8, reports: &[TransferReport], now: Millis) {
        let now = self.at(now);
        // The common report, successes through one peer, on a rail found at
        // its guess: nothing but the count can change. Everything else is
        // out of line, so this path saves no registers.
        if let [r] = reports
            && r.wc_status == SUCCESS
            && let Some(ri) = self.guess_rail(device, port)
        {
            let rail = &mut self.rails[ri];
            rail.transfers_ok = rail.transfers_ok.wrapping_add(u64::from(r.count));
            return;
        }
        self.count_transfers(device, port, reports, now);
    }

    /// Any other report: counted line by line, then judged if a line
    /// failed against the local path.
    #[inline(never)]
    fn count_transfers(&mut self, device: u32, port: u8, reports: &[TransferReport], now: Millis) {
        let Some(ri) = self.rail_index(device, port) else { return self.stray() };
        let (_, failed_locally) = count_reports(&mut self.rails[ri], reports);
        if failed_locally {
            self.judge(ri, reports, now);
        }
    }

    /// The rare part of a report: local-path failures, judged line by line.
    #[cold]
    #[inline(never)]
    fn judge(&mut self, ri: usize, reports: &[TransferReport], now: Millis) {
        for r in reports.iter().filter(|r| r.count > 0 && classify_wc(r.wc_status) == WcClass::LocalPath) {
            self.local_failure(ri, r, now);
        }
    }

    fn local_failure(&mut self, ri: usize, r: &TransferReport, now: Millis) {
        let Some(cfg) = self.config.data_path else { return };
        // Only an active rail is taken out: a paused one is out already,
        // and its failures are what its pause explains (work posted before
        // the breaker opened, completing late, is the same outage).
        if self.rails[ri].cell.load().state != RailState::Active {
            return;
        }
        match self.rails[ri].trouble_mut().window.fail(&cfg, r.peer, u64::from(r.count), now) {
            Verdict::Counting => {}
            Verdict::Open => self.trip(ri, 0, now),
            Verdict::OnePeer { peer } => {
                let rail = self.rails[ri].id;
                self.notify(now, Happening::PeerFailing { rail, peer });
            }
        }
    }

    /// Opens the breaker (an outage begins: one trip): the rail pauses
    /// (`data_path`; the port did not flap, so damping is not charged)
    /// until its backoff ends.
    fn trip(&mut self, ri: usize, trials: u32, now: Millis) {
        if self.open_breaker(ri, trials, now) {
            self.rails[ri].trouble_mut().breaker_trips += 1;
            self.take_out(ri, PauseReason::DataPath, now);
        }
    }

    /// Sets rail `ri`'s breaker open for the backoff after `trials` failed
    /// probes (jittered within the cap), and says so. False when the
    /// breaker is off.
    fn open_breaker(&mut self, ri: usize, trials: u32, now: Millis) -> bool {
        let Some(cfg) = self.config.data_path else { return false };
        let until = now.plus(self.with_jitter(backoff(&cfg, trials), cfg.backoff_max_ms));
        let rail = &mut self.rails[ri];
        let id = rail.id;
        let trouble = rail.trouble_mut();
        trouble.breaker = Some(Breaker::Open { until, trials });
        trouble.window.clear();
        self.push(Action::Log(Log::BreakerOpen { rail: id, trials, until }));
        true
    }

    /// Pauses an active rail whose port did not go down (the breaker, a
    /// lost address): the state first, then unavailable; no flap charged.
    pub(super) fn take_out(&mut self, ri: usize, reason: PauseReason, now: Millis) {
        let rail = &mut self.rails[ri];
        rail.activating = false;
        if rail.cell.pause(reason, now) == Outcome::Changed {
            rail.explained_at = Some(now);
            self.transition(ri, RailState::Active, Cause::Reason(reason), now);
            self.set_available(ri, false, now);
        }
        let device = self.rails[ri].id.device as usize;
        self.watch(device);
        self.arm_tick(now);
    }

    /// The breaker holds rail `ri` now (open, its backoff not over).
    pub(super) fn breaker_holds(&self, ri: usize, now: Millis) -> bool {
        matches!(self.rails[ri].breaker(), Some(Breaker::Open { until, .. }) if now < until)
    }

    /// The breaker tripped and has not closed since: an activation makes
    /// the rail half-open instead.
    pub(super) fn breaker_tripped(&self, ri: usize) -> bool {
        self.rails[ri].breaker().is_some()
    }

    /// The port reads ACTIVE and every hold is past, on a rail whose
    /// breaker tripped: half-open (unless it already is, with its probe
    /// slot as it stands). The rail stays paused and unavailable.
    pub(super) fn half_open(&mut self, ri: usize, now: Millis) {
        let trials = match self.rails[ri].breaker() {
            Some(Breaker::HalfOpen { .. }) if self.rails[ri].cell.load().reason.is_probe_stage() => return,
            Some(Breaker::Open { trials, .. } | Breaker::Due { trials } | Breaker::HalfOpen { trials, .. }) => trials,
            None => return,
        };
        self.rails[ri].set_breaker(Some(Breaker::HalfOpen { trials, taken: None }));
        self.set_reason(ri, PauseReason::HalfOpen, now);
        let rail = self.rails[ri].id;
        self.notify(now, Happening::HalfOpen { rail });
    }

    /// The backoff is over: one query; ACTIVE makes the rail half-open
    /// (through the activation path's holds). A port that is not ACTIVE
    /// then goes half-open when it is.
    pub(super) fn run_trial(&mut self, ri: usize) {
        let Some(Breaker::Open { trials, .. }) = self.rails[ri].breaker() else { return };
        self.rails[ri].set_breaker(Some(Breaker::Due { trials }));
        self.rails[ri].wake_by = Some(super::RecoveredBy::Probe);
        self.query(ri);
    }

    /// The outcome of the probe [`Gate::probe`](crate::Gate::probe)
    /// granted on the rail of `device`'s `port`: success closes the
    /// breaker (the rail activates through the one activation path, the
    /// generation moves once, the backoff starts again from its first
    /// step); failure opens it again with the next backoff. A report with
    /// no probe out (none was granted, it timed out, the port went down
    /// meanwhile) is a stray and changes nothing. No allocation.
    pub fn handle_probe(&mut self, device: u32, port: u8, succeeded: bool, now: Millis) {
        let now = self.at(now);
        let Some(ri) = self.rail_index(device, port) else { return self.stray() };
        let Some(Breaker::HalfOpen { trials, .. }) = self.rails[ri].breaker() else { return self.stray() };
        if self.rails[ri].cell.load().reason != PauseReason::Probing {
            return self.stray();
        }
        if succeeded {
            self.rails[ri].set_breaker(None);
            self.activate(ri, super::RecoveredBy::Probe, now);
        } else {
            self.probe_failed(ri, trials, false, now);
        }
    }

    /// The probe failed (or timed out): open again, the next backoff.
    fn probe_failed(&mut self, ri: usize, trials: u32, timed_out: bool, now: Millis) {
        if self.open_breaker(ri, trials.saturating_add(1), now) {
            self.set_reason(ri, PauseReason::DataPath, now);
            let rail = self.rails[ri].id;
            self.notify(now, Happening::ProbeFailed { rail, timed_out });
        }
    }

    /// At each tick, for a half-open rail: a probe first seen out (the
    /// gate grants it without a clock) starts its timeout, a deadline of
    /// its own ([`probe_deadline`](Self::probe_deadline)). A rail that left
    /// half-open with no probe out (its port went down) waits for the port
    /// again.
    pub(super) fn watch_probe(&mut self, ri: usize, now: Millis) {
        let Some(Breaker::HalfOpen { trials, taken }) = self.rails[ri].breaker() else { return };
        match (self.rails[ri].cell.load().reason, taken) {
            (PauseReason::Probing, None) => {
                self.rails[ri].set_breaker(Some(Breaker::HalfOpen { trials, taken: Some(now) }));
            }
            (PauseReason::HalfOpen | PauseReason::Probing, _) => {}
            _ => self.rails[ri].set_breaker(Some(Breaker::Due { trials })),
        }
    }

    /// When rail `ri`'s probe out times out: `probe_timeout_ms` after the
    /// tick that first saw it, so within one `tick_ms` more of its grant.
    pub(super) fn probe_deadline(&self, ri: usize) -> Option<Millis> {
        let timeout = self.config.data_path?.probe_timeout_ms;
        match self.rails[ri].breaker() {
            Some(Breaker::HalfOpen { taken: Some(t), .. })
                if self.rails[ri].cell.load().reason == PauseReason::Probing =>
            {
                Some(t.plus(timeout))
            }
            _ => None,
        }
    }

    /// The probe out on rail `ri` was not reported in time: failed.
    pub(super) fn probe_timed_out(&mut self, ri: usize, now: Millis) {
        if let Some(Breaker::HalfOpen { trials, .. }) = self.rails[ri].breaker() {
            self.probe_failed(ri, trials, true, now);
        }
    }

    /// Rail `ri` leaves probing for another reason (its port, carrier or
    /// device went): the probe out counts as failed, said at once, and the
    /// next backoff is the longer one (`reopen`: the breaker stays, as it
    /// does not when the device's context goes). The caller sets the
    /// rail's new reason.
    pub(super) fn probe_lost(&mut self, ri: usize, reopen: bool, now: Millis) {
        let Some(Breaker::HalfOpen { trials, .. }) = self.rails[ri].breaker() else { return };
        if self.rails[ri].cell.load().reason != PauseReason::Probing {
            return;
        }
        if reopen {
            self.open_breaker(ri, trials.saturating_add(1), now);
        }
        let rail = self.rails[ri].id;
        self.notify(now, Happening::ProbeFailed { rail, timed_out: false });
    }

    /// When rail `ri`'s backoff ends, if its breaker is open.
    pub(super) fn trial_at(&self, ri: usize) -> Option<Millis> {
        match self.rails[ri].breaker() {
            Some(Breaker::Open { until, .. }) => Some(until),
            _ => None,
        }
    }

    // ---- counters --------------------------------------------------------------

    /// The answer to an [`Action::ReadCounters`]. A rise of a flap counter
    /// on an active rail with no PORT_ERR seen since the last read is a
    /// silent flap once confirmed: a port read [`SILENT_FLAP_CONFIRM_MS`]
    /// later still finds the rail active with no flap seen (the counters
    /// move before the port's state and its event do, so a read racing a
    /// carrier loss sees the rise first). Then the generation moves (its
    /// QPs are gone), damping is charged, and it is notified. Counters that
    /// cannot be read turn the rule off for the port (said once).
    pub fn handle_counters(&mut self, device: u32, port: u8, answer: Result<PortCounters, Errno>, now: Millis) {
        let now = self.at(now);
        let Some(ri) = self.rail_index(device, port) else { return self.stray() };
        if self.devices[device as usize].mode.is_closed() {
            return;
        }
        let fresh = match answer {
            Ok(c) if c.any() => c,
            Ok(_) | Err(_) => return self.counters_unreadable(ri, answer.err().unwrap_or(Errno::EOPNOTSUPP)),
        };
        self.say_stuck(ri, &fresh);
        let rail = &mut self.rails[ri];
        let before = rail.counters.replace(fresh);
        let active = rail.cell.load().state == RailState::Active;
        // A flap the machine saw explains every rise until the rail is read
        // active again: a read during the outage takes in the carrier going
        // down, the first one after it the carrier coming back (a netdev's
        // `carrier_changes` counts both).
        let quiet = !rail.down_since_counters;
        if active {
            rail.down_since_counters = false;
        }
        if !(quiet && active && self.config.silent_flaps) {
            // Explained by a flap the machine saw, or the rail is not up.
            return rail.counters.set_suspect(None);
        }
        match rail.counters.suspect() {
            Some(s) if s.until <= now => {
                rail.counters.set_suspect(None);
                self.silent_flap(ri, now);
            }
            Some(_) => {}
            None if before.is_some_and(|b| fresh.rose_since(&b)) => {
                rail.counters.set_suspect(Some(Suspect { until: now.plus(SILENT_FLAP_CONFIRM_MS), asked: false }));
                self.watch(device as usize);
            }
            None => {}
        }
    }

    /// Says, once per counter and device context, that a counter is stuck
    /// at its width's maximum: it witnesses nothing more, and the rule
    /// goes on with the others (`blind`: none is left).
    fn say_stuck(&mut self, ri: usize, read: &PortCounters) {
        let new = self.rails[ri].counters.newly_stuck(read);
        if new == 0 {
            return;
        }
        let rail = self.rails[ri].id;
        for counter in Counter::ALL.into_iter().filter(|c| new & c.bit() != 0) {
            let value = read.get(counter).unwrap_or_default();
            let blind = read.all_stuck();
            self.push(Action::Log(Log::CounterStuck { rail, counter, value, blind }));
        }
    }

    fn counters_unreadable(&mut self, ri: usize, errno: Errno) {
        let rail = &mut self.rails[ri];
        if std::mem::replace(&mut rail.counters_readable, false) {
            let id = rail.id;
            self.push(Action::Log(Log::CountersUnavailable { rail: id, errno }));
        }
    }

    fn silent_flap(&mut self, ri: usize, now: Millis) {
        if let Some(cfg) = self.config.damping {
            self.rails[ri].holds_mut().penalty.flap(&cfg, now);
        }
        self.rails[ri].trouble_mut().silent_flaps += 1;
        let id = self.rails[ri].id;
        self.push(Action::Log(Log::SilentFlap { rail: id }));
        if self.rails[ri].cell.bump_generation() == Outcome::Changed {
            self.transition(ri, RailState::Active, Cause::SilentFlap, now);
        }
    }

    /// Asks for rail `ri`'s counters, if they can be read.
    pub(super) fn read_counters(&mut self, ri: usize) {
        let rail = &self.rails[ri];
        if rail.counters_readable && self.config.silent_flaps {
            let (device, port) = (rail.id.device, rail.id.port);
            self.push(Action::ReadCounters { device, port });
        }
    }

    // ---- addresses -----------------------------------------------------------------

    /// Whether rail `ri` may activate as far as its address goes; if not,
    /// it is held (`no_address`) and its address read (the answer resumes
    /// the activation `by` began).
    pub(super) fn address_ready(&mut self, ri: usize, by: super::RecoveredBy, now: Millis) -> bool {
        if self.config.require_address == crate::AddressRequirement::None || self.rails[ri].address_ok {
            return true;
        }
        self.rails[ri].wants_address = Some(by);
        self.set_reason(ri, PauseReason::NoAddress, now);
        self.read_address(ri);
        false
    }

    /// An address read answered: checks it against `require_address`.
    /// Met: the GID index is kept and said, and an activation that waited
    /// goes on. Not met: an active rail is taken out (`no_address`).
    pub(super) fn check_address(&mut self, ri: usize, address: Option<&crate::PortAddress>, now: Millis) {
        let need = self.config.require_address;
        if need == crate::AddressRequirement::None {
            return;
        }
        let chosen = address.and_then(|a| need.gid_index(a));
        let rail = &mut self.rails[ri];
        rail.address_ok = chosen.is_some();
        let id = rail.id;
        match chosen {
            Some(index) => {
                // A move on an active rail is said now; an activation says
                // the index it activates with.
                let active = rail.cell.load().state == RailState::Active;
                if let Some(index) = index
                    && rail.gid_index.replace(index) != Some(index)
                    && active
                {
                    self.notify(now, Happening::GidIndex { rail: id, index });
                }
                if let Some(by) = self.rails[ri].wants_address.take() {
                    self.request_activation(ri, by, now);
                }
            }
            None => {
                rail.gid_index = None;
                self.push(Action::Log(Log::NoAddress { rail: id }));
                if self.rails[ri].cell.load().state == RailState::Active {
                    self.take_out(ri, PauseReason::NoAddress, now);
                }
            }
        }
    }
}
