//! What the `watch` benches (rows 10 and 11) share: recovery latency of
//! back-to-back flaps of one simulated port, in rounds that
//! alternate between the side with the feature under test and the side
//! without it, and the median of the per-pair p99 ratios.

use std::time::{Duration, Instant};

use railwatch_core::Gate;
use railwatch_sim_backend::SimHandle;

/// Flaps port 1 of `sim` for `round`, calling `wake` (one wake-up of
/// `watch`) until `gate` follows; each recovery's latency (`PORT_ACTIVE`
/// written → the gate admits) in ns, sorted.
pub fn flap_round(sim: &SimHandle, gate: &Gate, round: Duration, mut wake: impl FnMut()) -> Vec<f64> {
    let mut lat = Vec::new();
    let started = Instant::now();
    while started.elapsed() < round {
        sim.port_down(1);
        while gate.check().is_ok() {
            wake();
        }
        let t0 = Instant::now();
        sim.port_up(1);
        while gate.check().is_err() {
            wake();
        }
        lat.push(t0.elapsed().as_nanos() as f64);
    }
    lat.sort_by(f64::total_cmp);
    lat
}

/// The medians over the pairs.
pub struct Compared {
    /// p99 with the feature, ns.
    pub on_ns: f64,
    /// p99 without it, ns.
    pub off_ns: f64,
    /// The per-pair ratio on / off.
    pub ratio: f64,
}

impl Compared {
    /// Prints `PREFIX_p99_on_ns`, `PREFIX_p99_off_ns` and `PREFIX_ratio`
    /// as `key<TAB>value` lines for the bench table.
    pub fn print(&self, prefix: &str) {
        println!("{prefix}_p99_on_ns\t{:.0}", self.on_ns);
        println!("{prefix}_p99_off_ns\t{:.0}", self.off_ns);
        println!("{prefix}_ratio\t{:.4}", self.ratio);
    }
}

/// The p99 of sorted latencies.
pub fn p99(sorted: &[f64]) -> f64 {
    sorted[sorted.len() * 99 / 100]
}

/// Runs `pairs` pairs of rounds, `round(true)` with the feature and
/// `round(false)` without, alternating which goes first; each round
/// returns its sorted latencies.
pub fn alternate(pairs: usize, mut round: impl FnMut(bool) -> Vec<f64>) -> Compared {
    let (mut on, mut off, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for pair in 0..pairs {
        let mut tail = [0f64; 2];
        for side in [pair % 2, 1 - pair % 2] {
            let lat = round(side == 1);
            tail[side] = p99(&lat);
        }
        on.push(tail[1]);
        off.push(tail[0]);
        ratios.push(tail[1] / tail[0]);
    }
    Compared { on_ns: median(on), off_ns: median(off), ratio: median(ratios) }
}

/// The median of `v` (the upper one of an even count).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
