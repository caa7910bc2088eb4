//! Loom models of the rail state word against concurrent gate checks.
//!
//! Run as CI does:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 CARGO_TARGET_DIR=target/loom \
//!     cargo test -p railwatch-core --release --test loom
//! ```
//!
//! Under `cfg(loom)` the crate's atomics and `Arc` are loom's (see
//! `src/sync.rs`), so every interleaving of these small models (up to the
//! preemption bound) is explored.
//!
//! `RailCell::since` is a second atomic, stored right after the word's CAS,
//! so a rejection's `since` may for a moment be the previous transition's
//! time, or already the next one's. The models check the word exactly and
//! only bound `since` to times the monitor wrote.
//!
//! Whatever runs on the model's main thread calls `thread::yield_now()`
//! first: loom's DPOR only sees a race with a thread that has a pending
//! operation, and a freshly spawned thread has none until it first runs, so
//! without the yield the main thread's early loads are never reordered after
//! the other threads' writes (`no_torn_word` then explores one execution).

#![cfg(loom)]

use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use loom::thread;
use railwatch_core::{Gate, Millis, Outcome, PauseReason, PortState, RailCell, RailState, RailWord, Rejection};

/// Runs `f` under every interleaving, with the preemption bound CI uses
/// (`LOOM_MAX_PREEMPTIONS`, 3 when unset).
fn model<F>(f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(3);
    }
    builder.check(f);
}

/// An attached, active rail: generation 1, port last seen ACTIVE, since 0.
fn active_cell() -> Arc<RailCell> {
    let cell = Arc::new(RailCell::new(Millis(0)));
    assert_eq!(cell.attach(PortState::Active, Millis(0)), Outcome::Changed);
    cell
}

/// Two threads run pause → resume cycles (two and one) against one rail while a
/// third restarts it (CQ_ERR). No bump is lost: the final generation is the
/// attach, plus one per resume that reported `Changed`, plus the restart.
#[test]
fn no_lost_generation_bump() {
    model(|| {
        let cell = active_cell();
        let cycles = |cell: Arc<RailCell>, n: u64, t0: u64| {
            thread::spawn(move || {
                let (mut paused, mut resumed) = (0u64, 0u64);
                for i in 0..n {
                    match cell.pause(PauseReason::PortErr, Millis(t0 + i)) {
                        Outcome::Changed => paused += 1,
                        other => assert_eq!(other, Outcome::AlreadyThere),
                    }
                    match cell.resume(Millis(t0 + i)) {
                        Outcome::Changed => resumed += 1,
                        other => assert_eq!(other, Outcome::AlreadyThere),
                    }
                }
                (paused, resumed)
            })
        };
        let a = cycles(cell.clone(), 2, 10);
        let b = cycles(cell.clone(), 1, 20);
        thread::yield_now();
        assert_eq!(cell.bump_generation(), Outcome::Changed, "a restart of a live rail always applies");
        let (pa, ra) = a.join().unwrap();
        let (pb, rb) = b.join().unwrap();

        let w = cell.load();
        assert_eq!(w.generation, 1 + ra + rb + 1, "attach + Changed resumes + restart");
        // Every thread ends with a resume, so whichever ran last left it active,
        // and pauses and resumes that changed the word alternate.
        assert_eq!((w.state, w.reason), (RailState::Active, PauseReason::None));
        assert_eq!(pa + pb, ra + rb);
        assert!(ra + rb >= 1);
    });
}

/// The monitor pauses, records a port read, resumes and restarts the rail;
/// a worker checks the gate meanwhile. Every ticket and every rejection is
/// exactly one of the words the monitor wrote, never a mix of two, and a
/// worker's successive observations never go back in time.
#[test]
fn no_torn_word() {
    // The words the monitor writes, in order.
    let active = |generation| RailWord {
        state: RailState::Active,
        reason: PauseReason::None,
        last_port_state: Some(PortState::Active),
        generation,
    };
    let paused = |port| RailWord {
        state: RailState::Paused,
        reason: PauseReason::PortErr,
        last_port_state: Some(port),
        generation: 1,
    };
    let sequence = [active(1), paused(PortState::Active), paused(PortState::Down), active(2), active(3)];

    model(move || {
        let cell = active_cell();
        let gate = Gate::new(cell.clone());
        let monitor = {
            let cell = cell.clone();
            thread::spawn(move || {
                assert_eq!(cell.pause(PauseReason::PortErr, Millis(10)), Outcome::Changed);
                cell.observe_port(PortState::Down);
                assert_eq!(cell.resume(Millis(20)), Outcome::Changed);
                assert_eq!(cell.bump_generation(), Outcome::Changed);
            })
        };

        thread::yield_now();
        let mut last = 0;
        for _ in 0..3 {
            let seen = match gate.check() {
                Ok(ticket) => {
                    let i =
                        sequence.iter().position(|w| w.state == RailState::Active && w.generation == ticket.generation);
                    i.unwrap_or_else(|| panic!("ticket {ticket:?} matches no active word"))
                }
                Err(Rejection { state, reason, since, last_port_state, generation }) => {
                    let w = RailWord { state, reason, last_port_state, generation };
                    let i = sequence.iter().position(|s| *s == w);
                    let i = i.unwrap_or_else(|| panic!("rejection {w:?} matches no word the monitor wrote"));
                    // The pause's time, or the attach's (the pause has not
                    // stored its time yet), or the resume's (it already has).
                    assert!([0, 10, 20].contains(&since.0), "since {since}");
                    i
                }
            };
            assert!(seen >= last, "the gate went back from word {last} to word {seen}");
            last = seen;
        }
        monitor.join().unwrap();
        assert_eq!(cell.load(), sequence[4]);
    });
}

/// A worker that has observed a pause complete (a flag the monitor sets
/// after `pause` returned `Changed` and before it resumes) is never admitted
/// with a generation from before the pause, even with a concurrent restart.
#[test]
fn no_admission_while_paused() {
    model(|| {
        let cell = active_cell();
        let gate = Gate::new(cell.clone());
        let paused = Arc::new(AtomicBool::new(false));
        // The generation read right after the pause took effect: at least the
        // generation the pause left the rail with.
        let paused_generation = Arc::new(AtomicU64::new(u64::MAX));

        let monitor = {
            let (cell, paused, paused_generation) = (cell.clone(), paused.clone(), paused_generation.clone());
            thread::spawn(move || {
                assert_eq!(cell.pause(PauseReason::PortErr, Millis(10)), Outcome::Changed);
                paused_generation.store(cell.load().generation, Ordering::Relaxed);
                paused.store(true, Ordering::Release);
                assert_eq!(cell.resume(Millis(20)), Outcome::Changed);
            })
        };
        let restart = {
            let cell = cell.clone();
            thread::spawn(move || assert_eq!(cell.bump_generation(), Outcome::Changed))
        };

        thread::yield_now();
        for _ in 0..2 {
            if !paused.load(Ordering::Acquire) {
                // Before the pause is known to be done any answer is fine.
                let _ = gate.check();
                continue;
            }
            let at_pause = paused_generation.load(Ordering::Relaxed);
            match gate.check() {
                Ok(ticket) => assert!(
                    ticket.generation > at_pause,
                    "admitted with generation {} after a pause at generation {at_pause}",
                    ticket.generation
                ),
                Err(r) => assert_eq!((r.state, r.reason), (RailState::Paused, PauseReason::PortErr)),
            }
        }
        monitor.join().unwrap();
        restart.join().unwrap();
        let w = cell.load();
        assert_eq!((w.state, w.generation), (RailState::Active, 3), "attach + restart + resume");
    });
}

/// Two activations race (the PORT_ACTIVE event and the recovery poll): one
/// resumes, the other finds it already there; one bump, not two.
#[test]
fn racing_activations_bump_once() {
    model(|| {
        let cell = active_cell();
        assert_eq!(cell.pause(PauseReason::PortErr, Millis(1)), Outcome::Changed);
        let other = {
            let cell = cell.clone();
            thread::spawn(move || cell.resume(Millis(2)))
        };
        thread::yield_now();
        let mine = cell.resume(Millis(3));
        let theirs = other.join().unwrap();
        let mut outcomes = [mine, theirs];
        outcomes.sort_by_key(|o| *o != Outcome::Changed);
        assert_eq!(outcomes, [Outcome::Changed, Outcome::AlreadyThere]);
        assert_eq!(cell.load().generation, 2);
    });
}

/// A device loss (DEVICE_FATAL) races a pause/resume cycle: the rail ends
/// inert whatever the order, and a worker that has seen it inert is never
/// admitted again (only attach leaves inert).
#[test]
fn inert_is_absorbing_under_races() {
    model(|| {
        let cell = active_cell();
        let gate = Gate::new(cell.clone());
        let fatal = {
            let cell = cell.clone();
            thread::spawn(move || assert_eq!(cell.detach(PauseReason::DeviceFatal, Millis(5)), Outcome::Changed))
        };
        let bounce = {
            let cell = cell.clone();
            thread::spawn(move || {
                let p = cell.pause(PauseReason::PortErr, Millis(3));
                assert!(matches!(p, Outcome::Changed | Outcome::Refused { from: RailState::Inert }), "{p:?}");
                let r = cell.resume(Millis(4));
                assert!(matches!(r, Outcome::Changed | Outcome::Refused { from: RailState::Inert }), "{r:?}");
            })
        };

        thread::yield_now();
        let mut seen_inert = false;
        for _ in 0..2 {
            match gate.check() {
                Ok(_) => assert!(!seen_inert, "admitted after the rail was seen inert"),
                Err(r) if r.state == RailState::Inert => {
                    assert_eq!(r.reason, PauseReason::DeviceFatal);
                    seen_inert = true;
                }
                Err(r) => assert!(!seen_inert && r.state == RailState::Paused),
            }
        }
        fatal.join().unwrap();
        bounce.join().unwrap();
        let w = cell.load();
        assert_eq!((w.state, w.reason), (RailState::Inert, PauseReason::DeviceFatal));
        assert!(gate.check().is_err());
        assert_eq!(cell.resume(Millis(6)), Outcome::Refused { from: RailState::Inert });
    });
}

/// The half-open breaker's one probe: two workers ask for it while the
/// monitor may open the breaker again (a port lost, a failed probe). At
/// most one worker is granted, and none is once the monitor's change came
/// first; a worker's ordinary check is refused throughout.
#[test]
fn one_probe_at_a_time() {
    model(|| {
        let cell = active_cell();
        assert_eq!(cell.pause(PauseReason::DataPath, Millis(1)), Outcome::Changed);
        assert_eq!(cell.set_reason(PauseReason::HalfOpen), Outcome::Changed);
        let granted = Arc::new(AtomicU64::new(0));
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let gate = Gate::new(cell.clone());
                let granted = granted.clone();
                thread::spawn(move || {
                    assert!(gate.check().is_err(), "ordinary work admitted while half-open");
                    if let Ok(t) = gate.probe() {
                        assert_eq!(t.generation, 1);
                        granted.fetch_add(1, Ordering::AcqRel);
                    }
                })
            })
            .collect();
        thread::yield_now();
        // The monitor re-opens it (a failed probe): a later ask is refused.
        let reopened = cell.set_reason(PauseReason::DataPath) == Outcome::Changed;
        for w in workers {
            w.join().unwrap();
        }
        let n = granted.load(Ordering::Acquire);
        assert!(n <= 1, "{n} probes granted at once");
        assert!(reopened, "the monitor's change is never lost to a worker's CAS");
        assert_eq!(cell.load().reason, PauseReason::DataPath);
    });
}
