//! Gate check against the floor, a plain relaxed atomic load (target 2),
//! on 1 thread and on 8 threads sharing the rails.
//!
//! The target rows are latency: a dependent chain of admissions over 16
//! rails (each gate over its own cell), each choosing the next rail from
//! the generation its ticket carries, against the same chain over 16
//! relaxed loads of 16 words (each in its own `Arc`, reached the same way).
//! One iteration is 16 steps; `cargo xtask bench` divides by 16. With 8
//! threads, one iteration is 8 such chains in parallel on however many
//! cores there are; the threads are spawned per sample, on both sides
//! alike. `sweep_1t` is throughput, for context: 16 independent checks
//! against 16 independent loads.
//!
//! Allocation and locking are covered by `table` (a counting allocator)
//! and by the code: `Gate::check` is one `AtomicU64::load(Acquire)`, a test
//! of the state bits and a shift; an acquire load on x86-64 is a plain
//! `mov`, the same instruction as a relaxed one.
#![allow(unsafe_code)]
// criterion_group! generates an undocumented `pub fn benches`.
#![allow(missing_docs)]

mod common;

use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use common::{GATE_RAILS, gate_chain, gate_rails, gate_sweep, load_chain, load_sweep};
use criterion::{Criterion, criterion_group, criterion_main};

const THREADS: usize = 8;

/// Wall time for `THREADS` threads to run `iters` calls of `f` each.
fn parallel(iters: u64, f: impl Fn() -> u64 + Sync) -> Duration {
    let barrier = Barrier::new(THREADS + 1);
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                barrier.wait();
                for _ in 0..iters {
                    black_box(f());
                }
            });
        }
        barrier.wait();
        let t = Instant::now();
        // Leaving the scope joins every thread.
        t
    })
    .elapsed()
}

fn gate(c: &mut Criterion) {
    let (gates, words) = gate_rails();
    let steps = GATE_RAILS as u64;
    assert_eq!(gate_sweep(&gates), GATE_RAILS as u64, "all active, generation 1");

    let mut g = c.benchmark_group("gate");
    g.bench_function("relaxed_load_1t", |b| b.iter(|| load_chain(&words, steps)));
    g.bench_function("check_1t", |b| b.iter(|| gate_chain(&gates, steps)));
    g.bench_function("relaxed_load_8t", |b| {
        b.iter_custom(|iters| parallel(iters, || load_chain(&words, steps) as u64))
    });
    g.bench_function("check_8t", |b| b.iter_custom(|iters| parallel(iters, || gate_chain(&gates, steps) as u64)));
    g.bench_function("relaxed_load_sweep_1t", |b| b.iter(|| load_sweep(&words)));
    g.bench_function("check_sweep_1t", |b| b.iter(|| gate_sweep(&gates)));
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_millis(1500));
    targets = gate
}
criterion_main!(benches);
