//! The files `simulate` writes (`--html`, `--record`), as an attacker or a
//! careless operator would set them up: links planted at the name, a
//! file-size limit. `watch --textfile` goes through the same code
//! (`crates/cli/src/outfile.rs`, whose unit tests plant links mid-run).

use std::fs;
use std::os::unix::fs::symlink;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;

mod common;

use common::railwatch;

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

/// `ln -s ../victim dir/report.html`: the link is replaced by the report,
/// the victim untouched; the same for a recording.
#[test]
fn a_link_at_an_output_is_replaced_and_its_target_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    fs::write(&victim, "precious\n").unwrap();
    let (html, rec) = (dir.path().join("report.html"), dir.path().join("incident.toml"));
    symlink(&victim, &html).unwrap();
    let other = outside.path().join("other");
    fs::write(&other, "precious too\n").unwrap();
    symlink(&other, &rec).unwrap();
    let out = railwatch(&["simulate", "--html", html.to_str().unwrap(), "--record", rec.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(fs::read_to_string(&victim).unwrap(), "precious\n");
    assert_eq!(fs::read_to_string(&other).unwrap(), "precious too\n");
    assert!(fs::symlink_metadata(&html).unwrap().is_file());
    assert!(fs::read_to_string(&html).unwrap().contains("<svg"));
    assert!(fs::read_to_string(&rec).unwrap().contains("[[device]]"));
    assert_eq!(names(dir.path()), ["incident.toml", "report.html"]);
}

/// `ulimit -f 2` (2 KiB): the report cannot be written; the process is not
/// killed by SIGXFSZ, says why naming the file, and leaves no temporary
/// file behind.
#[test]
fn a_file_size_limit_is_a_write_error_not_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("report.html");
    let out = Command::new("sh")
        .arg("-c")
        .arg(r#"ulimit -f 2 && exec "$0" simulate --html "$1""#)
        .arg(env!("CARGO_BIN_EXE_railwatch"))
        .arg(&html)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), None, "killed: {stderr}");
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("report.html") && stderr.contains("File too large"), "{stderr}");
    assert!(names(dir.path()).is_empty(), "{:?}", names(dir.path()));
}
