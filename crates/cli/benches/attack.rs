//! `/metrics` under attack (`cargo xtask attack`): a well-behaved scraper's
//! latency and failures while clients hostile to the endpoint hold it,
//! each attack against rounds without it in the same run
//! (docs/PERFORMANCE.md, "The metrics endpoint under attack").
//!
//! The server is the one `watch --metrics-listen` starts, over a registry
//! fed with 16 rails. The attacks, one at a time, each held while the
//! scraper scrapes:
//!
//! - `idle`: 1,000 connections that send nothing;
//! - `slowloris`: 100 connections sending a never-ending head, a byte a
//!   second each;
//! - `neverread`: 200 clients that send a request and never read the
//!   answer, each replaced by a new one after a second (20 every 100 ms);
//! - `heads`: 8 clients sending 1 MiB request heads, each a new one
//!   every 50 ms;
//! - `streams`: 200 readers of the state API's change stream
//!   (`/v1/state?watch=1`, served beside `/metrics`) that never read, while
//!   the published state changes every 50 ms (each stream has lines to
//!   write: it fills, and is cut).
//!
//! Each attack runs in rounds of 200 scrapes, alternating with rounds
//! without it (10 pairs, the order rotating); the ratio is the median of
//! the per-pair p99 ratios. A scrape is a fresh connection, a GET, the
//! whole answer read; it fails unless it gets a `200` with the metrics
//! within `SCRAPE_TIMEOUT` (`scrape_client`) (the default scrape timeout of Prometheus).
//! Prints `key<TAB>value` lines: `attack_<name>_p50_ns`, `_p99_ns`,
//! `_base_p50_ns`, `_base_p99_ns`, `_ratio`, `_scrapes`, `_failures`,
//! `_base_failures`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

mod scrape_client;

use railwatch_cli::metrics::{Metrics, Server};
use railwatch_cli::state::Published;
use railwatch_runtime::lines::Names;
use railwatch_runtime::{Config, Monitor, NoSelector, Snapshot, SystemClock};
use railwatch_sim_backend::{PortSpec, SimDevice};
use scrape_client::scrape;

/// Pairs of rounds per attack, one round under it and one not, in
/// alternating order (a burst of load from another build hits both).
const PAIRS: usize = 10;
/// Scrapes per round (p99: the second worst of 200).
const SCRAPES: usize = 200;
/// Between two scrapes.
const SCRAPE_EVERY: Duration = Duration::from_millis(5);
/// A round ends after this long even if its scrapes are not done (a
/// server that makes every scrape wait its timeout).
const ROUND_LIMIT: Duration = Duration::from_secs(15);
/// How long an attack runs before the scraper starts (its connections
/// are in place), and the pause after it ends.
const SETTLE: Duration = Duration::from_millis(500);

/// An attack: started against an address, its threads stopping when told.
type Attack = fn(SocketAddr, Arc<AtomicBool>) -> Vec<JoinHandle<()>>;

fn main() {
    let (monitor, metrics) = fed_metrics();
    let published = Arc::new(Published::default());
    published.update(&monitor.snapshot());
    let _ = STATE.set((Arc::clone(&published), monitor.snapshot()));
    let addr: SocketAddr = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let _server = Server::start(addr, metrics.exporter(), Some(published)).expect("the metrics server");
    // Warm-up: the first encodings allocate.
    for _ in 0..20 {
        let _ = scrape(addr);
    }
    let attacks: [(&str, Attack); 5] = [
        ("idle", idle),
        ("slowloris", slowloris),
        ("neverread", never_read),
        ("heads", big_heads),
        ("streams", streams),
    ];
    // `RAILWATCH_ATTACKS=idle,heads`: only those.
    let only = std::env::var("RAILWATCH_ATTACKS").ok();
    for (name, attack) in attacks {
        if only.as_deref().is_some_and(|o| !o.split(',').any(|a| a == name)) {
            continue;
        }
        let (mut on, mut off, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for pair in 0..PAIRS {
            let sides = if pair % 2 == 0 { [false, true] } else { [true, false] };
            let mut p99 = [0f64; 2];
            for attacked in sides {
                let figures = round(addr, attacked.then_some(attack));
                p99[usize::from(attacked)] = figures.p99;
                if std::env::var_os("RAILWATCH_ATTACK_ROUNDS").is_some() {
                    eprintln!(
                        "{name} attacked={attacked}: p50 {:.0} µs p99 {:.0} µs max {:.0} µs",
                        figures.p50 / 1e3,
                        figures.p99 / 1e3,
                        figures.max / 1e3
                    );
                }
                if attacked { on.push(figures) } else { off.push(figures) }
            }
            ratios.push(p99[1] / p99[0]);
        }
        print(name, &on, &off, ratios);
    }
}

/// Prints an attack's figures: the medians over its rounds.
fn print(name: &str, on: &[Figures], off: &[Figures], ratios: Vec<f64>) {
    let p50 = median(on.iter().map(|f| f.p50).collect());
    let p99 = median(on.iter().map(|f| f.p99).collect());
    let base_p50 = median(off.iter().map(|f| f.p50).collect());
    let base_p99 = median(off.iter().map(|f| f.p99).collect());
    let ratio = median(ratios);
    let scrapes: usize = on.iter().map(|f| f.scrapes).sum();
    let failures: usize = on.iter().map(|f| f.failures).sum();
    let base_failures: usize = off.iter().map(|f| f.failures).sum();
    println!("attack_{name}_p50_ns\t{p50:.0}");
    println!("attack_{name}_p99_ns\t{p99:.0}");
    println!("attack_{name}_base_p50_ns\t{base_p50:.0}");
    println!("attack_{name}_base_p99_ns\t{base_p99:.0}");
    println!("attack_{name}_ratio\t{ratio:.4}");
    println!("attack_{name}_scrapes\t{scrapes}");
    println!("attack_{name}_failures\t{failures}");
    println!("attack_{name}_base_failures\t{base_failures}");
    eprintln!(
        "{name:>10}: p50 {:.2} ms, p99 {:.2} ms (baseline {:.2} / {:.2} ms; p99 {ratio:.2}×); {failures} of {scrapes} scrapes failed",
        p50 / 1e6,
        p99 / 1e6,
        base_p50 / 1e6,
        base_p99 / 1e6,
    );
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A monitor over 8 simulated dual-port devices, fed to the metrics once.
fn fed_metrics() -> (Monitor<SimDevice, NoSelector, SystemClock>, Metrics) {
    let mut monitor = Monitor::new(Config::default(), NoSelector, SystemClock::new()).expect("a monitor");
    let notes = monitor.subscribe_unbounded();
    let names: Vec<String> = (0..8).map(|n| format!("mlx5_{n}")).collect();
    for name in &names {
        monitor.add_device(SimDevice::new(name, &[PortSpec::active(1), PortSpec::active(2)]).expect("a sim device"));
    }
    monitor.poll_once(Some(Duration::from_millis(10))).expect("poll");
    let names = Names::new(names, monitor.rails());
    let mut metrics = Metrics::new("bench");
    for n in notes.try_iter() {
        metrics.note(&names, &n);
    }
    metrics.update(&monitor.snapshot());
    (monitor, metrics)
}

/// One round's figures.
struct Figures {
    p50: f64,
    p99: f64,
    max: f64,
    scrapes: usize,
    failures: usize,
}

/// Starts an attack (if any), lets it settle, scrapes, stops it.
fn round(addr: SocketAddr, attack: Option<Attack>) -> Figures {
    let stop = Arc::new(AtomicBool::new(false));
    let attackers = attack.map(|a| a(addr, Arc::clone(&stop))).unwrap_or_default();
    thread::sleep(SETTLE);
    let started = Instant::now();
    let (mut lat, mut failures) = (Vec::new(), 0);
    while lat.len() < SCRAPES && started.elapsed() < ROUND_LIMIT {
        let t0 = Instant::now();
        let ok = scrape(addr);
        lat.push(t0.elapsed().as_nanos() as f64);
        failures += usize::from(!ok);
        thread::sleep(SCRAPE_EVERY);
    }
    stop.store(true, Ordering::Release);
    for a in attackers {
        let _ = a.join();
    }
    // What the attack left is closed by the server's timeouts or its
    // clients' going.
    thread::sleep(SETTLE);
    lat.sort_by(f64::total_cmp);
    let at = |q: usize| lat[(lat.len() * q / 100).min(lat.len() - 1)];
    Figures { p50: at(50), p99: at(99), max: at(100), scrapes: lat.len(), failures }
}

/// Connections held open until `stop`, each started with `first`.
fn hold(addr: SocketAddr, count: usize, first: &[u8]) -> Vec<TcpStream> {
    (0..count)
        .filter_map(|_| {
            let mut s = TcpStream::connect(addr).ok()?;
            let _ = s.set_nonblocking(true);
            let _ = s.write(first);
            Some(s)
        })
        .collect()
}

/// Waits for `stop`, then drops `held`.
fn until(stop: &AtomicBool, held: Vec<TcpStream>) {
    while !stop.load(Ordering::Acquire) {
        thread::sleep(Duration::from_millis(20));
    }
    drop(held);
}

/// 1,000 connections that send nothing.
fn idle(addr: SocketAddr, stop: Arc<AtomicBool>) -> Vec<JoinHandle<()>> {
    let held = hold(addr, 1000, b"");
    vec![thread::spawn(move || until(&stop, held))]
}

/// 100 connections sending a head that never ends, a byte a second each.
fn slowloris(addr: SocketAddr, stop: Arc<AtomicBool>) -> Vec<JoinHandle<()>> {
    let mut held = hold(addr, 100, b"GET /metrics HTTP/1.1\r\nX-Slow: ");
    vec![thread::spawn(move || {
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

/// 200 clients that send a request and never read, each replaced by a
/// new one after a second (a tenth of them every 100 ms).
fn never_read(addr: SocketAddr, stop: Arc<AtomicBool>) -> Vec<JoinHandle<()>> {
    let request = b"GET /metrics HTTP/1.1\r\nHost: attacker\r\n\r\n";
    vec![thread::spawn(move || {
        let mut held: std::collections::VecDeque<TcpStream> = hold(addr, 200, request).into();
        let mut next = Instant::now() + Duration::from_millis(100);
        while !stop.load(Ordering::Acquire) {
            if Instant::now() >= next {
                held.drain(..20.min(held.len()));
                held.extend(hold(addr, 20, request));
                next += Duration::from_millis(100);
            }
            thread::sleep(Duration::from_millis(10));
        }
        drop(held);
    })]
}

/// The state the `streams` attack changes: its publisher and a snapshot.
static STATE: std::sync::OnceLock<(Arc<Published>, Snapshot)> = std::sync::OnceLock::new();

/// How often the `streams` attack changes the state: 20 turns with a
/// change a second, a host flapping hard (an agent publishes once a turn).
const CHURN_EVERY: Duration = Duration::from_millis(50);

/// 200 stream readers that never read, and a state that changes every
/// [`CHURN_EVERY`] (a rail's generation moves), so every stream has lines
/// to write.
fn streams(addr: SocketAddr, stop: Arc<AtomicBool>) -> Vec<JoinHandle<()>> {
    let request = b"GET /v1/state?watch=1 HTTP/1.1\r\nHost: attacker\r\n\r\n";
    let readers = thread::spawn({
        let stop = Arc::clone(&stop);
        move || {
            let held = hold(addr, 200, request);
            while !stop.load(Ordering::Acquire) {
                thread::sleep(Duration::from_millis(10));
            }
            drop(held);
        }
    });
    let churn = thread::spawn(move || {
        let (published, snapshot) = STATE.get().expect("the state is set before the attacks");
        let mut snapshot = snapshot.clone();
        while !stop.load(Ordering::Acquire) {
            snapshot.rails[0].generation += 1;
            published.update(&snapshot);
            thread::sleep(CHURN_EVERY);
        }
    });
    vec![readers, churn]
}

/// Between two heads of one client (the attack is the size; a tight
/// loop would only measure two cores shared by attacker and scraper).
const HEAD_EVERY: Duration = Duration::from_millis(50);

/// 8 clients sending 1 MiB heads, reconnecting each time.
fn big_heads(addr: SocketAddr, stop: Arc<AtomicBool>) -> Vec<JoinHandle<()>> {
    let head = {
        let mut h = b"GET /metrics HTTP/1.1\r\n".to_vec();
        while h.len() < 1 << 20 {
            h.extend_from_slice(format!("X-Big-{}: {}\r\n", h.len(), "b".repeat(1000)).as_bytes());
        }
        h.extend_from_slice(b"\r\n");
        Arc::new(h)
    };
    (0..8)
        .map(|_| {
            let (stop, head) = (Arc::clone(&stop), Arc::clone(&head));
            thread::spawn(move || {
                while !stop.load(Ordering::Acquire) {
                    let Ok(mut s) = TcpStream::connect(addr) else { continue };
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
