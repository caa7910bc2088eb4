//! The cost of recording (`cargo xtask bench`, row 11): recovery latency
//! p99 — `PORT_ACTIVE` written on a simulated device → the rail's gate
//! admits — for a monitor whose inputs a `watch --record` recorder
//! observes (flushed after every wake-up, as `watch` does, to a file on
//! disk), against an identical monitor with no recorder. Also the bytes a
//! flap adds to the recording.
//!
//! Each recorded round starts a new recording (one long one would reach
//! the format's size limit and stop), flaps for [`WARM_UP`] and then
//! measures for [`ROUND`]. The warm-up is what `watch` pays once, when its
//! one recording starts: the recorder's buffers grow from nothing, and
//! every new page of them is a page fault on the event path. Its p99 ratio
//! is printed too, as context (`record_cold_ratio`). The side without a
//! recorder flaps the same way. Rounds alternate between the two; the
//! figures are the medians of the per-pair p99 ratios. Prints
//! `key<TAB>value` lines for the bench table.

use std::time::Duration;

mod common;

use railwatch_cli::record::Recording;
use railwatch_core::{Clock, Gate};
use railwatch_runtime::{Config, Monitor, NoSelector, SystemClock};
use railwatch_sim_backend::{PortSpec, SimDevice, SimHandle};

const PAIRS: usize = 16;
/// Flaps of a new recording not measured by the round.
const WARM_UP: Duration = Duration::from_millis(150);
/// The measured part of a round: short enough that warm-up and round stay
/// below the 15 MiB stop (about 95 bytes a flap, 400k flaps a second
/// here: under 10 MB); a faster machine that reaches it is told so.
const ROUND: Duration = Duration::from_millis(100);

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

    /// Flaps for `round`; each recovery's latency in ns, sorted. A
    /// wake-up is `watch`'s: poll, then flush the recording.
    fn flap(&mut self, round: Duration) -> Vec<f64> {
        let Side { monitor, sim, gate, recording } = self;
        common::flap_round(sim, gate, round, || {
            monitor.poll_once(Some(Duration::from_secs(1))).expect("poll");
            if let Some(r) = recording {
                r.flush(monitor.clock().now()).expect("the recording is written");
            }
        })
    }
}

fn main() {
    measure("record", "toml");
    // The input log (`--record FILE.rwlog`): each input a JSON line
    // appended in memory, written out each wake-up.
    measure("record_log", "rwlog");
}

/// Row 11's figures for a recording whose file ends in `.{ext}`, printed
/// under `prefix`.
fn measure(prefix: &str, ext: &str) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut plain = Side::new(None);
    let mut bytes = Vec::new();
    // The warm-ups' p99, per side, in the order the pairs ran.
    let mut cold: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let compared = common::alternate(PAIRS, |recorded| {
        if !recorded {
            cold[0].push(common::p99(&plain.flap(WARM_UP)));
            return plain.flap(ROUND);
        }
        let file = dir.path().join(format!("round{}.{ext}", bytes.len()));
        let r = Recording::create(&file, &Config::default(), false, "the record bench", "bench".into())
            .expect("the recording");
        let mut side = Side::new(Some(r));
        let warm_up = side.flap(WARM_UP);
        cold[1].push(common::p99(&warm_up));
        let lat = side.flap(ROUND);
        let text = std::fs::read_to_string(&file).expect("the recording exists");
        assert!(
            !text.contains("# recording stopped"),
            "a round outgrew the format's limits ({} bytes, {} flaps): shorten ROUND",
            text.len(),
            warm_up.len() + lat.len()
        );
        bytes.push(text.len() as f64 / (warm_up.len() + lat.len()) as f64);
        lat
    });
    compared.print(prefix);
    let cold_ratios = cold[1].iter().zip(&cold[0]).map(|(on, off)| on / off).collect();
    println!("{prefix}_cold_p99_on_ns\t{:.0}", common::median(cold[1].clone()));
    println!("{prefix}_cold_p99_off_ns\t{:.0}", common::median(cold[0].clone()));
    println!("{prefix}_cold_ratio\t{:.4}", common::median(cold_ratios));
    println!("{prefix}_bytes_per_flap\t{:.1}", common::median(bytes));
}
