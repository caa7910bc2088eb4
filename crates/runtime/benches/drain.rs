//! Drain cost (targets 1 and 5c): a 10k-event `COMM_EST` burst drained
//! through the monitor, against the floor: a bare loop of `read()` of
//! 16-byte records on the same kind of fd (a non-blocking pipe of the same
//! size, filled with the same 10k records).
//!
//! Every iteration fills the pipe untimed, then times the drain to
//! `EAGAIN` only. One iteration = 10k events; `cargo xtask bench` divides.
//!
//! - `drain/bare_read`: the floor.
//! - `drain/sim_only`: `SimDevice::get_event` in a loop, no monitor: what
//!   the simulator itself costs (lock, counters, overflow bookkeeping).
//! - `drain/monitor_sim`: `Monitor::poll_once` over a `SimDevice`.
//! - `drain/monitor_raw`: `Monitor::poll_once` over `RawPort` (read +
//!   decode, nothing else): the monitor's own overhead, apples to apples.
//! - `drain_devices/monitor_sim/N`: the burst on one device among N.
#![allow(unsafe_code)]
// criterion_group! generates an undocumented `pub fn benches`.
#![allow(missing_docs)]

mod common;

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{BURST, RawPipe, RawPort, bare_read, comm_est, drain_monitor, encode, sim_monitor, sim_only_read};
use criterion::{BenchmarkId, Criterion, SamplingMode, criterion_group, criterion_main};
use railwatch_core::NoSelector;
use railwatch_runtime::{Config, Monitor};
use railwatch_sim_backend::{PortSpec, SimClock, SimDevice};

fn drain(c: &mut Criterion) {
    let rec = encode(&comm_est());
    let mut g = c.benchmark_group("drain");
    g.sampling_mode(SamplingMode::Flat);

    let pipe = RawPipe::new();
    assert!(pipe.capacity >= BURST as usize * common::RECORD_LEN, "pipe too small: {} bytes", pipe.capacity);
    g.bench_function("bare_read", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                pipe.fill(&rec, BURST);
                let t = Instant::now();
                let n = bare_read(&pipe);
                total += t.elapsed();
                assert_eq!(n, BURST);
            }
            total
        })
    });

    let mut dev = SimDevice::new("sim0", &[PortSpec::active(1)]).expect("sim device");
    let h = dev.handle();
    assert!(h.pipe_capacity() >= BURST as usize * common::RECORD_LEN, "sim pipe too small: {}", h.pipe_capacity());
    g.bench_function("sim_only", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                h.queue(comm_est(), BURST);
                let t = Instant::now();
                let n = sim_only_read(&mut dev);
                total += t.elapsed();
                assert_eq!(n, BURST);
            }
            total
        })
    });
    drop(dev);

    let (mut m, handles, _clock) = sim_monitor(1, 0, Config::default(), NoSelector);
    g.bench_function("monitor_sim", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                handles[0].queue(comm_est(), BURST);
                let t = Instant::now();
                drain_monitor(&mut m);
                total += t.elapsed();
                assert_eq!(handles[0].pending(), 0);
            }
            total
        })
    });
    drop(m);

    let raw = Arc::new(RawPipe::new());
    let mut m = Monitor::new(Config::default(), NoSelector, SimClock::new()).expect("monitor");
    m.add_device(RawPort::new(raw.clone()));
    g.bench_function("monitor_raw", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                raw.fill(&rec, BURST);
                let t = Instant::now();
                drain_monitor(&mut m);
                total += t.elapsed();
                assert!(matches!(raw.read_record(), Err(e) if e.kind() == io::ErrorKind::WouldBlock));
            }
            total
        })
    });
    g.finish();
}

fn drain_devices(c: &mut Criterion) {
    let mut g = c.benchmark_group("drain_devices");
    g.sampling_mode(SamplingMode::Flat);
    for n in [1usize, 64, 1024, 4096] {
        let (mut m, handles, _clock) = sim_monitor(n, 0, Config::default(), NoSelector);
        g.bench_with_input(BenchmarkId::new("monitor_sim", n), &n, |b, _| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    handles[0].queue(comm_est(), BURST);
                    let t = Instant::now();
                    drain_monitor(&mut m);
                    total += t.elapsed();
                    assert_eq!(handles[0].pending(), 0);
                }
                total
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = drain, drain_devices
}
criterion_main!(benches);
