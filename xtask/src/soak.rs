//! `cargo xtask soak [--events N] [--seed S]`: the soak test
//! (`crates/runtime/tests/soak.rs`) in release mode, 10,000,000
//! simulated events by default, with random faults and flaps against the
//! real runtime monitor over simulated devices, in virtual time. It checks
//! that nothing is lost, no rail is stranded and memory stays flat, and
//! prints events/s, the final counters and the RSS samples. The same seed
//! gives the same run. `cargo test` runs the same test with 200,000 events.
//! The test's other knobs pass through the environment:
//! `RAILWATCH_SOAK_SETTLE_MS`, `RAILWATCH_SOAK_DAMPING=1` (soak with the
//! settle delay and flap damping on) and `RAILWATCH_SOAK_TRACE` (see the
//! test's documentation).

use std::time::Instant;

use crate::run::{cargo, step};

/// Events for `cargo xtask soak`.
pub const DEFAULT_EVENTS: u64 = 10_000_000;

/// `cargo xtask soak [--events N] [--seed S]`.
pub fn run(args: &[String]) -> Result<(), String> {
    let mut events = DEFAULT_EVENTS;
    let mut seed: Option<String> = None;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--events" => {
                let v = value()?;
                events = v.replace('_', "").parse().map_err(|_| format!("--events {v}: not a whole number"))?;
            }
            "--seed" => seed = Some(value()?.clone()),
            other => {
                return Err(format!(
                    "soak: unknown argument {other} (usage: cargo xtask soak [--events N] [--seed S])"
                ));
            }
        }
    }
    let mut cmd = cargo();
    cmd.args(["test", "--release", "-p", "railwatch-runtime", "--test", "soak", "--", "--nocapture"])
        .env("RAILWATCH_SOAK_EVENTS", events.to_string());
    if let Some(seed) = &seed {
        cmd.env("RAILWATCH_SOAK_SEED", seed);
    }
    let started = Instant::now();
    step(&format!("soak ({events} events)"), &mut cmd)?;
    eprintln!("==> soak: passed ({:.1} s including the release build)", started.elapsed().as_secs_f64());
    Ok(())
}
