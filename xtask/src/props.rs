//! `cargo xtask props [--cases N]`: the property tests of the machine
//! (`crates/core/tests/machine_props.rs`), of the monitor over simulated
//! devices (`crates/runtime/tests/proptest_monitor.rs`) and of recordings
//! (`crates/scenario/tests/replay_props.rs` and `replay_wide.rs`, two
//! generators of random scenarios recorded and replayed) and of evidence
//! scenarios (`evidence_props.rs`), in release
//! mode, with many more cases than `cargo test` runs (default 100,000 for
//! the machine, a tenth of that for the monitor and for each generator of
//! recordings, whose cases are heavier).

use std::time::Instant;

use crate::run::{cargo, step};

/// `cargo xtask props [--cases N]`.
pub fn run(args: &[String]) -> Result<(), String> {
    let mut cases: u64 = 100_000;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--cases" => {
                let v = it.next().ok_or("--cases needs a value")?;
                cases = v.replace('_', "").parse().map_err(|_| format!("--cases {v}: not a whole number"))?;
            }
            other => return Err(format!("props: unknown argument {other} (usage: cargo xtask props [--cases N])")),
        }
    }
    let started = Instant::now();
    step(
        &format!("machine properties ({cases} cases)"),
        cargo()
            .args(["test", "--release", "-p", "railwatch-core", "--test", "machine_props", "--", "--nocapture"])
            .env("PROPTEST_CASES", cases.to_string()),
    )?;
    let monitor_cases = (cases / 10).max(1);
    step(
        &format!("monitor properties ({monitor_cases} cases)"),
        cargo()
            .args(["test", "--release", "-p", "railwatch-runtime", "--test", "proptest_monitor", "--", "--nocapture"])
            .env("PROPTEST_CASES", monitor_cases.to_string()),
    )?;
    let replay_cases = (cases / 10).max(1);
    step(
        &format!("recordings replay exactly ({replay_cases} random scenarios)"),
        cargo()
            .args(["test", "--release", "-p", "railwatch-scenario", "--test", "replay_props", "--", "--nocapture"])
            .env("RAILWATCH_REPLAY_CASES", replay_cases.to_string()),
    )?;
    step(
        &format!("recordings replay exactly, the second generator ({replay_cases} random scenarios)"),
        cargo()
            .args(["test", "--release", "-p", "railwatch-scenario", "--test", "replay_wide", "--", "--nocapture"])
            .env("RAILWATCH_WIDE_CASES", replay_cases.to_string()),
    )?;
    let evidence_cases = (cases / 10).max(1);
    step(
        &format!("evidence scenarios run and replay the same ({evidence_cases} random scenarios)"),
        cargo()
            .args(["test", "--release", "-p", "railwatch-scenario", "--test", "evidence_props", "--", "--nocapture"])
            .env("RAILWATCH_EVIDENCE_CASES", evidence_cases.to_string()),
    )?;
    eprintln!("==> props: passed ({:.1} s including the release build)", started.elapsed().as_secs_f64());
    Ok(())
}
