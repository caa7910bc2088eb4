//! Files railwatch writes on a user's say (`--html`, `--record`,
//! `--textfile`): only regular files. A path that names a device, a FIFO,
//! a socket or a directory is refused with an error naming what it is, so
//! `--html /dev/null` cannot replace a device node, and `--record` on a
//! FIFO cannot block. A symbolic link is followed: its target is written.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// `path` with a symbolic link at its end resolved; refused when what it
/// names exists and is not a regular file.
pub fn target(path: &Path) -> io::Result<PathBuf> {
    let resolved = match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()),
        _ => path.to_path_buf(),
    };
    match fs::metadata(&resolved) {
        Ok(m) if !m.is_file() => {
            let what = if m.is_dir() { "a directory" } else { "not a regular file (a device, FIFO or socket)" };
            Err(io::Error::new(io::ErrorKind::InvalidInput, format!("it is {what}")))
        }
        _ => Ok(resolved),
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

/// `path` resolved (see [`target`]) and the temporary file written beside
/// it, cleared of a stale one of ours (a crash) in the way of `create_new`.
fn temporary_beside(path: &Path) -> io::Result<(PathBuf, PathBuf)> {
    let path = target(path)?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path.file_name().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    let tmp = dir.join(tmp_name);
    let _ = fs::remove_file(&tmp);
    Ok((path, tmp))
}

/// Whether [`write_atomically`] could write `path` now: it is (or would
/// be) a regular file, and its directory takes a new file. Checked before
/// a run whose result is written at its end, so a bad path is said first.
pub fn writable(path: &Path) -> io::Result<()> {
    let (_, tmp) = temporary_beside(path)?;
    fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
    fs::remove_file(&tmp)
}

/// Writes `text` to `path` through a new temporary file in the same
/// directory (created exclusively, never through a link someone planted),
/// renamed into place, so a reader never sees half a file.
pub fn write_atomically(path: &Path, text: &str) -> io::Result<()> {
    let (path, tmp) = temporary_beside(path)?;
    let written = (|| {
        let mut f = fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        fs::rename(&tmp, &path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_are_written() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.html");
        write_atomically(&file, "one").unwrap();
        write_atomically(&file, "two").unwrap();
        assert_eq!(fs::read_to_string(&file).unwrap(), "two");
        // Through a link: the target is written, the link stays.
        let link = dir.path().join("link.html");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        write_atomically(&link, "three").unwrap();
        assert!(fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(fs::read_to_string(&file).unwrap(), "three");
        // A device, a FIFO, a directory: refused, untouched.
        for bad in [Path::new("/dev/null"), dir.path()] {
            let e = write_atomically(bad, "x").unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{}: {e}", bad.display());
        }
        assert!(fs::metadata("/dev/null").unwrap().file_type().is_char_device());
        let fifo = dir.path().join("fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        assert!(target(&fifo).is_err());
        assert!(write_atomically(&dir.path().join("missing/a.html"), "x").is_err());
        assert!(writable(&dir.path().join("missing/a.html")).is_err());
        assert!(writable(&fifo).is_err());
        writable(&dir.path().join("new.html")).unwrap();
        let left: Vec<_> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert!(!left.iter().any(|n| n.to_string_lossy().ends_with(".tmp")), "{left:?}");
    }

    #[test]
    fn the_files_of_one_command_are_distinct() {
        let dir = tempfile::tempdir().unwrap();
        let scenario = dir.path().join("s.toml");
        fs::write(&scenario, "name = \"s\"").unwrap();
        let html = dir.path().join("r.html");
        assert_eq!(distinct(&[("the scenario", Some(scenario.as_path())), ("--html", Some(html.as_path()))]), Ok(()));
        // The same file by another spelling, and through a link.
        let spelled = dir.path().join(".").join("s.toml");
        let err = distinct(&[
            ("the scenario", Some(scenario.as_path())),
            ("--html", Some(html.as_path())),
            ("--record", Some(spelled.as_path())),
        ])
        .unwrap_err();
        assert!(err.starts_with("the scenario and --record name the same file"), "{err}");
        let link = dir.path().join("link.toml");
        std::os::unix::fs::symlink(&scenario, &link).unwrap();
        assert!(distinct(&[("the scenario", Some(scenario.as_path())), ("--record", Some(link.as_path()))]).is_err());
        // An option not given is no file.
        assert_eq!(
            distinct(&[("the scenario", Some(scenario.as_path())), ("--html", None), ("--record", None)]),
            Ok(())
        );
        // Two outputs that do not exist yet, spelled alike.
        let err = distinct(&[("--html", Some(html.as_path())), ("--record", Some(html.as_path()))]).unwrap_err();
        assert_eq!(err, format!("--html and --record name the same file, {}", html.display()));
    }

    use std::os::unix::fs::FileTypeExt;
}
