//! Project automation, in the rust-analyzer `xtask` style: `cargo xtask <task>`.
//!
//! - `ci`: everything CI checks, in order; the README's test command.
//! - `deps`: installs the system packages the verbs backend needs.
//! - `scale`: the CLI under a million queued events, timed, with peak memory.

use std::process::ExitCode;

mod ci;
mod deps;
mod run;
mod scale;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("ci") => ci::run(),
        Some("deps") => deps::run(),
        Some("scale") => scale::run(),
        _ => {
            eprintln!("usage: cargo xtask <ci|deps|scale>");
            eprintln!("  ci    format, lint, test (with loom), docs: what CI runs");
            eprintln!("  deps  install the Debian packages the verbs backend builds against");
            eprintln!("  scale time a 1,000,000-event, 64-device scenario and its peak memory");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}
