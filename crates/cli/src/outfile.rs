//! Files railwatch writes on a user's say (`--html`, `--record`,
//! `--textfile`): never through a link, never outside the named file's
//! directory, never half a file.
//!
//! - The directory is resolved once, when the output is opened ([`OutFile::open`]:
//!   links in the path up to it followed then) and held open; every later
//!   step is relative to that handle (`openat`, `renameat`), so a directory
//!   swapped for a link afterwards changes nothing.
//! - Each write creates a new temporary file in it (`.NAME.PID.tmp`,
//!   `O_CREAT | O_EXCL | O_NOFOLLOW`: a link planted under that name is an
//!   error, never followed) and renames it over the name, which replaces
//!   whatever entry is there, a link included: a link's target is never
//!   written. A recording, which grows in place, is created the same way
//!   and renamed into place at once ([`OutFile::create_growing`]); if its
//!   name stops naming it (moved away, deleted, replaced), the writer
//!   puts a copy back under the name ([`OutFile::names`],
//!   [`OutFile::replace_with`]).
//! - A name that is a directory, a device, a FIFO or a socket when opened
//!   is refused, naming what it is (`--html /dev/null` cannot replace a
//!   device node, `--record` on a FIFO cannot block).
//! - A write that fails (a full disk, `EFBIG` past a file-size limit:
//!   `SIGXFSZ` is ignored, see [`ignore_file_size_signal`]) removes its
//!   temporary file and is an error like any other.

use std::ffi::{OsStr, OsString};
use std::fs::{self, File};
use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

/// An output file: its directory (held open) and its name in it.
#[derive(Debug)]
pub struct OutFile {
    dir: OwnedFd,
    /// The directory as resolved when opened.
    dir_path: PathBuf,
    name: OsString,
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

impl OutFile {
    /// Resolves `path`'s directory (once) and checks what its name is now:
    /// nothing, a regular file or a link (to be replaced) are fine; a
    /// directory, device, FIFO or socket is refused.
    pub fn open(path: &Path) -> io::Result<OutFile> {
        let name = match path.file_name() {
            Some(n) if !path.as_os_str().as_encoded_bytes().ends_with(b"/") => n.to_owned(),
            _ => return Err(invalid("it is a directory, or names none".into())),
        };
        let parent = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let dir_path = fs::canonicalize(parent)?;
        let dir = rustix::fs::open(&dir_path, OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())?;
        let out = OutFile { dir, dir_path, name };
        out.check_kind()?;
        Ok(out)
    }

    /// The file's path (its directory as resolved when opened).
    pub fn path(&self) -> PathBuf {
        self.dir_path.join(&self.name)
    }

    /// The entry under the name, unless it is a regular file, a link or
    /// nothing: refused.
    fn check_kind(&self) -> io::Result<()> {
        match rustix::fs::statat(&self.dir, &self.name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => match FileType::from_raw_mode(st.st_mode) {
                FileType::RegularFile | FileType::Symlink => Ok(()),
                FileType::Directory => Err(invalid("it is a directory".into())),
                _ => Err(invalid("it is not a regular file (a device, FIFO or socket)".into())),
            },
            Err(rustix::io::Errno::NOENT) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    fn temporary_name(&self) -> OsString {
        sibling_name(&self.name, &format!(".{}.tmp", std::process::id()), true)
    }

    /// Creates the temporary file exclusively, for reading and writing (a
    /// stale one of ours, left by a crash of a process with our id,
    /// removed first; a link there is removed, never followed).
    fn create_temporary(&self) -> io::Result<(OsString, File)> {
        let tmp = self.temporary_name();
        let _ = rustix::fs::unlinkat(&self.dir, &tmp, AtFlags::empty());
        let flags = OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&self.dir, &tmp, flags, Mode::from_raw_mode(0o644))?;
        Ok((tmp, File::from(fd)))
    }

    /// Whether [`replace`](Self::replace) could write now: the directory
    /// takes a new file. Checked before a run whose result is written at
    /// its end, so a bad path is said first.
    pub fn writable(&self) -> io::Result<()> {
        self.check_kind()?;
        let (tmp, _file) = self.create_temporary()?;
        rustix::fs::unlinkat(&self.dir, &tmp, AtFlags::empty())?;
        Ok(())
    }

    /// Writes `text` to a new temporary file, syncs it and renames it over
    /// the name (a reader never sees half a file; a link there is
    /// replaced). On failure the temporary file is removed.
    pub fn replace(&self, text: &[u8]) -> io::Result<()> {
        self.replace_with(|mut file| file.write_all(text)).map(drop)
    }

    /// [`replace`](Self::replace) with the content written by `fill`;
    /// returns the file now under the name.
    pub fn replace_with(&self, fill: impl FnOnce(&File) -> io::Result<()>) -> io::Result<File> {
        let (tmp, file) = self.create_temporary()?;
        let written = (|| {
            fill(&file)?;
            file.sync_all()?;
            self.rename_into_place(&tmp)
        })();
        match written {
            Ok(()) => Ok(file),
            Err(e) => {
                let _ = rustix::fs::unlinkat(&self.dir, &tmp, AtFlags::empty());
                Err(e)
            }
        }
    }

    /// Whether the name still names `file` (not moved away, deleted or
    /// replaced by another file or a link since it was put there).
    pub fn names(&self, file: &File) -> io::Result<bool> {
        let held = rustix::fs::fstat(file)?;
        match rustix::fs::statat(&self.dir, &self.name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(st.st_dev == held.st_dev && st.st_ino == held.st_ino),
            Err(rustix::io::Errno::NOENT) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    fn rename_into_place(&self, tmp: &OsStr) -> io::Result<()> {
        self.check_kind()?;
        rustix::fs::renameat(&self.dir, tmp, &self.dir, &self.name)?;
        Ok(())
    }

    /// A new empty file under the name, to be grown in place: created as
    /// a temporary file and renamed into place at once.
    pub fn create_growing(&self) -> io::Result<File> {
        self.replace_with(|_| Ok(()))
    }

    /// Where [`keep_previous`](Self::keep_previous) keeps the file: the
    /// same directory, `.old` added to the name.
    pub fn kept_as(&self) -> PathBuf {
        self.dir_path.join(sibling_name(&self.name, ".old", false))
    }

    /// A non-empty regular file under the name is renamed to
    /// [`kept_as`](Self::kept_as) (replacing an older one); a link is
    /// not kept (it is replaced when written). Returns the kept name.
    pub fn keep_previous(&self) -> io::Result<Option<PathBuf>> {
        match rustix::fs::statat(&self.dir, &self.name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile && st.st_size > 0 => {
                let old = sibling_name(&self.name, ".old", false);
                rustix::fs::renameat(&self.dir, &self.name, &self.dir, &old)?;
                Ok(Some(self.dir_path.join(old)))
            }
            Ok(_) | Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}

/// `name` with `suffix` added, and a leading dot if `hidden`.
fn sibling_name(name: &OsStr, suffix: &str, hidden: bool) -> OsString {
    let mut s = OsString::from(if hidden { "." } else { "" });
    s.push(name);
    s.push(suffix);
    s
}

/// Writes `text` to `path` as [`OutFile::replace`] does (the directory
/// resolved now).
pub fn write_atomically(path: &Path, text: &str) -> io::Result<()> {
    OutFile::open(path)?.replace(text.as_bytes())
}

/// Whether [`write_atomically`] could write `path` now.
pub fn writable(path: &Path) -> io::Result<()> {
    OutFile::open(path)?.writable()
}

/// Makes a write past the file-size limit (`ulimit -f`, systemd's
/// `LimitFSIZE=`) an `EFBIG` error instead of the end of the process:
/// `SIGXFSZ`'s default action is replaced by a handler that only sets a
/// flag. Called once, first thing.
pub fn ignore_file_size_signal() {
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    if let Err(e) = signal_hook::flag::register(signal_hook::consts::SIGXFSZ, Arc::new(AtomicBool::new(false))) {
        log::warn!("cannot catch SIGXFSZ ({e}): a file-size limit would end the process");
    }
}

/// Whether two paths name the same file: the same inode when both exist,
/// else the same absolute path (so a file that does not exist yet is
/// still caught when both names spell it alike).
pub fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (fs::metadata(a), fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        (Err(_), Err(_)) => std::path::absolute(a).ok().zip(std::path::absolute(b).ok()).is_some_and(|(x, y)| x == y),
        _ => false,
    }
}

/// Refuses a command whose files collide: each pair is `(what, path)`,
/// the files it reads first (so an output can never replace its own
/// input) and then the ones it writes; a `None` path (an option not
/// given) is left out. The error names both roles.
pub fn distinct(files: &[(&str, Option<&Path>)]) -> Result<(), String> {
    let given: Vec<(&str, &Path)> = files.iter().filter_map(|&(what, path)| Some((what, path?))).collect();
    for (i, (what, path)) in given.iter().enumerate() {
        if let Some((other, _)) = given[..i].iter().find(|(_, earlier)| same_file(earlier, path)) {
            return Err(format!("{other} and {what} name the same file, {}", path.display()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
