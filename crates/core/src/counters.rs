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
}
