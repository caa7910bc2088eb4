//! A log read back: the header and every whole entry, or the first
//! problem named by its line. A last line cut by a crash (no newline, not
//! JSON) is not a problem: the log replays up to the entry before it and
//! says where it ends.

use std::fmt;

use super::{Entry, FORMAT, Header};

/// Most bytes one line may hold: an input is small (the largest, a device
/// list or an address with its GID table, a few KiB); a longer line is
/// garbage, refused before it is parsed.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// A log, read.
#[derive(Debug, Clone)]
pub struct Log {
    /// Its header.
    pub header: Header,
    /// Its entries, in order; entry `i` is on line `i + 2`.
    pub entries: Vec<Entry<'static>>,
    /// Where a crash cut it: the line number of the partial last line.
    pub cut_at_line: Option<usize>,
}

/// Why a log cannot be replayed, with the line (1 = the header).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogError {
    /// The line, from 1.
    pub line: usize,
    /// What is wrong there.
    pub problem: String,
}

impl fmt::Display for LogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.problem)
    }
}

impl std::error::Error for LogError {}

fn at(line: usize, problem: impl Into<String>) -> LogError {
    LogError { line, problem: problem.into() }
}

/// Reads a log's text.
pub fn read(text: &str) -> Result<Log, LogError> {
    let mut lines = text.split_inclusive('\n').enumerate().map(|(i, l)| (i + 1, l));
    let (_, first) = lines.next().ok_or_else(|| at(1, "the log is empty (no header)"))?;
    let header = header(first)?;
    let mut entries = Vec::new();
    let mut cut_at_line = None;
    let mut last_t = 0;
    for (n, line) in lines {
        let whole = line.ends_with('\n');
        let body = line.trim_end_matches('\n');
        if body.len() > MAX_LINE_BYTES {
            return Err(at(n, format!("a line of {} bytes (at most {MAX_LINE_BYTES})", body.len())));
        }
        let entry: Entry<'static> = match serde_json::from_str(body) {
            Ok(entry) => entry,
            // The last line, without its newline: where a crash cut it.
            Err(_) if !whole => {
                cut_at_line = Some(n);
                break;
            }
            Err(e) => return Err(at(n, format!("not an entry of the log: {e}"))),
        };
        if entry.t() < last_t {
            return Err(at(n, format!("time {} ms is before the entry above it ({last_t} ms)", entry.t())));
        }
        last_t = entry.t();
        entries.push(entry);
    }
    Ok(Log { header, entries, cut_at_line })
}

fn header(line: &str) -> Result<Header, LogError> {
    let body = line.trim_end_matches('\n');
    if body.len() > MAX_LINE_BYTES {
        return Err(at(1, "the header is longer than a line may be"));
    }
    let value: serde_json::Value =
        serde_json::from_str(body).map_err(|e| at(1, format!("not a railwatch input log's header: {e}")))?;
    let format = value.get("format").and_then(|f| f.as_str());
    if format != Some(FORMAT) {
        let found = format.map_or_else(|| "no format".to_owned(), |f| format!("format {f:?}"));
        return Err(at(1, format!("not a railwatch input log ({found}; this railwatch reads {FORMAT})")));
    }
    serde_json::from_value(value).map_err(|e| at(1, format!("the header: {e}")))
}
