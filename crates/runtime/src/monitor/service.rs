//! Servicing one ready device: the drain, and handing what it read (and how
//! it ended) to the machine, each input through the observer first.

use railwatch_core::{
    Clock, Handled, Happening, Input, Millis, Notification, PauseReason, RailId, Selector, VerbsPort,
};

use super::{Monitor, errno_of};
use crate::drain::{DrainEnd, drain};
use crate::observe::Observed;

impl<P: VerbsPort, S: Selector, C: Clock> Monitor<P, S, C> {
    /// Drains device `idx` once (up to the budget) and hands what it read
    /// to the machine, one event at a time, carrying out the machine's
    /// actions after each (so an activation's query is answered before the
    /// next event is looked at).
    pub(super) fn service(&mut self, idx: usize) {
        let slot = &mut self.devices[idx];
        let (true, Some(port)) = (slot.reading, slot.port.as_mut()) else {
            slot.pending = false;
            slot.hung_up = false;
            return;
        };
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        let report = drain(port, self.config.drain_budget.max(1), |ev| scratch.push(ev));
        slot.io.gets += report.gets as u64;
        slot.io.interrupted += report.interrupted as u64;
        // Events of this drain so far, counted before handling them: an
        // event in the batch (DEVICE_FATAL) may close the device.
        let events = (std::mem::take(&mut slot.drained_in_progress) + report.events as u64) as usize;
        let now = self.clock.now();
        let device = idx as u32;
        if report.interrupted > 0 {
            self.observe(now, Observed::Interrupted { device, count: report.interrupted as u64 });
        }
        for event in scratch.drain(..) {
            self.feed(now, Input::Event { device, event });
            self.carry_out(now);
        }
        self.scratch = scratch;
        self.drain_ended(idx, report.end, events, now);
        if std::mem::take(&mut self.devices[idx].hung_up) {
            self.feed(now, Input::HungUp { device });
            self.carry_out(now);
        }
    }

    /// What a drain's end means: serviced again (budget), reported (empty),
    /// or a read error for the machine.
    fn drain_ended(&mut self, idx: usize, end: DrainEnd, events: usize, now: Millis) {
        let device = idx as u32;
        let slot = &mut self.devices[idx];
        match end {
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
                self.feed(now, Input::ReadError { device, errno });
                self.carry_out(now);
            }
        }
    }

    /// Feeds one input to the machine, the observer seeing it first: the
    /// one way the monitor gives its machine anything.
    pub(super) fn feed(&mut self, now: Millis, input: Input<'_>) -> Handled {
        self.observe(now, Observed::Input(&input));
        self.machine.handle(now, &input)
    }

    pub(super) fn observe(&mut self, now: Millis, what: Observed<'_>) {
        if let Some(observer) = self.observer.as_mut() {
            observer(now, what);
        }
    }

    /// Tells the observer of each probe a worker took since it last looked
    /// (the word reads `probing`): the machine reads it in its timers, so a
    /// replay takes it at the same instant.
    pub(super) fn observe_probes_taken(&mut self, now: Millis) {
        let probing: Vec<RailId> =
            self.machine.rails().filter(|r| r.word.reason == PauseReason::Probing).map(|r| r.id).collect();
        self.probes_out.retain(|id| probing.contains(id));
        for id in probing {
            if !self.probes_out.contains(&id) {
                self.probes_out.push(id);
                self.feed(now, Input::ProbeTaken { device: id.device, port: id.port });
            }
        }
    }

    fn notify(&mut self, t: Millis, what: Happening) {
        self.notifier.send(Notification { t, what });
    }
}
