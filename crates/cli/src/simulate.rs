//! `railwatch simulate`: load a scenario, refuse it whole if it is bad, run
//! the real monitor against simulated devices, check its expectations.

use std::io::{self, Write};
use std::process::ExitCode;

use railwatch_scenario::driver::{self, Record, RunOptions};
use railwatch_scenario::scenario::Scenario;

use crate::output::{self, Style};
use crate::{SimulateArgs, builtin, use_color};

fn load(args: &SimulateArgs) -> Result<Scenario, String> {
    if let Some(path) = &args.file {
        return Scenario::load(path).map_err(|e| e.to_string());
    }
    let name = args.builtin.as_deref().unwrap_or(builtin::DEFAULT);
    let Some(b) = builtin::find(name) else {
        let names: Vec<&str> = builtin::BUILTINS.iter().map(|b| b.name).collect();
        return Err(format!("no built-in scenario called {name:?}; there are: {}", names.join(", ")));
    };
    Scenario::parse(b.text, &format!("builtin:{}", b.name)).map_err(|e| e.to_string())
}

/// Runs the command; see the crate docs for the exit codes.
pub fn run(args: SimulateArgs) -> ExitCode {
    let scenario = match load(&args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("railwatch: {e}");
            return ExitCode::from(2);
        }
    };
    let style = if args.json { Style::Json } else { Style::Human { color: use_color() } };
    let opts = RunOptions { realtime: args.realtime, tick_ms: args.tick_ms, max_instants: None };
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let mut write_failed: Option<io::Error> = None;
    if let Style::Human { .. } = style {
        let _ = writeln!(
            out,
            "scenario {} ({} ms of {} time)",
            output::escaped(&scenario.name),
            scenario.duration_ms,
            if args.realtime { "real" } else { "virtual" }
        );
    }
    let result = driver::run(&scenario, &opts, |names, record: Record<'_>| {
        if write_failed.is_some() {
            return;
        }
        let line = match style {
            Style::Json => output::json_record(names, &record).map(|v| v.to_string()),
            Style::Human { color } => output::human_record(names, &record, color),
        };
        if let Some(line) = line {
            if let Err(e) = writeln!(out, "{line}") {
                write_failed = Some(e);
            }
            if args.realtime {
                let _ = out.flush();
            }
        }
    });
    let summary = match result {
        Ok(s) => s,
        Err(e) => {
            let _ = out.flush();
            eprintln!("railwatch: the simulation could not run: {e}");
            return ExitCode::from(2);
        }
    };
    let printed = match style {
        Style::Json => writeln!(out, "{}", output::json_summary(&summary)),
        Style::Human { color } => output::human_summary(&mut out, &summary, color),
    };
    if let Err(e) = printed.and(out.flush()) {
        // A closed pipe (`| head`) is not the scenario's failure.
        if e.kind() != io::ErrorKind::BrokenPipe {
            eprintln!("railwatch: writing output failed: {e}");
            return ExitCode::from(2);
        }
    }
    let dropped = summary.snapshot.notifications_dropped;
    if dropped > 0 {
        // Never expected (the driver's subscription has no bound), but a
        // timeline with holes must not pass for a whole one.
        eprintln!("railwatch: {dropped} notification(s) were dropped; the output above is incomplete");
        return ExitCode::from(1);
    }
    let failures: Vec<_> = summary.expectations.iter().filter(|e| !e.passed).collect();
    if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        output::report_failures(&failures);
        ExitCode::from(1)
    }
}
