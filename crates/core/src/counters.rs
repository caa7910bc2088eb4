//! The counters that witness a flap when the port's state does not: a
//! flap whose PORT_ERR and PORT_ACTIVE were both lost leaves the port
//! ACTIVE and its QPs dead, and only these moved.

use crate::time::Millis;

/// What a counter read found. Each is `None` when the driver does not
/// have it (older drivers, an InfiniBand port has no netdev).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash, serde::Serialize, serde::Deserialize)]
pub struct PortCounters {
    /// The port's `link_downed` (`ports/N/counters/`, or rxe's
    /// `hw_counters/`): times the link went down.
    pub link_downed: Option<u64>,
    /// The netdev's `carrier_changes` (Ethernet link layer).
    pub carrier_changes: Option<u64>,
    /// The netdev's `carrier_down_count`.
    pub carrier_down: Option<u64>,
}

/// One of the flap counters, in [`PortCounters`]' order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Counter {
    /// `link_downed`.
    LinkDowned,
    /// `carrier_changes`.
    CarrierChanges,
    /// `carrier_down_count`.
    CarrierDown,
}

impl Counter {
    /// The three, in order.
    pub const ALL: [Counter; 3] = [Counter::LinkDowned, Counter::CarrierChanges, Counter::CarrierDown];

    /// Its name in logs and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Counter::LinkDowned => "link_downed",
            Counter::CarrierChanges => "carrier_changes",
            Counter::CarrierDown => "carrier_down",
        }
    }

    /// Its bit in a [`PortCounters::stuck`] mask.
    pub fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// The width (in bits) of the counter whose maximum `value` is, if it is
/// one: legacy PMA counters stop at 2^8−1 or 2^16−1, others at 2^32−1 or
/// 2^64−1, and a counter stuck there counts nothing more (gpud #943 saw a
/// live mlx5 port with `link_downed` at 255).
pub fn saturated_width(value: u64) -> Option<u32> {
    [8, 16, 32, 64].into_iter().find(|&bits| value == u64::MAX >> (64 - bits))
}

impl PortCounters {
    /// A counter's value, if read.
    pub fn get(&self, counter: Counter) -> Option<u64> {
        match counter {
            Counter::LinkDowned => self.link_downed,
            Counter::CarrierChanges => self.carrier_changes,
            Counter::CarrierDown => self.carrier_down,
        }
    }

    /// The counters read at a width's maximum ([`saturated_width`]), as a
    /// mask of [`Counter::bit`]s: stuck, they cannot witness a flap.
    pub fn stuck(&self) -> u8 {
        Counter::ALL
            .into_iter()
            .filter(|&c| self.get(c).is_some_and(|v| saturated_width(v).is_some()))
            .map(Counter::bit)
            .sum()
    }

    /// Whether every counter the read has is stuck: the rule is blind on
    /// the port (only port reads and the carrier remain).
    pub fn all_stuck(&self) -> bool {
        let present: u8 = Counter::ALL.into_iter().filter(|&c| self.get(c).is_some()).map(Counter::bit).sum();
        present != 0 && self.stuck() == present
    }

    /// Whether any counter rose from `before` to `self` between two reads
    /// that both know its value: one that went back, as after a driver
    /// reload, is a new baseline, not a flap; a read at a width's maximum
    /// ([`saturated_width`]) is unknown, so a rise into a maximum, from one
    /// maximum to another or from a maximum on is never a flap (the first
    /// read below every maximum is a new baseline). The other counters
    /// still witness one.
    pub fn rose_since(&self, before: &PortCounters) -> bool {
        let known = |v: Option<u64>| v.filter(|&v| saturated_width(v).is_none());
        Counter::ALL
            .into_iter()
            .any(|c| matches!((known(self.get(c)), known(before.get(c))), (Some(n), Some(t)) if n > t))
    }

    /// Whether the read found any counter at all.
    pub fn any(&self) -> bool {
        self.link_downed.is_some() || self.carrier_changes.is_some() || self.carrier_down.is_some()
    }
}

/// A rail's last [`PortCounters`] read, or none, kept in 32 bytes rather
/// than `Option<PortCounters>`'s 48: the three values, and one byte saying
/// which are there and whether there was a read at all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CountersBaseline {
    values: [u64; 3],
    /// Bit `i`: `values[i]` is there; [`READ`]: there was a read.
    present: u8,
    /// The [`Counter::bit`]s already said to be stuck (once per device
    /// context: cleared with the baseline).
    stuck_said: u8,
    /// A rise read with the port ACTIVE and no flap seen, waiting to be
    /// confirmed as a silent flap (cleared with the baseline): when its
    /// confirming read is due, and whether one is waiting. Kept as plain
    /// fields, always written, not as an `Option<Suspect>` whose `until`
    /// is left unwritten for `None`: the release build compares `until`
    /// before it tests the tag, which valgrind reports as a jump on
    /// uninitialised bytes in every C program (issue 42, item 9).
    suspect_until: Millis,
    suspect_asked: bool,
    suspect_waiting: bool,
}

/// How long after a flap-counter rise read with the port ACTIVE the port is
/// read again to confirm it as a silent flap. The kernel counts a carrier
/// loss at once; rxe's port state follows some milliseconds later and its
/// PORT_ERR reaches a reader later still under load (64 ms seen in the VM):
/// a read in between is a race, not a flap no event said.
pub const SILENT_FLAP_CONFIRM_MS: u64 = 250;

/// A flap-counter rise not yet called a silent flap: the counters move
/// before the port's state and its event do, so a read that races a
/// carrier loss sees the rise with the port still ACTIVE. It is confirmed
/// by a port read at `until` that finds the rail still active with no
/// flap seen in between.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Suspect {
    /// When the confirming read is due.
    pub(crate) until: Millis,
    /// The confirming read was asked for.
    pub(crate) asked: bool,
}

/// [`CountersBaseline::present`]'s bit for "a read is kept".
const READ: u8 = 1 << 3;

impl CountersBaseline {
    /// The read kept, if any.
    pub(crate) fn get(&self) -> Option<PortCounters> {
        if self.present & READ == 0 {
            return None;
        }
        let value = |i: usize| (self.present & (1 << i) != 0).then_some(self.values[i]);
        Some(PortCounters { link_downed: value(0), carrier_changes: value(1), carrier_down: value(2) })
    }

    /// Keeps `fresh`; returns the read kept before.
    pub(crate) fn replace(&mut self, fresh: PortCounters) -> Option<PortCounters> {
        let before = self.get();
        let mut next = CountersBaseline { values: [0; 3], present: READ, ..*self };
        for (i, v) in [fresh.link_downed, fresh.carrier_changes, fresh.carrier_down].into_iter().enumerate() {
            if let Some(v) = v {
                next.values[i] = v;
                next.present |= 1 << i;
            }
        }
        *self = next;
        before
    }

    /// The counters of `read` stuck at their maximum and not said so yet;
    /// they count as said from now on.
    pub(crate) fn newly_stuck(&mut self, read: &PortCounters) -> u8 {
        let new = read.stuck() & !self.stuck_said;
        self.stuck_said |= new;
        new
    }

    /// The rise waiting to be confirmed, if any.
    pub(crate) fn suspect(&self) -> Option<Suspect> {
        self.suspect_waiting.then_some(Suspect { until: self.suspect_until, asked: self.suspect_asked })
    }

    /// Sets (or, with `None`, drops) the rise waiting to be confirmed.
    pub(crate) fn set_suspect(&mut self, suspect: Option<Suspect>) {
        let s = suspect.unwrap_or(Suspect { until: Millis::ZERO, asked: false });
        (self.suspect_until, self.suspect_asked, self.suspect_waiting) = (s.until, s.asked, suspect.is_some());
    }

    /// Forgets the read kept, and what was said of it.
    pub(crate) fn clear(&mut self) {
        *self = CountersBaseline::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rise_of_any_counter_both_reads_have_counts() {
        let before = PortCounters { link_downed: Some(3), carrier_changes: Some(10), carrier_down: None };
        assert!(!before.rose_since(&before));
        assert!(PortCounters { link_downed: Some(4), ..before }.rose_since(&before));
        assert!(PortCounters { carrier_changes: Some(12), ..before }.rose_since(&before));
        // A counter only one read has says nothing; one that went back is
        // a reset.
        assert!(!PortCounters { carrier_down: Some(1), ..before }.rose_since(&before));
        assert!(!PortCounters { link_downed: Some(0), ..before }.rose_since(&before));
        assert!(!PortCounters::default().any());
    }

    #[test]
    fn a_counter_at_its_widths_maximum_is_stuck() {
        for (v, w) in [(255, Some(8)), (65_535, Some(16)), (u64::from(u32::MAX), Some(32)), (u64::MAX, Some(64))] {
            assert_eq!(saturated_width(v), w, "{v}");
        }
        for v in [0, 1, 254, 256, 65_534, 65_536, u64::from(u32::MAX) + 1] {
            assert_eq!(saturated_width(v), None, "{v}");
        }
        let c = PortCounters { link_downed: Some(255), carrier_changes: Some(12), carrier_down: None };
        assert_eq!(c.stuck(), Counter::LinkDowned.bit());
        assert!(!c.all_stuck());
        let blind = PortCounters { carrier_changes: None, ..c };
        assert!(blind.all_stuck());
        assert!(!PortCounters::default().all_stuck(), "no counter is not a stuck one");
        // Stuck, it does not rise; the carrier's counter still does.
        assert!(!c.rose_since(&c));
        assert!(PortCounters { carrier_changes: Some(14), ..c }.rose_since(&c));
        // Into a maximum, from one maximum to another, from a maximum on:
        // a read there is unknown, so none is a rise.
        let link = |v| PortCounters { link_downed: Some(v), ..Default::default() };
        for (from, to) in [(254, 255), (255, 65_535), (255, 256), (65_534, 65_535)] {
            assert!(!link(to).rose_since(&link(from)), "{from} -> {to}");
        }
        assert!(link(257).rose_since(&link(256)));
    }

    #[test]
    fn a_baseline_gives_back_what_it_kept() {
        let mut b = CountersBaseline::default();
        assert_eq!(b.get(), None);
        let reads = [
            PortCounters::default(),
            PortCounters { link_downed: Some(0), ..Default::default() },
            PortCounters { link_downed: Some(u64::MAX), carrier_changes: None, carrier_down: Some(7) },
            PortCounters { link_downed: None, carrier_changes: Some(3), carrier_down: None },
        ];
        let mut kept = None;
        for read in reads {
            assert_eq!(b.replace(read), kept);
            assert_eq!(b.get(), Some(read));
            kept = Some(read);
        }
        b.clear();
        assert_eq!(b.get(), None);
    }
}
