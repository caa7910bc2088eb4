//! The recording's file, written incrementally so that it is a valid
//! scenario after every write: a crash loses at most the last second.
//!
//! - Writes go at an offset the writer keeps (`write_all_at`, never
//!   `O_APPEND`), so the header can be rewritten in place: `duration_ms`
//!   sits at a fixed place, its value padded to a fixed width, and grows
//!   before the steps it must cover are appended.
//! - An append goes in whole or not at all: a write cut short (a full
//!   disk) is cut back off ([`File::set_len`]).
//! - Flushes write at most every [`FLUSH_EVERY_MS`]; syncing to disk is the
//!   caller's, on a second handle ([`RecordingFile::handle`]), so it need
//!   not hold the recorder.
//! - The file stays short of the scenario loader's limit
//!   ([`RecordingFile::room`]), leaving room for the closing expectations.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use crate::scenario::MAX_FILE_BYTES;

/// A flush writes at most this often; what it leaves waits for the next.
pub const FLUSH_EVERY_MS: u64 = 100;

/// The header's `duration_ms` value is padded to this width, so it can be
/// rewritten in place.
const DURATION_WIDTH: usize = 10;

/// Stop recording short of the loader's limit, leaving room for the
/// closing expectations.
const MAX_RECORDING_BYTES: u64 = MAX_FILE_BYTES - (1 << 20);

/// The file being written.
#[derive(Debug)]
pub(super) struct RecordingFile {
    file: File,
    /// Where the file ends.
    end: u64,
    /// The offset of `duration_ms`'s value in the header.
    duration_at: u64,
    /// The `duration_ms` the file says.
    duration: u64,
    /// When a flush last wrote.
    written_at: u64,
    /// The text of the last write, kept for its capacity.
    text: String,
}

impl RecordingFile {
    /// Writes `preamble` (comments) to `file` (new and empty), then the
    /// scenario `header` with its `duration_ms` value (1) widened to be
    /// rewritten in place.
    pub(super) fn create(file: File, mut preamble: String, header: &str) -> io::Result<RecordingFile> {
        let key = "duration_ms = ";
        let at = header.find(key).map_or(0, |i| i + key.len());
        let duration_at = (preamble.len() + at) as u64;
        // `duration_ms = 1         # grows with the recording`
        let line_end = header[at..].find('\n').map_or(header.len(), |i| at + i);
        preamble.push_str(&header[..at]);
        preamble.push_str(&format!("{:<DURATION_WIDTH$} # grows with the recording", 1));
        preamble.push_str(&header[line_end..]);
        file.write_all_at(preamble.as_bytes(), 0)?;
        Ok(RecordingFile {
            file,
            end: preamble.len() as u64,
            duration_at,
            duration: 1,
            written_at: 0,
            text: String::new(),
        })
    }

    /// A second handle on the file, to sync it to disk.
    pub(super) fn handle(&self) -> io::Result<File> {
        self.file.try_clone()
    }

    /// Copies what was written so far into `to` (new and empty), from its
    /// start: the recording's name no longer names this file, and the
    /// caller puts the copy there.
    pub(super) fn copy_into(&self, to: &File) -> io::Result<()> {
        let mut buf = vec![0u8; 64 * 1024];
        let mut at = 0;
        while at < self.end {
            let want = buf.len().min((self.end - at) as usize);
            let got = self.file.read_at(&mut buf[..want], at)?;
            if got == 0 {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the recording is shorter than written"));
            }
            to.write_all_at(&buf[..got], at)?;
            at += got as u64;
        }
        Ok(())
    }

    /// Goes on writing in `file`, a copy made by [`copy_into`](Self::copy_into).
    pub(super) fn continue_in(&mut self, file: File) {
        self.file = file;
    }

    /// The `duration_ms` the file says.
    pub(super) fn duration(&self) -> u64 {
        self.duration
    }

    /// The file's length.
    pub(super) fn end(&self) -> u64 {
        self.end
    }

    /// Whether a flush at `now` writes: the `first` always, the others at
    /// most every [`FLUSH_EVERY_MS`]. A flush that writes is remembered.
    pub(super) fn flush_due(&mut self, now: u64, first: bool) -> bool {
        if !first && now < self.written_at.saturating_add(FLUSH_EVERY_MS) {
            return false;
        }
        self.written_at = now;
        true
    }

    /// How many more bytes the recording may take before it stops.
    pub(super) fn room(&self) -> usize {
        MAX_RECORDING_BYTES.saturating_sub(self.end) as usize
    }

    /// An empty buffer for the next write (the last one's, for its
    /// capacity).
    pub(super) fn buffer(&mut self) -> String {
        let mut text = std::mem::take(&mut self.text);
        text.clear();
        text
    }

    /// Sets `duration_ms` to `duration`, then appends `text`: in that
    /// order, so the file is valid after each write. Keeps the buffer.
    pub(super) fn write(&mut self, duration: u64, text: String) -> io::Result<()> {
        if duration != self.duration {
            self.file.write_all_at(format!("{duration:<DURATION_WIDTH$}").as_bytes(), self.duration_at)?;
            self.duration = duration;
        }
        if !text.is_empty() {
            self.append(&text)?;
        }
        self.text = text;
        Ok(())
    }

    /// Appends `text` whole or not at all: a write cut short (a full disk)
    /// is cut back off, so the file stays the valid scenario it was.
    pub(super) fn append(&mut self, text: &str) -> io::Result<()> {
        if let Err(e) = self.file.write_all_at(text.as_bytes(), self.end) {
            let _ = self.file.set_len(self.end);
            return Err(e);
        }
        self.end += text.len() as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_duration_is_rewritten_in_place_before_the_text_it_covers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.toml");
        let mut f = RecordingFile::create(
            File::create(&path).unwrap(),
            "# hi\n".into(),
            "name = \"x\"\nduration_ms = 1\ntick_ms = 1000\n",
        )
        .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "# hi\nname = \"x\"\nduration_ms = 1          # grows with the recording\ntick_ms = 1000\n");
        f.write(1234567, "\n[[step]]\n".into()).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("duration_ms = 1234567    # grows"), "{text}");
        assert!(text.ends_with("tick_ms = 1000\n\n[[step]]\n"), "{text}");
        assert_eq!(f.end(), text.len() as u64);
        assert_eq!(f.duration(), 1234567);
        assert!(f.buffer().is_empty());
    }

    #[test]
    fn flushes_write_at_most_every_flush_period() {
        let dir = tempfile::tempdir().unwrap();
        let mut f =
            RecordingFile::create(File::create(dir.path().join("r.toml")).unwrap(), String::new(), "duration_ms = 1\n")
                .unwrap();
        assert!(f.flush_due(0, true));
        assert!(!f.flush_due(FLUSH_EVERY_MS - 1, false));
        assert!(f.flush_due(FLUSH_EVERY_MS, false));
        assert!(f.flush_due(FLUSH_EVERY_MS + 1, true), "the first flush always writes");
        assert!(f.room() < MAX_FILE_BYTES as usize);
    }

    #[test]
    fn a_copy_holds_what_was_written_and_takes_the_next_writes() {
        let dir = tempfile::tempdir().unwrap();
        let (first, second) = (dir.path().join("a.toml"), dir.path().join("b.toml"));
        let rw = File::options().read(true).write(true).create_new(true).open(&first).unwrap();
        let mut f = RecordingFile::create(rw, "# hi\n".into(), "duration_ms = 1\n").unwrap();
        f.write(7, "\n[[step]]\n".into()).unwrap();
        let copy = File::options().read(true).write(true).create_new(true).open(&second).unwrap();
        f.copy_into(&copy).unwrap();
        assert_eq!(std::fs::read(&first).unwrap(), std::fs::read(&second).unwrap());
        f.continue_in(copy);
        f.write(9, "x = 1\n".into()).unwrap();
        let text = std::fs::read_to_string(&second).unwrap();
        assert!(text.starts_with("# hi\nduration_ms = 9 ") && text.ends_with("[[step]]\nx = 1\n"), "{text}");
        assert!(!std::fs::read_to_string(&first).unwrap().contains("x = 1"), "the first file is left as it was");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_failed_append_leaves_the_end_where_it_was() {
        // /dev/full takes no byte: the append fails, and the next one must
        // go where this one would have.
        let Ok(full) = File::options().write(true).open("/dev/full") else { return };
        let mut f =
            RecordingFile { file: full, end: 0, duration_at: 0, duration: 1, written_at: 0, text: String::new() };
        assert!(f.append("[[step]]\n").is_err());
        assert_eq!(f.end(), 0);
    }
}
