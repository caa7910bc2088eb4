//! # How fast does a rail come back, next to `ibv_asyncwatch`?
//!
//! A probe for the Soft-RoCE VM (`cargo xtask vmtest gate_latency`), run on a
//! host with a real RDMA device whose carrier a netdev controls. It watches
//! `DEVICE` port 1 with railwatch's monitor (its own thread, as an engine
//! would), runs rdma-core's `ibv_asyncwatch -d DEVICE` beside it (line
//! buffered through `stdbuf -oL`, or its output would sit in a pipe buffer),
//! and then, `ROUNDS` times, takes the carrier away by setting `NETDEV` down
//! (the peer of the device's netdev: the kernel then raises exactly one
//! `PORT_ACTIVE` when it comes back), waits until both have seen the
//! `PORT_ERR`, and brings it up again.
//!
//! From the instant the `ip link set NETDEV up` is started it times two
//! things: the first `PORT_ACTIVE` line `ibv_asyncwatch` prints, and the
//! rail's gate admitting again (a spinning worker checking it, as engine
//! workers do). Both share everything before the kernel raises the event,
//! so the difference is what each does with it: asyncwatch reads and prints
//! it, railwatch drains it, queries the port, reads the link and opens the
//! gate.
//!
//! Output: one JSON line per round and a summary line with the medians, their
//! ratio (railwatch over asyncwatch) and the median of what railwatch took
//! beyond asyncwatch's print in each round, on stdout. Exit status 0 when
//! every round was timed, 1 otherwise (the reason on stderr).
//!
//! ```text
//! gate_latency DEVICE NETDEV ROUNDS     (IP=/usr/sbin/ip to choose the ip binary)
//! ```

use std::error::Error;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use railwatch_runtime::{BandwidthSelector, Config, Gate, Monitor, SystemClock};
use railwatch_verbs_backend::VerbsDevice;

/// Upper bound of every wait.
const PATIENCE: Duration = Duration::from_secs(10);

/// What `ibv_asyncwatch` printed, and when it arrived here.
enum Printed {
    /// Its first line, "DEVICE: async event FD N": it watches.
    Ready(Instant),
    PortErr(Instant),
    PortActive(Instant),
}

fn main() {
    if let Err(e) = run() {
        eprintln!("gate_latency: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [device, netdev, rounds] = args.as_slice() else {
        return Err("usage: gate_latency DEVICE NETDEV ROUNDS".into());
    };
    let rounds: usize = rounds.parse().map_err(|e| format!("ROUNDS {rounds:?}: {e}"))?;
    if rounds == 0 {
        return Err("ROUNDS must be at least 1".into());
    }
    let ip = std::env::var("IP").unwrap_or_else(|_| "ip".to_owned());

    let mut monitor = Monitor::new(Config::default(), Arc::new(BandwidthSelector::new()), SystemClock::new())?;
    monitor.add_device(VerbsDevice::open(device)?);
    let rail = format!("{device}/1");
    let gate = monitor.gate_of(&rail).ok_or_else(|| format!("{rail}: no such rail"))?;
    let handle = monitor.spawn()?;
    wait_for(|| gate.check().is_ok(), &format!("{rail} to be available at start"))?;

    let mut watcher = Command::new("stdbuf")
        .args(["-oL", "ibv_asyncwatch", "-d", device])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("stdbuf -oL ibv_asyncwatch: {e}"))?;
    let printed = read_asyncwatch(&mut watcher)?;

    let mut samples = Vec::with_capacity(rounds);
    let result = (|| -> Result<(), Box<dyn Error>> {
        for round in 1..=rounds {
            set_link(&ip, netdev, "down")?;
            wait_for(|| gate.check().is_err(), &format!("{rail} to pause after {netdev} down"))?;
            expect(&printed, "PORT_ERR", |p| matches!(p, Printed::PortErr(_)))?;

            let trigger = Instant::now();
            let mut up = Command::new(&ip).args(["link", "set", netdev, "up"]).spawn()?;
            let gate_at = spin_until_admitted(&gate, trigger);
            let print_at = expect(&printed, "PORT_ACTIVE", |p| matches!(p, Printed::PortActive(_)))?;
            up.wait()?;
            let gate_at = gate_at.ok_or_else(|| format!("{rail} not admitted within {PATIENCE:?} of {netdev} up"))?;
            let (gate_us, print_us) = (micros(gate_at - trigger), micros(print_at - trigger));
            println!(r#"{{"round":{round},"gate_us":{gate_us},"asyncwatch_us":{print_us}}}"#);
            samples.push((gate_us, print_us));
        }
        Ok(())
    })();
    let _ = watcher.kill();
    let _ = watcher.wait();
    drop(handle);
    result?;

    let gate = median(samples.iter().map(|s| s.0).collect());
    let print = median(samples.iter().map(|s| s.1).collect());
    let ratio = gate as f64 / print.max(1) as f64;
    // What railwatch takes beyond asyncwatch's print, round by round
    // (negative: the gate was open first).
    let mut extra: Vec<i64> = samples.iter().map(|&(g, p)| signed(g) - signed(p)).collect();
    extra.sort_unstable();
    let extra = extra[extra.len() / 2];
    println!(
        r#"{{"summary":true,"rounds":{rounds},"median_gate_us":{gate},"median_asyncwatch_us":{print},"ratio":{ratio:.3},"median_extra_us":{extra}}}"#
    );
    Ok(())
}

/// Starts a thread that reads `ibv_asyncwatch`'s lines, once it has said
/// it watches (its first line, "DEVICE: async event FD N").
fn read_asyncwatch(watcher: &mut Child) -> Result<Receiver<Printed>, Box<dyn Error>> {
    let stdout = watcher.stdout.take().ok_or("ibv_asyncwatch has no stdout")?;
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            let at = Instant::now();
            let printed = if line.contains("IBV_EVENT_PORT_ACTIVE") {
                Printed::PortActive(at)
            } else if line.contains("IBV_EVENT_PORT_ERR") {
                Printed::PortErr(at)
            } else if line.contains("async event FD") {
                Printed::Ready(at)
            } else {
                continue;
            };
            if tx.send(printed).is_err() {
                return;
            }
        }
    });
    expect(&rx, "its first line", |p| matches!(p, Printed::Ready(_)))?;
    Ok(rx)
}

/// The time of the next line `wanted` accepts; other lines are skipped.
fn expect(printed: &Receiver<Printed>, what: &str, wanted: impl Fn(&Printed) -> bool) -> Result<Instant, String> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match printed.recv_timeout(left) {
            Ok(p) if wanted(&p) => {
                let (Printed::Ready(at) | Printed::PortErr(at) | Printed::PortActive(at)) = p;
                return Ok(at);
            }
            Ok(_) => {}
            Err(RecvTimeoutError::Timeout) => {
                return Err(format!("ibv_asyncwatch printed no {what} within {PATIENCE:?}"));
            }
            Err(RecvTimeoutError::Disconnected) => return Err(format!("ibv_asyncwatch ended before printing {what}")),
        }
    }
}

/// A worker's view: checks the gate until it admits (yielding between
/// checks, so the monitor and asyncwatch get the CPUs they need).
fn spin_until_admitted(gate: &Gate, since: Instant) -> Option<Instant> {
    loop {
        if gate.check().is_ok() {
            return Some(Instant::now());
        }
        if since.elapsed() > PATIENCE {
            return None;
        }
        thread::yield_now();
    }
}

fn set_link(ip: &str, netdev: &str, updown: &str) -> Result<(), String> {
    let status = Command::new(ip)
        .args(["link", "set", netdev, updown])
        .status()
        .map_err(|e| format!("{ip} link set {netdev} {updown}: {e}"))?;
    if status.success() { Ok(()) } else { Err(format!("{ip} link set {netdev} {updown}: {status}")) }
}

fn wait_for(cond: impl Fn() -> bool, what: &str) -> Result<(), String> {
    let deadline = Instant::now() + PATIENCE;
    while !cond() {
        if Instant::now() > deadline {
            return Err(format!("waited {PATIENCE:?} for {what}"));
        }
        thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn signed(us: u64) -> i64 {
    i64::try_from(us).unwrap_or(i64::MAX)
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}
