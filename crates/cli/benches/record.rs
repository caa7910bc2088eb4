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

use std::time::Duration;

mod common;

use railwatch_cli::record::Recording;
use railwatch_core::{Clock, Gate};
use railwatch_runtime::{Config, Monitor, NoSelector, SystemClock};
use railwatch_sim_backend::{PortSpec, SimDevice, SimHandle};

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

    /// Flaps for one round; each recovery's latency in ns, sorted. A
    /// wake-up is `watch`'s: poll, then flush the recording.
    fn round(&mut self) -> Vec<f64> {
        let Side { monitor, sim, gate, recording } = self;
        common::flap_round(sim, gate, || {
            monitor.poll_once(Some(Duration::from_secs(1))).expect("poll");
            if let Some(r) = recording {
                r.flush(monitor.clock().now()).expect("the recording is written");
            }
        })
    }
}

fn main() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut plain = Side::new(None);
    let mut bytes = Vec::new();
    let compared = common::alternate(PAIRS, |recorded| {
        if !recorded {
            return plain.round();
        }
        let file = dir.path().join(format!("round{}.toml", bytes.len()));
        let r = Recording::create(&file, &Config::default(), false, "the record bench", "bench".into())
            .expect("the recording");
        let lat = Side::new(Some(r)).round();
        let size = std::fs::metadata(&file).expect("the recording exists").len();
        bytes.push(size as f64 / lat.len() as f64);
        lat
    });
    compared.print("record");
    println!("record_bytes_per_flap\t{:.1}", common::median(bytes));
}
