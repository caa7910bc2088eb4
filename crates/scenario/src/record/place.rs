//! Where in time a recorded change goes, so that a replay sees it.
//!
//! A live monitor observes a change when it asks (a port query, a read of
//! the event fd); the replay asks at its own times, which run on schedule
//! where the live ones may wake a little late. So a change is never placed
//! at the time it was seen but where the replay's asking will find it:
//!
//! - **A query's change.** A query saw a change at `t`; the port was last
//!   asked at `p`. The change happened in between, and the replay must see
//!   it at its own query. A query of the timers (the tick, the audit) may
//!   run late, so its change is placed at `max(p + 1, t - SLACK_MS)`: after
//!   the replay's previous query, no later than its next. An event's query
//!   is at the event's time, where the replay reads the event and asks
//!   too: its change goes at `t`. On a virtual clock (`simulate --record`)
//!   queries are never late, and which ticks run depends on when steps
//!   come (idle ticks are skipped): every step goes at `t` itself.
//! - **After a re-open.** The first query of a port after its device was
//!   opened again (after a `DEVICE_FATAL`, a hang-up, a removal, or
//!   leaving the host's list) saw what changed while the device was
//!   closed: the step goes at the close, after it (or just after the
//!   port's last query, when that was in the close's instant), since the
//!   replay re-opens at its own time (the backoff's jitter is drawn anew),
//!   maybe earlier than the live one, and must see it too.
//! - **A fault after the events of its drain.** A read error or a hang-up
//!   noticed in the drain that read events at the same instant goes at
//!   the same time, after them: the replay reads what its devices queued
//!   before a fault step of the same instant first.
//! - **Never before what is written.** Steps are written once no later
//!   observation can be placed before them ([`SLACK_MS`] behind the
//!   clock); from then on, nothing is placed before that floor.
//!
//! The [`Timeline`] holds the changes placed and not written yet, in the
//! small form the monitor's path can afford ([`Change`]).

use railwatch_core::{AsyncEvent, Element, PortCounters};

use super::WAKE_EVENT_CODE;
use crate::scenario::{
    CarrierChange, CountersChange, Fault, GidChange, LinkChange, MAX_REPEAT, PortStateChange, ProbeStep, Step,
    StepEvent, TransferStep,
};

/// How far before a query's time its change may be placed (see the module
/// docs): more than a live wake-up is ever late, less than a tick.
pub const SLACK_MS: u64 = 50;

/// What one pending step changes. Small on purpose: the monitor's path
/// pushes one per change it saw, and a burst of them must stay in cache
/// (a `Step` is three times the size); the `Step` is built when written.
#[derive(Debug, Clone, Copy)]
pub(super) enum Change {
    PortState(PortStateChange),
    Link(LinkChange),
    Gid(GidChange),
    /// A fault; `wake`: with the event that only wakes the reader (a read
    /// error is noticed on a wake-up).
    Fault {
        fault: Fault,
        wake: bool,
    },
    Event(StepEvent),
    /// A port's netdev carrier, notified or silent.
    Carrier(CarrierChange),
    /// A port's flap counters, `NONE` for one it has not (an
    /// `Option<u64>` each would make every queued change larger).
    Counters {
        port: u8,
        values: [u64; 3],
    },
    Transfers(TransferStep),
    /// The engine took the half-open breaker's probe and reported it.
    Probe(ProbeStep),
    /// The monitor reads what was queued before (`drain = true`).
    Drain,
}

/// A counter a port has not, in [`Change::Counters`].
const NONE: u64 = u64::MAX;

impl Change {
    /// The change for `c` (a counter at `u64::MAX` is recorded one less).
    pub(super) fn counters(c: CountersChange) -> Change {
        let v = |x: Option<u64>| x.map_or(NONE, |n| n.min(NONE - 1));
        let k = c.counters;
        Change::Counters { port: c.port, values: [v(k.link_downed), v(k.carrier_changes), v(k.carrier_down)] }
    }
}

/// A pending line of the recording.
#[derive(Debug)]
pub(super) enum Entry {
    Step { device: u32, change: Change },
    Comment(String),
}

impl Change {
    /// The scenario step that makes this change on `device` at `at_ms`.
    pub(super) fn step(self, at_ms: u64, device: u32, name: &str) -> Step {
        let mut step = Step {
            index: 0,
            line: 0,
            at_ms,
            device: name.to_owned(),
            device_index: device as usize,
            port_state: None,
            link: None,
            fault: None,
            event: None,
            gid: None,
            counters: None,
            carrier: None,
            transfers: None,
            probe: None,
            drain: false,
        };
        match self {
            Change::PortState(c) => step.port_state = Some(c),
            Change::Link(c) => step.link = Some(c),
            Change::Gid(c) => step.gid = Some(c),
            Change::Fault { fault, wake } => {
                step.fault = Some(fault);
                if wake {
                    step.event = Some(StepEvent { event: AsyncEvent::new(WAKE_EVENT_CODE, Element::None), repeat: 1 });
                }
            }
            Change::Event(e) => step.event = Some(e),
            Change::Counters { port, values } => {
                let v = |x: u64| (x != NONE).then_some(x);
                let counters = PortCounters {
                    link_downed: v(values[0]),
                    carrier_changes: v(values[1]),
                    carrier_down: v(values[2]),
                };
                step.counters = Some(CountersChange { port, counters });
            }
            Change::Carrier(c) => step.carrier = Some(c),
            Change::Transfers(t) => step.transfers = Some(t),
            Change::Probe(p) => step.probe = Some(p),
            Change::Drain => step.drain = true,
        }
        step
    }
}

/// The changes placed and not written yet, and the floor below which
/// nothing goes any more.
#[derive(Debug, Default)]
pub(super) struct Timeline {
    pending: Vec<(u64, Entry)>,
    /// Nothing from now on is placed before this.
    floor: u64,
    /// The monitor's queries are on time (a virtual clock): a change is
    /// placed at the query that saw it, no slack.
    on_time: bool,
    /// Where the current wake-up's changes begin in `pending` (unknown
    /// after a write).
    wake_start: Option<usize>,
    /// Where the last event placed is in `pending` (its step, or the burst
    /// it was counted in; unknown after a write).
    last_event: Option<usize>,
}

impl Timeline {
    /// Where nothing may be placed before.
    pub(super) fn floor(&self) -> u64 {
        self.floor
    }

    /// The slack: [`SLACK_MS`], or none on a virtual clock.
    pub(super) fn slack(&self) -> u64 {
        if self.on_time { 0 } else { SLACK_MS }
    }

    /// From now on, queries are on time (see [`Timeline::slack`]).
    pub(super) fn set_on_time(&mut self) {
        self.on_time = true;
    }

    /// `max(previous + 1, t - slack)`, never before what is written.
    pub(super) fn placed(&self, previous: Option<u64>, t: u64) -> u64 {
        self.placed_after(previous, t.saturating_sub(self.slack()), t)
    }

    /// `max(previous + 1, earliest)`, at most `t`, never before what is
    /// written.
    pub(super) fn placed_after(&self, previous: Option<u64>, earliest: u64, t: u64) -> u64 {
        previous.map_or(0, |p| p.saturating_add(1)).max(earliest).min(t).max(self.floor)
    }

    /// Where a change a query saw at `t` goes, the port asked last at
    /// `previous`: as [`placed`](Self::placed), unless this is the port's
    /// first query since its device came back (`reopen`: when it closed,
    /// after a `DEVICE_FATAL`, a hang-up, or leaving the host's list, and
    /// when it was opened again); then at the close, after it, or just
    /// after the port's last query when that was in the close's instant
    /// (the replay applies an instant's steps before its queries).
    /// A change a query of the timers saw (`late`: the tick, the audit,
    /// which a busy host runs late) goes as [`placed`](Self::placed); one
    /// an event's query (or an attach's, a read error's) saw goes at `t`,
    /// where the replay reads that event and asks too.
    pub(super) fn placed_for(&self, reopen: Option<(u64, u64)>, previous: Option<u64>, t: u64, late: bool) -> u64 {
        match reopen {
            // Left the host's list and back in one instant: at the close,
            // before the plug (the driver handles each list change before
            // the next step, so a query before the close does not see it).
            Some((closed, reopened)) if closed == reopened => closed.max(self.floor),
            // A device plugged in again a millisecond later leaves no room
            // after the close: at the close itself, after its step.
            Some((closed, _)) => self.placed_after(previous, closed, t),
            None if late => self.placed(previous, t),
            None => self.placed_after(previous, t, t),
        }
    }

    /// Places a change of `device` just before its last `plug` or `restore`
    /// step still pending at `at`, so the replay's re-open finds it (after
    /// it, the replay's attach would read the old state); at `at` if there
    /// is none.
    pub(super) fn push_before_reopen(&mut self, at: u64, device: u32, change: Change) {
        let reopen = self.pending.iter().rposition(|(t, e)| {
            *t == at
                && matches!(e, Entry::Step { device: d, change: Change::Fault { fault: Fault::Plug | Fault::Restore, .. } }
                    if *d == device)
        });
        let at = at.max(self.floor);
        match reopen {
            Some(i) => self.insert(i, (at, Entry::Step { device, change })),
            None => self.push(at, device, change),
        }
    }

    /// Where a fault on `device` noticed at `t` goes: at `t`, after the
    /// events its drain read in the same instant (placed before it; the
    /// replay reads what was queued before a fault step first), never
    /// before what is written.
    pub(super) fn fault_time(&self, t: u64) -> u64 {
        t.max(self.floor)
    }

    /// The monitor woke: what is placed from now on is its wake-up's.
    pub(super) fn woke(&mut self) {
        self.wake_start = Some(self.pending.len());
    }

    /// Places a `drain` step for `device` at `at`, before what the current
    /// wake-up placed. Says whether it could (not when a write came in the
    /// wake-up, which a caller never does).
    pub(super) fn drain_before_wake(&mut self, at: u64, device: u32) -> bool {
        let Some(i) = self.wake_start else { return false };
        self.insert(i, (at.max(self.floor), Entry::Step { device, change: Change::Drain }));
        self.wake_start = Some(i + 1);
        true
    }

    /// The event just placed (or counted in a burst) is the last one
    /// ([`drain_before_last_event`](Self::drain_before_last_event)).
    pub(super) fn placed_event(&mut self) {
        self.last_event = self.pending.len().checked_sub(1);
    }

    /// Places a `drain` step just before the last event placed, which must
    /// be `device`'s at `at` (a change its query saw had been read the old
    /// way by a query before it in the instant: the replay reads what came
    /// before first). A burst is split: its last event goes after the
    /// drain. Says whether it could.
    pub(super) fn drain_before_last_event(&mut self, at: u64, device: u32) -> bool {
        let Some(i) = self.last_event else { return false };
        let Some((t, Entry::Step { device: d, change: Change::Event(ev) })) = self.pending.get_mut(i) else {
            return false;
        };
        if *t != at || *d != device {
            return false;
        }
        let mut last = i;
        if ev.repeat > 1 {
            ev.repeat -= 1;
            let one = Change::Event(StepEvent { event: ev.event, repeat: 1 });
            last = i + 1;
            self.insert(last, (at, Entry::Step { device, change: one }));
        }
        self.insert(last, (at, Entry::Step { device, change: Change::Drain }));
        self.last_event = Some(last + 1);
        true
    }

    /// Inserts `entry` at `i` in `pending`, keeping where the wake-up's
    /// changes begin and where the last event is.
    fn insert(&mut self, i: usize, entry: (u64, Entry)) {
        self.pending.insert(i, entry);
        if let Some(start) = self.wake_start.as_mut().filter(|s| i < **s) {
            *start += 1;
        }
        if let Some(last) = self.last_event.as_mut().filter(|l| i <= **l) {
            *last += 1;
        }
    }

    /// Places a step at `at`.
    pub(super) fn push(&mut self, at: u64, device: u32, change: Change) {
        self.pending.push((at, Entry::Step { device, change }));
    }

    /// Places a comment at `t`, or at the floor if that is later.
    pub(super) fn comment(&mut self, t: u64, text: String) {
        self.pending.push((t.max(self.floor), Entry::Comment(text.replace('\n', " "))));
    }

    /// Counts `event` once more when the last change placed is the same
    /// event on `device` at `t` (a burst in one instant is one step with
    /// `repeat`). Says whether it did.
    pub(super) fn repeat_burst(&mut self, t: u64, device: u32, event: AsyncEvent) -> bool {
        if let Some((at, Entry::Step { device: d, change: Change::Event(ev) })) = self.pending.last_mut()
            && *at == t
            && *d == device
            && ev.event == event
        {
            ev.repeat += 1;
            return true;
        }
        false
    }

    /// Adds `count` to the last change placed when it is an `eintr` on
    /// `device` at `t` with room for them (a scenario's `count` is at most
    /// [`MAX_REPEAT`]). Says whether it did.
    pub(super) fn more_interrupts(&mut self, t: u64, device: u32, count: u64) -> bool {
        if let Some((at, Entry::Step { device: d, change: Change::Fault { fault: Fault::Eintr { count: n }, .. } })) =
            self.pending.last_mut()
            && *at == t
            && *d == device
            && *n + count <= MAX_REPEAT
        {
            *n += count;
            return true;
        }
        false
    }

    /// Turns the last read error placed for `device` at `t` or later (if
    /// there is one) into a removal: the fd hung up, or its port queries
    /// fail too. Says whether there was one.
    pub(super) fn read_error_to_removal(&mut self, device: u32, t: u64) -> bool {
        let last = self.pending.iter_mut().rev().find_map(|(at, e)| match e {
            Entry::Step { device: d, change }
                if *d == device && matches!(change, Change::Fault { fault: Fault::Eio | Fault::Ebadf, .. }) =>
            {
                Some((*at, change))
            }
            _ => None,
        });
        let Some((_, change)) = last.filter(|(at, _)| *at >= t) else { return false };
        // A removal hangs the fd up itself: no wake-up event.
        *change = Change::Fault { fault: Fault::Remove, wake: false };
        true
    }

    /// Takes what is placed before `cutoff`, in time order (equal times in
    /// the order they were placed), and raises the floor to `cutoff`.
    pub(super) fn take_due(&mut self, cutoff: u64) -> std::vec::Drain<'_, (u64, Entry)> {
        // Stable: equal times keep the order they were observed in. In
        // place, and drained in place: the buffer keeps its capacity.
        self.pending.sort_by_key(|(at, _)| *at);
        let due = self.pending.partition_point(|(at, _)| *at < cutoff);
        self.floor = self.floor.max(cutoff);
        self.wake_start = None;
        self.last_event = None;
        self.pending.drain(..due)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use railwatch_core::PortState;

    /// What the monitor's path pushes stays small (docs/PERFORMANCE.md,
    /// row 11): a burst of queued changes must fit in cache.
    #[test]
    fn a_queued_change_is_a_third_of_a_step_at_most() {
        let queued = std::mem::size_of::<(u64, Entry)>();
        assert!(queued <= 64, "{queued} bytes");
        assert!(queued * 3 <= std::mem::size_of::<Step>(), "{queued} vs {}", std::mem::size_of::<Step>());
        eprintln!("a queued change: {queued} bytes; a Step: {} bytes", std::mem::size_of::<Step>());
    }

    fn down(port: u8) -> Change {
        Change::PortState(PortStateChange { port, state: PortState::Down })
    }

    #[test]
    fn a_query_s_change_goes_after_the_previous_query_and_within_the_slack() {
        let tl = Timeline::default();
        assert_eq!(tl.placed(Some(900), 1000), 1000 - SLACK_MS);
        assert_eq!(tl.placed(Some(990), 1000), 991);
        assert_eq!(tl.placed(None, 10), 0);
        assert_eq!(tl.placed(Some(1000), 1000), 1000, "never after the query that saw it");
        // The first query after a re-open: at the close.
        assert_eq!(tl.placed_for(Some((200, 800)), Some(100), 1000, true), 200);
        let asked_then = tl.placed_for(Some((200, 800)), Some(200), 1000, true);
        assert_eq!(asked_then, 201, "asked in the close's instant, before it");
        assert_eq!(tl.placed_for(Some((200, 200)), Some(200), 1000, true), 200, "back in the close's instant");
        assert_eq!(tl.placed_for(None, Some(850), 1000, true), 1000 - SLACK_MS);
        assert_eq!(tl.placed_for(None, Some(850), 1000, false), 1000, "an event's query is on time");
    }

    /// What the first queries after a re-open saw goes before the
    /// re-open's step of the same instant, never after it.
    #[test]
    fn a_change_seen_on_a_reopen_goes_before_the_plug_of_its_instant() {
        let mut tl = Timeline::default();
        tl.push(100, 0, Change::Fault { fault: Fault::Unplug, wake: false });
        tl.push(100, 0, Change::Fault { fault: Fault::Plug, wake: false });
        tl.push(100, 1, Change::Fault { fault: Fault::Plug, wake: false });
        tl.push_before_reopen(100, 0, down(1));
        tl.push_before_reopen(100, 0, down(2));
        tl.push_before_reopen(200, 0, down(3));
        let order: Vec<(u64, u32, &str)> = tl
            .take_due(u64::MAX)
            .map(|(at, e)| match e {
                Entry::Step { device, change: Change::Fault { fault: Fault::Plug, .. } } => (at, device, "plug"),
                Entry::Step { device, change: Change::Fault { .. } } => (at, device, "unplug"),
                Entry::Step { device, .. } => (at, device, "down"),
                Entry::Comment(_) => (at, 9, "comment"),
            })
            .collect();
        assert_eq!(
            order,
            [
                (100, 0, "unplug"),
                (100, 0, "down"),
                (100, 0, "down"),
                (100, 0, "plug"),
                (100, 1, "plug"),
                (200, 0, "down")
            ]
        );
    }

    #[test]
    fn nothing_goes_before_what_is_written() {
        let mut tl = Timeline::default();
        tl.push(500, 0, down(1));
        tl.push(100, 0, down(2));
        tl.push(700, 0, down(3));
        let due: Vec<u64> = tl.take_due(600).map(|(at, _)| at).collect();
        assert_eq!(due, [100, 500]);
        assert_eq!(tl.floor(), 600);
        assert_eq!(tl.placed(Some(10), 650), 600);
        tl.comment(5, "late\nnews".into());
        let rest: Vec<(u64, bool)> =
            tl.take_due(u64::MAX).map(|(at, e)| (at, matches!(e, Entry::Comment(_)))).collect();
        assert_eq!(rest, [(600, true), (700, false)]);
    }

    #[test]
    fn a_fault_goes_after_its_drain_s_events_and_a_read_error_can_become_a_removal() {
        let mut tl = Timeline::default();
        let ev = AsyncEvent::new(10, Element::Port(1));
        tl.push(300, 0, Change::Event(StepEvent { event: ev, repeat: 1 }));
        assert!(tl.repeat_burst(300, 0, ev));
        assert!(!tl.repeat_burst(301, 0, ev));
        assert_eq!((tl.fault_time(300), tl.fault_time(299)), (300, 299));
        tl.push(301, 0, Change::Fault { fault: Fault::Eio, wake: true });
        assert!(!tl.read_error_to_removal(0, 302), "placed before the query that failed");
        assert!(tl.read_error_to_removal(0, 301));
        let faults: Vec<_> = tl
            .take_due(u64::MAX)
            .filter_map(|(_, e)| match e {
                Entry::Step { change: Change::Fault { fault, wake }, .. } => Some((fault, wake)),
                Entry::Step { change: Change::Event(e), .. } => {
                    assert_eq!(e.repeat, 2);
                    None
                }
                _ => None,
            })
            .collect();
        assert_eq!(faults, [(Fault::Remove, false)]);
    }
}
