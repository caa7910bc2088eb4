//! The data-path breaker: transfer failures that point at the local path,
//! seen through enough distinct peers within a window, take a rail out of
//! service; after a backoff one probe at a time may test the path, and only
//! a probe's success brings the rail back.
//!
//! Why distinct peers: a failure through one peer says the peer may be
//! down (Mooncake #3559: a remote NIC's outage latched local NICs down);
//! the same kind of failure through several peers at once says the local
//! side is. This module is the arithmetic (the window, the peers, the
//! backoff); the machine applies it (docs/STATE-MACHINE.md, "The data-path
//! breaker").

use crate::declare::settings;
use crate::setting::SettingKind;
use crate::time::Millis;

/// The most distinct peers the breaker needs to see (`min_peers`), so the
/// per-rail record of peers is a small fixed array.
pub const MAX_MIN_PEERS: usize = 16;

settings! {
    /// The breaker's settings. `Default` gives the documented defaults.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct DataPathConfig (prefix "data_path.") {
        /// Local-path failures within `window_ms` that open the breaker
        /// (default 8).
        pub failures: u64 = 8
            => SettingKind::Count { min: 1, max: 1_000_000 }, "local-path failures within the window that open it";
        /// The window they must fall in, from the first (default 10 s).
        pub window_ms: u64 = 10_000
            => SettingKind::Millis { min: 1 }, "the window they must fall in";
        /// The distinct peers they must come through (default 2, at most 16):
        /// failures through fewer are notified per peer and leave the rail in
        /// service.
        pub min_peers: u64 = 2
            => SettingKind::Count { min: 1, max: MAX_MIN_PEERS as u64 }, "the distinct peers they must come through";
        /// The first backoff before a probe (default 1 s).
        pub backoff_initial_ms: u64 = 1000
            => SettingKind::Millis { min: 1 }, "the first wait before a probe";
        /// The longest backoff (default 60 s): it doubles after each failed
        /// probe; the jitter is taken within it.
        pub backoff_max_ms: u64 = 60_000
            => SettingKind::Millis { min: 1 }, "the longest wait before a probe";
        /// How long a granted probe may go unreported before it counts as
        /// failed (default 40 s: longer than an RC transport's retry budget at
        /// NCCL's defaults, about 34 s).
        pub probe_timeout_ms: u64 = 40_000
            => SettingKind::Millis { min: 1 }, "a granted probe unreported this long counts as failed";
    }
}

/// What one local-path failure did to the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Below the threshold.
    Counting,
    /// The threshold is reached through enough distinct peers: open.
    Open,
    /// The threshold is reached, but through too few peers: this peer is
    /// notified once per window, the rail stays in service.
    OnePeer {
        /// The peer the failures came through.
        peer: u64,
    },
}

/// One rail's window of local-path failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FailureWindow {
    start: Millis,
    count: u64,
    peers: [u64; MAX_MIN_PEERS],
    /// The failures through each of `peers`.
    through: [u64; MAX_MIN_PEERS],
    distinct: usize,
    /// The one-peer notification was given in this window.
    told: bool,
}

impl FailureWindow {
    /// Counts `n` local-path failures through `peer` at `now`.
    pub fn fail(&mut self, cfg: &DataPathConfig, peer: u64, n: u64, now: Millis) -> Verdict {
        if self.count == 0 || now.since(self.start) >= cfg.window_ms {
            *self = FailureWindow { start: now, ..FailureWindow::default() };
        }
        self.count = self.count.saturating_add(n);
        let want = (cfg.min_peers as usize).clamp(1, MAX_MIN_PEERS);
        match self.peers[..self.distinct].iter().position(|&p| p == peer) {
            Some(i) => self.through[i] = self.through[i].saturating_add(n),
            None if self.distinct < want => {
                self.peers[self.distinct] = peer;
                self.through[self.distinct] = n;
                self.distinct += 1;
            }
            None => {}
        }
        if self.count < cfg.failures {
            Verdict::Counting
        } else if self.distinct >= want {
            *self = FailureWindow::default();
            Verdict::Open
        } else if !std::mem::replace(&mut self.told, true) {
            Verdict::OnePeer { peer: self.most_failing() }
        } else {
            Verdict::Counting
        }
    }

    /// The peer most of the window's failures came through (the first seen
    /// of those tied).
    fn most_failing(&self) -> u64 {
        let (mut best, mut most) = (self.peers[0], 0);
        for (&p, &n) in self.peers[..self.distinct].iter().zip(&self.through) {
            if n > most {
                (best, most) = (p, n);
            }
        }
        best
    }

    /// Forgets the window (the rail was paused or re-attached: what it
    /// counted was about the path before).
    pub fn clear(&mut self) {
        *self = FailureWindow::default();
    }
}

/// The backoff after `n` failed probes: `initial × 2^n`, capped.
pub fn backoff(cfg: &DataPathConfig, trial: u32) -> u64 {
    cfg.backoff_initial_ms
        .saturating_mul(1u64.checked_shl(trial.min(63)).unwrap_or(u64::MAX))
        .min(cfg.backoff_max_ms)
        .max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_through_enough_peers_within_the_window_open() {
        let cfg = DataPathConfig::default();
        let mut w = FailureWindow::default();
        for i in 0..7 {
            assert_eq!(w.fail(&cfg, i % 2, 1, Millis(i)), Verdict::Counting);
        }
        assert_eq!(w.fail(&cfg, 0, 1, Millis(7)), Verdict::Open);
        // The window starts again after opening.
        assert_eq!(w.fail(&cfg, 0, 1, Millis(8)), Verdict::Counting);
    }

    #[test]
    fn failures_through_one_peer_are_told_once_and_never_open() {
        let cfg = DataPathConfig::default();
        let mut w = FailureWindow::default();
        assert_eq!(w.fail(&cfg, 7, 8, Millis(0)), Verdict::OnePeer { peer: 7 });
        for t in 1..100 {
            assert_eq!(w.fail(&cfg, 7, 5, Millis(t)), Verdict::Counting);
        }
        // A new window tells again.
        assert_eq!(w.fail(&cfg, 7, 8, Millis(20_000)), Verdict::OnePeer { peer: 7 });
    }

    /// With three peers needed, two failing: the one failing most is named.
    #[test]
    fn the_peer_named_is_the_one_failing_most() {
        let cfg = DataPathConfig { min_peers: 3, failures: 8, ..DataPathConfig::default() };
        let mut w = FailureWindow::default();
        assert_eq!(w.fail(&cfg, 1, 1, Millis(0)), Verdict::Counting);
        assert_eq!(w.fail(&cfg, 2, 7, Millis(1)), Verdict::OnePeer { peer: 2 });
    }

    #[test]
    fn an_old_window_is_forgotten() {
        let cfg = DataPathConfig::default();
        let mut w = FailureWindow::default();
        w.fail(&cfg, 1, 7, Millis(0));
        // 10 s later the seven are out of the window.
        assert_eq!(w.fail(&cfg, 2, 1, Millis(10_000)), Verdict::Counting);
    }

    #[test]
    fn the_backoff_doubles_to_its_cap() {
        let cfg = DataPathConfig::default();
        let b: Vec<u64> = (0..9).map(|n| backoff(&cfg, n)).collect();
        assert_eq!(b, [1000, 2000, 4000, 8000, 16_000, 32_000, 60_000, 60_000, 60_000]);
        assert_eq!(backoff(&cfg, u32::MAX), 60_000);
    }
}
