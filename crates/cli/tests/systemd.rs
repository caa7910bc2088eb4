//! railwatch as a systemd service: the unit file, the notification
//! protocol (`READY=1`, `STATUS=`, `WATCHDOG=1`, `RELOADING=1`,
//! `STOPPING=1`), SIGHUP reloading the config file, and `<N>` priority
//! prefixes on log lines under journald.
//!
//! The `watch` tests need the `verbs` feature: they run the real binary
//! under the fake libibverbs, with `NOTIFY_SOCKET` naming a datagram socket
//! the test binds. Every wait is bounded.

use std::path::PathBuf;
use std::process::Command;

/// `systemd-analyze verify` on the unit, with `ExecStart` pointed at the
/// binary just built (verify checks that the command exists). Skipped with
/// a note where `systemd-analyze` is not installed (Debian: package
/// `systemd`).
#[test]
fn unit_file_verifies() {
    let unit = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("dist/railwatch.service");
    let text = std::fs::read_to_string(&unit).expect("the unit file is there");
    for line in [
        "Type=notify",
        "NotifyAccess=main",
        "ExecStart=/usr/bin/railwatch watch --config /etc/railwatch/railwatch.toml",
        "ExecReload=/bin/sh -c 'kill -HUP $MAINPID'",
        "Restart=on-failure",
        "DynamicUser=yes",
        "ProtectSystem=strict",
        "ProtectHome=yes",
        "NoNewPrivileges=yes",
        "After=rdma-hw.target network.target",
        "Wants=rdma-hw.target",
        "#WatchdogSec=",
        "#SupplementaryGroups=rdma",
    ] {
        assert!(text.lines().any(|l| l.starts_with(line)), "no line {line:?} in {}", unit.display());
    }
    let available = Command::new("systemd-analyze").arg("--version").output().is_ok_and(|o| o.status.success());
    if !available {
        println!("note: systemd-analyze is not installed (Debian package `systemd`); not verifying the unit");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("railwatch.service");
    std::fs::write(&copy, text.replace("/usr/bin/railwatch", env!("CARGO_BIN_EXE_railwatch"))).unwrap();
    // --man=no: Documentation= names the man page the package installs
    // (`cargo xtask package` verifies the unit installed, with it).
    let out =
        Command::new("systemd-analyze").args(["verify", "--man=no"]).arg(&copy).output().expect("systemd-analyze runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "systemd-analyze verify failed:\n{stderr}");
    assert!(!stderr.contains("railwatch.service"), "systemd-analyze verify complained:\n{stderr}");
}

#[cfg(feature = "verbs")]
mod with_verbs {
    use std::io::{BufRead, BufReader};
    use std::os::unix::net::UnixDatagram;
    use std::path::PathBuf;
    use std::process::{Child, Command, Stdio};
    use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
    use std::time::{Duration, Instant};

    use railwatch_verbs_backend::testing::{FakeLib, command_under_fake};

    /// How long any one thing may take before the test fails.
    const WAIT: Duration = Duration::from_secs(20);

    /// A `railwatch watch` under the fake, its notification socket and its
    /// stderr lines.
    struct Agent {
        child: Child,
        notify: UnixDatagram,
        stderr: Receiver<String>,
        /// Every stderr line read so far, for failure messages.
        log: Vec<String>,
        /// Every notification received so far.
        messages: Vec<String>,
        _dir: tempfile::TempDir,
        config: PathBuf,
    }

    impl Agent {
        /// Starts `watch --config FILE` (FILE holding `config`) on `devices`
        /// with `env` set.
        fn start(devices: &str, config: &str, env: &[(&str, &str)]) -> Agent {
            let dir = tempfile::tempdir().unwrap();
            let socket = dir.path().join("notify.sock");
            let notify = UnixDatagram::bind(&socket).unwrap();
            let config_path = dir.path().join("railwatch.toml");
            std::fs::write(&config_path, config).unwrap();
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_railwatch"));
            cmd.env("NO_COLOR", "1").env("RUST_LOG", "info");
            for var in [
                "FAKE_IBVERBS_EVENTS",
                "FAKE_IBVERBS_LIST_ERRNO",
                "FAKE_IBVERBS_OPEN_ERRNO",
                "JOURNAL_STREAM",
                "WATCHDOG_USEC",
                "WATCHDOG_PID",
            ] {
                cmd.env_remove(var);
            }
            command_under_fake(&mut cmd, FakeLib::Basic)
                .env("FAKE_IBVERBS_DEVICES", devices)
                .env("NOTIFY_SOCKET", &socket)
                .envs(env.iter().copied())
                .args(["watch", "--json", "--config"])
                .arg(&config_path)
                .stdout(Stdio::null())
                .stderr(Stdio::piped());
            let mut child = cmd.spawn().expect("railwatch starts");
            let pipe = child.stderr.take().unwrap();
            let (tx, stderr) = mpsc::channel();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
            Agent { child, notify, stderr, log: Vec::new(), messages: Vec::new(), _dir: dir, config: config_path }
        }

        /// Waits for a notification datagram that `want` accepts; returns it.
        fn wait_message(&mut self, what: &str, want: impl Fn(&str) -> bool) -> String {
            let deadline = Instant::now() + WAIT;
            let mut buf = [0u8; 4096];
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    let log = self.drain_log();
                    panic!("no {what} within {WAIT:?}; received {:?}; stderr:\n{log}", self.messages);
                }
                self.notify.set_read_timeout(Some(left)).unwrap();
                match self.notify.recv(&mut buf) {
                    Ok(n) => {
                        let m = String::from_utf8_lossy(&buf[..n]).into_owned();
                        self.messages.push(m.clone());
                        if m.lines().any(&want) {
                            return m;
                        }
                    }
                    Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                    Err(e) => panic!("receiving notifications: {e}"),
                }
            }
        }

        /// Waits for a stderr line that `want` accepts; returns it.
        fn wait_log(&mut self, what: &str, want: impl Fn(&str) -> bool) -> String {
            let deadline = Instant::now() + WAIT;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                match self.stderr.recv_timeout(left) {
                    Ok(line) => {
                        self.log.push(line.clone());
                        if want(&line) {
                            return line;
                        }
                    }
                    Err(RecvTimeoutError::Timeout) => {
                        panic!("no {what} within {WAIT:?}; stderr:\n{}", self.log.join("\n"))
                    }
                    Err(RecvTimeoutError::Disconnected) => {
                        panic!("railwatch ended without {what}; stderr:\n{}", self.log.join("\n"))
                    }
                }
            }
        }

        fn drain_log(&mut self) -> String {
            self.log.extend(self.stderr.try_iter());
            self.log.join("\n")
        }

        fn signal(&self, name: &str) {
            let status = Command::new("kill")
                .arg(format!("-{name}"))
                .arg(self.child.id().to_string())
                .status()
                .expect("kill runs");
            assert!(status.success(), "kill -{name} failed");
        }

        fn rewrite_config(&self, text: &str) {
            std::fs::write(&self.config, text).unwrap();
        }

        fn config_name(&self) -> String {
            self.config.display().to_string()
        }

        /// SIGTERM; expects `STOPPING=1` and a clean exit (stderr closing
        /// first, so the wait for the exit is bounded too).
        fn stop(mut self) {
            self.signal("TERM");
            self.wait_message("STOPPING=1", |l| l == "STOPPING=1");
            let deadline = Instant::now() + WAIT;
            loop {
                match self.stderr.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                    Ok(line) => self.log.push(line),
                    Err(RecvTimeoutError::Disconnected) => break,
                    Err(RecvTimeoutError::Timeout) => {
                        let _ = self.child.kill();
                        panic!("railwatch did not exit after SIGTERM; stderr:\n{}", self.log.join("\n"));
                    }
                }
            }
            let status = self.child.wait().unwrap();
            assert!(status.success(), "{status:?}; stderr:\n{}", self.log.join("\n"));
        }
    }

    impl Drop for Agent {
        fn drop(&mut self) {
            // A failed test must not leave railwatch running.
            if self.child.try_wait().ok().flatten().is_none() {
                let _ = self.child.kill();
                let _ = self.child.wait();
            }
        }
    }

    #[test]
    fn ready_status_watchdog_and_stopping() {
        let mut agent = Agent::start("mlx5_0:4/128/2", "tick_ms = 1000\n", &[("WATCHDOG_USEC", "200000")]);
        agent.wait_message("READY=1", |l| l == "READY=1");
        agent.wait_message("the status", |l| l == "STATUS=1/1 rails available");
        // Every 100 ms: two within the bounded wait.
        agent.wait_message("a first WATCHDOG=1", |l| l == "WATCHDOG=1");
        agent.wait_message("a second WATCHDOG=1", |l| l == "WATCHDOG=1");
        agent.stop();
    }

    /// No device at start: ready all the same, saying it waits.
    #[test]
    fn with_no_device_it_is_ready_and_waits() {
        let mut agent = Agent::start("", "", &[]);
        agent.wait_message("READY=1", |l| l == "READY=1");
        agent.wait_message("the status", |l| l == "STATUS=0 rails, waiting for devices");
        agent.stop();
    }

    #[test]
    fn no_watchdog_for_another_pid() {
        let mut agent = Agent::start("mlx5_0:4/128/2", "", &[("WATCHDOG_USEC", "200000"), ("WATCHDOG_PID", "1")]);
        agent.wait_message("READY=1", |l| l == "READY=1");
        agent.signal("TERM");
        agent.wait_message("STOPPING=1", |l| l == "STOPPING=1");
        assert!(!agent.messages.iter().any(|m| m == "WATCHDOG=1"), "{:?}", agent.messages);
        let _ = agent.child.wait();
    }

    #[test]
    fn sighup_refuses_a_bad_file_and_applies_a_good_one() {
        let mut agent =
            Agent::start("mlx5_0:4/128/2;mlx5_1:4/32/2", "tick_ms = 1000\n", &[("WATCHDOG_USEC", "200000")]);
        agent.wait_message("READY=1", |l| l == "READY=1");
        agent.wait_message("the status", |l| l == "STATUS=2/2 rails available");
        let name = agent.config_name();

        // A bad file: refused, naming file, line and key; still running.
        agent.rewrite_config("# line 1\ntick_ms = 0\n");
        agent.signal("HUP");
        agent.wait_message("RELOADING=1", |l| l == "RELOADING=1");
        let line = agent.wait_log("the refusal", |l| l.contains("reload refused"));
        assert!(line.contains(&format!("{name}:2: tick_ms:")), "{line}");
        agent.wait_message("READY=1 after the refused reload", |l| l == "READY=1");
        agent.wait_message("a WATCHDOG=1 after the refused reload", |l| l == "WATCHDOG=1");

        // A good file: exclude applied at once, tick_ms named as needing a
        // restart.
        agent.rewrite_config("tick_ms = 500\nexclude = [\"mlx5_1\"]\n");
        agent.signal("HUP");
        let restart = agent.wait_log("the restart warning", |l| l.contains("needing a restart"));
        assert!(restart.contains("tick_ms"), "{restart}");
        assert!(!restart.contains("exclude"), "{restart}");
        let applied = agent.wait_log("the applied line", |l| l.contains("reloaded the settings"));
        assert!(applied.contains("applied"), "{applied}");
        assert!(applied.contains("no longer watched: mlx5_1"), "{applied}");
        agent.wait_message("READY=1 after the reload", |l| l == "READY=1");
        agent.wait_message("the new status", |l| l == "STATUS=1/1 rails available");

        // Including it again attaches it again.
        agent.rewrite_config("tick_ms = 500\n");
        agent.signal("HUP");
        let applied = agent.wait_log("the second applied line", |l| l.contains("reloaded the settings"));
        assert!(applied.contains("attached: mlx5_1"), "{applied}");
        agent.wait_message("the status after re-including", |l| l == "STATUS=2/2 rails available");
        agent.stop();
    }

    /// A reload that moves or drops `metrics.textfile` removes the file no
    /// longer written, so node_exporter does not go on exporting it.
    #[test]
    fn sighup_moving_the_text_file_removes_the_old_one() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.prom"), dir.path().join("b.prom"));
        let table = |p: &std::path::Path| format!("[metrics]\ntextfile = \"{}\"\n", p.display());
        let mut agent = Agent::start("mlx5_0:4/128/2", &table(&a), &[]);
        agent.wait_message("READY=1", |l| l == "READY=1");
        assert!(a.exists());
        agent.rewrite_config(&table(&b));
        agent.signal("HUP");
        let applied = agent.wait_log("the move", |l| l.contains("reloaded the settings"));
        assert!(applied.contains("metrics.textfile"), "{applied}");
        assert!(b.exists() && !a.exists(), "a: {}, b: {}", a.exists(), b.exists());
        agent.rewrite_config("");
        agent.signal("HUP");
        agent.wait_log("the second reload", |l| l.contains("metrics.textfile = none"));
        assert!(!b.exists());
        agent.stop();
    }

    /// An idle host: no watchdog, no deadline, so the wait has no timeout,
    /// and the metrics threads exist, so a signal may land on one of them.
    /// SIGHUP and SIGTERM must still be acted on at once.
    #[test]
    fn signals_wake_an_idle_watch_with_metrics_threads() {
        let listen = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listen.local_addr().unwrap();
        drop(listen);
        let config = format!("[metrics]\nlisten = \"{addr}\"\n");
        let mut agent = Agent::start("mlx5_0:4/128/2", &config, &[]);
        agent.wait_message("READY=1", |l| l == "READY=1");
        for round in 0..3 {
            agent.signal("HUP");
            agent.wait_log(&format!("reload {round} acted on"), |l| l.contains("reloaded the settings"));
        }
        // `stop` sends SIGTERM and waits (bounded) for STOPPING=1 and the
        // exit; on an idle host that needs the wake.
        let started = Instant::now();
        agent.stop();
        assert!(started.elapsed() < Duration::from_secs(5), "SIGTERM took {:?}", started.elapsed());
    }

    #[test]
    fn journal_stream_prefixes_priorities() {
        let mut agent = Agent::start(
            "mlx5_0:4/128/2",
            "include = [\"mlx5_0\", \"mlx5_9\"]\n",
            &[("JOURNAL_STREAM", "8:12345"), ("WATCHDOG_USEC", "200000")],
        );
        let warn = agent.wait_log("the warning", |l| l.contains("included but not present"));
        assert!(warn.starts_with("<4>"), "{warn}");
        agent.wait_message("READY=1", |l| l == "READY=1");
        agent.rewrite_config("tick_ms = 0\n");
        agent.signal("HUP");
        let error = agent.wait_log("the refusal", |l| l.contains("reload refused"));
        assert!(error.starts_with("<3>"), "{error}");
        agent.rewrite_config("include = [\"mlx5_0\", \"mlx5_9\"]\n");
        agent.signal("HUP");
        let info = agent.wait_log("the reload", |l| l.contains("reloaded the settings"));
        assert!(info.starts_with("<6>"), "{info}");
        agent.stop();
    }

    #[test]
    fn nothing_is_sent_without_notify_socket_and_logs_have_no_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_railwatch"));
        cmd.env("NO_COLOR", "1").env("RUST_LOG", "warn").env_remove("NOTIFY_SOCKET").env_remove("JOURNAL_STREAM");
        command_under_fake(&mut cmd, FakeLib::Basic)
            .env("FAKE_IBVERBS_DEVICES", "mlx5_0:4/128/2")
            .current_dir(dir.path())
            .args(["watch", "--for-ms", "50", "--include", "mlx5_0", "--include", "mlx5_9"]);
        let out = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        let warn = stderr.lines().find(|l| l.contains("included but not present")).expect("the warning");
        assert!(!warn.starts_with('<'), "{warn}");
    }
}
