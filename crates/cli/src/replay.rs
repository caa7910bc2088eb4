//! `railwatch replay FILE.rwlog`: an input log (`watch --record
//! FILE.rwlog`) replayed on a fresh machine with the recorded settings and
//! seed, printed as `simulate` prints a run. Exit 0: replayed to the end;
//! 1: the replay diverged from the log (named); 2: the log cannot be read.
//! And `railwatch lift FILE.rwlog`: the log as a scenario, checked.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use railwatch_core::{Machine, Notification};
use railwatch_runtime::lines::{Line, Names, Record};
use railwatch_scenario::rwlog::{self, ReplayError};

use crate::output;

/// The largest log `replay` reads (it reads it whole).
const MAX_LOG_BYTES: u64 = 1 << 30;

/// `railwatch replay`'s arguments.
#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// The input log (`watch --record FILE.rwlog`).
    file: PathBuf,
    /// Print JSON lines (docs/JSON.md) instead of the timeline.
    #[arg(long)]
    json: bool,
    /// Also write the replay as one self-contained HTML page.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
}

/// The notifications' names, rebuilt when the machine's devices change.
#[derive(Default)]
struct Naming {
    names: Names,
    devices: usize,
    rails: usize,
}

impl Naming {
    fn of(&mut self, m: &Machine) -> &Names {
        let (devices, rails) = (m.devices().len(), m.rails().len());
        if (devices, rails) != (self.devices, self.rails) {
            self.names.follow(m);
            (self.devices, self.rails) = (devices, rails);
        }
        &self.names
    }
}

fn refuse(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("railwatch: {message}");
    ExitCode::from(2)
}

fn read_log(file: &std::path::Path) -> Result<rwlog::Log, String> {
    let path = file.display();
    let size = std::fs::metadata(file).map_err(|e| format!("cannot read the log {path}: {e}"))?.len();
    if size > MAX_LOG_BYTES {
        return Err(format!("the log {path} is {size} bytes, more than the {MAX_LOG_BYTES} replay reads"));
    }
    let bytes = std::fs::read(file).map_err(|e| format!("cannot read the log {path}: {e}"))?;
    let text = String::from_utf8(bytes).map_err(|e| format!("the log {path} is not text (UTF-8): {e}"))?;
    let log = rwlog::read(&text).map_err(|e| format!("{path}: {e}"))?;
    if log.header.railwatch != env!("CARGO_PKG_VERSION") {
        eprintln!(
            "railwatch: {path} was recorded by railwatch {} (this is {}): replayed as its inputs still mean the same",
            log.header.railwatch,
            env!("CARGO_PKG_VERSION")
        );
    }
    Ok(log)
}

/// Runs the command.
pub fn run(args: ReplayArgs) -> ExitCode {
    let log = match read_log(&args.file) {
        Ok(log) => log,
        Err(e) => return refuse(e),
    };
    if let Some(html) = &args.html
        && let Err(e) = railwatch_cli::outfile::writable(html)
    {
        return refuse(format_args!("cannot write the HTML report {}: {e}", html.display()));
    }
    let mut out = io::BufWriter::new(io::stdout().lock());
    let color = !args.json && crate::use_color();
    let mut lines = Vec::new();
    let mut naming = Naming::default();
    let mut printed = Ok(());
    let result = rwlog::replay(&log, |m, note: &Notification| {
        let names = naming.of(m);
        let record = Record::Note(note);
        if args.html.is_some()
            && let Some(line) = Line::of(names, &record).and_then(|l| serde_json::to_value(l).ok())
        {
            lines.push(line);
        }
        if printed.is_ok() {
            printed = match args.json {
                true => Line::of(names, &record).map_or(Ok(()), |l| output::write_json(&mut out, &l)),
                false => output::human_record(names, &record, color).map_or(Ok(()), |l| writeln!(out, "{l}")),
            };
        }
    });
    let _ = out.flush();
    if let Some(line) = log.cut_at_line {
        eprintln!("railwatch: {}: the log ends at line {line}, cut (a crash): replayed up to it", args.file.display());
    }
    let code = match result {
        Ok(replay) => {
            eprintln!(
                "railwatch: replayed {} inputs over {} wake-ups to {} ms: no divergence",
                replay.inputs, replay.wakeups, replay.end_ms
            );
            ExitCode::SUCCESS
        }
        Err(ReplayError::Diverged(d)) => {
            eprintln!("railwatch: {}: {d}", args.file.display());
            ExitCode::from(1)
        }
        Err(ReplayError::Log(e)) => return refuse(format_args!("{}: {e}", args.file.display())),
    };
    if let Some(path) = &args.html {
        let end = log.entries.last().map_or(0, |e| e.t());
        let mut report = railwatch_report::Timeline {
            title: args.file.display().to_string(),
            duration_ms: end,
            ..Default::default()
        };
        for line in lines {
            report.push(line);
        }
        if let Err(e) = railwatch_cli::outfile::write_atomically(path, &railwatch_report::render_html(&report)) {
            return refuse(format_args!("cannot write the HTML report {}: {e}", path.display()));
        }
    }
    match printed {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => refuse(format_args!("writing output failed: {e}")),
        _ => code,
    }
}

/// `railwatch lift`'s arguments.
#[derive(Args, Debug)]
pub struct LiftArgs {
    /// The input log (`watch --record FILE.rwlog`).
    file: PathBuf,
    /// Write the scenario here instead of to standard output.
    #[arg(long, short = 'o', value_name = "FILE")]
    output: Option<PathBuf>,
}

/// Runs `railwatch lift`: the log as a scenario (docs/RECORDING.md), on
/// standard output or `--output`; exit 0 when the scenario's transitions
/// are the log's, 1 when they part (said, the scenario written all the
/// same), 2 when the log cannot be read.
pub fn lift(args: LiftArgs) -> ExitCode {
    let log = match read_log(&args.file) {
        Ok(log) => log,
        Err(e) => return refuse(e),
    };
    let out = match &args.output {
        Some(path) => railwatch_cli::outfile::OutFile::open(path).and_then(|o| o.create_growing()),
        None => rustix::fs::memfd_create("railwatch-lift", rustix::fs::MemfdFlags::CLOEXEC)
            .map(std::fs::File::from)
            .map_err(io::Error::from),
    };
    let file = match out {
        Ok(f) => f,
        Err(e) => return refuse(format_args!("cannot write the scenario: {e}")),
    };
    let handle = file.try_clone();
    let lifted = match rwlog::lift(&log, file, "railwatch lift") {
        Ok(l) => l,
        Err(e) => return refuse(format_args!("{}: {e}", args.file.display())),
    };
    if args.output.is_none() {
        use std::io::{Read, Seek};
        let mut text = String::new();
        let read = handle.and_then(|mut f| f.seek(io::SeekFrom::Start(0)).and_then(|_| f.read_to_string(&mut text)));
        if let Err(e) = read.and_then(|_| io::stdout().lock().write_all(text.as_bytes())) {
            return refuse(format_args!("writing the scenario failed: {e}"));
        }
    }
    match lifted.difference() {
        None => {
            eprintln!("railwatch: lifted: the scenario's {} transitions are the log's", lifted.logged.len());
            ExitCode::SUCCESS
        }
        Some(d) => {
            eprintln!("railwatch: lifted, but the scenario does not replay the log: {d}");
            ExitCode::from(1)
        }
    }
}
