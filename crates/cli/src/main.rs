//! `railwatch`: watch RDMA rails, or simulate their failure modes.
//!
//! Exit codes: 0 all expectations held (or the command succeeded), 1 an
//! expectation failed, 2 bad input (or a command this build lacks).

use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

mod builtin;
mod output;
mod simulate;
#[cfg(feature = "verbs")]
mod verbs;

/// Keep RDMA NIC ports ("rails") usable: drain async events correctly,
/// recover rails whose PORT_ACTIVE was lost, and show why a rail is down.
#[derive(Parser, Debug)]
#[command(name = "railwatch", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the real monitor against simulated devices following a scenario
    /// (the built-in default when no FILE is given).
    Simulate(SimulateArgs),
    /// List the built-in scenarios.
    Scenarios,
    /// Watch real devices and print what happens (needs the `verbs` feature).
    Watch(WatchArgs),
    /// Show every rail of every real device (needs the `verbs` feature).
    Status(StatusArgs),
}

#[derive(Args, Debug)]
struct SimulateArgs {
    /// A scenario file (TOML, see docs/SCENARIOS.md).
    #[arg(conflicts_with = "builtin")]
    file: Option<std::path::PathBuf>,
    /// Run a built-in scenario instead (`railwatch scenarios` lists them).
    #[arg(long, value_name = "NAME")]
    builtin: Option<String>,
    /// Print JSON lines (docs/JSON.md) instead of the timeline.
    #[arg(long)]
    json: bool,
    /// Run in real time instead of virtual time.
    #[arg(long)]
    realtime: bool,
    /// Override the scenario's recovery tick period, in milliseconds.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    tick_ms: Option<u64>,
}

#[derive(Args, Debug)]
struct WatchArgs {
    /// Watch only this device (default: every device).
    #[arg(long, value_name = "D")]
    device: Option<String>,
    /// Print JSON lines instead of the timeline.
    #[arg(long)]
    json: bool,
    /// Stop after this many milliseconds (default: run until interrupted).
    #[arg(long, value_name = "MS")]
    for_ms: Option<u64>,
    /// Recovery tick period in milliseconds.
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    tick_ms: u64,
}

#[derive(Args, Debug)]
struct StatusArgs {
    /// Print one JSON object per rail instead of a table.
    #[arg(long)]
    json: bool,
}

/// Colour only on a terminal, and never with `NO_COLOR` set.
fn use_color() -> bool {
    io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"))
        .format_timestamp_millis()
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Simulate(args) => simulate::run(args),
        Command::Scenarios => scenarios(),
        Command::Watch(args) => watch(args),
        Command::Status(args) => status(args),
    }
}

fn scenarios() -> ExitCode {
    let mut out = io::stdout().lock();
    for b in builtin::BUILTINS {
        let description = match railwatch_scenario::scenario::Scenario::parse(b.text, b.name) {
            Ok(s) => s.description.unwrap_or_default(),
            Err(e) => format!("(does not parse: {e})"),
        };
        let marker = if b.name == builtin::DEFAULT { " (default)" } else { "" };
        if writeln!(out, "{:<26} {description}{marker}", b.name).is_err() {
            return ExitCode::from(2);
        }
    }
    ExitCode::SUCCESS
}

#[cfg(not(feature = "verbs"))]
fn no_verbs(command: &str) -> ExitCode {
    eprintln!(
        "railwatch: `{command}` needs real RDMA devices, but this build has no verbs support. \
         Rebuild with `cargo build -p railwatch --features verbs` (system packages: `cargo xtask deps`)."
    );
    ExitCode::from(2)
}

#[cfg(not(feature = "verbs"))]
fn watch(_args: WatchArgs) -> ExitCode {
    no_verbs("watch")
}

#[cfg(not(feature = "verbs"))]
fn status(_args: StatusArgs) -> ExitCode {
    no_verbs("status")
}

#[cfg(feature = "verbs")]
fn watch(args: WatchArgs) -> ExitCode {
    verbs::watch(args)
}

#[cfg(feature = "verbs")]
fn status(args: StatusArgs) -> ExitCode {
    verbs::status(args)
}
