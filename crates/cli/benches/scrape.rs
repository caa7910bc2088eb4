//! The cost of being scraped (`cargo xtask bench`, row 10): recovery
//! latency p99 — `PORT_ACTIVE` written on a simulated device → the rail's
//! gate admits — for a monitor fed to the metrics as `railwatch watch`
//! feeds them (every notification, a snapshot per wake-up), with a scraper
//! fetching `/metrics` from the metrics server at 10 Hz, against the same
//! without the scraper. Rounds of one second alternate between the two;
//! the figure is the median of the per-pair p99 ratios. Prints
//! `key<TAB>value` lines for the bench table.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

mod common;

use railwatch_cli::metrics::{Metrics, Server};
use railwatch_runtime::lines::Names;
use railwatch_runtime::{Config, Monitor, NoSelector, SystemClock};
use railwatch_sim_backend::{PortSpec, SimDevice};

const PAIRS: usize = 4;
/// One round of flaps, scraped or not.
const ROUND: Duration = Duration::from_secs(1);

fn main() {
    let mut monitor = Monitor::new(Config::default(), NoSelector, SystemClock::new()).expect("a monitor");
    let dev = SimDevice::new("mlx5_0", &[PortSpec::active(1)]).expect("a sim device");
    let sim = dev.handle();
    let notes = monitor.subscribe_unbounded();
    monitor.add_device(dev);
    let names = Names::new(vec!["mlx5_0".into()], monitor.rails());
    let gate = monitor.gate_of("mlx5_0/1").expect("the rail");
    let mut metrics = Metrics::new("bench");

    let addr: SocketAddr = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let _server = Server::start(addr, metrics.exporter(), None).expect("the metrics server");
    let scraping = Arc::new(AtomicBool::new(false));
    let scrapes = Arc::new(AtomicU64::new(0));
    {
        let (scraping, scrapes) = (scraping.clone(), scrapes.clone());
        std::thread::spawn(move || {
            loop {
                if scraping.load(Ordering::Acquire) && scrape(addr).is_some() {
                    scrapes.fetch_add(1, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
    }

    // One wake-up of `watch`: poll, then feed the metrics.
    let wake = |monitor: &mut Monitor<SimDevice, NoSelector, SystemClock>, metrics: &mut Metrics| {
        monitor.poll_once(Some(Duration::from_secs(1))).expect("poll");
        for n in notes.try_iter() {
            metrics.note(&names, &n);
        }
        metrics.update(&monitor.snapshot());
    };

    let compared = common::alternate(PAIRS, |scraped| {
        scraping.store(scraped, Ordering::Release);
        common::flap_round(&sim, &gate, ROUND, || wake(&mut monitor, &mut metrics))
    });
    scraping.store(false, Ordering::Release);
    compared.print("scrape");
    println!("scrape_count\t{}", scrapes.load(Ordering::Relaxed));
}

/// One GET /metrics; the body's length.
fn scrape(addr: SocketAddr) -> Option<usize> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(s, "GET /metrics HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n").ok()?;
    let mut body = Vec::new();
    s.read_to_end(&mut body).ok()?;
    Some(body.len())
}
