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
//! So what is read from a device's fd (an event, a read error, a hang-up)
//! in a later wake-up of the instant than another device's reads, a run of
//! the timers or a re-open gets a `drain` step before that wake-up's steps
//! (the replay reads what came before, runs its timers, then applies the
//! rest), and so does a device leaving or coming to the host's list after
//! an earlier wake-up saw anything (the replay applies the list change and
//! then reads, so it would see it before the rest of a burst past the
//! drain budget), and a change a query saw when an earlier wake-up of the
//! instant asked the port the same and read the old value. One device's
//! reads in several wake-ups need none: the replay reads them in order.
//! Where the replay reads anyway (a transfer report, a device leaving or
//! coming back), the instant starts afresh.

/// Where the current instant's wake-ups are.
#[derive(Debug, Default)]
pub(super) struct Wakes {
    /// The instant of the last observation.
    t: u64,
    /// The wake-ups so far (the current one's number).
    count: u64,
    /// The first wake-up of the current part of the instant (since it
    /// began, or since the replay last read the devices in it).
    first: u64,
    /// The devices read in this part, each with the last wake-up it was
    /// read in.
    read: Vec<(u32, u64)>,
    /// The last wake-up of this part whose timers ran or that re-opened a
    /// device.
    ran: Option<u64>,
    /// The first wake-up of this part that saw anything.
    busy_since: Option<u64>,
    /// The answers observed now are the timers' (the tick, the audit).
    timers: bool,
    /// Events read so far.
    events: u64,
    /// The event whose queries are answered now: its device and number.
    answering: Option<(u32, u64)>,
}

impl Wakes {
    /// The monitor woke at `t`.
    pub(super) fn woke(&mut self, t: u64) {
        self.at(t);
        self.count += 1;
        self.asked_otherwise();
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
            self.restart(self.count + 1);
        }
    }

    /// A new part of the instant begins with wake-up `first`.
    fn restart(&mut self, first: u64) {
        self.first = first;
        self.read.retain(|&(_, w)| w >= first);
        self.ran = self.ran.filter(|&w| w >= first);
        self.busy_since = self.busy_since.filter(|&w| w >= first);
    }

    /// The machine's timers due run now: the answers that follow are
    /// theirs until something else is observed
    /// ([`asked_otherwise`](Self::asked_otherwise)).
    pub(super) fn timers_run(&mut self) {
        self.asked_otherwise();
        self.timers = true;
        self.ran = Some(self.count);
    }

    /// An event of `device` was read: the answers that follow are its
    /// queries'.
    pub(super) fn event_read(&mut self, device: u32) {
        self.events += 1;
        self.answering = Some((device, self.events));
    }

    /// The current wake-up's number.
    pub(super) fn current(&self) -> u64 {
        self.count
    }

    /// The events read so far.
    pub(super) fn events(&self) -> u64 {
        self.events
    }

    /// The event whose queries the answers observed now answer, if any:
    /// its device and number (see [`events`](Self::events)).
    pub(super) fn answering(&self) -> Option<(u32, u64)> {
        self.answering
    }

    /// Whether `t` is the current instant.
    pub(super) fn is_now(&self, t: u64) -> bool {
        self.t == t
    }

    /// A device was re-opened now (by the timers).
    pub(super) fn reopened(&mut self) {
        self.ran = Some(self.count);
    }

    /// Something other than the timers asks from now on (an event read, a
    /// device attached).
    pub(super) fn asked_otherwise(&mut self) {
        self.timers = false;
        self.answering = None;
    }

    /// Whether the answers observed now are the timers'.
    pub(super) fn timers_asking(&self) -> bool {
        self.timers
    }

    /// `device`'s fd is read now (an event, a read error, a hang-up):
    /// whether a `drain` step must go before this wake-up's steps (an
    /// earlier wake-up of the instant read another device, ran the timers
    /// or re-opened a device).
    pub(super) fn read_needs_drain(&mut self, device: u32) -> bool {
        let now = self.count;
        let need = self.ran.is_some_and(|w| w < now) || self.read.iter().any(|&(d, w)| d != device && w < now);
        self.note_read(device);
        need
    }

    /// A source of state (the carrier fd: what it tells is read anew, not
    /// queued) is read now: as [`read_needs_drain`](Self::read_needs_drain),
    /// and also when an earlier wake-up of the instant read the same
    /// source (the replay would read both changes as one).
    pub(super) fn state_read_needs_drain(&mut self, source: u32) -> bool {
        let now = self.count;
        let read_before = self.read.iter().any(|&(d, w)| d == source && w < now);
        self.read_needs_drain(source) || read_before
    }

    /// `device`'s fd is read now (its reads were interrupted, say).
    pub(super) fn note_read(&mut self, device: u32) {
        let now = self.count;
        match self.read.iter_mut().find(|(d, _)| *d == device) {
            Some(entry) => entry.1 = now,
            None => self.read.push((device, now)),
        }
    }

    /// Whether a device leaving the host's list or coming to it now needs
    /// a `drain` step before this wake-up's steps: an earlier wake-up of
    /// the instant saw anything. The replay applies the unplug or plug and
    /// then reads, and its monitor sees the list change in its first
    /// wake-up, before the events still queued (a burst past the drain
    /// budget; an unplugged device's are dropped with it).
    pub(super) fn list_change_needs_drain(&self) -> bool {
        self.busy_since.is_some_and(|w| w < self.count)
    }

    /// Whether the current wake-up read no device but `device`.
    pub(super) fn only_read_now(&self, device: u32) -> bool {
        self.read.iter().all(|&(d, w)| d == device || w < self.count)
    }

    /// Whether a change a query saw at `t` needs a `drain` step before
    /// this wake-up's steps: the port was asked the same at `previous`, in
    /// wake-up `wake`, an earlier one of this part of the instant (which
    /// read the old value, and in the replay would read the new one).
    pub(super) fn change_needs_drain(&self, t: u64, previous: Option<u64>, wake: u64) -> bool {
        previous == Some(t) && self.t == t && self.first <= wake && wake < self.count
    }

    /// A `drain` step was placed before the current wake-up's steps: what
    /// it saw so far comes after it.
    pub(super) fn drain_placed(&mut self) {
        self.restart(self.count);
    }

    /// The replay reads the devices after the step just placed (a transfer
    /// report, an unplug, a plug): the instant starts afresh.
    pub(super) fn read_here(&mut self) {
        self.read.clear();
        self.ran = None;
        self.busy_since = None;
        self.first = self.count;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_after_another_device_s_in_an_earlier_wake_up_needs_a_drain() {
        let mut w = Wakes::default();
        w.woke(10);
        assert!(!w.read_needs_drain(0));
        w.woke(10);
        assert!(!w.read_needs_drain(0), "one device, in order");
        assert!(!w.read_needs_drain(1), "the same wake-up as device 0's");
        w.woke(10);
        assert!(w.read_needs_drain(0), "after device 1's");
        w.drain_placed();
        assert!(!w.read_needs_drain(0), "once");
        w.woke(11);
        assert!(!w.read_needs_drain(0), "a new instant");
    }

    #[test]
    fn a_read_after_the_timers_or_a_re_open_needs_a_drain() {
        let mut w = Wakes::default();
        w.woke(10);
        w.timers_run();
        assert!(w.timers_asking());
        w.woke(10);
        assert!(!w.timers_asking());
        assert!(w.read_needs_drain(0));
        let mut w = Wakes::default();
        w.woke(10);
        w.reopened();
        w.read_here();
        w.woke(10);
        assert!(!w.read_needs_drain(0), "the replay read the devices in between");
    }

    #[test]
    fn only_the_devices_read_in_this_wake_up_count() {
        let mut w = Wakes::default();
        w.woke(10);
        w.note_read(1);
        w.woke(10);
        w.note_read(0);
        assert!(w.only_read_now(0), "device 1 was read in an earlier wake-up");
        w.note_read(1);
        assert!(!w.only_read_now(0));
    }

    #[test]
    fn a_list_change_after_an_earlier_wake_up_that_saw_anything_needs_a_drain() {
        let mut w = Wakes::default();
        w.woke(10);
        w.saw(10);
        assert!(!w.list_change_needs_drain());
        w.woke(10);
        w.saw(10);
        assert!(w.list_change_needs_drain());
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
        w.drain_placed();
        assert!(!w.change_needs_drain(10, Some(10), first), "before the drain");
    }
}
