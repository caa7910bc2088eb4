//! Helpers shared by the cli's integration tests.

use std::process::{Command, Output};

/// Runs the built `railwatch` with `args`, without colour or log filter
/// from the caller's environment.
pub fn railwatch(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_railwatch"))
        .args(args)
        .env("NO_COLOR", "1")
        .env_remove("RUST_LOG")
        .output()
        .expect("the binary runs")
}
