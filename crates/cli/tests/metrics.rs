//! `railwatch watch --metrics-listen` and `--textfile` (docs/METRICS.md).
//!
//! With `--features verbs`, the real binary runs under the fake libibverbs
//! (railwatch-verbs-backend's fake, configured through `FAKE_IBVERBS_*`),
//! and `/metrics` is scraped with a plain HTTP/1.1 GET over a std
//! `TcpStream`. Every wait is bounded: the scrape is retried until what it
//! looks for is there or a deadline passes. The settings tests need no
//! libibverbs and run in every build.

use std::io::Write;
use std::process::{Command, Output};

use serde_json::Value;

fn railwatch() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_railwatch"));
    cmd.env("NO_COLOR", "1").env("RUST_LOG", "warn");
    for var in ["FAKE_IBVERBS_DEVICES", "FAKE_IBVERBS_EVENTS", "FAKE_IBVERBS_LIST_ERRNO", "FAKE_IBVERBS_OPEN_ERRNO"] {
        cmd.env_remove(var);
    }
    cmd
}

fn run(cmd: &mut Command) -> (Output, String, String) {
    let out = cmd.output().expect("the railwatch binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stdout, stderr)
}

fn checked_json(args: &[&str]) -> (Output, Value, String) {
    let mut cmd = railwatch();
    cmd.args(["watch", "--check", "--json"]).args(args);
    let (out, stdout, stderr) = run(&mut cmd);
    let v = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}\n{stderr}"));
    (out, v, stderr)
}

// ---- the settings (every build) -------------------------------------------------

#[test]
fn the_flags_override_the_metrics_table_and_are_checked() {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(b"[metrics]\nlisten = \"127.0.0.1:9464\"\ntextfile = \"a.prom\"\n").unwrap();
    let path = f.path().to_str().unwrap();

    let (out, v, stderr) = checked_json(&["--config", path]);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(v["settings"]["metrics"], serde_json::json!({"listen": "127.0.0.1:9464", "textfile": "a.prom"}));
    assert_eq!(v["metrics_served"], true);
    assert!(!stderr.contains("not built"), "no note any more: {stderr}");

    let (out, v, stderr) =
        checked_json(&["--config", path, "--metrics-listen", "[::1]:9100", "--textfile", "dir/b.prom"]);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(v["settings"]["metrics"], serde_json::json!({"listen": "[::1]:9100", "textfile": "dir/b.prom"}));
    assert_eq!(v["from"]["metrics.listen"], "--metrics-listen");
    assert_eq!(v["from"]["metrics.textfile"], "--textfile");

    let (out, v, _) = checked_json(&[]);
    assert!(out.status.success());
    assert_eq!(v["metrics_served"], false, "no address and no file: nothing is served");

    for (args, flag, message) in [
        (&["--metrics-listen", "127.0.0.1:0"][..], "--metrics-listen", "the port must not be 0"),
        (&["--textfile", "dir/"][..], "--textfile", "names a directory"),
    ] {
        let (out, v, stderr) = checked_json(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert_eq!((v["flag"].as_str(), v["key"].as_str()), (Some(flag), Some(flag_key(flag))), "{v}");
        assert!(v["message"].as_str().unwrap().contains(message), "{v}");
    }

    // A host name is not an address: the argument parser refuses it.
    let (out, _, stderr) = run(railwatch().args(["watch", "--check", "--metrics-listen", "localhost:9464"]));
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--metrics-listen"), "{stderr}");
}

fn flag_key(flag: &str) -> &'static str {
    if flag == "--metrics-listen" { "metrics.listen" } else { "metrics.textfile" }
}

// ---- serving (real binary under the fake libibverbs) -------------------------------

#[cfg(feature = "verbs")]
mod with_verbs {
    use std::io::{Read, Write};
    use std::net::{SocketAddr, TcpListener, TcpStream};
    use std::path::Path;
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    use railwatch_verbs_backend::testing::{FakeLib, command_under_fake};

    use super::{railwatch, run};

    /// One device with an ACTIVE NDR 4x port.
    const ONE_DEVICE: &str = "mlx5_0:4/128/2";
    /// A PORT_ERR then a PORT_ACTIVE on port 1, queued at open.
    const BOUNCE: &str = "mlx5_0:10@1,9@1";
    /// Longest any wait in these tests lasts.
    const PATIENCE: Duration = Duration::from_secs(20);

    /// The rail's labels.
    const RAIL: &str = r#"{device="mlx5_0",port="1"}"#;

    /// `railwatch watch ARGS` under the fake with one device that bounces.
    fn watch(args: &[&str]) -> Command {
        let mut cmd = railwatch();
        command_under_fake(&mut cmd, FakeLib::Basic)
            .env("FAKE_IBVERBS_DEVICES", ONE_DEVICE)
            .env("FAKE_IBVERBS_EVENTS", BOUNCE)
            .arg("watch")
            .args(args);
        cmd
    }

    /// A running `watch`, killed when dropped.
    struct Running(Child);

    impl Drop for Running {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    fn spawn(mut cmd: Command) -> Running {
        Running(cmd.stdout(Stdio::null()).stderr(Stdio::inherit()).spawn().expect("railwatch starts"))
    }

    /// An address on 127.0.0.1 that was free a moment ago.
    fn free_addr() -> SocketAddr {
        TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
    }

    /// An HTTP answer: status, headers (lower-cased names), body.
    struct Answer {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    }

    impl Answer {
        fn header(&self, name: &str) -> Option<&str> {
            self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
        }
    }

    /// `GET path` with an optional Accept header, over a plain TcpStream.
    fn get(addr: SocketAddr, path: &str, accept: Option<&str>) -> std::io::Result<Answer> {
        let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
        stream.set_read_timeout(Some(Duration::from_secs(5)))?;
        stream.set_write_timeout(Some(Duration::from_secs(5)))?;
        let accept = accept.map(|a| format!("Accept: {a}\r\n")).unwrap_or_default();
        write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{accept}Connection: close\r\n\r\n")?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw)?;
        let raw = String::from_utf8(raw).map_err(|e| std::io::Error::other(e.to_string()))?;
        let (head, body) = raw.split_once("\r\n\r\n").ok_or_else(|| std::io::Error::other("no end of headers"))?;
        let mut lines = head.lines();
        let status = lines
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("no status line: {head}")))?;
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect::<Vec<_>>();
        let answer = Answer { status, headers, body: body.to_owned() };
        if let Some(len) = answer.header("content-length").and_then(|l| l.parse::<usize>().ok()) {
            assert_eq!(answer.body.len(), len, "the whole body arrived");
        }
        Ok(answer)
    }

    /// Scrapes `/metrics` until `done` holds for the body, or panics after
    /// [`PATIENCE`] with the last answer.
    fn scrape_until(addr: SocketAddr, what: &str, done: impl Fn(&str) -> bool) -> Answer {
        let start = Instant::now();
        loop {
            let last = match get(addr, "/metrics", None) {
                Ok(a) if a.status == 200 && done(&a.body) => return a,
                Ok(a) => format!("{} {}", a.status, a.body),
                Err(e) => format!("error: {e}"),
            };
            assert!(
                start.elapsed() < PATIENCE,
                "no {what} on http://{addr}/metrics within {PATIENCE:?}; last:\n{last}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The value of the series `name_and_labels` exactly.
    fn value<'t>(text: &'t str, name_and_labels: &str) -> Option<&'t str> {
        text.lines().find_map(|l| l.strip_prefix(name_and_labels).and_then(|r| r.strip_prefix(' ')))
    }

    fn settled(body: &str) -> bool {
        value(body, r#"railwatch_async_events_total{device="mlx5_0",event="port_active"}"#) == Some("1")
            && value(body, &format!("railwatch_rail_available{RAIL}")) == Some("1")
    }

    #[test]
    fn metrics_listen_serves_the_rails_events_transitions_and_build_info() {
        let addr = free_addr();
        let listen = addr.to_string();
        let _watch = spawn(watch(&["--for-ms", "60000", "--metrics-listen", &listen]));
        let a = scrape_until(addr, "counted PORT_ACTIVE", settled);
        let text = &a.body;
        assert_eq!(a.header("content-type"), Some("text/plain; version=0.0.4; charset=utf-8"));
        assert_eq!(value(text, &format!("railwatch_rail_available{RAIL}")), Some("1"), "{text}");
        assert_eq!(value(text, &format!("railwatch_rail_state{RAIL}")), Some("0"), "{text}");
        assert_eq!(value(text, &format!("railwatch_port_state{RAIL}")), Some("4"), "{text}");
        assert_eq!(value(text, &format!("railwatch_rail_generation{RAIL}")), Some("2"), "{text}");
        assert_eq!(value(text, &format!("railwatch_link_rate_bytes_per_second{RAIL}")), Some("50000000000"));
        for event in ["port_err", "port_active"] {
            let series = format!(r#"railwatch_async_events_total{{device="mlx5_0",event="{event}"}}"#);
            assert_eq!(value(text, &series), Some("1"), "{event}: {text}");
        }
        let transition = |to: &str, cause: &str| {
            format!(r#"railwatch_transitions_total{{device="mlx5_0",port="1",to="{to}",cause="{cause}"}}"#)
        };
        assert_eq!(value(text, &transition("active", "attach")), Some("1"), "{text}");
        assert_eq!(value(text, &transition("paused", "port_err")), Some("1"), "{text}");
        assert_eq!(value(text, &transition("active", "event")), Some("1"), "{text}");
        assert_eq!(value(text, &format!("railwatch_rail_unavailable_seconds_count{RAIL}")), Some("1"), "{text}");
        assert_eq!(value(text, r#"railwatch_read_errors_total{device="mlx5_0"}"#), Some("0"), "{text}");
        assert_eq!(value(text, r#"railwatch_reopen_attempts_total{device="mlx5_0"}"#), Some("0"), "{text}");
        let build = format!(r#"railwatch_build_info{{version="{}"}}"#, env!("CARGO_PKG_VERSION"));
        assert_eq!(value(text, &build), Some("1"), "{text}");
        // Named by what does not change, read through libibverbs at attach.
        let info = r#"railwatch_rail_info{device="mlx5_0",port="1",node_guid="0002:c903:00f1:0000",port_guid="0000:0000:0000:0001"}"#;
        assert_eq!(value(text, info), Some("1"), "{text}");
        assert_eq!(value(text, "railwatch_host_degraded"), Some("0"), "{text}");
        assert_eq!(value(text, r#"railwatch_device_present{device="mlx5_0"}"#), Some("1"), "{text}");
        for name in ["railwatch_rail_state", "railwatch_port_state", "railwatch_transitions_total"] {
            assert!(text.contains(&format!("# HELP {name} ")), "{name} has help: {text}");
        }
        assert!(!text.contains("# EOF"), "{text}");
        promtool_check(text);
    }

    #[test]
    fn openmetrics_on_request_and_404_elsewhere() {
        let addr = free_addr();
        let listen = addr.to_string();
        let _watch = spawn(watch(&["--for-ms", "60000", "--metrics-listen", &listen]));
        scrape_until(addr, "counted PORT_ACTIVE", settled);

        let accept = "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.4,*/*;q=0.1";
        let a = get(addr, "/metrics", Some(accept)).unwrap();
        assert_eq!(a.status, 200);
        assert_eq!(a.header("content-type"), Some("application/openmetrics-text; version=1.0.0; charset=utf-8"));
        assert!(a.body.ends_with("# EOF\n"), "{}", a.body);
        assert!(a.body.contains("# TYPE railwatch_async_events counter\n"), "{}", a.body);
        assert!(a.body.contains("# TYPE railwatch_build info\n"), "{}", a.body);
        assert_eq!(value(&a.body, &format!("railwatch_rail_available{RAIL}")), Some("1"), "{}", a.body);

        let a = get(addr, "/metrics", Some("text/plain")).unwrap();
        assert!(a.header("content-type").unwrap().starts_with("text/plain; version=0.0.4"));
        assert!(!a.body.contains("# EOF"));

        for path in ["/", "/metric", "/metrics/x", "/favicon.ico"] {
            let a = get(addr, path, None).unwrap();
            assert_eq!(a.status, 404, "{path}");
        }
        // A query string is still /metrics.
        assert_eq!(get(addr, "/metrics?x=1", None).unwrap().status, 200);
    }

    /// The files in `dir`, sorted.
    fn listing(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    #[test]
    fn textfile_has_what_is_served_and_is_written_at_exit_with_no_temp_file_left() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("railwatch.prom");
        let addr = free_addr();
        let listen = addr.to_string();
        let file = path.to_str().unwrap();
        let watch_run = spawn(watch(&["--for-ms", "60000", "--metrics-listen", &listen, "--textfile", file]));
        let served = scrape_until(addr, "counted PORT_ACTIVE", settled).body;
        // Rewritten within about a second of a change: wait (bounded) for
        // the file to catch up with what is served.
        let start = Instant::now();
        loop {
            let written = std::fs::read_to_string(&path).unwrap_or_default();
            if written == served {
                break;
            }
            assert!(start.elapsed() < PATIENCE, "the text file never matched the scrape:\n{written}\n---\n{served}");
            std::thread::sleep(Duration::from_millis(50));
        }
        drop(watch_run);

        // A run to its end: the file holds the final values, and only it is
        // left in the directory.
        let path = dir.path().join("final.prom");
        let (out, _, stderr) = run(&mut watch(&["--for-ms", "200", "--textfile", path.to_str().unwrap()]));
        assert!(out.status.success(), "{stderr}");
        let written = std::fs::read_to_string(&path).unwrap();
        assert!(settled(&written), "{written}");
        assert!(written.contains("# TYPE railwatch_transitions_total counter\n"), "{written}");
        assert!(!written.contains("# EOF"), "{written}");
        promtool_check(&written);
        // The first run was killed, so only its final name is checked.
        let names = listing(dir.path());
        assert!(names.iter().all(|n| n.ends_with(".prom")), "a temporary file was left: {names:?}");
        assert_eq!(names, ["final.prom", "railwatch.prom"]);
    }

    #[test]
    fn an_address_that_cannot_be_bound_is_named_and_exits_2() {
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap().to_string();
        let (out, stdout, stderr) = run(&mut watch(&["--for-ms", "100", "--metrics-listen", &addr]));
        assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
        assert!(stderr.contains(&format!("cannot serve metrics on {addr}")), "{stderr}");
        assert!(stdout.is_empty(), "nothing was watched: {stdout}");

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing/railwatch.prom");
        let (out, _, stderr) = run(&mut watch(&["--for-ms", "100", "--textfile", path.to_str().unwrap()]));
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("cannot write the metrics text file"), "{stderr}");
    }

    /// `promtool check metrics` on `text`, when promtool is installed
    /// (Debian package `prometheus`); a printed note when it is not.
    fn promtool_check(text: &str) {
        let child = Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                eprintln!(
                    "note: promtool is not installed (Debian package `prometheus`); skipped `promtool check metrics`"
                );
                return;
            }
            Err(e) => panic!("cannot run promtool: {e}"),
        };
        child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "promtool check metrics: {}{}\n{text}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
