//! Everything in the `cargo xtask bench` table that a criterion timing
//! cannot give (a plain `harness = false` binary):
//!
//! - interleaved A/B ratios (targets 1, 2, 5a, 5c): the subject and its
//!   baseline run alternately, round by round, in rotating order, and the
//!   ratio is the median of the per-round ratios, so a burst of load from
//!   elsewhere on a shared machine hits both sides of a round alike;
//! - 2: heap allocations in `Gate::check`, on 1 and on 8 threads;
//! - 3: event-path recovery latency (p50, p99 over 10k flaps) against an
//!   epoll wake-up round trip on a pipe, interleaved flap by flap;
//! - 4: idle wake-ups of a spawned monitor (8 healthy devices; one paused
//!   rail);
//! - 5b: monitor heap bytes per rail;
//! - 6: heap allocations per drained event.
//!
//! Allocations are counted by a counting global allocator (below), in
//! total and per thread. Results go to the file `cargo xtask bench` reads.
//! The criterion benches (`drain`, `gate`, `tick`) time the same code paths
//! one after the other, with criterion's statistics.
#![allow(unsafe_code)]

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::hint::black_box;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use common::{
    BURST, GATE_RAILS, RawPipe, RawPort, bare_read, comm_est, drain_monitor, encode, gate_chain, gate_rails,
    gate_sweep, load_chain, load_sweep, record, sim_devices, sim_monitor, sim_only_read, spin_until,
};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use railwatch_core::{
    Action, AsyncEvent, EventKind, Gate, LinkAttrs, Machine, MachineConfig, Millis, NoSelector, PortState, RailCell,
    RailId, TransferReport, VerbsPort,
};
use railwatch_runtime::{BandwidthSelector, Config, Monitor, SystemClock};
use railwatch_sim_backend::{PortSpec, SimClock, SimDevice};

// ---- the counting allocator ------------------------------------------------

static ALLOCS: AtomicU64 = AtomicU64::new(0);
/// Bytes requested, minus bytes released (what the program asked for).
static LIVE_REQUESTED: AtomicU64 = AtomicU64::new(0);
/// The same in malloc's usable sizes (what the allocator really handed out,
/// rounding included; glibc adds an 8-byte chunk header on top of this).
static LIVE_USABLE: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static THREAD_ALLOCS: Cell<u64> = const { Cell::new(0) };
}

struct Counting;

fn usable(ptr: *mut u8) -> u64 {
    if ptr.is_null() {
        return 0;
    }
    // SAFETY: `ptr` came from System (glibc malloc, memalign or realloc) and
    // is still allocated.
    unsafe { libc::malloc_usable_size(ptr.cast()) as u64 }
}

fn counted(ptr: *mut u8, requested: usize) -> *mut u8 {
    if !ptr.is_null() {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        let _ = THREAD_ALLOCS.try_with(|c| c.set(c.get() + 1));
        LIVE_REQUESTED.fetch_add(requested as u64, Ordering::Relaxed);
        LIVE_USABLE.fetch_add(usable(ptr), Ordering::Relaxed);
    }
    ptr
}

// SAFETY: every call is forwarded to System with the same arguments; the
// counters only observe.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        counted(unsafe { System.alloc(layout) }, layout.size())
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        counted(unsafe { System.alloc_zeroed(layout) }, layout.size())
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_REQUESTED.fetch_sub(layout.size() as u64, Ordering::Relaxed);
        LIVE_USABLE.fetch_sub(usable(ptr), Ordering::Relaxed);
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old_usable = usable(ptr);
        // SAFETY: forwarded with the caller's guarantees.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            LIVE_REQUESTED.fetch_sub(layout.size() as u64, Ordering::Relaxed);
            LIVE_USABLE.fetch_sub(old_usable, Ordering::Relaxed);
            counted(new, new_size);
        }
        new
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn allocs() -> u64 {
    ALLOCS.load(Ordering::Relaxed)
}

fn thread_allocs() -> u64 {
    THREAD_ALLOCS.with(Cell::get)
}

fn live() -> (i64, i64) {
    (LIVE_REQUESTED.load(Ordering::Relaxed) as i64, LIVE_USABLE.load(Ordering::Relaxed) as i64)
}

// ---- interleaved A/B ratios (1, 2, 5a, 5c) ------------------------------------

type Case<'a> = Box<dyn FnMut() -> Duration + 'a>;

/// Runs every case once per round, in an order rotated each round, after
/// `warm` unrecorded rounds; returns each case's nanoseconds, round by round.
fn interleave(warm: usize, rounds: usize, cases: &mut [Case<'_>]) -> Vec<Vec<f64>> {
    let k = cases.len();
    let mut out = vec![Vec::with_capacity(rounds); k];
    for r in 0..warm + rounds {
        for j in 0..k {
            let c = (r + j) % k;
            let ns = cases[c]().as_nanos() as f64;
            if r >= warm {
                out[c].push(ns);
            }
        }
    }
    out
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Records `{prefix}_{name}_ns` (median nanoseconds per op) for every case
/// and `{prefix}_{name}_ratio` (median over rounds of case ÷ the first
/// case, the baseline) for every other case.
fn record_pairs(prefix: &str, names: &[&str], ops_per_round: f64, times: &[Vec<f64>]) {
    for (name, t) in names.iter().zip(times) {
        record(&format!("{prefix}_{name}_ns"), median(t) / ops_per_round);
    }
    for (name, t) in names.iter().zip(times).skip(1) {
        let ratios: Vec<f64> = t.iter().zip(&times[0]).map(|(s, b)| s / b).collect();
        record(&format!("{prefix}_{name}_ratio"), median(&ratios));
    }
}

const DRAIN_ROUNDS: usize = 100;
const DEVICE_ROUNDS: usize = 60;
const GATE_ROUNDS: usize = 200;
/// Checks per case and round: ~2 ms.
const GATE_CHUNK: u64 = 400_000;
const GATE8_ROUNDS: usize = 20;
/// Checks per thread and round: ~10 ms of one core's time each, so the
/// barriers around a round (which wake 8 threads) stay a few percent.
const GATE8_CHUNK: u64 = 2_000_000;
const GATE_THREADS: usize = 8;
const TICK_ROUNDS: usize = 30;
const TICK_CALLS: u64 = 100;
const TICK_PERIOD_MS: u64 = 1000;

/// 1: a 10k burst drained by a bare read loop, by the sim alone, by the
/// monitor over the sim, and by the monitor over `RawPort`.
fn drain_pairs() {
    let rec = encode(&comm_est());
    let bare = RawPipe::new();
    let mut solo = SimDevice::new("solo", &[PortSpec::active(1)]).expect("sim device");
    let solo_h = solo.handle();
    let (mut msim, handles, _clock) = sim_monitor(1, 0, Config::default(), NoSelector);
    let raw = Arc::new(RawPipe::new());
    let mut mraw = Monitor::new(Config::default(), NoSelector, SimClock::new()).expect("monitor");
    mraw.add_device(RawPort::new(raw.clone()));
    for (what, bytes) in [("bare", bare.capacity), ("sim", solo_h.pipe_capacity()), ("raw", raw.capacity)] {
        assert!(bytes >= BURST as usize * common::RECORD_LEN, "{what} pipe holds only {bytes} bytes");
    }
    let mut cases: Vec<Case<'_>> = vec![
        Box::new(|| {
            bare.fill(&rec, BURST);
            let t = Instant::now();
            let n = bare_read(&bare);
            let d = t.elapsed();
            assert_eq!(n, BURST);
            d
        }),
        Box::new(|| {
            solo_h.queue(comm_est(), BURST);
            let t = Instant::now();
            let n = sim_only_read(&mut solo);
            let d = t.elapsed();
            assert_eq!(n, BURST);
            d
        }),
        Box::new(|| {
            handles[0].queue(comm_est(), BURST);
            let t = Instant::now();
            drain_monitor(&mut msim);
            let d = t.elapsed();
            assert_eq!(handles[0].pending(), 0);
            d
        }),
        Box::new(|| {
            raw.fill(&rec, BURST);
            let t = Instant::now();
            drain_monitor(&mut mraw);
            t.elapsed()
        }),
    ];
    let times = interleave(5, DRAIN_ROUNDS, &mut cases);
    drop(cases);
    assert_eq!(mraw.snapshot().devices[0].counters.comm_est, (5 + DRAIN_ROUNDS as u64) * BURST);
    record_pairs("drain", &["bare", "sim_only", "monitor_sim", "monitor_raw"], BURST as f64, &times);
}

/// 7: the machine's cost per event driven directly vs through the monitor:
/// the same flaps (PORT_ERR, then PORT_ACTIVE with its query and link
/// read), fed to a bare `Machine` that answers its own questions, and
/// written into a raw pipe the monitor drains.
fn machine_pairs() {
    const FLAPS: u64 = 2_000;
    let mut machine = Machine::new(MachineConfig::default()).expect("machine");
    let dev = machine.add_device("raw", &[1], Millis(0)).expect("a device");
    let serve = |m: &mut Machine| {
        while let Some(a) = m.poll_action() {
            match a {
                Action::QueryPort { device, port } => {
                    m.handle_port_state(device, port, Ok(PortState::Active), Millis(0))
                }
                Action::ReadLink { device, port } => {
                    m.handle_link(device, port, Ok(LinkAttrs::new(PortSpec::NDR, PortSpec::WIDTH_4X)), Millis(0))
                }
                other => drop(black_box(other)),
            }
        }
    };
    serve(&mut machine);
    let raw = Arc::new(RawPipe::new());
    let mut monitor = Monitor::new(Config::default(), NoSelector, SimClock::new()).expect("monitor");
    monitor.add_device(RawPort::new(raw.clone()));
    let (err, active) = (AsyncEvent::port(EventKind::PortErr, 1), AsyncEvent::port(EventKind::PortActive, 1));
    let mut cases: Vec<Case<'_>> = vec![
        Box::new(|| {
            let t = Instant::now();
            for _ in 0..FLAPS {
                machine.handle_event(dev, err, Millis(0));
                serve(&mut machine);
                machine.handle_event(dev, active, Millis(0));
                serve(&mut machine);
            }
            t.elapsed()
        }),
        Box::new(|| {
            let mut total = Duration::ZERO;
            // In chunks the pipe holds.
            for _ in 0..FLAPS / 500 {
                for _ in 0..500 {
                    raw.fill(&encode(&err), 1);
                    raw.fill(&encode(&active), 1);
                }
                let t = Instant::now();
                drain_monitor(&mut monitor);
                total += t.elapsed();
            }
            total
        }),
    ];
    let times = interleave(3, 30, &mut cases);
    drop(cases);
    assert!(monitor.snapshot().rails[0].generation > FLAPS, "the monitor resumed the rail on every flap");
    record_pairs("machine", &["direct", "monitor"], (2 * FLAPS) as f64, &times);
}

/// A machine with one attached, active rail, answered at once.
fn machine_of_one_rail() -> (Machine, u32) {
    let mut m = Machine::new(MachineConfig::default()).expect("machine");
    let dev = m.add_device("raw", &[1], Millis(0)).expect("a device");
    answer(&mut m, Millis(0));
    (m, dev)
}

/// Carries out the machine's actions as a device whose port reads ACTIVE
/// at 200 Gb/s would.
fn answer(m: &mut Machine, now: Millis) {
    while let Some(a) = m.poll_action() {
        match a {
            Action::QueryPort { device, port } => m.handle_port_state(device, port, Ok(PortState::Active), now),
            Action::ReadLink { device, port } => m.handle_link(device, port, Ok(LinkAttrs::new(128, 2)), now),
            other => drop(black_box(other)),
        }
    }
}

/// The common report: an engine's poll of its CQs found successes (through
/// one peer).
const REPORT_ONE: [TransferReport; 1] = [TransferReport { peer: 1, wc_status: 0, count: 64 }];

/// A mixed report: successes through two peers, a peer's refusal, a flush
/// (none of it changes the rail).
const REPORT: [TransferReport; 4] = [
    TransferReport { peer: 1, wc_status: 0, count: 64 },
    TransferReport { peer: 2, wc_status: 0, count: 64 },
    TransferReport { peer: 3, wc_status: 10, count: 1 },
    TransferReport { peer: 1, wc_status: 5, count: 7 },
];

/// 12: one transfer report through `Machine::handle_transfers` (the common
/// one line; and, for context, a mixed report of four) vs one counted
/// `COMM_EST` through `Machine::handle_event`, per call.
fn transfer_pairs() {
    const CALLS: u64 = 200_000;
    let (mut a, dev_a) = machine_of_one_rail();
    let (mut b, dev_b) = machine_of_one_rail();
    let (mut c, dev_c) = machine_of_one_rail();
    let comm = comm_est();
    let mut cases: Vec<Case<'_>> = vec![
        Box::new(|| {
            let t = Instant::now();
            for i in 0..CALLS {
                b.handle_event(dev_b, black_box(comm), Millis(i / 1000));
            }
            t.elapsed()
        }),
        Box::new(|| {
            let t = Instant::now();
            for i in 0..CALLS {
                c.handle_transfers(dev_c, 1, black_box(&REPORT_ONE), Millis(i / 1000));
            }
            t.elapsed()
        }),
        Box::new(|| {
            let t = Instant::now();
            for i in 0..CALLS {
                a.handle_transfers(dev_a, 1, black_box(&REPORT), Millis(i / 1000));
            }
            t.elapsed()
        }),
    ];
    let times = interleave(3, 30, &mut cases);
    drop(cases);
    assert!(a.rail(RailId { device: dev_a, port: 1 }).is_some_and(|r| r.evidence.transfers_ok > CALLS));
    assert!(!a.has_actions() && !c.has_actions(), "a report of successes and peer errors asks for nothing");
    record_pairs("transfers", &["comm_est", "report", "report4"], CALLS as f64, &times);
}

/// 12: heap allocations per transfer report after warm-up.
fn transfer_allocations() {
    let (mut m, dev) = machine_of_one_rail();
    m.handle_transfers(dev, 1, &REPORT, Millis(0));
    let before = allocs();
    for i in 0..10_000 {
        m.handle_transfers(dev, 1, &REPORT, Millis(i));
    }
    let n = allocs() - before;
    assert_eq!(n, 0, "a transfer report allocated {n} times in 10k");
    record("allocs_per_transfer_report", n as f64 / 10_000.0);
}

/// 12: heap allocations per half-open cycle after warm-up: the backoff's
/// deadline run, the probe granted through the gate, its failure reported
/// (the breaker open again). A tripped rail's record is boxed once, at the
/// trip; nothing after that allocates.
fn probe_allocations() {
    const CYCLES: u64 = 1_000;
    let (mut m, dev) = machine_of_one_rail();
    let gate = m.gate(RailId { device: dev, port: 1 }).expect("the rail's gate");
    // Local-path failures through two peers: the default breaker trips.
    let trip =
        [TransferReport { peer: 1, wc_status: 12, count: 4 }, TransferReport { peer: 2, wc_status: 12, count: 4 }];
    m.handle_transfers(dev, 1, &trip, Millis(1));
    let cycle = |m: &mut Machine| {
        // The deadlines due (the recovery tick's among them) up to the
        // backoff's end: half-open, a probe is granted.
        let mut granted = None;
        for _ in 0..1_000 {
            let due = m.poll_timeout().expect("the backoff's deadline");
            m.handle_timeout(due);
            answer(m, due);
            if let Ok(ticket) = gate.probe() {
                granted = Some((black_box(ticket), due));
                break;
            }
        }
        let (_, due) = granted.expect("half-open within 1000 deadlines");
        m.handle_probe(dev, 1, false, due);
        answer(m, due);
    };
    for _ in 0..50 {
        cycle(&mut m);
    }
    let before = allocs();
    for _ in 0..CYCLES {
        cycle(&mut m);
    }
    let n = allocs() - before;
    assert_eq!(n, 0, "a half-open cycle allocated {n} times in {CYCLES}");
    record("allocs_per_probe_cycle", n as f64 / CYCLES as f64);
}

/// 5c: the same burst on one device among 1, 64, 1024 and 4096.
fn device_pairs() {
    let sizes = [1usize, 64, 1024, 4096];
    let mut monitors: Vec<_> = sizes.iter().map(|&n| sim_monitor(n, 0, Config::default(), NoSelector)).collect();
    let mut cases: Vec<Case<'_>> = monitors
        .iter_mut()
        .map(|(m, handles, _clock)| {
            Box::new(move || {
                handles[0].queue(comm_est(), BURST);
                let t = Instant::now();
                drain_monitor(m);
                let d = t.elapsed();
                assert_eq!(handles[0].pending(), 0);
                d
            }) as Case<'_>
        })
        .collect();
    let times = interleave(3, DEVICE_ROUNDS, &mut cases);
    let names: Vec<String> = sizes.iter().map(|n| n.to_string()).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    record_pairs("drain_devices", &names, BURST as f64, &times);
}

/// 2: `Gate::check` against a relaxed load, on 1 thread, then on 8
/// threads (kept alive across rounds; each round is one chunk per thread).
fn gate_pairs() {
    let (gates, words) = gate_rails();
    assert_eq!(gate_chain(&gates, GATE_RAILS as u64 + 1), load_chain(&words, GATE_RAILS as u64 + 1));
    let mut cases: Vec<Case<'_>> = vec![
        Box::new(|| {
            let t = Instant::now();
            black_box(load_chain(&words, GATE_CHUNK));
            t.elapsed()
        }),
        Box::new(|| {
            let t = Instant::now();
            black_box(gate_chain(&gates, GATE_CHUNK));
            t.elapsed()
        }),
        Box::new(|| {
            let t = Instant::now();
            for _ in 0..GATE_CHUNK / GATE_RAILS as u64 {
                black_box(load_sweep(&words));
            }
            t.elapsed()
        }),
        Box::new(|| {
            let t = Instant::now();
            for _ in 0..GATE_CHUNK / GATE_RAILS as u64 {
                black_box(gate_sweep(&gates));
            }
            t.elapsed()
        }),
    ];
    let times = interleave(10, GATE_ROUNDS, &mut cases);
    drop(cases);
    record_pairs("gate_1t", &["load", "check"], GATE_CHUNK as f64, &times[..2]);
    record_pairs("gate_sweep", &["load", "check"], GATE_CHUNK as f64, &times[2..]);

    // 0: relaxed loads, 1: gate checks, 2: stop.
    let phase = AtomicU64::new(0);
    let start = Barrier::new(GATE_THREADS + 1);
    let done = Barrier::new(GATE_THREADS + 1);
    std::thread::scope(|s| {
        for _ in 0..GATE_THREADS {
            s.spawn(|| {
                loop {
                    start.wait();
                    match phase.load(Ordering::Acquire) {
                        0 => {
                            black_box(load_chain(&words, GATE8_CHUNK));
                        }
                        1 => {
                            black_box(gate_chain(&gates, GATE8_CHUNK));
                        }
                        _ => return,
                    }
                    done.wait();
                }
            });
        }
        let run = |p: u64| {
            phase.store(p, Ordering::Release);
            let t = Instant::now();
            start.wait();
            done.wait();
            t.elapsed()
        };
        let mut cases: Vec<Case<'_>> = vec![Box::new(|| run(0)), Box::new(|| run(1))];
        let times = interleave(3, GATE8_ROUNDS, &mut cases);
        // Per op = wall time per check per thread; the 8 threads share the
        // cores, so this is 8 / cores times a single thread's.
        record_pairs("gate_8t", &["load", "check"], GATE8_CHUNK as f64, &times);
        phase.store(2, Ordering::Release);
        start.wait();
    });
}

/// 5a: the tick through `poll_once` on a virtual clock, 1 paused rail among
/// 1, 64, 1024, 4096 (single-port devices), and 64 paused among 4096.
fn tick_pairs() {
    let cases_spec: [(usize, usize); 5] = [(1, 1), (64, 1), (1024, 1), (4096, 1), (4096, 64)];
    let config = Config::from(MachineConfig { tick_ms: TICK_PERIOD_MS, ..MachineConfig::default() });
    let mut monitors: Vec<_> =
        cases_spec.iter().map(|&(n, paused)| sim_monitor(n, paused, config.clone(), NoSelector)).collect();
    let ticks_before: Vec<u64> = monitors.iter().map(|(m, _, _)| m.snapshot().ticks).collect();
    let mut cases: Vec<Case<'_>> = monitors
        .iter_mut()
        .map(|(m, _handles, clock)| {
            Box::new(move || {
                let t = Instant::now();
                for _ in 0..TICK_CALLS {
                    clock.advance(TICK_PERIOD_MS);
                    m.poll_once(Some(Duration::ZERO)).expect("poll_once");
                }
                t.elapsed()
            }) as Case<'_>
        })
        .collect();
    let times = interleave(2, TICK_ROUNDS, &mut cases);
    drop(cases);
    for ((m, _, _), before) in monitors.iter().zip(ticks_before) {
        let ticks = m.snapshot().ticks - before;
        assert_eq!(ticks, (2 + TICK_ROUNDS as u64) * TICK_CALLS, "one tick per call");
    }
    record_pairs("tick", &["1", "64", "1024", "4096", "4096_paused64"], TICK_CALLS as f64, &times);
}

// ---- 6: allocations per drained event ---------------------------------------

fn allocations_per_event() {
    let (mut m, handles, _clock) = sim_monitor(1, 0, Config::default(), NoSelector);
    // Warm-up: the first drain may size reusable buffers.
    handles[0].queue(comm_est(), BURST);
    drain_monitor(&mut m);
    handles[0].queue(comm_est(), BURST);
    let before = allocs();
    drain_monitor(&mut m);
    let n = allocs() - before;
    assert_eq!(handles[0].pending(), 0);
    assert_eq!(m.snapshot().devices[0].counters.comm_est, 2 * BURST);
    record("allocs_per_event_sim", n as f64 / BURST as f64);

    let raw = Arc::new(RawPipe::new());
    let rec = encode(&comm_est());
    let mut m = Monitor::new(Config::default(), NoSelector, SimClock::new()).expect("monitor");
    m.add_device(RawPort::new(raw.clone()));
    raw.fill(&rec, BURST);
    drain_monitor(&mut m);
    raw.fill(&rec, BURST);
    let before = allocs();
    drain_monitor(&mut m);
    let n = allocs() - before;
    assert_eq!(m.snapshot().devices[0].counters.comm_est, 2 * BURST);
    record("allocs_per_event_raw", n as f64 / BURST as f64);

    // Not the hot path, for the record: a flap (PORT_ERR, then PORT_ACTIVE
    // with its activation: resume, link read, re-seed check, available).
    let (mut m, handles, _clock) = sim_monitor(1, 0, Config::default(), NoSelector);
    for _ in 0..2 {
        handles[0].port_down(1);
        drain_monitor(&mut m);
        handles[0].port_up(1);
        drain_monitor(&mut m);
    }
    const FLAPS: u64 = 100;
    let before = allocs();
    for _ in 0..FLAPS {
        handles[0].port_down(1);
        drain_monitor(&mut m);
        handles[0].port_up(1);
        drain_monitor(&mut m);
    }
    // port_down/port_up (the script's side) allocate nothing either: the
    // sim's overflow queue keeps its buffer.
    record("allocs_per_port_event", (allocs() - before) as f64 / (2 * FLAPS) as f64);
}

// ---- 2: the gate allocates nothing ------------------------------------------

/// A stand-alone copy of the admission path, for the disassembly quoted in
/// docs/PERFORMANCE.md (`objdump -d` the `counts` bench binary).
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "Rust" fn railwatch_gate_check_probe(gate: &Gate) -> u64 {
    match gate.check() {
        Ok(t) => t.generation,
        Err(_) => u64::MAX,
    }
}

fn gate_allocations() {
    const CHECKS: u64 = 1_000_000;
    let cell = Arc::new(RailCell::new(Millis(0)));
    let _ = cell.attach(PortState::Active, Millis(0));
    let gate = Gate::new(cell.clone());

    let before = thread_allocs();
    for _ in 0..CHECKS {
        black_box(railwatch_gate_check_probe(black_box(&gate)));
    }
    record("gate_allocs_1t", (thread_allocs() - before) as f64);

    let total = AtomicU64::new(0);
    let barrier = Barrier::new(8);
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                barrier.wait();
                let before = thread_allocs();
                for _ in 0..CHECKS {
                    black_box(black_box(&gate).check().is_ok());
                }
                total.fetch_add(thread_allocs() - before, Ordering::Relaxed);
            });
        }
    });
    record("gate_allocs_8t", total.load(Ordering::Relaxed) as f64);

    // A refused check builds its Rejection on the stack: no allocation either.
    let _ = cell.pause(railwatch_core::PauseReason::PortErr, Millis(1));
    let before = thread_allocs();
    for _ in 0..CHECKS {
        black_box(black_box(&gate).check().is_err());
    }
    record("gate_allocs_refused_1t", (thread_allocs() - before) as f64);
}

// ---- 3: event-path recovery ---------------------------------------------------

const FLAPS: usize = 10_000;
const WARM_FLAPS: usize = 300;
/// Before each measured write the reader is given this long to be back,
/// blocked in epoll_wait (it needs a few microseconds), on both sides.
const SETTLE: Duration = Duration::from_micros(100);

fn percentile(sorted: &[u64], p: f64) -> u64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// The floor: a thread blocked in epoll_wait on a pipe (mio, edge-triggered,
/// as the monitor registers) wakes, reads, publishes with a release store.
struct Floor {
    pipe: Arc<RawPipe>,
    seen: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    sent: u64,
}

impl Floor {
    fn new() -> Floor {
        let pipe = Arc::new(RawPipe::new());
        let seen = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let mut poll = Poll::new().expect("poll");
        poll.registry().register(&mut SourceFd(&pipe.read_fd()), Token(0), Interest::READABLE).expect("register");
        let (p, s, st) = (pipe.clone(), seen.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut events = Events::with_capacity(8);
            let mut n = 0u64;
            loop {
                poll.poll(&mut events, None).expect("epoll_wait");
                if st.load(Ordering::Acquire) {
                    return;
                }
                match p.read_some() {
                    Ok(k) => {
                        n += k as u64;
                        s.store(n, Ordering::Release);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => panic!("read: {e}"),
                }
                // Edge-triggered: empty it before waiting again.
                while let Ok(k) = p.read_some() {
                    if k == 0 {
                        break;
                    }
                    n += k as u64;
                    s.store(n, Ordering::Release);
                }
            }
        });
        Floor { pipe, seen, stop, thread: Some(thread), sent: 0 }
    }

    fn round_trip(&mut self) -> u64 {
        std::thread::sleep(SETTLE);
        self.sent += 1;
        let t = Instant::now();
        self.pipe.poke();
        spin_until("the epoll reader", || self.seen.load(Ordering::Acquire) >= self.sent);
        t.elapsed().as_nanos() as u64
    }
}

impl Drop for Floor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.pipe.poke();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A monitor on its own thread and a way to flap its one rail.
struct Flapping {
    gate: Gate,
    down: Box<dyn Fn()>,
    up: Box<dyn Fn()>,
}

impl Flapping {
    /// One flap: PORT_ERR (and wait until the gate refuses), a pause for the
    /// monitor to block again, then the timed PORT_ACTIVE → admission.
    fn flap(&self) -> u64 {
        (self.down)();
        spin_until("the gate to refuse after PORT_ERR", || self.gate.check().is_err());
        std::thread::sleep(SETTLE);
        let t = Instant::now();
        (self.up)();
        spin_until("the gate to admit after PORT_ACTIVE", || self.gate.check().is_ok());
        t.elapsed().as_nanos() as u64
    }
}

fn recovery_latency() {
    let rail = RailId { device: 0, port: 1 };

    // The monitor over the sim, as the issue describes it.
    let dev = SimDevice::new("sim0", &[PortSpec::active(1)]).expect("sim device");
    let script = dev.handle();
    let mut m =
        Monitor::new(Config::default(), Arc::new(BandwidthSelector::new()), SystemClock::new()).expect("monitor");
    m.add_device(dev);
    let sim = Flapping {
        gate: m.gate(rail).expect("gate"),
        down: Box::new({
            let s = script.clone();
            move || {
                s.port_down(1);
            }
        }),
        up: Box::new(move || {
            script.port_up(1);
        }),
    };
    let sim_monitor = m.spawn().expect("spawn");

    // The same monitor over `RawPort`: no lock, no counters in the backend.
    let raw = Arc::new(RawPipe::new());
    let mut m =
        Monitor::new(Config::default(), Arc::new(BandwidthSelector::new()), SystemClock::new()).expect("monitor");
    let port = RawPort::new(raw.clone());
    let port_up = port.port_up.clone();
    m.add_device(port);
    let err = encode(&railwatch_core::AsyncEvent::port(railwatch_core::EventKind::PortErr, 1));
    let active = encode(&railwatch_core::AsyncEvent::port(railwatch_core::EventKind::PortActive, 1));
    let raw_flapping = Flapping {
        gate: m.gate(rail).expect("gate"),
        down: Box::new({
            let (p, up) = (raw.clone(), port_up.clone());
            move || {
                up.store(false, Ordering::Release);
                p.fill(&err, 1);
            }
        }),
        up: Box::new(move || {
            port_up.store(true, Ordering::Release);
            raw.fill(&active, 1);
        }),
    };
    let raw_monitor = m.spawn().expect("spawn");

    let mut floor = Floor::new();
    let mut times: [Vec<u64>; 3] = std::array::from_fn(|_| Vec::with_capacity(FLAPS));
    for i in 0..WARM_FLAPS + FLAPS {
        for j in 0..3 {
            let which = (i + j) % 3;
            let ns = match which {
                0 => floor.round_trip(),
                1 => sim.flap(),
                _ => raw_flapping.flap(),
            };
            if i >= WARM_FLAPS {
                times[which].push(ns);
            }
        }
    }
    for handle in [sim_monitor.shutdown().map(|m| m.snapshot()), raw_monitor.shutdown().map(|m| m.snapshot())] {
        let s = handle.expect("shutdown");
        assert_eq!(s.rails[0].generation, 1 + (WARM_FLAPS + FLAPS) as u64, "every flap was one resume");
    }
    drop(floor);

    for (name, v) in ["floor", "event", "event_raw"].into_iter().zip(times.iter_mut()) {
        v.sort_unstable();
        record(&format!("recovery_{name}_p50_ns"), percentile(v, 0.50) as f64);
        record(&format!("recovery_{name}_p99_ns"), percentile(v, 0.99) as f64);
        record(&format!("recovery_{name}_max_ns"), *v.last().unwrap_or(&0) as f64);
    }
}

// ---- 4: idle wake-ups -----------------------------------------------------------

const IDLE_TICK_MS: u64 = 100;
const IDLE_RUN: Duration = Duration::from_millis(1500);

fn idle(paused: usize) -> (f64, f64) {
    let config = Config::from(MachineConfig { tick_ms: IDLE_TICK_MS, ..MachineConfig::default() });
    let mut m = Monitor::new(config, NoSelector, SystemClock::new()).expect("monitor");
    let (devices, _handles) = sim_devices(8, paused);
    for d in devices {
        m.add_device(d);
    }
    let handle = m.spawn().expect("spawn");
    let t = Instant::now();
    std::thread::sleep(IDLE_RUN);
    let m = handle.shutdown().expect("shutdown");
    let secs = t.elapsed().as_secs_f64();
    let s = m.snapshot();
    // The shutdown itself wakes the monitor once (its mio Waker).
    let wakeups = s.wakeups.saturating_sub(1);
    (wakeups as f64 / secs, s.ticks as f64 / secs)
}

fn idle_wakeups() {
    let (healthy, healthy_ticks) = idle(0);
    record("idle_healthy_wakeups_per_s", healthy);
    record("idle_healthy_ticks_per_s", healthy_ticks);
    let (paused, ticks) = idle(1);
    record("idle_paused_wakeups_per_s", paused);
    record("idle_paused_ticks_per_s", ticks);
    record("idle_tick_ms", IDLE_TICK_MS as f64);
}

// ---- 5b: memory per rail ----------------------------------------------------------

fn memory_per_rail() {
    // What the monitor calls on a device while adding it leaves nothing
    // allocated on the sim's side (its `ports()` Vec is freed at once).
    let (mut spare, _h) = sim_devices(1, 0);
    let (r0, u0) = live();
    {
        let d = &mut spare[0];
        black_box((d.name().len(), d.ports(), d.async_fd(), d.port_state(1).ok(), d.link(1).ok()));
    }
    let (r1, u1) = live();
    record("sim_calls_net_bytes", ((r1 - r0).max(u1 - u0)) as f64);

    let (r0, u0) = live();
    let m: Monitor<SimDevice, NoSelector, SimClock> =
        Monitor::new(Config::default(), NoSelector, SimClock::new()).expect("monitor");
    let (r1, u1) = live();
    record("monitor_fixed_bytes", (r1 - r0) as f64);
    // Most of it: the notification channel's preallocated slots.
    record("notification_bytes", std::mem::size_of::<railwatch_runtime::Notification>() as f64);
    record("monitor_fixed_usable_bytes", (u1 - u0) as f64);
    drop(m);

    for n in [1usize, 64, 1024, 4096] {
        // The devices (their pipes, names, port maps) exist before the
        // window: they are the backend's, not the monitor's.
        let (mut devices, _handles) = sim_devices(n, 0);
        let mut m = Monitor::new(Config::default(), NoSelector, SimClock::new()).expect("monitor");
        let (r0, u0) = live();
        // drain(..) keeps the Vec's buffer: nothing of the backend's is
        // freed inside the window.
        for d in devices.drain(..) {
            m.add_device(d);
        }
        let (r1, u1) = live();
        assert_eq!(m.snapshot().rails.len(), n);
        record(&format!("mem_per_rail_{n}"), (r1 - r0) as f64 / n as f64);
        record(&format!("mem_usable_per_rail_{n}"), (u1 - u0) as f64 / n as f64);
    }
}

fn main() {
    // `cargo bench` passes `--bench` (a filter, if any, is ignored);
    // `cargo test --benches` does not, and gets only the counts, which
    // take no time and hold on any machine.
    common::raise_fd_limit();
    if !std::env::args().any(|a| a == "--bench") {
        allocations_per_event();
        gate_allocations();
        transfer_allocations();
        probe_allocations();
        eprintln!("table: counts only (timings run under `cargo bench` / `cargo xtask bench`)");
        return;
    }
    let t = Instant::now();
    let pipe = RawPipe::new();
    record("pipe_capacity_bytes", pipe.capacity as f64);
    drop(pipe);
    drain_pairs();
    machine_pairs();
    transfer_pairs();
    transfer_allocations();
    probe_allocations();
    device_pairs();
    gate_pairs();
    tick_pairs();
    allocations_per_event();
    gate_allocations();
    memory_per_rail();
    idle_wakeups();
    recovery_latency();
    eprintln!("table: done in {:.1} s", t.elapsed().as_secs_f64());
}
