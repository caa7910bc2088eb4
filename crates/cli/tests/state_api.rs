//! `railwatch watch --state-socket` and its readers, `railwatch rails`
//! and `railwatch check` (docs/STATE-API.md), with the real binary under
//! the fake libibverbs: one device up, one down; the document's fields; the
//! agent gone (exit 2, never a stale "healthy"); the socket's safety.

use std::process::{Command, Output};

fn railwatch() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_railwatch"));
    cmd.env("NO_COLOR", "1").env("RUST_LOG", "warn");
    cmd
}

fn run(args: &[&str]) -> (Output, String) {
    let out = railwatch().args(args).output().expect("railwatch runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (out, stdout)
}

#[test]
fn without_an_agent_rails_and_check_say_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("state.sock");
    let socket = socket.to_str().unwrap();
    let (out, stdout) = run(&["rails", "--socket", socket]);
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    assert!(stdout.is_empty());
    let (out, stdout) = run(&["check", "--npd", "--socket", socket]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stdout.starts_with("unknown: ") && stdout.trim_end().chars().count() <= 80, "{stdout}");
}

/// `--socket` naming a regular file or a directory says it is not a
/// socket, a missing path that it does not exist (the agent not running):
/// never "nobody answers", which sends one looking for a stuck agent.
#[test]
fn a_socket_path_that_is_no_socket_is_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, "").unwrap();
    let missing = dir.path().join("missing.sock");
    let cases = [
        (file.as_path(), "is not a socket"),
        (dir.path(), "is not a socket but a directory"),
        (missing.as_path(), "does not exist: railwatch is not running"),
    ];
    for (path, says) in cases {
        let shown = format!("{} {says}", path.display());
        let out = railwatch().args(["rails", "--socket"]).arg(path).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(&shown) && !stderr.contains("nobody answers"), "{stderr}");
        let (out, line) = run(&["check", "--npd", "--socket", path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{line}");
        assert!(line.starts_with(&format!("unknown: {}", path.display())), "{line}");
    }
}

/// A line longer than 80 bytes (here a long socket path) is cut to 80
/// with a visible mark, never silently.
#[test]
fn a_long_check_line_is_cut_with_a_mark() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("a-socket-path-long-enough-to-push-the-line-past-eighty-characters.sock");
    let (out, line) = run(&["check", "--npd", "--socket", socket.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let line = line.strip_suffix('\n').expect("one line");
    assert!(line.len() <= 80 && line.ends_with("..."), "{line:?} ({} bytes)", line.len());
    assert!(line.starts_with("unknown: "), "{line}");
}

/// `(gid_t)-1` is not a group (chown reads it as "no change"): refused
/// before anything starts, naming the value, and no socket made.
#[test]
fn an_impossible_socket_group_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("state.sock");
    let socket = socket.to_str().unwrap();
    for check in [true, false] {
        let mut args = vec!["watch", "--for-ms", "100", "--state-socket", socket, "--state-socket-group", "4294967295"];
        if check {
            args.push("--check");
        }
        let out = railwatch().args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        // `--check` says invalid settings with 1, a run with 2 (bad input).
        assert_eq!(out.status.code(), Some(if check { 1 } else { 2 }), "{stderr}");
        assert!(stderr.contains("--state-socket-group") && stderr.contains("4294967295"), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(std::fs::symlink_metadata(socket).is_err(), "a socket was left behind");
    }
}

#[cfg(feature = "verbs")]
mod with_verbs {
    use std::path::Path;
    use std::process::{Child, Stdio};
    use std::time::{Duration, Instant};

    use railwatch_verbs_backend::testing::{FakeLib, command_under_fake};
    use serde_json::Value;

    use super::{railwatch, run};

    /// mlx5_0 with an ACTIVE port, mlx5_3 with a DOWN one.
    const DEVICES: &str = "mlx5_0:4/128/2;mlx5_3:1/128/2";

    /// A running `watch`, killed when dropped.
    struct Agent(Child);

    impl Drop for Agent {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    fn agent(socket: &Path) -> Agent {
        let mut cmd = railwatch();
        command_under_fake(&mut cmd, FakeLib::Basic)
            .env("FAKE_IBVERBS_DEVICES", DEVICES)
            .args(["watch", "--state-socket"])
            .arg(socket)
            .stdout(Stdio::null());
        Agent(cmd.spawn().expect("watch starts"))
    }

    /// `rails` until it exits 0, or a deadline.
    fn usable(socket: &str) -> (i32, String) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let (out, stdout) = run(&["rails", "--socket", socket]);
            let code = out.status.code().unwrap_or(-1);
            if code != 2 || Instant::now() > deadline {
                return (code, stdout);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The state document, read with a plain HTTP/1.0 GET.
    fn document(socket: &Path) -> Value {
        use std::io::{Read, Write};
        let mut s = std::os::unix::net::UnixStream::connect(socket).unwrap();
        s.write_all(b"GET /v1/state HTTP/1.0\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        let body = out.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
        serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
    }

    #[test]
    fn the_agent_answers_rails_check_and_the_document_and_gone_is_unknown() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.sock");
        let socket = path.to_str().unwrap();
        let running = agent(&path);

        assert_eq!(usable(socket), (0, "mlx5_0:1\n".to_owned()));
        let (_, nccl) = run(&["rails", "--socket", socket, "--nccl"]);
        assert_eq!(nccl, "NCCL_IB_HCA==mlx5_0:1\n");
        let (_, ucx) = run(&["rails", "--socket", socket, "--ucx"]);
        assert_eq!(ucx, "UCX_NET_DEVICES=mlx5_0:1\n");

        let (out, line) = run(&["check", "--npd", "--socket", socket]);
        assert_eq!((out.status.code(), line.as_str()), (Some(0), "ok: 1/2 rails usable\n"));
        let (out, line) = run(&["check", "--npd", "--socket", socket, "--max-unusable", "0"]);
        assert_eq!((out.status.code(), line.as_str()), (Some(1), "problem: 1/2 rails usable; down: mlx5_3/1\n"));
        let (out, _) = run(&["check", "--nhc", "--socket", socket, "--min-usable", "2"]);
        assert_eq!(out.status.code(), Some(1));
        // Both thresholds: a problem when either is crossed (they were
        // refused as conflicting, though the docs said "or").
        for (min, max, code) in [("1", "1", 0), ("1", "0", 1), ("2", "1", 1), ("0", "5", 0)] {
            let args = ["check", "--npd", "--socket", socket, "--min-usable", min, "--max-unusable", max];
            let (out, line) = run(&args);
            assert_eq!(out.status.code(), Some(code), "--min-usable {min} --max-unusable {max}: {line}");
        }

        let doc = document(&path);
        assert_eq!(doc["schema"], "railwatch.state/1");
        assert_eq!(doc["warm"], true);
        let rails = doc["rails"].as_array().unwrap();
        let up = rails.iter().find(|r| r["rail"] == "mlx5_0/1").unwrap();
        assert_eq!((&up["usable"], &up["health"]["verdict"]), (&Value::Bool(true), &Value::from("Healthy")));
        let down = rails.iter().find(|r| r["rail"] == "mlx5_3/1").unwrap();
        assert_eq!(down["health"]["verdict"], "Unhealthy");
        assert!(down["health"]["message"].as_str().unwrap().chars().count() <= 80);
        for key in ["device", "port", "state", "reason", "generation", "available", "node_guid", "address"] {
            assert!(up.get(key).is_some(), "{key} missing: {up}");
        }

        // The agent gone: unknown, never the last answer.
        drop(running);
        let (out, stdout) = run(&["rails", "--socket", socket]);
        assert_eq!((out.status.code(), stdout.as_str()), (Some(2), ""));
        let (out, line) = run(&["check", "--npd", "--socket", socket]);
        assert_eq!(out.status.code(), Some(2), "{line}");
    }

    /// Writes one command line to the fake's control FIFO.
    fn control(fifo: &Path, line: &str) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().write(true).open(fifo).expect("the fake reads its control FIFO");
        writeln!(f, "{line}").unwrap();
    }

    /// The next stream line whose `kind` is `kind` (heartbeats skipped).
    fn next(lines: &mut impl Iterator<Item = std::io::Result<String>>, kind: &str) -> Value {
        for line in lines.by_ref() {
            let v: Value = serde_json::from_str(&line.expect("a line within the read timeout")).unwrap();
            if v["kind"] == kind {
                return v;
            }
        }
        panic!("the stream ended before a {kind} line");
    }

    #[test]
    fn a_stream_reader_hears_the_rail_go_down_and_come_back() {
        use std::io::{BufRead, BufReader, Write};
        let dir = tempfile::tempdir().unwrap();
        let (path, fifo) = (dir.path().join("state.sock"), dir.path().join("control"));
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let mut cmd = railwatch();
        command_under_fake(&mut cmd, FakeLib::Basic)
            .env("FAKE_IBVERBS_DEVICES", DEVICES)
            .env("FAKE_IBVERBS_CONTROL", &fifo)
            .args(["watch", "--state-socket"])
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let _agent = Agent(cmd.spawn().unwrap());
        assert_eq!(usable(path.to_str().unwrap()).0, 0);

        let mut s = std::os::unix::net::UnixStream::connect(&path).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.write_all(b"GET /v1/state?watch=1 HTTP/1.0\r\n\r\n").unwrap();
        let mut lines = BufReader::new(s).lines().skip_while(|l| l.as_ref().is_ok_and(|l| !l.starts_with('{')));
        let first = next(&mut lines, "state");
        assert_eq!((first["warm"].clone(), first["rails"].as_array().map(Vec::len)), (Value::Bool(true), Some(2)));

        control(&fifo, "port 0 1 1\nevent 0 10 1");
        let down = next(&mut lines, "rail");
        assert_eq!((&down["rail"]["rail"], &down["rail"]["usable"]), (&Value::from("mlx5_0/1"), &Value::Bool(false)));
        assert_eq!(down["rail"]["health"]["verdict"], "Unhealthy");

        control(&fifo, "port 0 1 4\nevent 0 9 1");
        let up = loop {
            let v = next(&mut lines, "rail");
            if v["rail"]["usable"] == true {
                break v;
            }
        };
        assert_eq!(up["rail"]["health"]["verdict"], "Healthy");
    }

    #[test]
    fn rails_direct_reads_the_devices_with_no_agent_and_says_so() {
        let mut cmd = railwatch();
        command_under_fake(&mut cmd, FakeLib::Basic).env("FAKE_IBVERBS_DEVICES", DEVICES).args(["rails", "--direct"]);
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(0));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "mlx5_0:1\n");
        assert!(String::from_utf8_lossy(&out.stderr).contains("--direct: no agent asked"));
    }

    #[test]
    fn a_file_where_the_socket_goes_is_refused_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.sock");
        std::fs::write(&path, "mine").unwrap();
        let mut cmd = railwatch();
        command_under_fake(&mut cmd, FakeLib::Basic)
            .env("FAKE_IBVERBS_DEVICES", DEVICES)
            .args(["watch", "--for-ms", "100", "--state-socket"])
            .arg(&path);
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("not replaced"));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "mine");
    }
}

/// The shipped node-problem-detector plugin and NHC check call `railwatch
/// check` as docs/STATE-API.md says, and parse.
#[test]
fn the_shipped_scheduler_samples_call_check() {
    let dist = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("dist");
    let npd: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dist.join("node-problem-detector/railwatch.json")).unwrap())
            .expect("the NPD plugin config is JSON");
    assert_eq!(npd["plugin"], "custom");
    assert_eq!(npd["pluginConfig"]["skip_initial_status"], true);
    assert_eq!(npd["pluginConfig"]["max_output_length"], 80);
    let rule = &npd["rules"][0];
    assert_eq!(rule["path"], "/usr/bin/railwatch");
    assert_eq!((&rule["args"][0], &rule["args"][1]), (&serde_json::json!("check"), &serde_json::json!("--npd")));
    assert_eq!(rule["condition"], npd["conditions"][0]["type"]);

    let nhc = dist.join("nhc/railwatch.nhc");
    let checked = Command::new("bash").arg("-n").arg(&nhc).status().expect("bash runs");
    assert!(checked.success(), "bash -n {}", nhc.display());
    let text = std::fs::read_to_string(&nhc).unwrap();
    assert!(text.contains("function check_railwatch_rails") && text.contains("check --nhc"));
}
