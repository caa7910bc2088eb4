//! `railwatch simulate`: load a scenario, refuse it whole if it is bad, run
//! the real monitor against simulated devices, check its expectations; with
//! `--html FILE`, also write the run as one page (crates/report).

use std::io::{self, Write};
use std::process::ExitCode;

use railwatch_report::Timeline;
use railwatch_runtime::lines::{Line, Record};
use railwatch_scenario::driver::{self, RunOptions};
use railwatch_scenario::scenario::Scenario;

use crate::output::{self, Style};
use crate::{SimulateArgs, builtin, use_color};
use railwatch_cli::record::Recording;

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
    // Only with --html: the run's JSON lines and tick times (bounded:
    // `Timeline::push` cuts a run too long to hold).
    let mut report = args.html.as_ref().map(|_| Timeline {
        title: scenario.name.clone(),
        duration_ms: scenario.duration_ms,
        ..Timeline::default()
    });
    // The output files are checked before the run, not after it.
    if let Some(html) = &args.html {
        if let Err(e) = railwatch_cli::outfile::writable(html) {
            eprintln!("railwatch: cannot write the HTML report {}: {e}", html.display());
            return ExitCode::from(2);
        }
    }
    // Neither output may replace the scenario it runs, nor the other.
    let files = [
        ("the scenario", args.file.as_deref()),
        ("--html", args.html.as_deref()),
        ("--record", args.rec.record.as_deref()),
    ];
    if let Err(e) = railwatch_cli::outfile::distinct(&files) {
        eprintln!("railwatch: {e}");
        return ExitCode::from(2);
    }
    let recording = match &args.rec.record {
        None => None,
        Some(path) => {
            let config = railwatch_scenario::driver::config(&scenario, &opts);
            let description = format!("recorded by railwatch simulate from the scenario {}", scenario.name);
            match Recording::create(
                path,
                &config,
                args.rec.record_anonymize,
                "railwatch simulate --record",
                description,
            ) {
                Ok(r) => Some(r),
                Err(e) => {
                    eprintln!("railwatch: cannot write the recording {}: {e}", path.display());
                    return ExitCode::from(2);
                }
            }
        }
    };
    if let Style::Human { .. } = style {
        let _ = writeln!(
            out,
            "scenario {} ({} ms of {} time)",
            output::escaped(&scenario.name),
            scenario.duration_ms,
            if args.realtime { "real" } else { "virtual" }
        );
    }
    let mut recording_failed: Option<io::Error> = None;
    let mut flushed_at = None;
    let observer = recording.as_ref().map(Recording::observer);
    let result = driver::run_observed(&scenario, &opts, observer, |names, record: Record<'_>| {
        if let (Some(r), Record::Note(note)) = (&recording, &record) {
            // Written as virtual time moves, as `watch` writes as real time does.
            if flushed_at != Some(note.t) && recording_failed.is_none() {
                flushed_at = Some(note.t);
                recording_failed = r.flush(note.t).err();
            }
        }
        if let Some(report) = report.as_mut() {
            match record {
                Record::Tick(t) => report.push_tick(t),
                _ => {
                    if let Some(line) = Line::of(names, &record).and_then(|l| serde_json::to_value(l).ok()) {
                        report.push(line);
                    }
                }
            }
        }
        if write_failed.is_some() {
            return;
        }
        let written = match style {
            Style::Json => Line::of(names, &record).map(|line| output::write_json(&mut out, &line)),
            Style::Human { color } => output::human_record(names, &record, color).map(|line| writeln!(out, "{line}")),
        };
        if let Some(written) = written {
            if let Err(e) = written {
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
        Style::Json => output::write_json(&mut out, &summary.line()),
        Style::Human { color } => output::human_summary(&mut out, &summary, color),
    };
    if let (Some(r), Some(path)) = (&recording, args.rec.record.as_deref()) {
        let finished = match recording_failed.take() {
            Some(e) => Err(e),
            None => r.finish(summary.snapshot.t, &summary.snapshot),
        };
        if let Err(e) = finished {
            eprintln!("railwatch: writing the recording {} failed: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    if let (Some(mut report), Some(path)) = (report, args.html.as_deref()) {
        if let Ok(line) = serde_json::to_value(summary.line()) {
            report.push(line);
        }
        let _ = out.flush();
        if let Err(e) = railwatch_cli::outfile::write_atomically(path, &railwatch_report::render_html(&report)) {
            eprintln!("railwatch: cannot write the HTML report {}: {e}", path.display());
            return ExitCode::from(2);
        }
    }
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
