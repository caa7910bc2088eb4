//! The state socket under attack (`cargo xtask attack`, its second table;
//! issue 30's outside-attack suite): the watch loop's recovery p99 and a
//! well-behaved scraper's `/metrics` p99 while clients hostile to the
//! state socket (`--state-socket`) hold it, each attack against rounds
//! without it in the same run, and the process's memory before and after.
//!
//! The agent here is what `watch --state-socket --metrics-listen` runs: a
//! monitor over a simulated device whose every wake-up feeds the metrics
//! and publishes its snapshot to the state API, the state socket's server
//! and the metrics listener (each on a thread of its own, as in the
//! agent). A round has two halves: the loop flaps the device's port back
//! to back for [`ROUND`] (as row 13 of `cargo xtask bench`,
//! `benches/readers.rs`): recovery latency is `PORT_ACTIVE` written → the
//! rail's gate admits; then a scraper makes [`SCRAPES`] scrapes of
//! `/metrics` on the metrics listener, one every [`SCRAPE_EVERY`] (a fresh
//! connection, a GET, the whole answer within `SCRAPE_TIMEOUT` (`scrape_client`); anything
//! else is a failed scrape), while the port flaps every
//! [`CHANGE_EVERY`] (the state changes, streams have lines; the loop
//! otherwise sleeps, as an agent's does). The attacks on the state socket, one
//! at a time, each held through its rounds:
//!
//! - `idle`: 1,000 connections that send nothing;
//! - `slowloris`: 100 connections sending a never-ending head, a byte a
//!   second each;
//! - `streams`: 200 readers of `/v1/state?watch=1` that never read, each
//!   replaced by a new one after a second (20 every 100 ms: a reader that
//!   never reads is cut within the second, its buffers full, while every
//!   flap has lines for it);
//! - `heads`: 8 clients sending 1 MiB request heads, each a new one every
//!   50 ms.
//!
//! Each attack runs in a process of its own (this bench again, with
//! `--attacker NAME PATH`), so the memory measured is the agent's side's:
//! the loop, the servers, the scraper. Rounds alternate with and without
//! the attack ([`PAIRS`] pairs, the order rotating); each ratio is the
//! median of the per-pair p99 ratios. Before anything, a path that is a symbolic link or a file
//! is offered as the socket: refused, left as it was. Prints
//! `key<TAB>value` lines: `state_attack_<name>_recovery_ratio`,
//! `_recovery_p99_ns`, `_recovery_base_p99_ns`, `_scrape_ratio`,
//! `_scrape_p99_ns`, `_scrape_base_p99_ns`, `_scrapes`, `_failures`,
//! `_rss_kib` (after the attack's rounds), and `state_attack_rss_start_kib`,
//! `state_attack_paths_refused`.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

// Its comparison of one figure is not used here (two figures a round).
#[allow(dead_code)]
mod common;

mod scrape_client;

use railwatch_cli::metrics::{Metrics, Server};
use railwatch_cli::state::{DEFAULT_SOCKET_MODE, Published, SocketSettings, StateSocket, bind};
use railwatch_runtime::lines::Names;
use railwatch_runtime::{Config, Monitor, NoSelector, SystemClock};
use railwatch_sim_backend::{PortSpec, SimDevice};
use scrape_client::scrape;

/// Pairs of rounds per attack, one round under it and one not.
const PAIRS: usize = 6;
/// The first half of a round: back-to-back flaps.
const ROUND: Duration = Duration::from_secs(1);
/// Scrapes per round (p99: the second worst).
const SCRAPES: usize = 200;
/// Between two changes of the state while the scraper scrapes.
const CHANGE_EVERY: Duration = Duration::from_millis(25);
/// Between two scrapes.
const SCRAPE_EVERY: Duration = Duration::from_millis(5);
/// How long an attack runs before the round starts, and the pause after
/// it ends.
const SETTLE: Duration = Duration::from_millis(500);

/// An attack: started against the socket, its threads stopping when told.
type Attack = fn(PathBuf, Arc<AtomicBool>) -> Vec<JoinHandle<()>>;

type SimMonitor = Monitor<SimDevice, NoSelector, SystemClock>;

/// The attacks, in order.
const ATTACKS: [(&str, Attack); 4] =
    [("idle", idle), ("slowloris", slowloris), ("streams", streams), ("heads", big_heads)];

fn main() {
    // `BENCH --attacker NAME PATH`: the attacker's own process.
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--attacker") {
        return attacker(&args[at + 1], PathBuf::from(&args[at + 2]));
    }
    println!("state_attack_paths_refused\t{}", u8::from(paths_refused()));
    let mut monitor = Monitor::new(Config::default(), NoSelector, SystemClock::new()).expect("a monitor");
    let notes = monitor.subscribe_unbounded();
    let dev = SimDevice::new("mlx5_0", &[PortSpec::active(1)]).expect("a sim device");
    let sim = dev.handle();
    monitor.add_device(dev);
    monitor.poll_once(Some(Duration::from_millis(10))).expect("poll");
    let gate = monitor.gate_of("mlx5_0/1").expect("the rail");
    let names = Names::new(vec!["mlx5_0".to_owned()], monitor.rails());
    let mut metrics = Metrics::new("bench");

    let published = Arc::new(Published::default());
    published.update(&monitor.snapshot());
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("state.sock");
    let settings = SocketSettings { path: path.clone(), mode: DEFAULT_SOCKET_MODE, group: None };
    let _socket = StateSocket::start(&settings, Arc::clone(&published)).expect("the state socket");
    let addr: SocketAddr = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let _server = Server::start(addr, metrics.exporter(), Some(Arc::clone(&published))).expect("the metrics listener");

    // One wake-up of `watch`: poll, then the turn's notifications and
    // snapshot out to the metrics and the state API.
    let mut wake = |monitor: &mut SimMonitor| {
        monitor.poll_once(Some(Duration::from_secs(1))).expect("poll");
        for n in notes.try_iter() {
            metrics.note(&names, &n);
        }
        let snapshot = monitor.snapshot();
        metrics.update(&snapshot);
        published.update(&snapshot);
    };
    // Warm-up: the first encodings and connections allocate.
    for _ in 0..20 {
        let _ = scrape(addr);
    }
    let _ = common::flap_round(&sim, &gate, Duration::from_millis(200), || wake(&mut monitor));
    println!("state_attack_rss_start_kib\t{}", rss_kib());
    // `RAILWATCH_ATTACKS=idle,heads`: only those.
    let only = std::env::var("RAILWATCH_ATTACKS").ok();
    let verbose = std::env::var_os("RAILWATCH_ATTACK_ROUNDS").is_some();
    for (name, _) in ATTACKS {
        if only.as_deref().is_some_and(|o| !o.split(',').any(|a| a == name)) {
            continue;
        }
        let mut sides: [Vec<Round>; 2] = [Vec::new(), Vec::new()];
        for pair in 0..PAIRS {
            let order = if pair % 2 == 0 { [false, true] } else { [true, false] };
            for attacked in order {
                let attackers = attacked.then(|| {
                    let exe = std::env::current_exe().expect("the bench's own path");
                    let mut cmd = Command::new(exe);
                    cmd.arg("--attacker").arg(name).arg(&path).stdin(Stdio::piped());
                    cmd.spawn().expect("the attacker's process")
                });
                thread::sleep(SETTLE);
                let recovery = common::flap_round(&sim, &gate, ROUND, || wake(&mut monitor));
                let scraper = thread::spawn(move || scrapes(addr));
                // Meanwhile a flap every CHANGE_EVERY, waited for, not
                // back to back: streams have lines, the loop mostly sleeps.
                while !scraper.is_finished() {
                    sim.port_down(1);
                    while gate.check().is_ok() {
                        wake(&mut monitor);
                    }
                    thread::sleep(CHANGE_EVERY);
                    sim.port_up(1);
                    while gate.check().is_err() {
                        wake(&mut monitor);
                    }
                    thread::sleep(CHANGE_EVERY);
                }
                let (scrapes, failures) = scraper.join().expect("the scraper");
                if let Some(mut a) = attackers {
                    drop(a.stdin.take());
                    let _ = a.wait();
                }
                thread::sleep(SETTLE);
                let round =
                    Round { recovery: common::p99(&recovery), scrape: p99(&scrapes), scrapes: scrapes.len(), failures };
                if verbose {
                    eprintln!(
                        "{name} attacked={attacked}: recovery p99 {:.1} µs ({} flaps), scrape p99 {:.0} µs, {failures} failed, rss {} KiB",
                        round.recovery / 1e3,
                        recovery.len(),
                        round.scrape / 1e3,
                        rss_kib()
                    );
                }
                sides[usize::from(attacked)].push(round);
            }
        }
        print(name, &sides[1], &sides[0]);
    }
}

/// Runs attack `name` on `path` until stdin closes (the bench's end of
/// the round).
fn attacker(name: &str, path: PathBuf) {
    let Some((_, attack)) = ATTACKS.iter().find(|(n, _)| *n == name) else { panic!("no attack {name}") };
    let stop = Arc::new(AtomicBool::new(false));
    let threads = attack(path, Arc::clone(&stop));
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    stop.store(true, Ordering::Release);
    for t in threads {
        let _ = t.join();
    }
}

/// One round's figures.
struct Round {
    recovery: f64,
    scrape: f64,
    scrapes: usize,
    failures: usize,
}

/// Prints an attack's figures: medians over its rounds and pairs.
fn print(name: &str, on: &[Round], off: &[Round]) {
    let median = |v: Vec<f64>| common::median(v);
    let ratio = |f: fn(&Round) -> f64| median(on.iter().zip(off).map(|(a, b)| f(a) / f(b)).collect());
    let recovery_ratio = ratio(|r| r.recovery);
    let scrape_ratio = ratio(|r| r.scrape);
    let recovery = median(on.iter().map(|r| r.recovery).collect());
    let recovery_base = median(off.iter().map(|r| r.recovery).collect());
    let scrape = median(on.iter().map(|r| r.scrape).collect());
    let scrape_base = median(off.iter().map(|r| r.scrape).collect());
    let scrapes: usize = on.iter().map(|r| r.scrapes).sum();
    let failures: usize = on.iter().chain(off).map(|r| r.failures).sum();
    let rss = rss_kib();
    let p = format!("state_attack_{name}");
    println!("{p}_recovery_ratio\t{recovery_ratio:.4}");
    println!("{p}_recovery_p99_ns\t{recovery:.0}");
    println!("{p}_recovery_base_p99_ns\t{recovery_base:.0}");
    println!("{p}_scrape_ratio\t{scrape_ratio:.4}");
    println!("{p}_scrape_p99_ns\t{scrape:.0}");
    println!("{p}_scrape_base_p99_ns\t{scrape_base:.0}");
    println!("{p}_scrapes\t{scrapes}");
    println!("{p}_failures\t{failures}");
    println!("{p}_rss_kib\t{rss}");
    eprintln!(
        "{name:>10}: recovery p99 {:.1} µs (baseline {:.1} µs; {recovery_ratio:.2}×), scrape p99 {:.2} ms (baseline {:.2} ms; {scrape_ratio:.2}×); {failures} failed scrapes; rss {rss} KiB",
        recovery / 1e3,
        recovery_base / 1e3,
        scrape / 1e6,
        scrape_base / 1e6,
    );
}

/// The p99 of latencies, sorted here.
fn p99(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() * 99 / 100).copied().unwrap_or(f64::NAN)
}

/// The process's resident memory, KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// A symbolic link and a file where the socket goes: both refused, both
/// left as they were.
fn paths_refused() -> bool {
    let dir = tempfile::tempdir().expect("a directory");
    let file = dir.path().join("file");
    std::fs::write(&file, "keep").unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&file, &link).unwrap();
    let refused = [&file, &link].into_iter().all(|path| {
        let settings = SocketSettings { path: path.clone(), mode: DEFAULT_SOCKET_MODE, group: None };
        bind(&settings).is_err() && StateSocket::start(&settings, Arc::default()).is_err()
    });
    let kept = std::fs::read_to_string(&file).is_ok_and(|t| t == "keep")
        && std::fs::symlink_metadata(&link).is_ok_and(|m| m.file_type().is_symlink());
    refused && kept
}

/// [`SCRAPES`] scrapes, one every [`SCRAPE_EVERY`]: the latencies (ns)
/// and how many failed.
fn scrapes(addr: SocketAddr) -> (Vec<f64>, usize) {
    let (mut lat, mut failures) = (Vec::new(), 0);
    while lat.len() < SCRAPES {
        let t0 = Instant::now();
        let ok = scrape(addr);
        lat.push(t0.elapsed().as_nanos() as f64);
        failures += usize::from(!ok);
        thread::sleep(SCRAPE_EVERY);
    }
    (lat, failures)
}

/// Connections to the socket, each started with `first`.
fn hold(path: &Path, count: usize, first: &[u8]) -> Vec<UnixStream> {
    (0..count)
        .filter_map(|_| {
            let mut s = UnixStream::connect(path).ok()?;
            let _ = s.set_nonblocking(true);
            let _ = s.write(first);
            Some(s)
        })
        .collect()
}

/// Waits for `stop`, then drops `held`.
fn until(stop: &AtomicBool, held: Vec<UnixStream>) {
    while !stop.load(Ordering::Acquire) {
        thread::sleep(Duration::from_millis(20));
    }
    drop(held);
}

/// 1,000 connections that send nothing.
fn idle(path: PathBuf, stop: Arc<AtomicBool>) -> Vec<JoinHandle<()>> {
    vec![thread::spawn(move || {
        let held = hold(&path, 1000, b"");
        until(&stop, held);
    })]
}

/// 100 connections sending a head that never ends, a byte a second each.
fn slowloris(path: PathBuf, stop: Arc<AtomicBool>) -> Vec<JoinHandle<()>> {
    vec![thread::spawn(move || {
        let mut held = hold(&path, 100, b"GET /v1/state HTTP/1.1\r\nX-Slow: ");
        let mut next = Instant::now();
        while !stop.load(Ordering::Acquire) {
            if Instant::now() >= next {
                for s in &mut held {
                    let _ = s.write(b"a");
                }
                next += Duration::from_secs(1);
            }
            thread::sleep(Duration::from_millis(20));
        }
    })]
}

/// 200 readers of the change stream that never read, each replaced by a
/// new one after a second (a tenth of them every 100 ms).
fn streams(path: PathBuf, stop: Arc<AtomicBool>) -> Vec<JoinHandle<()>> {
    let request = b"GET /v1/state?watch=1 HTTP/1.1\r\nHost: attacker\r\n\r\n";
    vec![thread::spawn(move || {
        let mut held: VecDeque<UnixStream> = hold(&path, 200, request).into();
        let mut next = Instant::now() + Duration::from_millis(100);
        while !stop.load(Ordering::Acquire) {
            if Instant::now() >= next {
                held.drain(..20.min(held.len()));
                held.extend(hold(&path, 20, request));
                next += Duration::from_millis(100);
            }
            thread::sleep(Duration::from_millis(10));
        }
    })]
}

/// Between two heads of one client (the attack is the size).
const HEAD_EVERY: Duration = Duration::from_millis(50);

/// 8 clients sending 1 MiB heads, reconnecting each time.
fn big_heads(path: PathBuf, stop: Arc<AtomicBool>) -> Vec<JoinHandle<()>> {
    let head = {
        let mut h = b"GET /v1/state HTTP/1.1\r\n".to_vec();
        while h.len() < 1 << 20 {
            h.extend_from_slice(format!("X-Big-{}: {}\r\n", h.len(), "b".repeat(1000)).as_bytes());
        }
        h.extend_from_slice(b"\r\n");
        Arc::new(h)
    };
    (0..8)
        .map(|_| {
            let (stop, head, path) = (Arc::clone(&stop), Arc::clone(&head), path.clone());
            thread::spawn(move || {
                while !stop.load(Ordering::Acquire) {
                    let Ok(mut s) = UnixStream::connect(&path) else { continue };
                    let _ = s.set_write_timeout(Some(Duration::from_secs(2)));
                    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                    let _ = s.write_all(&head);
                    let mut sink = Vec::new();
                    let _ = s.read_to_end(&mut sink);
                    thread::sleep(HEAD_EVERY);
                }
            })
        })
        .collect()
}
