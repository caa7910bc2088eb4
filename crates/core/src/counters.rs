//! The counters that witness a flap when the port's state does not: a
//! flap whose PORT_ERR and PORT_ACTIVE were both lost leaves the port
//! ACTIVE and its QPs dead, and only these moved.

/// What a counter read found. Each is `None` when the driver does not
/// have it (older drivers, an InfiniBand port has no netdev).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct PortCounters {
    /// The port's `link_downed` (`ports/N/counters/`, or rxe's
    /// `hw_counters/`): times the link went down.
    pub link_downed: Option<u64>,
    /// The netdev's `carrier_changes` (Ethernet link layer).
    pub carrier_changes: Option<u64>,
    /// The netdev's `carrier_down_count`.
    pub carrier_down: Option<u64>,
}

impl PortCounters {
    /// Whether any counter both reads have rose from `before` to `self`
    /// (one that went back, as after a driver reload, is a new baseline,
    /// not a flap).
    pub fn rose_since(&self, before: &PortCounters) -> bool {
        let rose = |now: Option<u64>, then: Option<u64>| matches!((now, then), (Some(n), Some(t)) if n > t);
        rose(self.link_downed, before.link_downed)
            || rose(self.carrier_changes, before.carrier_changes)
            || rose(self.carrier_down, before.carrier_down)
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
        let mut next = CountersBaseline { values: [0; 3], present: READ };
        for (i, v) in [fresh.link_downed, fresh.carrier_changes, fresh.carrier_down].into_iter().enumerate() {
            if let Some(v) = v {
                next.values[i] = v;
                next.present |= 1 << i;
            }
        }
        *self = next;
        before
    }

    /// Forgets the read kept.
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
