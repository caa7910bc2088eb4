//! Recovery-tick cost against the number of rails (target 5a): the
//! monitor's tick through `poll_once` on a virtual clock, with one paused
//! rail among 1, 64, 1024 and 4096 (single-port sim devices, the worst case
//! for anything that walks devices). Each iteration moves the clock one
//! tick period and calls `poll_once(0)`, so every call runs a tick that
//! reads the paused rail's port (DOWN: it stays paused).
//!
//! `tick/paused_64/4096` has 64 paused rails among 4096: the tick should
//! grow with those, not with the rest.
#![allow(unsafe_code)]
// criterion_group! generates an undocumented `pub fn benches`.
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use common::sim_monitor;
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use railwatch_core::NoSelector;
use railwatch_runtime::{Config, MachineConfig};

const TICK_MS: u64 = 1000;

fn tick(c: &mut Criterion) {
    let mut g = c.benchmark_group("tick");
    let config = Config::from(MachineConfig { tick_ms: TICK_MS, ..MachineConfig::default() });
    let cases: [(&str, usize, usize); 5] = [
        ("paused_1", 1, 1),
        ("paused_1", 64, 1),
        ("paused_1", 1024, 1),
        ("paused_1", 4096, 1),
        ("paused_64", 4096, 64),
    ];
    for (name, rails, paused) in cases {
        let (mut m, _handles, clock) = sim_monitor(rails, paused, config.clone(), NoSelector);
        assert!(m.next_tick().is_some(), "a paused rail arms the tick");
        let ticks_before = m.snapshot().ticks;
        let mut calls = 0u64;
        g.bench_with_input(BenchmarkId::new(name, rails), &rails, |b, _| {
            b.iter(|| {
                clock.advance(TICK_MS);
                m.poll_once(Some(Duration::ZERO)).expect("poll_once");
                calls += 1;
            })
        });
        let s = m.snapshot();
        assert_eq!(s.ticks - ticks_before, calls, "every call ran one tick");
        assert_eq!(s.rails.iter().filter(|r| r.state == railwatch_core::RailState::Paused).count(), paused);
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = tick
}
criterion_main!(benches);
