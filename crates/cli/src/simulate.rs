//! `railwatch simulate`: load a scenario, refuse it whole if it is bad, run
//! the real monitor against simulated devices, check its expectations; with
//! `--html FILE`, also write the run as one page (crates/report), with
//! `--record FILE` as a recording (docs/RECORDING.md), with
//! `--metrics-series FILE` as the metrics a scraper would have stored
//! (docs/METRICS.md).

use std::io::{self, Write};
use std::process::ExitCode;

use railwatch_core::Millis;
use railwatch_report::Timeline;
use railwatch_runtime::lines::{ExpectResult, Line, Names, Record};
use railwatch_scenario::driver::{self, RunOptions, RunSummary, SimMonitor, Sink};
use railwatch_scenario::scenario::{MAX_DURATION_MS, Scenario};

use crate::output::{self, Style};
use crate::{SimulateArgs, builtin, use_color};
use railwatch_cli::metrics::{Series, SeriesError};
use railwatch_cli::record::Recording;

fn load(args: &SimulateArgs) -> Result<Scenario, String> {
    if let Some(path) = &args.file {
        return Scenario::load(path).map_err(|e| e.to_string());
    }
    let name = args.builtin.as_deref().unwrap_or(builtin::DEFAULT);
    let Some(b) = builtin::find(name) else {
        let names: Vec<&str> = builtin::BUILTINS.iter().map(|b| b.name).collect();
        return Err(format!(
            "no built-in scenario called {}; there are: {}",
            railwatch_core::shown_name(name),
            names.join(", ")
        ));
    };
    Scenario::parse(b.text, &format!("builtin:{}", b.name)).map_err(|e| e.to_string())
}

/// Refuses bad input: exit 2, said on stderr.
fn refuse(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("railwatch: {message}");
    ExitCode::from(2)
}

/// Where a run goes as it happens: stdout, and the HTML report and the
/// recording when asked for.
struct Outputs {
    style: Style,
    realtime: bool,
    out: io::BufWriter<io::StdoutLock<'static>>,
    /// The first write to stdout that failed; nothing more is printed.
    write_failed: Option<io::Error>,
    /// Only with --html: the run's JSON lines and tick times (bounded:
    /// `Timeline::push` cuts a run too long to hold).
    report: Option<Timeline>,
    recording: Option<Recording>,
    /// The recording was told the start is over (the devices present at
    /// the start are attached before the first instant).
    recording_started: bool,
    recording_failed: Option<io::Error>,
    flushed_at: Option<Millis>,
    /// Only with --metrics-series: the scrapes so far.
    series: Option<Series>,
    series_failed: Option<SeriesError>,
}

/// The series of `--metrics-series`, checked before the run: the file
/// writable, the scrapes within their bound.
fn start_series(args: &SimulateArgs, scenario: &Scenario, opts: &RunOptions) -> Result<Option<Series>, ExitCode> {
    let Some(path) = &args.metrics_series else { return Ok(None) };
    if let Err(e) = railwatch_cli::outfile::writable(path) {
        return Err(refuse(format_args!("cannot write the metrics series {}: {e}", path.display())));
    }
    let end = driver::end_ms(scenario, opts);
    match Series::new(env!("CARGO_PKG_VERSION"), &scenario.name, args.scrape_interval, end) {
        Ok(series) => Ok(Some(series)),
        Err(e) => Err(refuse(format_args!("--metrics-series {}: {e}", path.display()))),
    }
}

impl Outputs {
    /// Checks the output files before the run, not after it, and starts
    /// the recording.
    fn start(args: &SimulateArgs, scenario: &Scenario, opts: &RunOptions) -> Result<Outputs, ExitCode> {
        let out = io::BufWriter::new(io::stdout().lock());
        let report = args.html.as_ref().map(|_| Timeline {
            title: scenario.name.clone(),
            duration_ms: scenario.duration_ms,
            ..Timeline::default()
        });
        if let Some(html) = &args.html {
            if let Err(e) = railwatch_cli::outfile::writable(html) {
                return Err(refuse(format_args!("cannot write the HTML report {}: {e}", html.display())));
            }
        }
        // No output may replace the scenario it runs, nor another.
        let files = [
            ("the scenario", args.file.as_deref()),
            ("--html", args.html.as_deref()),
            ("--record", args.rec.record.as_deref()),
            ("--metrics-series", args.metrics_series.as_deref()),
        ];
        railwatch_cli::outfile::distinct(&files).map_err(refuse)?;
        let series = start_series(args, scenario, opts)?;
        let recording = match &args.rec.record {
            None => None,
            Some(path) => {
                let config = driver::config(scenario, opts);
                let description = format!("recorded by railwatch simulate from the scenario {}", scenario.name);
                let by = "railwatch simulate --record";
                match Recording::create(path, &config, args.rec.record_anonymize, by, description) {
                    Ok(r) => {
                        if !args.realtime {
                            r.on_virtual_time();
                        }
                        Some(r)
                    }
                    Err(e) => return Err(refuse(format_args!("cannot write the recording {}: {e}", path.display()))),
                }
            }
        };
        let style = if args.json { Style::Json } else { Style::Human { color: use_color() } };
        let (realtime, write_failed, recording_failed, flushed_at) = (args.realtime, None, None, None);
        Ok(Outputs {
            style,
            realtime,
            out,
            write_failed,
            report,
            recording,
            recording_started: false,
            recording_failed,
            flushed_at,
            series,
            series_failed: None,
        })
    }

    /// The human header line.
    fn header(&mut self, scenario: &Scenario) {
        if let Style::Human { .. } = self.style {
            let _ = writeln!(
                self.out,
                "scenario {} ({} ms of {} time)",
                output::escaped(&scenario.name),
                scenario.duration_ms,
                if self.realtime { "real" } else { "virtual" }
            );
        }
    }

    /// One record of the run, as it happens.
    fn record(&mut self, names: &Names, record: Record<'_>) {
        if let (Some(series), Record::Note(note)) = (&mut self.series, &record) {
            series.note(names, note);
        }
        if let (Some(r), Record::Note(note)) = (&self.recording, &record) {
            // Written as virtual time moves, as `watch` writes as real time does.
            if self.flushed_at != Some(note.t) && self.recording_failed.is_none() {
                self.flushed_at = Some(note.t);
                self.recording_failed = r.flush(note.t).err();
            }
        }
        if let Some(report) = self.report.as_mut() {
            match record {
                Record::Tick(t) => report.push_tick(t),
                _ => {
                    if let Some(line) = Line::of(names, &record).and_then(|l| serde_json::to_value(l).ok()) {
                        report.push(line);
                    }
                }
            }
        }
        if self.write_failed.is_some() {
            return;
        }
        let written = match self.style {
            Style::Json => Line::of(names, &record).map(|line| output::write_json(&mut self.out, &line)),
            Style::Human { color } => {
                output::human_record(names, &record, color).map(|line| writeln!(self.out, "{line}"))
            }
        };
        if let Some(written) = written {
            if let Err(e) = written {
                self.write_failed = Some(e);
            }
            if self.realtime {
                let _ = self.out.flush();
            }
        }
    }

    /// The end: the summary printed, the recording finished, the report
    /// written. `Err` with the exit status when one of them failed.
    fn finish(mut self, summary: &RunSummary, args: &SimulateArgs) -> Result<(), ExitCode> {
        let printed = match self.style {
            Style::Json => output::write_json(&mut self.out, &summary.line()),
            Style::Human { color } => human_summary(&mut self.out, summary, color),
        };
        if let (Some(r), Some(path)) = (&self.recording, args.rec.record.as_deref()) {
            let finished = match self.recording_failed.take() {
                Some(e) => Err(e),
                None => r.finish(summary.snapshot.t, &summary.snapshot),
            };
            if let Err(e) = finished {
                return Err(refuse(format_args!("writing the recording {} failed: {e}", path.display())));
            }
        }
        self.finish_series(summary, args)?;
        if let (Some(mut report), Some(path)) = (self.report.take(), args.html.as_deref()) {
            if let Ok(line) = serde_json::to_value(summary.line()) {
                report.push(line);
            }
            let _ = self.out.flush();
            if let Err(e) = railwatch_cli::outfile::write_atomically(path, &railwatch_report::render_html(&report)) {
                return Err(refuse(format_args!("cannot write the HTML report {}: {e}", path.display())));
            }
        }
        match printed.and(self.out.flush()) {
            // A closed pipe (`| head`) is not the scenario's failure.
            Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(refuse(format_args!("writing output failed: {e}"))),
            _ => Ok(()),
        }
    }
}

impl Outputs {
    /// Writes the metrics series, if asked for.
    fn finish_series(&mut self, summary: &RunSummary, args: &SimulateArgs) -> Result<(), ExitCode> {
        let (Some(series), Some(path)) = (self.series.take(), args.metrics_series.as_deref()) else { return Ok(()) };
        let text = match self.series_failed.take() {
            Some(e) => Err(e),
            None => series.finish(&summary.snapshot),
        };
        let text = text.map_err(|e| refuse(format_args!("--metrics-series {}: {e}", path.display())))?;
        railwatch_cli::outfile::write_atomically(path, &text)
            .map_err(|e| refuse(format_args!("cannot write the metrics series {}: {e}", path.display())))
    }
}

impl Sink for Outputs {
    fn record(&mut self, names: &Names, record: Record<'_>) {
        Outputs::record(self, names, record);
    }

    /// The scrapes due before `t` see the monitor as it is now. Before the
    /// first instant, the recording learns that the start is over: a
    /// device plugged in from then on appeared during the run (declared
    /// `present = false`), even before anything was flushed.
    fn before_instant(&mut self, t: u64, monitor: &SimMonitor) {
        if let Some(r) = self.recording.as_ref().filter(|_| !self.recording_started) {
            r.started();
            self.recording_started = true;
        }
        let Some(series) = self.series.as_mut().filter(|s| s.due_before(t)) else { return };
        if self.series_failed.is_none() {
            self.series_failed = series.sample_before(t, &monitor.snapshot()).err();
        }
    }
}

/// The closing table for people.
fn human_summary(out: &mut impl Write, summary: &RunSummary, color: bool) -> io::Result<()> {
    let p = output::Paint { color };
    writeln!(out)?;
    writeln!(out, "RAIL         STATE    AVAILABLE        GB/S GENERATION  RECOVERED BY")?;
    for r in &summary.snapshot.rails {
        let state = format!("{:<8}", r.state.name());
        writeln!(
            out,
            "{:<12} {} {:<10} {:>10} {:>10}  {}",
            output::escaped(&r.name),
            p.state(&state),
            if r.available { "yes" } else { "no" },
            r.rate.and_then(|r| r.as_gbps()).map_or("-".into(), |g| g.to_string()),
            r.generation,
            r.recovered_by.map_or("-", |b| b.name()),
        )?;
    }
    writeln!(
        out,
        "\nevents queued {}, read {}, acked {}; expectations {} held, {} failed",
        summary.events_queued,
        summary.events_read,
        summary.events_acked,
        summary.passed(),
        summary.failed()
    )
}

/// Prints the failed expectations on stderr.
fn report_failures(failures: &[&ExpectResult]) {
    for e in failures {
        eprintln!(
            "railwatch: expectation failed at {} ms on {}: {}",
            e.at_ms,
            output::escaped(&e.rail),
            output::escaped(&e.detail)
        );
    }
}

/// Runs the command; see the crate docs for the exit codes.
pub fn run(args: SimulateArgs) -> ExitCode {
    let scenario = match load(&args) {
        Ok(s) => s,
        Err(e) => return refuse(e),
    };
    // A scenario's own limit bounds a longer run too (every time in the
    // run, the report's axis among them, stays within it).
    if let Some(d) = args.duration_ms.filter(|&d| d > MAX_DURATION_MS) {
        return refuse(format_args!("--duration-ms {d} is more than the limit of {MAX_DURATION_MS} ms (7 days)"));
    }
    if let Some(d) = args.duration_ms.filter(|&d| d < scenario.duration_ms) {
        return refuse(format_args!(
            "--duration-ms {d} is before the scenario's end ({} ms): a run can only be made longer",
            scenario.duration_ms
        ));
    }
    let opts = RunOptions {
        realtime: args.realtime,
        tick_ms: args.tick_ms,
        max_instants: None,
        duration_ms: args.duration_ms,
    };
    let mut outputs = match Outputs::start(&args, &scenario, &opts) {
        Ok(o) => o,
        Err(code) => return code,
    };
    outputs.header(&scenario);
    let observer = outputs.recording.as_ref().map(Recording::observer);
    let result = driver::run_with(&scenario, &opts, observer, &mut outputs);
    let summary = match result {
        Ok(s) => s,
        Err(e) => {
            let _ = outputs.out.flush();
            return refuse(format_args!("the simulation could not run: {e}"));
        }
    };
    if let Err(code) = outputs.finish(&summary, &args) {
        return code;
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
        report_failures(&failures);
        ExitCode::from(1)
    }
}
