//! `cargo xtask ci`: what CI runs, in the order a failure is cheapest.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use crate::run::{cargo, root, step};

/// Runs the workspace's tests, echoing their output and adding up cargo's
/// `test result:` lines.
fn tests() -> Result<(u64, u64), String> {
    let mut cmd = cargo();
    cmd.args(["test", "--workspace", "--all-features"]).stdout(Stdio::piped());
    eprintln!("==> tests: {cmd:?}");
    let mut child = cmd.spawn().map_err(|e| format!("tests: cannot start: {e}"))?;
    let (mut passed, mut failed) = (0, 0);
    let stdout = child.stdout.take().ok_or("tests: no stdout")?;
    for line in BufReader::new(stdout).lines() {
        let line = line.map_err(|e| format!("tests: reading output: {e}"))?;
        println!("{line}");
        if let Some(rest) = line.strip_prefix("test result: ") {
            // "ok. 7 passed; 0 failed; 0 ignored; …"
            for part in rest.split(['.', ';']) {
                let mut words = part.split_whitespace();
                match (words.next().and_then(|n| n.parse::<u64>().ok()), words.next()) {
                    (Some(n), Some("passed")) => passed += n,
                    (Some(n), Some("failed")) => failed += n,
                    _ => {}
                }
            }
        }
    }
    let status = child.wait().map_err(|e| format!("tests: {e}"))?;
    if !status.success() {
        return Err(format!("tests failed ({status}): {passed} passed, {failed} failed"));
    }
    Ok((passed, failed))
}

/// Runs every built-in scenario through the built binary: each must hold
/// all of its expectations (exit 0).
fn builtins() -> Result<(), String> {
    step("build railwatch", cargo().args(["build", "-p", "railwatch"]))?;
    let target = crate::run::target_dir();
    let bin = target.join("debug/railwatch");
    let list = Command::new(&bin).arg("scenarios").output().map_err(|e| format!("{}: {e}", bin.display()))?;
    if !list.status.success() {
        return Err(format!("railwatch scenarios failed ({})", list.status));
    }
    let text = String::from_utf8_lossy(&list.stdout).into_owned();
    let names: Vec<&str> = text.lines().filter_map(|l| l.split_whitespace().next()).collect();
    if names.is_empty() {
        return Err("railwatch scenarios listed nothing".into());
    }
    for name in &names {
        step(
            &format!("scenario {name}"),
            Command::new(&bin).args(["simulate", "--builtin", name]).env("NO_COLOR", "1"),
        )?;
    }
    eprintln!("==> built-in scenarios: {} held every expectation", names.len());
    Ok(())
}

/// Runs every check; the first failure stops the run.
pub fn run() -> Result<(), String> {
    crate::deps::run()?;
    step("format", cargo().args(["fmt", "--all", "--check"]))?;
    step("clippy", cargo().args(["clippy", "--workspace", "--all-targets", "--all-features", "--", "-D", "warnings"]))?;
    // No function over 150 lines, no file over 700 lines of code.
    eprintln!("==> size: lines of code and function lengths against the limits");
    crate::size::run(&[])?;
    let (passed, failed) = tests()?;
    // The C API from C and C++ (shared and static library, valgrind).
    let (ffi_passed, ffi_failed) = crate::ffi::run(&[])?;
    step(
        "loom models",
        cargo()
            .args(["test", "-p", "railwatch-core", "--release", "--test", "loom"])
            .env("RUSTFLAGS", "--cfg loom")
            .env("LOOM_MAX_PREEMPTIONS", "3")
            // A separate target dir: cfg(loom) rebuilds everything.
            .env("CARGO_TARGET_DIR", root().join("target/loom")),
    )?;
    builtins()?;
    // The real kernel RDMA stack (Soft-RoCE in qemu), after the simulated one.
    crate::vmtest::run(&[])?;
    step("engine example", cargo().args(["run", "-p", "railwatch-runtime", "--example", "engine"]))?;
    // An engine that keeps its own epoll loop and drives only the machine.
    step("own-loop example", cargo().args(["run", "-p", "railwatch-sim-backend", "--example", "own_loop"]))?;
    step(
        "docs",
        cargo().args(["doc", "--workspace", "--no-deps", "--all-features"]).env("RUSTDOCFLAGS", "-D warnings"),
    )?;
    // Last, being the slowest to set up on a fresh machine (cargo-fuzz is
    // installed and the targets built with coverage instrumentation).
    crate::fuzz::short()?;
    eprintln!("==> ci: all checks passed");
    // The plain closing line CI reads, with the counts of the test steps
    // (cargo's tests and the C API's checks).
    println!("tests: {} passed, {} failed", passed + ffi_passed, failed + ffi_failed);
    Ok(())
}
