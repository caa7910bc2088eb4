//! End to end with a real Prometheus server (Debian's `prometheus`, which
//! `cargo xtask deps` installs): `railwatch watch --metrics-listen` runs
//! under the fake libibverbs, Prometheus scrapes it every 100 ms on
//! loopback, a port flaps (driven through the fake's control FIFO,
//! `FAKE_IBVERBS_CONTROL`), and queries to Prometheus's HTTP API see the
//! `railwatch_rail_available` series go 1 → 0 → 1. Skipped, saying so,
//! where no `prometheus` binary is installed. Every wait is bounded.

#![cfg(feature = "verbs")]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use railwatch_verbs_backend::testing::{FakeLib, command_under_fake};

const WAIT: Duration = Duration::from_secs(30);

/// Kills the child when the test ends, however it ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A GET on loopback; the body, or `None` while nothing answers.
fn get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    text.split_once("\r\n\r\n").map(|(_, body)| body.to_string())
}

/// The value Prometheus gives now for the rail's availability, if any.
fn available_now(prometheus: u16) -> Option<String> {
    let body = get(prometheus, "/api/v1/query?query=railwatch_rail_available%7Bdevice%3D%22mlx5_0%22%7D")?;
    // {"status":"success","data":{"resultType":"vector","result":[{"metric":{...},"value":[t,"1"]}]}}
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    v["data"]["result"][0]["value"][1].as_str().map(str::to_owned)
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "no {what} within {WAIT:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Writes one command line to the fake's control FIFO.
fn control(fifo: &Path, line: &str) {
    let mut f = std::fs::OpenOptions::new().write(true).open(fifo).expect("the fake reads its control FIFO");
    writeln!(f, "{line}").unwrap();
}

#[test]
fn prometheus_sees_a_rail_go_down_and_come_back() {
    let Some(prometheus_bin) =
        ["/usr/bin/prometheus", "/usr/local/bin/prometheus"].into_iter().map(Path::new).find(|p| p.exists())
    else {
        eprintln!("note: no prometheus binary installed (Debian package prometheus): test skipped");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("control");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success(), "mkfifo");

    let metrics = free_port();
    let mut watch = Command::new(env!("CARGO_BIN_EXE_railwatch"));
    command_under_fake(&mut watch, FakeLib::Basic)
        .env("FAKE_IBVERBS_DEVICES", "mlx5_0:4/128/2")
        .env("FAKE_IBVERBS_CONTROL", &fifo)
        .env_remove("FAKE_IBVERBS_EVENTS")
        .args(["watch", "--metrics-listen", &format!("127.0.0.1:{metrics}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let _watch = Killed(watch.spawn().expect("railwatch starts"));
    wait_for("/metrics from railwatch", || {
        get(metrics, "/metrics").is_some_and(|b| b.contains("railwatch_rail_available"))
    });

    let web = free_port();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 100ms\n  scrape_timeout: 100ms\nscrape_configs:\n  - job_name: railwatch\n    \
             static_configs:\n      - targets: ['127.0.0.1:{metrics}']\n"
        ),
    )
    .unwrap();
    let _prometheus = Killed(
        Command::new(prometheus_bin)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{web}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus starts"),
    );

    wait_for("the rail available (1) in Prometheus", || available_now(web).as_deref() == Some("1"));
    // The port goes down with a PORT_ERR (10) ...
    control(&fifo, "port 0 1 1\nevent 0 10 1");
    wait_for("the rail unavailable (0) in Prometheus", || available_now(web).as_deref() == Some("0"));
    // ... and comes back with a PORT_ACTIVE (9).
    control(&fifo, "port 0 1 4\nevent 0 9 1");
    wait_for("the rail available again (1) in Prometheus", || available_now(web).as_deref() == Some("1"));
    // Prometheus recorded both changes in the series.
    let body = get(web, "/api/v1/query?query=changes(railwatch_rail_available%7Bdevice%3D%22mlx5_0%22%7D%5B1m%5D)")
        .expect("a query answer");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let changes: f64 = v["data"]["result"][0]["value"][1].as_str().and_then(|s| s.parse().ok()).unwrap_or(-1.0);
    assert!(changes >= 2.0, "changes() over the series: {body}");
}
