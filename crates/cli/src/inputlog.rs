//! `--record FILE.rwlog`: the input log (railwatch-scenario's
//! [`rwlog`](railwatch_scenario::rwlog)) written to a file as the run goes:
//! the observer appends lines in memory, each flush writes them out.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;

use railwatch_core::{MachineConfig, Millis};
use railwatch_runtime::Observed;
use railwatch_scenario::record::FLUSH_EVERY_MS;
use railwatch_scenario::rwlog::{Header, LogWriter};

/// An input log in a file.
pub struct LogFile {
    writer: LogWriter,
    file: File,
    /// When lines were last written out (`None`: never).
    written_at: Option<Millis>,
}

/// How many entries are held in memory before a write whatever the time
/// (about 1 MiB of lines).
const WRITE_AT_ENTRIES: usize = 10_000;

impl LogFile {
    /// Starts the log in `file` (empty) with the header for `config` (its
    /// seed fixed: the one the machine runs with).
    pub fn create_in(file: File, config: &MachineConfig, recorded_by: &str) -> io::Result<LogFile> {
        let mut log = LogFile { writer: LogWriter::new(&Header::new(config, recorded_by)), file, written_at: None };
        log.write_out()?;
        Ok(log)
    }

    /// Takes what the monitor's observer saw.
    pub fn observe(&mut self, now: Millis, what: Observed<'_>) {
        self.writer.observe(now, what);
    }

    /// Writes the lines not yet written, at most every
    /// [`FLUSH_EVERY_MS`] (a busy monitor flushes every wake-up: one write
    /// a wake-up would cost it more than the lines do) or once
    /// `WRITE_AT_ENTRIES` wait;
    /// says whether it wrote.
    pub fn flush(&mut self, now: Millis) -> io::Result<bool> {
        let due = self.written_at.is_none_or(|at| now.since(at) >= FLUSH_EVERY_MS);
        if !due && self.writer.pending() < WRITE_AT_ENTRIES {
            return Ok(false);
        }
        self.written_at = Some(now);
        self.write_out()
    }

    /// Writes every line not yet written; says whether there were any.
    pub fn write_out(&mut self) -> io::Result<bool> {
        let pending = self.writer.take();
        if pending.is_empty() {
            return Ok(false);
        }
        self.file.write_all(&pending)?;
        Ok(true)
    }

    /// A second handle on the file (to sync it).
    pub fn file_handle(&self) -> io::Result<File> {
        self.file.try_clone()
    }

    /// Copies what was written into `to` (a new file under the name).
    pub fn copy_into(&self, to: &File) -> io::Result<()> {
        let mut buf = vec![0u8; 64 * 1024];
        let (mut at, mut to) = (0u64, to);
        loop {
            let n = self.file.read_at(&mut buf, at)?;
            if n == 0 {
                return Ok(());
            }
            to.write_all(&buf[..n])?;
            at += n as u64;
        }
    }

    /// Goes on writing in `file` (where [`copy_into`](Self::copy_into)
    /// copied the log).
    pub fn continue_in(&mut self, file: File) {
        self.file = file;
    }
}
