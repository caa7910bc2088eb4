//! `watch --json --metrics-listen … | sleep 1000`: a stdout nobody reads.
//! Under the fake libibverbs, a port flaps a few hundred times through
//! the fake's control FIFO while stdout is a pipe never read: `/metrics`
//! keeps following the flaps, the dropped lines are counted there, and
//! SIGTERM ends the agent. Every wait is bounded.

#![cfg(feature = "verbs")]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use railwatch_verbs_backend::testing::{FakeLib, command_under_fake};

const WAIT: Duration = Duration::from_secs(30);

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn get(addr: SocketAddr) -> Option<String> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    text.split_once("\r\n\r\n").map(|(_, body)| body.to_string())
}

fn value(body: &str, series: &str) -> Option<u64> {
    body.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

fn control(fifo: &Path, text: &str) {
    let mut f = std::fs::OpenOptions::new().write(true).open(fifo).expect("the fake reads its control FIFO");
    f.write_all(text.as_bytes()).unwrap();
}

#[test]
fn a_stalled_stdout_never_stops_the_loop_and_sigterm_ends_it() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("control");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success(), "mkfifo");
    let addr = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let mut watch = Command::new(env!("CARGO_BIN_EXE_railwatch"));
    command_under_fake(&mut watch, FakeLib::Basic)
        .env("FAKE_IBVERBS_DEVICES", "mlx5_0:4/128/2")
        .env("FAKE_IBVERBS_CONTROL", &fifo)
        .env("RUST_LOG", "off")
        .env_remove("FAKE_IBVERBS_EVENTS")
        .args(["watch", "--json", "--metrics-listen", &addr.to_string()])
        // A pipe this test never reads: it fills and stays full.
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = Killed(watch.spawn().expect("railwatch starts"));
    let deadline = Instant::now() + WAIT;
    let generation = r#"railwatch_rail_generation{device="mlx5_0",port="1"}"#;
    while get(addr).and_then(|b| value(&b, generation)).is_none() {
        assert!(Instant::now() < deadline, "no /metrics");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Each flap is 6 lines or so of JSON: 600 flaps are ~300 KB, far past
    // a pipe's 64 KiB.
    let mut flaps = String::new();
    for _ in 0..600 {
        flaps.push_str("port 0 1 1\nevent 0 10 1\nport 0 1 4\nevent 0 9 1\n");
    }
    control(&fifo, &flaps);
    let dropped = r#"railwatch_output_lines_dropped_total{stream="stdout"}"#;
    // Every event read and handled, whatever stdout does. (Not one
    // generation per flap: flaps read in one drain come back as one.)
    let read = r#"railwatch_async_events_total{device="mlx5_0",event="port_active"}"#;
    let mut last = String::new();
    loop {
        let body = get(addr).unwrap_or_default();
        let all_read = value(&body, read).is_some_and(|n| n == 600);
        if all_read && value(&body, generation).is_some_and(|g| g > 100) && value(&body, dropped).is_some_and(|d| d > 0)
        {
            break;
        }
        last = body;
        assert!(Instant::now() < deadline, "the loop stopped following the flaps:\n{last}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = last;
    // SIGTERM: it ends (with stdout still full), exit 0.
    assert!(Command::new("kill").arg("-TERM").arg(child.0.id().to_string()).status().unwrap().success());
    let stopped = Instant::now();
    let status = loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            break status;
        }
        assert!(stopped.elapsed() < WAIT, "SIGTERM did not end watch with stdout full");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
}
