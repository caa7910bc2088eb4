//! `--textfile PATH`: the metrics written for node_exporter's textfile
//! collector, from a thread of its own, never half a file.

use std::io;
use std::path::{Path, PathBuf};
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

/// Writes the text file from a thread of its own: at most once per
/// [`TEXTFILE_EVERY`] when the metrics changed (and every
/// [`TEXTFILE_REFRESH`] regardless), and once more when stopped.
pub struct TextfileWriter {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl TextfileWriter {
    /// Resolves the file's directory once ([`OutFile::open`]) and writes
    /// it once now (so a path that cannot be written is an error before
    /// anything is watched), then starts the thread.
    pub fn start(path: PathBuf, exporter: Exporter) -> io::Result<TextfileWriter> {
        let out = OutFile::open(&path)?;
        let path = out.path();
        let mut last = exporter.encode(Format::Prometheus);
        out.replace(last.as_bytes())?;
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = thread::Builder::new().name("railwatch-textfile".to_owned()).spawn(move || {
            let mut written_at = Instant::now();
            let mut failing = false;
            loop {
                let last_round = match stopped.recv_timeout(TEXTFILE_EVERY) {
                    Err(RecvTimeoutError::Timeout) => false,
                    Ok(()) | Err(RecvTimeoutError::Disconnected) => true,
                };
                let text = exporter.encode(Format::Prometheus);
                if last_round || text != last || written_at.elapsed() >= TEXTFILE_REFRESH {
                    match out.replace(text.as_bytes()) {
                        Ok(()) => {
                            if failing {
                                log::warn!("writing the metrics to {} works again", path.display());
                            }
                            failing = false;
                            last = text;
                            written_at = Instant::now();
                        }
                        Err(e) if !failing => {
                            log::warn!("cannot write the metrics to {}: {e}", path.display());
                            failing = true;
                        }
                        Err(_) => {}
                    }
                }
                if last_round {
                    return;
                }
            }
        })?;
        Ok(TextfileWriter { stop: Some(stop), thread: Some(thread) })
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
