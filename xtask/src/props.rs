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
    // (what, package, test file, the variable its case count is read from,
    // the divisor of --cases: the heavier cases run a tenth as many).
    const SUITES: [(&str, &str, &str, &str, u64); 5] = [
        ("machine properties", "railwatch-core", "machine_props", "PROPTEST_CASES", 1),
        ("monitor properties", "railwatch-runtime", "proptest_monitor", "PROPTEST_CASES", 10),
        ("recordings replay exactly", "railwatch-scenario", "replay_props", "RAILWATCH_REPLAY_CASES", 10),
        (
            "recordings replay exactly, the second generator",
            "railwatch-scenario",
            "replay_wide",
            "RAILWATCH_WIDE_CASES",
            10,
        ),
        (
            "evidence scenarios run and replay the same",
            "railwatch-scenario",
            "evidence_props",
            "RAILWATCH_EVIDENCE_CASES",
            10,
        ),
    ];
    for (what, package, test, variable, divisor) in SUITES {
        let n = (cases / divisor).max(1);
        step(
            &format!("{what} ({n} cases)"),
            cargo()
                .args(["test", "--release", "-p", package, "--test", test, "--", "--nocapture"])
                .env(variable, n.to_string()),
        )?;
    }
    eprintln!("==> props: passed ({:.1} s including the release build)", started.elapsed().as_secs_f64());
    Ok(())
}
