use std::os::unix::fs::{FileTypeExt, symlink};

use super::*;

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

#[test]
fn only_regular_files_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.html");
    write_atomically(&file, "one").unwrap();
    write_atomically(&file, "two").unwrap();
    assert_eq!(fs::read_to_string(&file).unwrap(), "two");
    // A device, a directory: refused, untouched.
    for bad in [Path::new("/dev/null"), dir.path()] {
        let e = write_atomically(bad, "x").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{}: {e}", bad.display());
    }
    assert!(fs::metadata("/dev/null").unwrap().file_type().is_char_device());
    let fifo = dir.path().join("fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    assert!(OutFile::open(&fifo).is_err());
    assert!(write_atomically(&dir.path().join("missing/a.html"), "x").is_err());
    assert!(writable(&dir.path().join("missing/a.html")).is_err());
    assert!(writable(&fifo).is_err());
    writable(&dir.path().join("new.html")).unwrap();
    assert_eq!(names(dir.path()), ["a.html", "fifo"], "no temporary file left");
}

/// `ln -s ../etc/passwd dir/railwatch.prom`: the link is replaced by the
/// file, its target never written; so is a link planted after the
/// output was opened.
#[test]
fn a_link_at_the_name_is_replaced_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("passwd");
    fs::write(&victim, "root:x:0:0\n").unwrap();
    let path = dir.path().join("railwatch.prom");
    symlink(&victim, &path).unwrap();
    let out = OutFile::open(&path).unwrap();
    out.replace(b"a 1\n").unwrap();
    assert_eq!(fs::read_to_string(&victim).unwrap(), "root:x:0:0\n");
    assert!(fs::symlink_metadata(&path).unwrap().is_file());
    assert_eq!(fs::read_to_string(&path).unwrap(), "a 1\n");
    // Planted mid-run.
    fs::remove_file(&path).unwrap();
    symlink(&victim, &path).unwrap();
    out.replace(b"a 2\n").unwrap();
    assert_eq!(fs::read_to_string(&victim).unwrap(), "root:x:0:0\n");
    assert_eq!(fs::read_to_string(&path).unwrap(), "a 2\n");
    // A recording too.
    let rec = dir.path().join("incident.toml");
    symlink(&victim, &rec).unwrap();
    let mut grown = OutFile::open(&rec).unwrap().create_growing().unwrap();
    grown.write_all(b"name = \"x\"\n").unwrap();
    assert_eq!(fs::read_to_string(&victim).unwrap(), "root:x:0:0\n");
    assert_eq!(fs::read_to_string(&rec).unwrap(), "name = \"x\"\n");
    assert_eq!(names(outside.path()), ["passwd"]);
}

/// A link planted under the temporary file's (predictable) name is not
/// followed either.
#[test]
fn a_link_at_the_temporary_name_is_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    fs::write(&victim, "keep").unwrap();
    let out = OutFile::open(&dir.path().join("a.prom")).unwrap();
    symlink(&victim, dir.path().join(out.temporary_name())).unwrap();
    out.replace(b"a 1\n").unwrap();
    assert_eq!(fs::read_to_string(&victim).unwrap(), "keep");
    assert_eq!(names(dir.path()), ["a.prom"]);
}

/// A directory reached through a link is resolved once: re-pointing the
/// link later does not move where the file goes.
#[test]
fn the_directory_is_resolved_once() {
    let root = tempfile::tempdir().unwrap();
    let (a, b) = (root.path().join("a"), root.path().join("b"));
    fs::create_dir(&a).unwrap();
    fs::create_dir(&b).unwrap();
    let link = root.path().join("collector");
    symlink(&a, &link).unwrap();
    let out = OutFile::open(&link.join("railwatch.prom")).unwrap();
    assert_eq!(out.path(), fs::canonicalize(&a).unwrap().join("railwatch.prom"));
    fs::remove_file(&link).unwrap();
    symlink(&b, &link).unwrap();
    out.replace(b"a 1\n").unwrap();
    assert_eq!(names(&a), ["railwatch.prom"]);
    assert!(names(&b).is_empty());
    // Even with the directory itself renamed away.
    fs::rename(&a, root.path().join("moved")).unwrap();
    out.replace(b"a 2\n").unwrap();
    assert_eq!(fs::read_to_string(root.path().join("moved/railwatch.prom")).unwrap(), "a 2\n");
}

#[test]
fn a_recording_is_kept_beside_itself() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("incident.toml");
    let out = OutFile::open(&path).unwrap();
    assert_eq!(out.keep_previous().unwrap(), None);
    fs::write(&path, "old").unwrap();
    assert_eq!(out.keep_previous().unwrap(), Some(out.kept_as()));
    assert_eq!(fs::read_to_string(dir.path().join("incident.toml.old")).unwrap(), "old");
    // A link is not a recording: not kept, and its target untouched.
    let victim = dir.path().join("victim");
    fs::write(&victim, "v").unwrap();
    symlink(&victim, &path).unwrap();
    assert_eq!(out.keep_previous().unwrap(), None);
    assert_eq!(fs::read_to_string(&victim).unwrap(), "v");
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
    symlink(&scenario, &link).unwrap();
    assert!(distinct(&[("the scenario", Some(scenario.as_path())), ("--record", Some(link.as_path()))]).is_err());
    // An option not given is no file.
    assert_eq!(distinct(&[("the scenario", Some(scenario.as_path())), ("--html", None), ("--record", None)]), Ok(()));
    // Two outputs that do not exist yet, spelled alike.
    let err = distinct(&[("--html", Some(html.as_path())), ("--record", Some(html.as_path()))]).unwrap_err();
    assert_eq!(err, format!("--html and --record name the same file, {}", html.display()));
}

/// A grown file knows when its name stops naming it: moved away, deleted,
/// replaced by another file or by a link; `replace_with` puts a file back.
#[test]
fn a_name_that_stops_naming_its_file_is_noticed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.toml");
    let out = OutFile::open(&path).unwrap();
    let grown = out.create_growing().unwrap();
    assert!(out.names(&grown).unwrap());
    fs::rename(&path, dir.path().join("moved")).unwrap();
    assert!(!out.names(&grown).unwrap(), "moved away");
    fs::write(&path, "other").unwrap();
    assert!(!out.names(&grown).unwrap(), "another file");
    fs::remove_file(&path).unwrap();
    symlink(dir.path().join("moved"), &path).unwrap();
    assert!(!out.names(&grown).unwrap(), "a link, even to the file itself");
    let again = out.replace_with(|mut f| f.write_all(b"anew")).unwrap();
    assert!(out.names(&again).unwrap());
    assert!(fs::symlink_metadata(&path).unwrap().file_type().is_file());
    assert_eq!(fs::read_to_string(&path).unwrap(), "anew");
    assert_eq!(names(dir.path()), ["moved", "r.toml"], "no temporary file left");
}
