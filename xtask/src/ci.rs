//! `cargo xtask ci`: what CI runs, in the order a failure is cheapest.

use crate::run::{cargo, root, step};

/// Runs every check; the first failure stops the run.
pub fn run() -> Result<(), String> {
    crate::deps::run()?;
    step("format", cargo().args(["fmt", "--all", "--check"]))?;
    step("clippy", cargo().args(["clippy", "--workspace", "--all-targets", "--all-features", "--", "-D", "warnings"]))?;
    step("tests", cargo().args(["test", "--workspace", "--all-features"]))?;
    step(
        "loom models",
        cargo()
            .args(["test", "-p", "railwatch-core", "--release", "--test", "loom"])
            .env("RUSTFLAGS", "--cfg loom")
            .env("LOOM_MAX_PREEMPTIONS", "3")
            // A separate target dir: cfg(loom) rebuilds everything.
            .env("CARGO_TARGET_DIR", root().join("target/loom")),
    )?;
    step(
        "docs",
        cargo().args(["doc", "--workspace", "--no-deps", "--all-features"]).env("RUSTDOCFLAGS", "-D warnings"),
    )?;
    eprintln!("==> ci: all checks passed");
    Ok(())
}
