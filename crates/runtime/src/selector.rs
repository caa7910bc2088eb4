//! A reference [`Selector`]: availability and bandwidth per rail, and a
//! bandwidth-weighted pick among the available ones.

use std::collections::BTreeMap;
use std::sync::Mutex;

use railwatch_core::{LinkRate, RailId, Selector};

#[derive(Debug, Clone, Copy, Default)]
struct Entry {
    available: bool,
    rate: Option<LinkRate>,
}

/// Weight of a rail whose rate is unknown: picked, but rarely (1 Mb/s).
const UNKNOWN_RATE_WEIGHT_MBPS: u64 = 1;

/// A selector an engine can use as is, or read as an example.
///
/// Safe to share between the monitor and worker threads (`Arc` it).
#[derive(Debug, Default)]
pub struct BandwidthSelector {
    rails: Mutex<BTreeMap<RailId, Entry>>,
}

impl BandwidthSelector {
    /// An empty selector.
    pub fn new() -> BandwidthSelector {
        BandwidthSelector::default()
    }

    fn with<R>(&self, f: impl FnOnce(&mut BTreeMap<RailId, Entry>) -> R) -> R {
        // A panic elsewhere while holding the lock cannot leave an entry
        // half-written (each write is one field), so poisoning is ignored.
        let mut guard = self.rails.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut guard)
    }

    /// Whether `rail` may be picked.
    pub fn is_available(&self, rail: RailId) -> bool {
        self.with(|m| m.get(&rail).is_some_and(|e| e.available))
    }

    /// The last rate seeded for `rail`.
    pub fn rate(&self, rail: RailId) -> Option<LinkRate> {
        self.with(|m| m.get(&rail).and_then(|e| e.rate))
    }

    /// The available rails, in id order.
    pub fn available(&self) -> Vec<RailId> {
        self.with(|m| m.iter().filter(|(_, e)| e.available).map(|(id, _)| *id).collect())
    }

    /// Sum of the available rails' known rates in Gb/s; `None` when no rail
    /// is available.
    pub fn aggregate_gbps(&self) -> Option<f64> {
        self.with(|m| {
            let mut any = false;
            let mut mbps = 0u64;
            for e in m.values().filter(|e| e.available) {
                any = true;
                if let Some(LinkRate::Known { mbps: r }) = e.rate {
                    mbps += r;
                }
            }
            any.then_some(mbps as f64 / 1000.0)
        })
    }

    /// Picks an available rail with probability proportional to its
    /// bandwidth. `seed` is any random `u64` the caller draws (the selector
    /// keeps no random state, so workers need no shared generator).
    pub fn pick(&self, seed: u64) -> Option<RailId> {
        self.with(|m| {
            let weight = |e: &Entry| match e.rate {
                Some(LinkRate::Known { mbps }) if mbps > 0 => mbps,
                _ => UNKNOWN_RATE_WEIGHT_MBPS,
            };
            let total: u64 = m.values().filter(|e| e.available).map(weight).sum();
            if total == 0 {
                return None;
            }
            let mut point = seed % total;
            for (id, e) in m.iter().filter(|(_, e)| e.available) {
                let w = weight(e);
                if point < w {
                    return Some(*id);
                }
                point -= w;
            }
            None
        })
    }
}

impl Selector for BandwidthSelector {
    fn set_available(&self, rail: RailId, available: bool) {
        self.with(|m| m.entry(rail).or_default().available = available);
    }

    fn reseed(&self, rail: RailId, rate: LinkRate) {
        self.with(|m| m.entry(rail).or_default().rate = Some(rate));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(port: u8) -> RailId {
        RailId { device: 0, port }
    }

    #[test]
    fn nothing_available_means_no_pick_and_no_aggregate() {
        let s = BandwidthSelector::new();
        assert_eq!(s.pick(7), None);
        assert_eq!(s.aggregate_gbps(), None);
        s.reseed(id(1), LinkRate::gbps(400));
        assert_eq!(s.pick(7), None, "seeded but unavailable");
        assert_eq!(s.aggregate_gbps(), None);
    }

    #[test]
    fn pick_is_weighted_by_bandwidth() {
        let s = BandwidthSelector::new();
        s.reseed(id(1), LinkRate::gbps(300));
        s.reseed(id(2), LinkRate::gbps(100));
        s.set_available(id(1), true);
        s.set_available(id(2), true);
        assert_eq!(s.aggregate_gbps(), Some(400.0));
        let mut counts = [0u32; 2];
        for seed in 0..400_000u64 {
            match s.pick(seed * 1000) {
                Some(r) if r == id(1) => counts[0] += 1,
                Some(r) if r == id(2) => counts[1] += 1,
                other => panic!("picked {other:?}"),
            }
        }
        assert_eq!(counts, [300_000, 100_000]);
        s.set_available(id(1), false);
        assert!((0..1000).all(|seed| s.pick(seed) == Some(id(2))));
        assert_eq!(s.aggregate_gbps(), Some(100.0));
        assert_eq!(s.available(), vec![id(2)]);
    }

    #[test]
    fn unknown_rate_rails_are_picked_rarely_and_count_zero() {
        let s = BandwidthSelector::new();
        s.reseed(id(1), LinkRate::Unknown);
        s.set_available(id(1), true);
        assert_eq!(s.pick(123), Some(id(1)));
        assert_eq!(s.aggregate_gbps(), Some(0.0));
    }
}
