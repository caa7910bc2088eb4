//! The cost of recording (`cargo xtask bench`, row 11): recovery latency
//! p99 — `PORT_ACTIVE` written on a simulated device → the rail's gate
//! admits — for a monitor whose inputs a `watch --record` recorder
//! observes (flushed after every wake-up, as `watch` does, to a file on
//! disk), against an identical monitor with no recorder. Also the bytes a
//! flap adds to the recording. Rounds of one
//! second alternate between the two; each recorded round starts a new
//! file (a round of flaps is far below the format's limits). The figure
//! is the median of the per-pair p99 ratios. Prints `key<TAB>value` lines
//! for the bench table.

use std::time::{Duration, Instant};

use railwatch_cli::record::Recording;
use railwatch_core::{Clock, Gate};
use railwatch_runtime::{Config, Monitor, NoSelector, SystemClock};
use railwatch_sim_backend::{PortSpec, SimDevice, SimHandle};

const ROUND: Duration = Duration::from_secs(1);
const PAIRS: usize = 6;

struct Side {
    monitor: Monitor<SimDevice, NoSelector, SystemClock>,
    sim: SimHandle,
    gate: Gate,
    recording: Option<Recording>,
}

impl Side {
    /// A monitor over one simulated device, recorded when `recording` is
    /// given (the observer is set before the device attaches, as `watch`
    /// sets it).
    fn new(recording: Option<Recording>) -> Side {
        let mut monitor = Monitor::new(Config::default(), NoSelector, SystemClock::new()).expect("a monitor");
        if let Some(r) = &recording {
            monitor.set_observer(r.observer());
        }
        let dev = SimDevice::new("mlx5_0", &[PortSpec::active(1)]).expect("a sim device");
        let sim = dev.handle();
        monitor.add_device(dev);
        let gate = monitor.gate_of("mlx5_0/1").expect("the rail");
        Side { monitor, sim, gate, recording }
    }

    /// One wake-up of `watch`: poll, then flush the recording.
    fn wake(&mut self) {
        self.monitor.poll_once(Some(Duration::from_secs(1))).expect("poll");
        if let Some(r) = &self.recording {
            r.flush(self.monitor.clock().now()).expect("the recording is written");
        }
    }

    /// Flaps for one round; each recovery's latency in ns, sorted.
    fn round(&mut self) -> Vec<f64> {
        let mut lat = Vec::new();
        let started = Instant::now();
        while started.elapsed() < ROUND {
            self.sim.port_down(1);
            while self.gate.check().is_ok() {
                self.wake();
            }
            let t0 = Instant::now();
            self.sim.port_up(1);
            while self.gate.check().is_err() {
                self.wake();
            }
            lat.push(t0.elapsed().as_nanos() as f64);
        }
        lat.sort_by(f64::total_cmp);
        lat
    }
}

fn main() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut plain = Side::new(None);
    let mut ratios = Vec::new();
    let (mut on_all, mut off_all, mut bytes) = (Vec::new(), Vec::new(), Vec::new());
    for pair in 0..PAIRS {
        let mut p99 = [0f64; 2];
        // Alternate which side goes first.
        for side in [pair % 2, 1 - pair % 2] {
            let lat = if side == 1 {
                let file = dir.path().join(format!("round{pair}.toml"));
                let r = Recording::create(&file, &Config::default(), false, "the record bench", "bench".into())
                    .expect("the recording");
                let lat = Side::new(Some(r)).round();
                let size = std::fs::metadata(&file).expect("the recording exists").len();
                bytes.push(size as f64 / lat.len() as f64);
                lat
            } else {
                plain.round()
            };
            p99[side] = lat[lat.len() * 99 / 100];
            if side == 1 { on_all.push(p99[side]) } else { off_all.push(p99[side]) }
        }
        ratios.push(p99[1] / p99[0]);
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!("record_p99_on_ns\t{:.0}", median(on_all));
    println!("record_p99_off_ns\t{:.0}", median(off_all));
    println!("record_ratio\t{:.4}", median(ratios));
    println!("record_bytes_per_flap\t{:.1}", median(bytes));
}
