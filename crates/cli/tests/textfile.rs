//! `railwatch watch --textfile` as an outside suite reads it: readers in a
//! loop while a port flaps, and a file-size limit that makes every write
//! fail until it is raised. The real binary runs under the fake
//! libibverbs, driven through its control FIFO (`FAKE_IBVERBS_CONTROL`).
//! Every wait is bounded.

#![cfg(feature = "verbs")]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use railwatch_verbs_backend::testing::{FakeLib, command_under_fake};

/// Two ports on `mlx5_0`, one on `mlx5_1`: three rails (the outside
/// suite's devices).
const DEVICES: &str = "mlx5_0:4/128/2,4/128/2;mlx5_1:4/64/2";
/// How many `railwatch_rail_available` series a whole file holds.
const RAILS: usize = 3;
/// Longest any wait lasts.
const PATIENCE: Duration = Duration::from_secs(20);
/// `O_NONBLOCK` (Linux).
const O_NONBLOCK: i32 = 0o4000;

/// A running `watch`, killed when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `railwatch watch ARGS` under the fake with [`DEVICES`], its control
/// FIFO at `fifo`, run through `prefix` (a program and its arguments
/// that execs the rest) if any.
fn watch(prefix: &[&str], fifo: &Path, args: &[&str]) -> Command {
    let bin = env!("CARGO_BIN_EXE_railwatch");
    let mut cmd = match prefix.split_first() {
        Some((program, rest)) => {
            let mut c = Command::new(program);
            c.args(rest).arg(bin);
            c
        }
        None => Command::new(bin),
    };
    command_under_fake(&mut cmd, FakeLib::Basic)
        .env("NO_COLOR", "1")
        .env("RUST_LOG", "warn")
        .env("FAKE_IBVERBS_DEVICES", DEVICES)
        .env("FAKE_IBVERBS_CONTROL", fifo)
        .env_remove("FAKE_IBVERBS_EVENTS")
        .arg("watch")
        .args(args)
        .stdout(Stdio::null());
    cmd
}

/// A directory with the fake's control FIFO in it.
fn setup() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("control");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success(), "mkfifo");
    (dir, fifo)
}

/// Writes command lines to the fake's control FIFO (one write), once the
/// fake reads it (opened without blocking: no reader is an error, retried
/// within [`PATIENCE`]).
fn control(fifo: &Path, lines: &str) {
    let mut open = std::fs::OpenOptions::new();
    open.write(true).custom_flags(O_NONBLOCK);
    let mut f = None;
    wait_for("reader of the fake's control FIFO", || {
        f = open.open(fifo).ok();
        f.is_some()
    });
    f.unwrap().write_all(lines.as_bytes()).unwrap();
}

/// How many rails the text `text` gives an availability.
fn rails_in(text: &str) -> usize {
    text.lines().filter(|l| l.starts_with("railwatch_rail_available{")).count()
}

/// The outside suite's loop: three readers for 3 s while port 1 of
/// `mlx5_0` flaps every 50 ms, `--tick-ms 20`. Every file read holds every
/// rail, from the first one written (issue 42, regression 6: the file
/// written at start, before any device was attached, held none, and
/// stayed for a second).
#[test]
fn every_textfile_read_while_a_port_flaps_holds_every_rail() {
    let (dir, fifo) = setup();
    let path = dir.path().join("railwatch.prom");
    let file = path.to_str().unwrap();
    let mut cmd = watch(&[], &fifo, &["--tick-ms", "20", "--for-ms", "60000", "--textfile", file]);
    let _watch = Running(cmd.stderr(Stdio::inherit()).spawn().expect("railwatch starts"));
    let until = Instant::now() + Duration::from_secs(3);
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let path = path.clone();
            thread::spawn(move || {
                let (mut reads, mut partial) = (0, Vec::new());
                while Instant::now() < until {
                    // Not there yet: the agent is starting.
                    let Ok(text) = std::fs::read_to_string(&path) else { continue };
                    reads += 1;
                    if rails_in(&text) != RAILS {
                        partial.push((text.len(), rails_in(&text)));
                    }
                    thread::sleep(Duration::from_millis(1));
                }
                (reads, partial)
            })
        })
        .collect();
    let mut down = true;
    while Instant::now() < until {
        let (state, event) = if down { (1, 10) } else { (4, 9) };
        control(&fifo, &format!("port 0 1 {state}\nevent 0 {event} 1\n"));
        down = !down;
        thread::sleep(Duration::from_millis(50));
    }
    let (mut reads, mut partial) = (0, Vec::new());
    for r in readers {
        let (n, p) = r.join().unwrap();
        reads += n;
        partial.extend(p);
    }
    assert!(reads >= 30, "the file was read only {reads} times");
    partial.sort_unstable();
    let n = partial.len();
    partial.dedup();
    assert!(n == 0, "{n} of {reads} reads lacked rails; (bytes, rails) seen: {partial:?}");
}

/// The lines of a child's stderr, gathered as they come.
fn gather(child: &mut Child) -> Arc<Mutex<Vec<String>>> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let stderr = child.stderr.take().unwrap();
    let into = Arc::clone(&lines);
    thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { return };
            into.lock().unwrap().push(line);
        }
    });
    lines
}

/// Waits, bounded, until `done`.
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < PATIENCE, "no {what} within {PATIENCE:?}");
        thread::sleep(Duration::from_millis(20));
    }
}

fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.retain(|n| n != "control");
    names.sort();
    names
}

/// A 2 KiB `RLIMIT_FSIZE` (systemd's `LimitFSIZE=2K`), smaller than the
/// file: the agent keeps running, says once that the write failed, leaves
/// no temporary file, and writes the file when the limit is raised
/// (issue 42, regression 7: it exited 2).
#[test]
fn a_file_size_limit_fails_the_textfile_writes_but_not_the_watch() {
    let (dir, fifo) = setup();
    let path = dir.path().join("railwatch.prom");
    let file = path.to_str().unwrap();
    let prlimit = ["prlimit", "--fsize=2048:unlimited", "--"];
    let mut cmd = watch(&prlimit, &fifo, &["--for-ms", "60000", "--textfile", file]);
    let mut watch = Running(cmd.stderr(Stdio::piped()).spawn().expect("prlimit runs railwatch"));
    let stderr = gather(&mut watch.0);
    let said = |what: &str| stderr.lock().unwrap().iter().filter(|l| l.contains(what)).count();
    wait_for("warning that the text file cannot be written", || said("cannot write the metrics") > 0);
    // Between two tries (a second apart): the failed one left nothing.
    thread::sleep(Duration::from_millis(300));
    assert_eq!(listing(dir.path()), Vec::<String>::new(), "{:?}", stderr.lock().unwrap());
    // At least one more try fails, unsaid.
    thread::sleep(Duration::from_millis(1500));
    assert!(watch.0.try_wait().unwrap().is_none(), "watch ended: {:?}", stderr.lock().unwrap());
    let pid = watch.0.id().to_string();
    let raised = Command::new("prlimit").args(["--pid", &pid, "--fsize=unlimited:unlimited"]).status().unwrap();
    assert!(raised.success(), "prlimit --pid");
    wait_for("the text file, every rail in it", || {
        std::fs::read_to_string(&path).is_ok_and(|text| rails_in(&text) == RAILS)
    });
    // SIGTERM: a normal end (exit 0).
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success(), "kill -TERM");
    let status = watch.0.wait().unwrap();
    let lines = stderr.lock().unwrap().clone();
    assert!(status.success(), "{status:?}: {lines:?}");
    assert_eq!(said("cannot write the metrics"), 1, "said once: {lines:?}");
    assert!(lines.iter().any(|l| l.contains("File too large")), "{lines:?}");
    assert_eq!(said("works again"), 1, "{lines:?}");
    assert_eq!(listing(dir.path()), ["railwatch.prom"]);
}
