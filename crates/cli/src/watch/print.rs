//! What `watch` prints on stdout: a header (for people), a line per
//! notification (the timeline of `simulate`, or its JSON lines), and the
//! closing summary. Every write to stdout goes through [`Printer`], which
//! queues it for a writer thread ([`LineOut`]): a stdout nobody reads
//! drops lines (counted, and said once it drains: an `output_dropped`
//! line), never blocks the watch loop.

use std::io::{self, Write};
use std::time::Duration;

use railwatch_core::{Millis, PortAddress, VerbsPort};
use railwatch_runtime::lines::{Body, Line, Names, Record};
use railwatch_runtime::{Notification, Snapshot};
use railwatch_verbs_backend::VerbsDevice;

use railwatch_cli::lineout::LineOut;

use crate::devices::NO_DEVICES;
use crate::output::{self, Style};

/// stdout, in `watch`'s style.
pub struct Printer {
    style: Style,
    out: Queued,
}

/// stdout through its queue; unqueued if no writer thread could be had.
enum Queued {
    Queue(LineOut),
    Direct(io::Stdout),
}

/// How long the end waits for stdout to take what is queued: SIGTERM
/// ends `watch` within a second whatever stdout does.
pub const FINISH_WITHIN: Duration = Duration::from_millis(500);

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The devices as the header names them: `mlx5_0 (2 ports)`.
pub fn described(devices: &[VerbsDevice]) -> Vec<String> {
    devices.iter().map(|d| format!("{} ({})", d.name(), plural(d.ports().len(), "port", "ports"))).collect()
}

impl Printer {
    /// JSON lines when `json`, else the timeline (coloured on a terminal).
    pub fn new(json: bool) -> Printer {
        let style = if json { Style::Json } else { Style::Human { color: crate::use_color() } };
        let out = LineOut::stdout().map_or_else(
            |e| {
                log::warn!("stdout stays unqueued ({e}): a reader that stalls would stall watch");
                Queued::Direct(io::stdout())
            },
            Queued::Queue,
        );
        Printer { style, out }
    }

    /// Queues `line` (whole lines); `t_ms` is when, for the notice of
    /// lines dropped before it.
    fn send(&mut self, t_ms: u64, line: Vec<u8>) -> io::Result<()> {
        let style = self.style;
        match &mut self.out {
            Queued::Queue(q) => q.send(line, |n| dropped_notice(style, t_ms, n)),
            Queued::Direct(out) => out.write_all(&line),
        }
    }

    /// Lines dropped so far because stdout was not read.
    pub fn dropped(&self) -> u64 {
        match &self.out {
            Queued::Queue(q) => q.dropped(),
            Queued::Direct(_) => 0,
        }
    }

    /// Gives stdout up to [`FINISH_WITHIN`] to take what is queued.
    pub fn finish(&mut self, t_ms: u64) {
        let style = self.style;
        if let Queued::Queue(q) = &self.out {
            if !q.finish(FINISH_WITHIN, |n| dropped_notice(style, t_ms, n)) {
                log::warn!("stdout did not take the last lines within {FINISH_WITHIN:?}: left unwritten");
            }
        }
    }

    /// For people only: what is watched ([`described`]), how often the
    /// tick runs, until when. A line that cannot be written is dropped (the
    /// next one says).
    pub fn header(&mut self, watched: &[String], tick_ms: u64, for_ms: Option<u64>) {
        if let Style::Human { .. } = self.style {
            let until = for_ms.map_or_else(|| "until Ctrl-C".to_string(), |ms| format!("for {ms} ms"));
            let what =
                if watched.is_empty() { "no device yet (waiting for one)".to_owned() } else { watched.join(", ") };
            let line = format!("watching {what}; recovery tick {tick_ms} ms; {until}\n");
            let _ = self.send(0, line.into_bytes());
        }
    }

    /// The line of one notification; `address` is the rail's new address
    /// for an address change.
    pub fn note(&mut self, names: &Names, note: &Notification, address: Option<&PortAddress>) -> io::Result<()> {
        let record = Record::Note(note);
        let mut buf = Vec::new();
        match self.style {
            // An address line carries the new address.
            Style::Json => match Line::of(names, &record) {
                Some(line) => output::write_json(&mut buf, &line.with_address(address))?,
                None => return Ok(()),
            },
            Style::Human { color } => match output::human_record(names, &record, color) {
                Some(line) => match address {
                    Some(a) => {
                        let gids: Vec<String> =
                            a.gids.iter().map(|g| format!("[{}] {g} {}", g.index, g.kind.name())).collect();
                        writeln!(buf, "{line}: {}", gids.join(", "))?;
                    }
                    None => writeln!(buf, "{line}")?,
                },
                None => return Ok(()),
            },
        }
        self.send(note.t.0, buf)
    }

    /// The closing summary of `snapshot`: the `summary` line (the snapshot
    /// whole, docs/JSON.md), or a table and the counters.
    pub fn summary(&mut self, snapshot: &Snapshot) -> io::Result<()> {
        let mut buf = Vec::new();
        match self.style {
            Style::Json => output::write_json(&mut buf, &Line::watch_summary(snapshot))?,
            Style::Human { color } => human_summary(&mut buf, snapshot, color)?,
        }
        self.send(snapshot.t.0, buf)
    }

    /// There is no device to watch: said on stdout (for people) or stderr
    /// beside an empty summary (JSON).
    pub fn nothing_to_watch(&mut self) -> io::Result<()> {
        match self.style {
            Style::Human { .. } => self.send(0, format!("{NO_DEVICES}\n").into_bytes()),
            Style::Json => {
                eprintln!("railwatch: {NO_DEVICES}");
                self.summary(&empty_snapshot())
            }
        }
    }
}

impl Drop for Printer {
    /// Whatever the way out (an early exit too), stdout gets its bounded
    /// time to take what is queued.
    fn drop(&mut self) {
        let style = self.style;
        if let Queued::Queue(q) = &self.out {
            q.finish(FINISH_WITHIN, |n| dropped_notice(style, 0, n));
        }
    }
}

/// The line saying `n` lines were dropped before `t_ms`.
fn dropped_notice(style: Style, t_ms: u64, n: u64) -> Vec<u8> {
    let mut buf = Vec::new();
    let _ = match style {
        Style::Json => output::write_json(&mut buf, &Line::new(t_ms, Body::OutputDropped { lines: n })),
        Style::Human { .. } => writeln!(buf, "railwatch: {n} line(s) not printed: stdout was not read fast enough"),
    };
    buf
}

fn empty_snapshot() -> Snapshot {
    Snapshot { t: Millis(0), rails: Vec::new(), devices: Vec::new(), wakeups: 0, ticks: 0, notifications_dropped: 0 }
}

fn human_summary(out: &mut impl Write, snapshot: &Snapshot, color: bool) -> io::Result<()> {
    let paint = |code: &str, text: String| if color { format!("\x1b[{code}m{text}\x1b[0m") } else { text };
    writeln!(out)?;
    writeln!(out, "RAIL             STATE    AVAILABLE        GB/S GENERATION  RECOVERED BY")?;
    for r in &snapshot.rails {
        let state = format!("{:<8}", r.state.name());
        let state = match r.state.name() {
            "active" => paint("32", state),
            "paused" => paint("33", state),
            _ => paint("31", state),
        };
        writeln!(
            out,
            "{:<16} {} {:<10} {:>10} {:>10}  {}",
            r.name,
            state,
            if r.available { "yes" } else { "no" },
            r.rate.and_then(|r| r.as_gbps()).map_or("-".into(), |g| g.to_string()),
            r.generation,
            r.recovered_by.map_or("-", |b| b.name()),
        )?;
    }
    // The backend acknowledges each event it returns: read is acked.
    let read: u64 = snapshot.devices.iter().map(|d| d.counters.events).sum();
    writeln!(out, "\nevents read {read}, acked {read}; {} tick(s)", snapshot.ticks)?;
    for d in &snapshot.devices {
        let c = &d.counters;
        writeln!(
            out,
            "{}: {} mode, {} event(s) ({} COMM_EST, {} unhandled), {} read error(s), {} re-open(s)",
            d.name,
            d.mode.name(),
            c.events,
            c.comm_est,
            c.unhandled,
            c.read_errors,
            c.reopens
        )?;
    }
    Ok(())
}
