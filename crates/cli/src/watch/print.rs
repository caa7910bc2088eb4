//! What `watch` prints on stdout: a header (for people), a line per
//! notification (the timeline of `simulate`, or its JSON lines), and the
//! closing summary. Every write to stdout goes through [`Printer`].

use std::io::{self, Write};

use railwatch_core::{Millis, PortAddress, VerbsPort};
use railwatch_runtime::lines::{Line, Names, Record};
use railwatch_runtime::{Notification, Snapshot};
use railwatch_verbs_backend::VerbsDevice;

use crate::devices::NO_DEVICES;
use crate::output::{self, Style};

/// stdout, in `watch`'s style.
pub struct Printer {
    style: Style,
    out: io::StdoutLock<'static>,
}

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
        Printer { style, out: io::stdout().lock() }
    }

    /// For people only: what is watched ([`described`]), how often the
    /// tick runs, until when. A line that cannot be written is dropped (the
    /// next one says).
    pub fn header(&mut self, watched: &[String], tick_ms: u64, for_ms: Option<u64>) {
        if let Style::Human { .. } = self.style {
            let until = for_ms.map_or_else(|| "until Ctrl-C".to_string(), |ms| format!("for {ms} ms"));
            let _ = writeln!(self.out, "watching {}; recovery tick {tick_ms} ms; {until}", watched.join(", "));
        }
    }

    /// The line of one notification; `address` is the rail's new address
    /// for an address change.
    pub fn note(&mut self, names: &Names, note: &Notification, address: Option<&PortAddress>) -> io::Result<()> {
        let record = Record::Note(note);
        match self.style {
            // An address line carries the new address.
            Style::Json => Line::of(names, &record)
                .map_or(Ok(()), |line| output::write_json(&mut self.out, &line.with_address(address))),
            Style::Human { color } => match output::human_record(names, &record, color) {
                Some(line) => match address {
                    Some(a) => {
                        let gids: Vec<String> =
                            a.gids.iter().map(|g| format!("[{}] {g} {}", g.index, g.kind.name())).collect();
                        writeln!(self.out, "{line}: {}", gids.join(", "))
                    }
                    None => writeln!(self.out, "{line}"),
                },
                None => Ok(()),
            },
        }
    }

    /// The closing summary of `snapshot`: the `summary` line (the snapshot
    /// whole, docs/JSON.md), or a table and the counters.
    pub fn summary(&mut self, snapshot: &Snapshot) -> io::Result<()> {
        match self.style {
            Style::Json => output::write_json(&mut self.out, &Line::watch_summary(snapshot)),
            Style::Human { color } => human_summary(&mut self.out, snapshot, color),
        }
    }

    /// There is no device to watch: said on stdout (for people) or stderr
    /// beside an empty summary (JSON).
    pub fn nothing_to_watch(&mut self) -> io::Result<()> {
        match self.style {
            Style::Human { .. } => writeln!(self.out, "{NO_DEVICES}"),
            Style::Json => {
                eprintln!("railwatch: {NO_DEVICES}");
                self.summary(&empty_snapshot())
            }
        }
    }
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
