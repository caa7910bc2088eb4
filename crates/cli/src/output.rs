//! The two renderings of a run: JSON lines (the contract in DESIGN.md and
//! docs/JSON.md, parsed by tools; its records are railwatch-runtime's
//! `lines`) and an aligned timeline for people.

use std::io::{self, Write};

use railwatch_core::{LinkRate, ObjectHandle, WorkScope};
use railwatch_runtime::lines::{Names, Record};
use railwatch_runtime::{Cause, Happening, Notification};
use serde::Serialize;

/// How to print.
#[derive(Debug, Clone, Copy)]
pub enum Style {
    /// One JSON object per line.
    Json,
    /// A timeline for a terminal, coloured when `color`.
    Human {
        /// Use ANSI colours.
        color: bool,
    },
}

/// `text` safe for a terminal: control characters (escape sequences
/// included) and the bidirectional controls that reorder a line are shown
/// escaped, never sent raw.
pub fn escaped(text: &str) -> String {
    let unsafe_char = |c: char| c.is_control() || railwatch_report::is_bidi_control(c);
    if !text.chars().any(unsafe_char) {
        return text.to_string();
    }
    text.chars().map(|c| if unsafe_char(c) { c.escape_default().to_string() } else { c.to_string() }).collect()
}

/// Reports a write error of `status`, `watch`, `rails` or `check`: a
/// closed pipe (`| head`) ends quietly with 0, anything else is exit 2.
pub fn write_failed(e: &io::Error) -> std::process::ExitCode {
    if e.kind() == io::ErrorKind::BrokenPipe {
        return std::process::ExitCode::SUCCESS;
    }
    eprintln!("railwatch: writing output failed: {e}");
    std::process::ExitCode::from(2)
}

/// Writes `value` as one JSON line.
pub fn write_json(out: &mut impl Write, value: &impl Serialize) -> io::Result<()> {
    serde_json::to_writer(&mut *out, value).map_err(io::Error::from)?;
    out.write_all(b"\n")
}

/// ANSI colours, or none.
pub struct Paint {
    /// Use ANSI colours.
    pub color: bool,
}

impl Paint {
    /// `text` in colour `code`.
    pub fn wrap(&self, code: &str, text: &str) -> String {
        if self.color { format!("\x1b[{code}m{text}\x1b[0m") } else { text.to_string() }
    }
    /// A rail state's name in its colour (only the bare name is coloured).
    pub fn state(&self, name: &str) -> String {
        match name {
            "active" => self.wrap("32", name),
            "paused" => self.wrap("33", name),
            "inert" => self.wrap("31", name),
            other => other.to_string(),
        }
    }
    fn dim(&self, text: &str) -> String {
        self.wrap("2", text)
    }
}

fn time(t_ms: u64) -> String {
    format!("{:>4}.{:03}s", t_ms / 1000, t_ms % 1000)
}

fn hex(handle: Option<ObjectHandle>) -> String {
    handle.map_or_else(|| "(no handle)".to_owned(), |h| format!("{:#x}", h.0))
}

fn rate_text(rate: Option<LinkRate>) -> String {
    match rate {
        None => "never seeded".into(),
        Some(r) => r.to_string(),
    }
}

/// One timeline line, or `None` for records not worth a line.
pub fn human_record(names: &Names, record: &Record<'_>, color: bool) -> Option<String> {
    let p = Paint { color };
    let (t, subject, what) = match record {
        Record::Note(Notification { t, what }) => {
            let (subject, text) = match what {
                Happening::Event { device, port, kind } => {
                    let subject = match names.event_rail(*device, *port, *kind) {
                        Some(rail) => rail.to_string(),
                        None => names.device(*device).to_string(),
                    };
                    (subject, format!("event {} (code {}): {}", kind, kind.code(), kind.ibv_str()))
                }
                Happening::Transition { rail, from, to, cause, generation } => {
                    let why = match cause {
                        Cause::Reason(r) => format!("because {r}"),
                        Cause::By(by) => format!("by {}", by.name()),
                        Cause::Bump(kind) => format!("{kind}: endpoints are stale"),
                        Cause::SilentFlap => {
                            "silent flap (a flap counter rose, no PORT_ERR): endpoints are stale".into()
                        }
                    };
                    let arrow = match (from == to, cause) {
                        (true, Cause::Bump(_) | Cause::SilentFlap) => {
                            format!("{} (generation bump)", p.state(from.name()))
                        }
                        (true, _) => format!("still {}", p.state(from.name())),
                        (false, _) => format!("{} → {}", p.state(from.name()), p.state(to.name())),
                    };
                    (names.rail(*rail).to_string(), format!("{arrow}  {why}, generation {generation}"))
                }
                Happening::Reseed { rail, from, to } => (
                    names.rail(*rail).to_string(),
                    format!("bandwidth {} → {}", rate_text(*from), rate_text(Some(*to))),
                ),
                Happening::Available { rail, available } => (
                    names.rail(*rail).to_string(),
                    if *available { "available to the selector".into() } else { "unavailable to the selector".into() },
                ),
                Happening::Drain { device, events, errno } => (
                    names.device(*device).to_string(),
                    match errno {
                        None => p.dim(&format!("drained {events} event(s) to EAGAIN")),
                        Some(e) => format!(
                            "read failed after {events} event(s): {} (errno {e}); polling its ports instead",
                            io::Error::from_raw_os_error(*e)
                        ),
                    },
                ),
                Happening::AddressChanged { rail, generation } => (
                    names.rail(*rail).to_string(),
                    format!("address changed (GID table, LID or netdev), generation {generation}"),
                ),
                Happening::PeerFailing { rail, peer } => (
                    names.rail(*rail).to_string(),
                    format!(
                        "transfers through peer {peer} fail against the local path, through no other: kept in service"
                    ),
                ),
                Happening::HalfOpen { rail } => {
                    (names.rail(*rail).to_string(), "half-open: one probe may test the path".into())
                }
                Happening::ProbeFailed { rail, timed_out } => (
                    names.rail(*rail).to_string(),
                    if *timed_out {
                        "the probe was not reported in time: open again".into()
                    } else {
                        "the probe failed: open again".into()
                    },
                ),
                Happening::GidIndex { rail, index } => {
                    (names.rail(*rail).to_string(), format!("endpoints use GID index {index}"))
                }
                Happening::WorkLost { device, scope } => (
                    names.device(*device).to_string(),
                    p.wrap(
                        "33",
                        &match scope {
                            WorkScope::Qp { kind, handle } => {
                                format!("{kind} on QP {}: its work is lost", hex(*handle))
                            }
                            WorkScope::Wq(handle) => format!("wq_fatal on WQ {}: its work is lost", hex(*handle)),
                            WorkScope::Cq(handle) => {
                                format!("cq_err on CQ {}: work completing to it is lost", hex(*handle))
                            }
                            WorkScope::Device(reason) => {
                                format!("context gone ({reason}): all work posted on it is lost")
                            }
                        },
                    ),
                ),
            };
            (t.0, subject, text)
        }
        Record::Expect(e) => {
            let verdict = if e.passed { p.wrap("32", "held") } else { p.wrap("31;1", "FAILED") };
            (e.at_ms, e.rail.clone(), format!("expect {verdict}: {}", e.detail))
        }
        Record::Tick(_) => return None,
    };
    Some(format!("{}  {:<12} {}", time(t), escaped(&subject), what))
}
