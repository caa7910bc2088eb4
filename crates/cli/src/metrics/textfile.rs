//! `--textfile PATH`: the metrics written for node_exporter's textfile
//! collector, from a thread of its own, never half a file.

use std::io;
use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::export::{Exporter, Format};
use crate::outfile::OutFile;

/// How often, at most, the text file is rewritten.
pub const TEXTFILE_EVERY: Duration = Duration::from_secs(1);

/// The text file is rewritten at least this often even when nothing
/// changed, so its mtime (node_exporter's `node_textfile_mtime_seconds`)
/// says the agent is alive.
pub const TEXTFILE_REFRESH: Duration = Duration::from_secs(60);

/// Writes `text` to `path` through a temporary file in the same
/// directory, renamed into place, so node_exporter never reads half a
/// file ([`OutFile::replace`]: never through a link). The temporary name
/// does not end in `.prom`, so the collector ignores it.
pub fn write_atomically(path: &Path, text: &str) -> io::Result<()> {
    crate::outfile::write_atomically(path, text)
}

/// A text file to be written: its directory resolved once
/// ([`OutFile::open`]) and checked to take a new file
/// ([`OutFile::writable`]), so a path that cannot be written is an error
/// before anything is watched. Nothing is written yet: a record published
/// before the watch loop's first turn holds no rail.
pub struct Textfile(OutFile);

impl Textfile {
    /// Checks `path` as said above.
    pub fn open(path: &Path) -> io::Result<Textfile> {
        let out = OutFile::open(path)?;
        out.writable()?;
        Ok(Textfile(out))
    }
}

/// Writes the text file: at once, then from a thread of its own at most
/// once per [`TEXTFILE_EVERY`] when the metrics changed (and every
/// [`TEXTFILE_REFRESH`] regardless), and once more when stopped. A write
/// that fails (a full disk, a file-size limit) is said once and tried
/// again at the next round; watching goes on.
pub struct TextfileWriter {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl TextfileWriter {
    /// Writes `file` now from what `exporter` has published (so start it
    /// once the watch loop published a turn; the file is there when READY
    /// is said), then starts the thread.
    pub fn start(file: Textfile, exporter: Exporter) -> io::Result<TextfileWriter> {
        let (stop, stopped) = mpsc::channel::<()>();
        let mut rounds = Rounds { out: file.0, last: None, written_at: Instant::now(), failing: false };
        rounds.write(&exporter, true);
        let thread = thread::Builder::new().name("railwatch-textfile".to_owned()).spawn(move || {
            loop {
                let last_round = match stopped.recv_timeout(TEXTFILE_EVERY) {
                    Err(RecvTimeoutError::Timeout) => false,
                    Ok(()) | Err(RecvTimeoutError::Disconnected) => true,
                };
                rounds.write(&exporter, last_round);
                if last_round {
                    return;
                }
            }
        })?;
        Ok(TextfileWriter { stop: Some(stop), thread: Some(thread) })
    }
}

/// The writing thread's state between rounds.
struct Rounds {
    out: OutFile,
    /// The text last written (none yet, or the last write failed since).
    last: Option<String>,
    written_at: Instant,
    /// The last write failed (and was said).
    failing: bool,
}

impl Rounds {
    /// Writes the file if `now`, if the metrics changed since the last
    /// write, or if it is due for a refresh. A failure is said once, until
    /// a write works again.
    fn write(&mut self, exporter: &Exporter, now: bool) {
        let text = exporter.encode(Format::Prometheus);
        let changed = self.last.as_ref() != Some(&text);
        if !(now || changed || self.written_at.elapsed() >= TEXTFILE_REFRESH) {
            return;
        }
        let path = self.out.path();
        match self.out.replace(text.as_bytes()) {
            Ok(()) => {
                if self.failing {
                    log::warn!("writing the metrics to {} works again", path.display());
                }
                self.failing = false;
                self.last = Some(text);
                self.written_at = Instant::now();
            }
            Err(e) if !self.failing => {
                log::warn!("cannot write the metrics to {}: {e}; tried again every {TEXTFILE_EVERY:?}", path.display());
                self.failing = true;
                self.last = None;
            }
            Err(_) => {}
        }
    }
}

impl Drop for TextfileWriter {
    /// Writes the file a last time and waits for the thread.
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_file_is_replaced_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("railwatch.prom");
        write_atomically(&path, "a 1\n").unwrap();
        write_atomically(&path, "a 2\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a 2\n");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["railwatch.prom"]);
        assert!(write_atomically(&dir.path().join("missing/railwatch.prom"), "a 1\n").is_err());
    }
}
