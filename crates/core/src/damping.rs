//! Flap damping: a penalty per flap that decays with a half-life, in the
//! style of BGP route-flap damping (RFC 2439).
//!
//! Each flap (a pause by `PORT_ERR`, or by the poll seeing the port leave
//! ACTIVE) adds `penalty_per_flap`. The penalty halves every
//! `half_life_ms`. Once it reaches `suppress`, the rail is *suppressed*: it
//! stays paused (reason `damped`) even when its port reads ACTIVE, until the
//! penalty has decayed below `reuse`. A rail that flaps a few times in a row
//! thus sits out, while one that flapped once long ago is not held at all.
//! docs/STATE-MACHINE.md has a worked example.

use crate::declare::settings;
use crate::setting::SettingKind;
use crate::time::Millis;

settings! {
    /// Damping parameters. Penalties are dimensionless; only their ratios
    /// matter.
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub struct DampingConfig (prefix "damping.") {
        /// Added per flap (default 1000).
        pub penalty_per_flap: f64 = 1000.0
            => SettingKind::Positive, "penalty added per flap";
        /// At or above this the rail is suppressed (default 2500: the third
        /// flap in quick succession).
        pub suppress: f64 = 2500.0
            => SettingKind::Positive, "at or above this a rail is held";
        /// A suppressed rail is released below this (default 750).
        pub reuse: f64 = 750.0
            => SettingKind::Positive, "a held rail is released below this";
        /// The penalty halves every this many milliseconds (default 15 s).
        pub half_life_ms: u64 = 15_000
            => SettingKind::Millis { min: 1 }, "the penalty halves this often";
        /// The penalty never exceeds this, so a rail that flapped for an hour
        /// is not held for a day (default 6000: at most
        /// `half_life × log2(6000 / 750)` = 3 half-lives suppressed).
        pub max_penalty: f64 = 6000.0
            => SettingKind::Positive, "the penalty's ceiling";
    }
}

impl DampingConfig {
    /// How long a rail at the maximum penalty stays suppressed.
    pub fn longest_hold_ms(&self) -> f64 {
        half_lives(self.max_penalty, self.reuse).max(0.0) * self.half_life_ms as f64
    }
}

/// How many half-lives take `value` down to `reuse`: `log2(value /
/// reuse)`, without the quotient overflowing for a tiny `reuse`.
fn half_lives(value: f64, reuse: f64) -> f64 {
    let ratio = value / reuse;
    if ratio.is_finite() { ratio.log2() } else { value.log2() - reuse.log2() }
}

/// One rail's penalty.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FlapPenalty {
    value: f64,
    at: Millis,
    suppressed: bool,
}

impl Default for FlapPenalty {
    fn default() -> Self {
        FlapPenalty { value: 0.0, at: Millis::ZERO, suppressed: false }
    }
}

impl FlapPenalty {
    /// The penalty at `now`, decayed since the last flap.
    pub fn value(&self, cfg: &DampingConfig, now: Millis) -> f64 {
        let half_lives = now.since(self.at) as f64 / cfg.half_life_ms as f64;
        self.value * 0.5f64.powf(half_lives)
    }

    /// Records a flap at `now`; returns the new penalty.
    pub fn flap(&mut self, cfg: &DampingConfig, now: Millis) -> f64 {
        let value = (self.value(cfg, now) + cfg.penalty_per_flap).min(cfg.max_penalty);
        *self = FlapPenalty { value, at: now, suppressed: self.suppressed || value >= cfg.suppress };
        value
    }

    /// Whether the rail must stay paused at `now`. Suppression starts when
    /// the penalty reaches `suppress` and lasts until it decays below
    /// `reuse` (hysteresis, so a rail is not released and suppressed again
    /// on every flap).
    pub fn suppressed(&mut self, cfg: &DampingConfig, now: Millis) -> bool {
        if self.suppressed && self.value(cfg, now) < cfg.reuse {
            self.suppressed = false;
        }
        self.suppressed
    }

    /// When a suppressed rail will be released (the penalty reaches
    /// `reuse`), rounded up to the next millisecond; `None` if it is not
    /// suppressed.
    pub fn reuse_at(&self, cfg: &DampingConfig) -> Option<Millis> {
        if !self.suppressed {
            return None;
        }
        if self.value < cfg.reuse {
            return Some(self.at);
        }
        let half_lives = half_lives(self.value, cfg.reuse);
        // `as` saturates (and maps NaN to 0); the sum saturates too, so an
        // unvalidated config gives a far deadline, never a wrapped one.
        let wait = (half_lives * cfg.half_life_ms as f64).ceil() as u64;
        Some(self.at.plus(wait.saturating_add(1)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worked_example() {
        // docs/STATE-MACHINE.md, "Flap damping": three flaps 1 s apart.
        let cfg = DampingConfig::default();
        let mut p = FlapPenalty::default();
        assert_eq!(p.flap(&cfg, Millis(0)), 1000.0);
        assert!(!p.suppressed(&cfg, Millis(0)));
        let v = p.flap(&cfg, Millis(1000));
        assert!((v - 1954.84).abs() < 0.01, "{v}");
        assert!(!p.suppressed(&cfg, Millis(1000)));
        let v = p.flap(&cfg, Millis(2000));
        assert!((v - 2866.56).abs() < 0.01, "{v}");
        assert!(p.suppressed(&cfg, Millis(2000)));
        // 2866.56 → 750 takes log2(3.822) = 1.934 half-lives = 29.015 s.
        let release = p.reuse_at(&cfg).unwrap();
        assert_eq!(release, Millis(2000 + 29_016 + 1));
        assert!(p.suppressed(&cfg, Millis(release.0 - 100)));
        assert!(!p.suppressed(&cfg, release));
        assert_eq!(p.reuse_at(&cfg), None);
    }

    #[test]
    fn a_single_flap_never_suppresses_and_decays() {
        let cfg = DampingConfig::default();
        let mut p = FlapPenalty::default();
        p.flap(&cfg, Millis(0));
        assert!((p.value(&cfg, Millis(15_000)) - 500.0).abs() < 1e-9);
        assert!((p.value(&cfg, Millis(30_000)) - 250.0).abs() < 1e-9);
        assert!(!p.suppressed(&cfg, Millis(1)));
        assert_eq!(p.reuse_at(&cfg), None);
    }

    #[test]
    fn the_penalty_is_capped() {
        let cfg = DampingConfig::default();
        let mut p = FlapPenalty::default();
        for t in 0..100 {
            p.flap(&cfg, Millis(t));
        }
        assert!(p.value(&cfg, Millis(99)) <= cfg.max_penalty);
        // Capped at 6000: released after log2(6000/750) = 3 half-lives.
        assert_eq!(p.reuse_at(&cfg), Some(Millis(99 + 45_000 + 1)));
    }

    #[test]
    fn hysteresis_between_suppress_and_reuse() {
        let cfg = DampingConfig::default();
        let mut p = FlapPenalty::default();
        for t in [0, 1, 2] {
            p.flap(&cfg, Millis(t));
        }
        assert!(p.suppressed(&cfg, Millis(3)));
        // Below suppress but above reuse: still suppressed.
        let t = Millis(20_000);
        let v = p.value(&cfg, t);
        assert!(v < cfg.suppress && v > cfg.reuse, "{v}");
        assert!(p.suppressed(&cfg, t));
    }

    #[test]
    fn validation() {
        assert!(DampingConfig::default().validate().is_ok());
        let bad = DampingConfig { reuse: 3000.0, ..Default::default() };
        assert_eq!(bad.validate().unwrap_err().key, "damping.reuse");
        let bad = DampingConfig { half_life_ms: 0, ..Default::default() };
        assert!(bad.validate().is_err());
        let bad = DampingConfig { penalty_per_flap: f64::NAN, ..Default::default() };
        assert_eq!(bad.validate().unwrap_err().key, "damping.penalty_per_flap");
        // A bad suppress is named as such, not as the max_penalty above it.
        let bad = DampingConfig { suppress: f64::NAN, ..Default::default() };
        assert_eq!(bad.validate().unwrap_err().to_string(), "damping.suppress: must be positive, not NaN");
        let bad = DampingConfig { suppress: 1e308, ..Default::default() };
        assert!(bad.validate().unwrap_err().to_string().len() < 120, "floats are printed short");
        // A tiny reuse whose ratio overflows: 15 s × log2(6000 / 1e-320)
        // is about 4.5 hours, well within a week.
        let tiny = DampingConfig { reuse: 1e-320, ..Default::default() };
        assert!(tiny.validate().is_ok(), "{:?}", tiny.validate());
        let hold = tiny.longest_hold_ms();
        assert!(hold.is_finite() && (16_000_000.0..17_000_000.0).contains(&hold), "{hold}");
        let mut p = FlapPenalty::default();
        for t in 0..3 {
            p.flap(&tiny, Millis(t));
        }
        assert!(p.reuse_at(&tiny).is_some_and(|t| t.0 < 17_000_000), "{:?}", p.reuse_at(&tiny));
        // Release times that would overflow are refused up front …
        let bad = DampingConfig { half_life_ms: u64::MAX, ..Default::default() };
        assert_eq!(bad.validate().unwrap_err().key, "damping.half_life_ms");
        let bad = DampingConfig { reuse: 1e-300, half_life_ms: 3_600_000, ..Default::default() };
        assert_eq!(bad.validate().unwrap_err().key, "damping.half_life_ms");
        // … and an unvalidated one saturates instead of wrapping.
        let mut p = FlapPenalty::default();
        for t in 0..3 {
            p.flap(&bad, Millis(t));
        }
        assert!(p.reuse_at(&bad).unwrap() > Millis(3));
    }
}
