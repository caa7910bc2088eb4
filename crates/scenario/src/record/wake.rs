//! The wake-ups of one instant, and where the replay must be told to read.
//!
//! A replay applies the steps of an instant, then lets its monitor read
//! them (in one wake-up, or a few when a drain spends its budget). The live
//! monitor may have read the same instant in several wake-ups with things
//! between them: its timers (a re-open, the tick), a step the recording
//! does not see (a read fault on a device already read), or, on a real
//! host, events arriving apart within one millisecond. Read in one go, the
//! replay would read a device's later events before another device's
//! earlier ones, queue an event into a device it has not re-opened yet, or
//! run its timers after events the live monitor read after them.
//!
//! So an event read in a later wake-up of the instant than something else
//! the instant saw gets a `drain` step before that wake-up's steps (the
//! replay reads what came before, runs its timers, then applies the rest),
//! and so does a change a query saw when an earlier wake-up of the instant
//! asked the port the same and read the old value. Where the replay reads
//! anyway (a transfer report, a device leaving or coming back), the instant
//! starts afresh.

/// Where the current instant's wake-ups are.
#[derive(Debug, Default)]
pub(super) struct Wakes {
    /// The instant of the last observation.
    t: u64,
    /// The wake-ups so far (the current one's number).
    count: u64,
    /// The first wake-up of the instant that saw anything since the replay
    /// last read the devices in it.
    busy_since: Option<u64>,
    /// The answers observed now are the timers' (the tick, the audit).
    timers: bool,
}

impl Wakes {
    /// The monitor woke at `t`.
    pub(super) fn woke(&mut self, t: u64) {
        self.at(t);
        self.count += 1;
        self.timers = false;
    }

    /// The monitor runs its timers: the answers that follow are theirs
    /// until something else is observed ([`asked_otherwise`](Self::asked_otherwise)).
    pub(super) fn timers_run(&mut self) {
        self.timers = true;
    }

    /// Something other than the timers asks from now on (an event read, a
    /// device attached).
    pub(super) fn asked_otherwise(&mut self) {
        self.timers = false;
    }

    /// Whether the answers observed now are the timers'.
    pub(super) fn timers_asking(&self) -> bool {
        self.timers
    }

    /// Something was observed at `t`; returns the current wake-up.
    pub(super) fn saw(&mut self, t: u64) -> u64 {
        self.at(t);
        self.busy_since.get_or_insert(self.count);
        self.count
    }

    fn at(&mut self, t: u64) {
        if t != self.t {
            self.t = t;
            self.busy_since = None;
        }
    }

    /// Whether an event read now needs a `drain` step before this
    /// wake-up's steps: an earlier wake-up of the instant saw something.
    pub(super) fn event_needs_drain(&self) -> bool {
        self.busy_since.is_some_and(|w| w < self.count)
    }

    /// Whether a change a query saw at `t` needs a `drain` step before
    /// this wake-up's steps: the port was asked the same at `previous`, in
    /// wake-up `wake`, an earlier one of this instant (which read the old
    /// value, and in the replay would read the new one).
    pub(super) fn change_needs_drain(&self, t: u64, previous: Option<u64>, wake: u64) -> bool {
        previous == Some(t) && self.t == t && self.busy_since.is_some_and(|w| w <= wake) && wake < self.count
    }

    /// A `drain` step was placed before the current wake-up's steps: what
    /// it saw so far comes after it.
    pub(super) fn drain_placed(&mut self) {
        self.busy_since = Some(self.count);
    }

    /// The replay reads the devices after the step just placed (a transfer
    /// report, an unplug, a plug): the instant starts afresh.
    pub(super) fn read_here(&mut self) {
        self.busy_since = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_in_a_later_wake_up_of_a_busy_instant_needs_a_drain() {
        let mut w = Wakes::default();
        w.woke(10);
        w.saw(10);
        assert!(!w.event_needs_drain(), "the first wake-up of the instant");
        w.woke(10);
        w.saw(10);
        assert!(w.event_needs_drain());
        w.drain_placed();
        assert!(!w.event_needs_drain(), "once");
        w.woke(11);
        w.saw(11);
        assert!(!w.event_needs_drain(), "a new instant");
        w.read_here();
        w.woke(11);
        w.saw(11);
        assert!(!w.event_needs_drain(), "the replay read the devices in between");
    }

    #[test]
    fn a_change_needs_a_drain_after_an_earlier_wake_up_asked_the_same() {
        let mut w = Wakes::default();
        w.woke(10);
        let first = w.saw(10);
        w.woke(10);
        w.saw(10);
        assert!(w.change_needs_drain(10, Some(10), first));
        assert!(!w.change_needs_drain(10, Some(9), first), "asked in an earlier instant");
        assert!(!w.change_needs_drain(10, Some(10), first + 1), "asked in this wake-up");
    }
}
